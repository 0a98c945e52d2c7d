package mamba3

import (
	"fmt"
	"strings"
	"testing"

	"ssmverify/bridge"
	"ssmverify/mamba3"
	"ssmverify/report"
	"ssmverify/verify/bridgetest"
)

// TestMamba3ErrorGrowth reports how the error of y grows with position in
// a forward of 2048 tokens, per declared input type (the table "mamba3
// error growth"); every element is judged as in TestMamba3Forward.
func TestMamba3ErrorGrowth(t *testing.T) {
	track(t)
	const L = 2048
	bs := bridgetest.Buckets(L)
	cols := []string{"dtype"}
	for _, b := range bs {
		cols = append(cols, fmt.Sprintf("[%d,%d)", b[0], b[1]))
	}
	tab := report.Table{Name: fmt.Sprintf("mamba3 error growth, forward of %d tokens, by position: rms(kernel − reference)/rms(reference) of y", L), Columns: cols}
	for _, dt := range dtypes(bridge.OpMamba3Forward) {
		o := base(dt)
		o.Batch, o.Seqlen, o.D, o.Z = 1, L, true, true
		p := prepare(t, bridge.OpMamba3Forward, mamba3.Generate(o, 240), dt)
		y, _ := judgeForward(t, bridge.OpMamba3Forward, p)
		if y == nil {
			continue
		}
		want, _ := mamba3.Forward(p)
		tab.Rows = append(tab.Rows, append([]string{dt.String()}, bridgetest.Growth(y, want, L, p.Heads*p.P, 1, bs)...))
	}
	rep.AddTable(tab)
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n%s\n", tab.Name, strings.Join(tab.Columns, "\t"))
	for _, r := range tab.Rows {
		fmt.Fprintln(&b, strings.Join(r, "\t"))
	}
	t.Log("\n" + b.String())
}

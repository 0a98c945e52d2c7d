package mamba2

import (
	"fmt"
	"strings"
	"testing"

	"ssmverify/bridge"
	"ssmverify/mamba2"
	"ssmverify/report"
	"ssmverify/verify/bridgetest"
)

// TestMamba2ErrorGrowth reports how the error of y grows with position, for
// every declared dtype and state dtype, in a long prefill and in a chain of
// decode steps from a zero state (the table "mamba2 error growth"); every
// element is judged as in TestMamba2Prefill.
func TestMamba2ErrorGrowth(t *testing.T) {
	track(t)
	L, steps := 2048, 256
	if *long {
		L, steps = 16384, 2048
	}
	table := func(what string, bs [][2]int) report.Table {
		cols := []string{"dtype/state"}
		for _, b := range bs {
			cols = append(cols, fmt.Sprintf("[%d,%d)", b[0], b[1]))
		}
		return report.Table{Name: "mamba2 error growth, " + what + ": rms(kernel − reference)/rms(reference) of y", Columns: cols}
	}
	bs, sb := bridgetest.Buckets(L), bridgetest.Buckets(steps)
	pre, dec := table(fmt.Sprintf("prefill of %d tokens, by position", L), bs), table(fmt.Sprintf("%d decode steps from h = 0, by step", steps), sb)
	for _, dt := range pairs {
		o := base(dt)
		o.Batch, o.Seqlen, o.D, o.Z, o.DtBias, o.Softplus = 1, L, true, true, true, true
		p := mamba2.Generate(o, 61).Rounded()
		if out := judgePrefill(t, p); out != nil {
			want, _ := mamba2.Prefill(p)
			pre.Rows = append(pre.Rows, append([]string{dt.String()}, bridgetest.Growth(out.Y, want.Y, L, p.Heads*p.Headdim, 1, bs)...))
		}
		// a chain of decode steps from h = 0
		q := mamba2.Generate(mamba2.Options{Batch: 1, Seqlen: steps, Heads: 4, Headdim: 16, Groups: 2, Dstate: 16, D: true, DtBias: true, Softplus: true, DType: dt.in, StateDType: dt.state}, 62).Rounded()
		state := make([]float64, q.StateLen())
		var y []float64
		ok := true
		for step := 0; step < steps && ok; step++ {
			s := mamba2.StepAt(q, step, state)
			if why := kernel.SupportsStep(s); why != "" {
				rep.KernelUnsupported(t.Name(), bridge.OpStep, s.DType, s.StateDType, why)
				ok = false
				break
			}
			var out *mamba2.StepOutput
			if out, ok = runStep(t, s); ok {
				y, state = append(y, out.Y...), out.State
			}
		}
		if ok {
			want, _ := mamba2.Prefill(q)
			dec.Rows = append(dec.Rows, append([]string{dt.String()}, bridgetest.Growth(y, want.Y, steps, q.Heads*q.Headdim, 1, sb)...))
		}
	}
	var b strings.Builder
	for _, tab := range []report.Table{pre, dec} {
		rep.AddTable(tab)
		fmt.Fprintf(&b, "%s\n%s\n", tab.Name, strings.Join(tab.Columns, "\t"))
		for _, r := range tab.Rows {
			fmt.Fprintln(&b, strings.Join(r, "\t"))
		}
	}
	t.Log("\n" + b.String())
}

package mamba3

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"ssmverify/bridge"
	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/mamba3"
	"ssmverify/report"
	"ssmverify/ssm"
	"ssmverify/verify/bridgetest"
)

// mutantCase returns the problem of a mutant's case ("fwd:NAME" of
// forwardCases, "step:state"), prepared for the worker's arithmetic.
func mutantCase(t *testing.T, k *bridge.Mamba3, name string) (string, *mamba3.Problem, error) {
	op, c, _ := strings.Cut(name, ":")
	o := base(ssm.BF16)
	if op == "step" {
		o.Seqlen, o.Batch, o.State = 1, 3, true
		p := mamba3.Generate(o, 150)
		p.DType = ssm.BF16
		a, err := k.Arithmetic(bridge.OpMamba3Step, ssm.BF16)
		p.Arithmetic = a
		return bridge.OpMamba3Step, p.Rounded(), err
	}
	for i, fc := range forwardCases {
		if fc.name == c {
			fc.mod(&o)
			p := mamba3.Generate(o, uint64(100+i))
			p.DType = ssm.BF16
			a, err := k.Arithmetic(bridge.OpMamba3Forward, ssm.BF16)
			p.Arithmetic = a
			return bridge.OpMamba3Forward, p.Rounded(), err
		}
	}
	return "", nil, fmt.Errorf("no case %q", name)
}

// TestMamba3TritonMutants plants the bugs of testdata/triton-mutants.json in
// copies of upstream's Mamba-3 Triton files (SSMK_MAMBA3_MUTANTS=checkout)
// and requires that each is killed by its case and at least 90% are named
// with the planted slip (alone or beside a property of the unmutated
// kernel). Four at a time, each in a worker of its own.
func TestMamba3TritonMutants(t *testing.T) {
	checkout := os.Getenv("SSMK_MAMBA3_MUTANTS")
	if checkout == "" {
		t.Skip("SSMK_MAMBA3_MUTANTS=path/to/mamba checkout not set (a GPU machine with torch and Triton: docs/mamba3.md)")
	}
	track(t)
	mutants, err := bridgetest.LoadTritonMutants("testdata/triton-mutants.json")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		killed bool
		ratio  float64
		f      report.Finding
	}
	results := make([]result, len(mutants))
	errs := bridgetest.ForEachMutant(t, checkout, mutants, func(i int, m bridgetest.TritonMutant, dir string) error {
		r := &results[i]
		w, err := bridge.Start(bridge.Spec{Python: spec.Python, Adapter: "mamba3_upstream", Args: []string{"checkout=" + dir, "commit=mutant-" + m.Name}, Timeout: spec.Timeout})
		if err != nil {
			return err
		}
		defer w.Close()
		k := &bridge.Mamba3{W: w}
		op, p, err := mutantCase(t, k, m.Case)
		if err != nil {
			return err
		}
		y, st, err := k.Forward(op, p)
		if err != nil {
			r.killed, r.f = true, report.Finding{Tag: "crash", Cause: err.Error()}
			return nil
		}
		want, wst := mamba3.Forward(p)
		c, _, _ := judge.CompareSSD(judge.Mamba3Arrays(p, y, want, st, wst, mamba3.ErrorScale(p)))
		r.ratio = c.Worst.Ratio
		r.killed = c.NonFinite > 0 || c.Worst.Ratio > judge.Threshold(p.DType)
		if r.killed {
			r.f = diagnose.Mamba3(p, y, st)
		}
		return nil
	})
	tab := report.Table{Name: "mamba3 Triton mutants (" + checkout + ")", Columns: []string{"mutant", "case", "killed", "ratio", "diagnosis", "planted", "named"}}
	named := 0
	for i, m := range mutants {
		r := results[i]
		if errs[i] != nil {
			t.Errorf("mutant %s: %v", m.Name, errs[i])
			continue
		}
		if !r.killed {
			t.Errorf("mutant %s survived its case %s (ratio %.3g)", m.Name, m.Case, r.ratio)
		}
		ok := slices.Contains(append(strings.Split(r.f.Tag, "+"), r.f.Also...), m.Tag)
		if ok {
			named++
		}
		tab.Rows = append(tab.Rows, []string{m.Name, m.Case, fmt.Sprint(r.killed), fmt.Sprintf("%.3g", r.ratio), r.f.Tag, m.Tag, fmt.Sprint(ok)})
		t.Logf("%-20s %-12s killed %-5t ratio %-9.3g [%s] %s", m.Name, m.Case, r.killed, r.ratio, r.f.Tag, r.f)
	}
	rep.AddTable(tab)
	if float64(named) < 0.9*float64(len(mutants)) {
		t.Errorf("named correctly %d of %d, want at least 90%%", named, len(mutants))
	}
}

// TestMamba3TritonMutantsApply checks that every mutant applies to the
// checkout SSMK_MAMBA3_MUTANTS names (no GPU needed): the list is kept in
// step with upstream's files.
func TestMamba3TritonMutantsApply(t *testing.T) {
	bridgetest.CheckMutantsApply(t, "SSMK_MAMBA3_MUTANTS", "testdata/triton-mutants.json")
}

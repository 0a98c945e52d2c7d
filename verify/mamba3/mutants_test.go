package mamba3

import (
	"fmt"
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
	checkout, mutants := bridgetest.MutantsFromEnv(t, "SSMK_MAMBA3_MUTANTS", "testdata/triton-mutants.json", "docs/mamba3.md")
	track(t)
	results := make([]bridgetest.MutantResult, len(mutants))
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
			r.Killed, r.Finding = true, report.Finding{Tag: "crash", Cause: err.Error()}
			return nil
		}
		want, wst := mamba3.Forward(p)
		c, _, _ := judge.CompareArrays(judge.Mamba3Arrays(p, y, want, st, wst, mamba3.ErrorScale(p)))
		r.Ratio = c.Worst.Ratio
		r.Killed = c.NonFinite > 0 || c.Worst.Ratio > judge.Threshold(p.DType)
		if r.Killed {
			r.Finding = diagnose.Mamba3(p, y, st, func(q *mamba3.Problem) ([]float64, *mamba3.State, error) { return k.Forward(op, q) })
		}
		return nil
	})
	bridgetest.Tally(t, rep, "mamba3 Triton mutants ("+checkout+")", mutants, results, errs)
}

// TestMamba3TritonMutantsApply checks that every mutant applies to the
// checkout SSMK_MAMBA3_MUTANTS names (no GPU needed): the list is kept in
// step with upstream's files.
func TestMamba3TritonMutantsApply(t *testing.T) {
	bridgetest.CheckMutantsApply(t, "SSMK_MAMBA3_MUTANTS", "testdata/triton-mutants.json")
}

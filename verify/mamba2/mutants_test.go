package mamba2

import (
	"strings"
	"testing"

	"ssmverify/bridge"
	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/mamba2"
	"ssmverify/report"
	"ssmverify/ssm"
	"ssmverify/verify/bridgetest"
)

func TestReplaceOccurrences(t *testing.T) {
	s, err := bridgetest.ReplaceOccurrences("a+a+a", "a", "b", []int{1, 3})
	if err != nil || s != "b+a+b" {
		t.Errorf("got %q, %v; want b+a+b", s, err)
	}
	if _, err := bridgetest.ReplaceOccurrences("a+a", "a", "b", []int{3}); err == nil {
		t.Error("occurrence 3 of 2: no error")
	}
	if _, err := bridgetest.ReplaceOccurrences("a", "c", "b", nil); err == nil {
		t.Error("missing: no error")
	}
}

// TestMamba2TritonMutants plants the bugs of testdata/triton-mutants.json in
// copies of upstream's Triton kernels (SSMK_MAMBA2_MUTANTS=checkout) and
// requires that each is killed by its case (a prefill's, a decode step's
// or the backward's: "bwd:CASE" of backwardCases) and that at least 90%
// are diagnosed with the planted cause. Four mutants run at a time, each in a
// worker of its own (Triton compiles each mutated kernel afresh).
func TestMamba2TritonMutants(t *testing.T) {
	checkout, mutants := bridgetest.MutantsFromEnv(t, "SSMK_MAMBA2_MUTANTS", "testdata/triton-mutants.json", "docs/bridge.md")
	track(t)
	results := make([]bridgetest.MutantResult, len(mutants))
	f32 := pair{ssm.F32, ssm.F32}
	errs := bridgetest.ForEachMutant(t, checkout, mutants, func(i int, m bridgetest.TritonMutant, dir string) error {
		r := &results[i]
		// One configuration per kernel (upstream's deterministic mode): a
		// mutant's verdict needs no tuning, and each worker compiles its
		// kernels afresh.
		w, err := bridge.Start(bridge.Spec{Python: spec.Python, Adapter: "mamba2_upstream", Args: []string{"checkout=" + dir, "commit=mutant-" + m.Name},
			Timeout: spec.Timeout, Env: []string{"MAMBA_DETERMINISTIC=1"}})
		if err != nil {
			return err
		}
		defer w.Close()
		k := &bridge.SSD{W: w}
		op, name, _ := strings.Cut(m.Case, ":")
		switch op {
		case "bwd":
			// bf16 inputs with float32 states: upstream's backward passes
			// every case of this pair unmutated (its fp32 forward takes
			// TF32 products)
			p, ct := backwardProblem(name, pair{ssm.BF16, ssm.F32})
			p.Chunk = 64 // upstream's, whichever kernel SSMK_BRIDGE names
			out, g, err := k.Backward(p, ct)
			if err != nil {
				r.Killed, r.Finding = true, report.Finding{Tag: "crash", Cause: err.Error()}
				return nil
			}
			v := judgedBackward(p, ct, out, g, k.Prefill, k.Backward)
			r.Ratio, r.Killed, r.Finding = v.ratio, !v.passed, v.finding
			return nil
		case "prefill":
			p := prefillCase(name, f32)
			got, err := k.Prefill(p)
			if err != nil {
				r.Killed, r.Finding = true, report.Finding{Tag: "crash", Cause: err.Error()}
				return nil
			}
			want, sc := mamba2.Prefill(p)
			c, _, _ := judge.CompareArrays(judge.PrefillArrays(p, got, want, sc))
			r.Ratio = c.Worst.Ratio
			r.Killed = c.NonFinite > 0 || c.Worst.Ratio > judge.Threshold(p.DType)
			if r.Killed {
				r.Finding = diagnose.SSDPrefill(p, got, k.Prefill)
			}
		default:
			s := decodeCase(name, f32)
			got, err := k.Step(s)
			if err != nil {
				r.Killed, r.Finding = true, report.Finding{Tag: "crash", Cause: err.Error()}
				return nil
			}
			want, sc := mamba2.Decode(s)
			c, _, _ := judge.CompareArrays(judge.StepArrays(s, got, want, sc))
			r.Ratio = c.Worst.Ratio
			r.Killed = c.NonFinite > 0 || c.Worst.Ratio > judge.Threshold(s.DType)
			if r.Killed {
				r.Finding = diagnose.SSDStep(s, got)
			}
		}
		return nil
	})
	bridgetest.Tally(t, rep, "mamba2 Triton mutants ("+checkout+")", mutants, results, errs)
}

// TestMamba2TritonMutantsApply checks that every mutant applies to the
// checkout SSMK_MAMBA2_MUTANTS names (no GPU needed).
func TestMamba2TritonMutantsApply(t *testing.T) {
	bridgetest.CheckMutantsApply(t, "SSMK_MAMBA2_MUTANTS", "testdata/triton-mutants.json")
}

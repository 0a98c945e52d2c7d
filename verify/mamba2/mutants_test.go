package mamba2

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"ssmverify/bridge"
	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/report"
	"ssmverify/ssd"
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
// requires that each is killed by its case and that at least 90% are
// diagnosed with the planted cause. Four mutants run at a time, each in a
// worker of its own (Triton compiles each mutated kernel afresh).
func TestMamba2TritonMutants(t *testing.T) {
	checkout := os.Getenv("SSMK_MAMBA2_MUTANTS")
	if checkout == "" {
		t.Skip("SSMK_MAMBA2_MUTANTS=path/to/mamba checkout not set (a GPU machine with torch and Triton: docs/bridge.md)")
	}
	track(t)
	mutants, err := bridgetest.LoadTritonMutants("testdata/triton-mutants.json")
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		killed  bool
		tag     string
		ratio   float64
		finding report.Finding
	}
	results := make([]result, len(mutants))
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
		if op == "prefill" {
			p := prefillCase(name, f32)
			got, err := k.Prefill(p)
			if err != nil {
				r.killed, r.tag, r.finding = true, "crash", report.Finding{Tag: "crash", Cause: err.Error()}
				return nil
			}
			want, sc := ssd.Prefill(p)
			c, _, _ := judge.CompareSSD(judge.PrefillArrays(p, got, want, sc))
			r.ratio = c.Worst.Ratio
			r.killed = c.NonFinite > 0 || c.Worst.Ratio > judge.Threshold(p.DType)
			if r.killed {
				r.finding = diagnose.SSDPrefill(p, got, k.Prefill)
			}
		} else {
			s := decodeCase(name, f32)
			got, err := k.Step(s)
			if err != nil {
				r.killed, r.tag, r.finding = true, "crash", report.Finding{Tag: "crash", Cause: err.Error()}
				return nil
			}
			want, sc := ssd.Decode(s)
			c, _, _ := judge.CompareSSD(judge.StepArrays(s, got, want, sc))
			r.ratio = c.Worst.Ratio
			r.killed = c.NonFinite > 0 || c.Worst.Ratio > judge.Threshold(s.DType)
			if r.killed {
				r.finding = diagnose.SSDStep(s, got)
			}
		}
		r.tag = r.finding.Tag
		return nil
	})
	tab := report.Table{Name: "mamba2 Triton mutants (" + checkout + ")", Columns: []string{"mutant", "case", "killed", "ratio", "diagnosis", "planted", "named"}}
	killed, named := 0, 0
	for i, m := range mutants {
		r := results[i]
		if errs[i] != nil {
			t.Errorf("mutant %s: %v", m.Name, errs[i])
			continue
		}
		// a diagnosis names the planted slip alone, or with a second cause
		// that the unmutated kernel has too (TF32 products, softplus)
		ok := slices.Contains(strings.Split(r.tag, "+"), m.Tag)
		if r.killed {
			killed++
		} else {
			t.Errorf("mutant %s survived its case %s (ratio %.3g)", m.Name, m.Case, r.ratio)
		}
		if ok {
			named++
		}
		tab.Rows = append(tab.Rows, []string{m.Name, m.Case, fmt.Sprint(r.killed), fmt.Sprintf("%.3g", r.ratio), r.tag, m.Tag, fmt.Sprint(ok)})
		t.Logf("%-24s %-26s killed %-5t ratio %-9.3g [%s] %s", m.Name, m.Case, r.killed, r.ratio, r.tag, r.finding)
	}
	rep.AddTable(tab)
	t.Logf("killed %d of %d, named correctly %d of %d", killed, len(mutants), named, len(mutants))
	if float64(named) < 0.9*float64(len(mutants)) {
		t.Errorf("named correctly %d of %d, want at least 90%%", named, len(mutants))
	}
}

// TestMamba2TritonMutantsApply checks that every mutant applies to the
// checkout SSMK_MAMBA2_MUTANTS names (no GPU needed).
func TestMamba2TritonMutantsApply(t *testing.T) {
	bridgetest.CheckMutantsApply(t, "SSMK_MAMBA2_MUTANTS", "testdata/triton-mutants.json")
}

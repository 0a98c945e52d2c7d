package report

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"ssmverify/judge"
	"ssmverify/ssm"
	"ssmverify/testrun"
)

// TestNumRoundTrip: the special values a broken kernel produces survive
// report.json both ways, and anything else is refused.
func TestNumRoundTrip(t *testing.T) {
	for _, v := range []float64{0, -1.5, 3e300, math.Inf(1), math.Inf(-1), math.NaN()} {
		b, err := json.Marshal(Num(v))
		if err != nil {
			t.Fatal(err)
		}
		var back Num
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%v → %s: %v", v, b, err)
		}
		if !(float64(back) == v || math.IsNaN(v) && math.IsNaN(float64(back))) {
			t.Errorf("%v → %s → %v", v, b, back)
		}
	}
	var n Num
	if err := json.Unmarshal([]byte(`"infinity"`), &n); err == nil {
		t.Error(`"infinity" decoded`)
	}
}

// TestSummaryReadsFirst: the summary gives the verdict on its first line, a
// legend, the seven checks' verdicts (not their decision tests) and what
// failed.
func TestSummaryReadsFirst(t *testing.T) {
	r := New(LibraryInfo{Path: "lib.so", Backend: "cpu", Device: "host"})
	r.Add("TestAccuracy", ssm.FOH, ssm.F32, false, 7.5, 12, false, "out[0 0 1]")
	r.RecordTest("TestCheck1IdenticalInputs", Passed)
	r.RecordTest("TestCheck1DecisionCatchesDifferentInputs", Passed)
	r.Undecide("TestCheck3Threading", "timing", "the CPU build scales by design")
	r.RecordTest("TestCheck3Threading", Passed)
	r.Undecide("TestCheck6MicroBenchmarks", "", "every figure noisy")
	r.RecordTest("TestCheck6MicroBenchmarks", Undecided)
	r.RecordTest("TestCheck7MethodComparison", Failed)
	r.RecordTest("TestAccuracy", Failed)
	r.SetReasons([]testrun.Test{{Name: "TestAccuracy", Result: testrun.Fail, Reason: "foh fp32: worst out[0 0 1]; threshold 4"},
		{Name: "TestCheck7MethodComparison", Result: testrun.Fail, Reason: "foh takes 4.1× zoh's time"}})
	r.Finish()
	s := r.Summary()
	first := strings.SplitN(s, "\n", 2)[0]
	if !strings.HasPrefix(first, "ssmverify FAIL — lib.so") {
		t.Errorf("first line %q, want the verdict", first)
	}
	for _, want := range []string{"max ratio: the largest", "  Check1 pass\n", "  Check3 pass; undecided: timing: the CPU build scales by design\n",
		"  Check6 undecided: every figure noisy\n", "  Check7 FAIL: foh takes 4.1× zoh's time\n", "undecided: could not decide on this machine, not a pass",
		"failed tests (2;", "  FAIL TestAccuracy: foh fp32: worst out[0 0 1]; threshold 4\n", "foh/fp32/real: 1 of 1 checks failed",
		"ssmverify FAIL: 2 tests failed"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}

// TestMerge: a run split over two processes reports as one.
func TestMerge(t *testing.T) {
	lib := LibraryInfo{Path: "lib.so"}
	first := New(lib)
	first.RecordTest("TestCheck7MethodComparison", Failed)
	first.AddTable(Table{Name: "Check7"})
	second := New(lib)
	second.Add("TestAccuracy", ssm.ZOH, ssm.F32, false, 0.5, 1, true, "")
	first.Add("TestAccuracy", ssm.ZOH, ssm.F32, false, 9, 100, false, "out[0]")
	second.RecordTest("TestAccuracy", Passed)
	if err := second.Merge(first); err != nil {
		t.Fatal(err)
	}
	second.Finish()
	c := second.cell(ssm.ZOH, ssm.F32, false)
	if len(second.Tests) != 2 || len(second.Tables) != 1 || second.Passed || c.Checks != 2 || c.Failures != 1 || c.MaxRatio != 9 {
		t.Errorf("merged: %d tests, %d tables, passed %t, zoh cell %+v", len(second.Tests), len(second.Tables), second.Passed, *c)
	}
	if err := second.Merge(New(LibraryInfo{Path: "other.so"})); err == nil {
		t.Error("a report of another library merged")
	}
	// the cell of a method the ABI does not carry (Mamba-3's, through the
	// bridge) merges by its name
	a, b := New(lib), New(lib)
	a.AddMethodCell("TestTrapezoidal", "exp-trapezoidal", ssm.F32, "real", "bridge", 2, 1, true, "")
	b.AddMethodCell("TestTrapezoidal", "exp-trapezoidal", ssm.F32, "real", "bridge", 7, 1, false, "y[3]")
	if err := b.Merge(a); err != nil {
		t.Fatalf("merging exp-trapezoidal's cells: %v", err)
	}
	named := 0
	for _, c := range b.Cells {
		if c.Method == "exp-trapezoidal" {
			named++
		}
	}
	if c := b.methodCell("exp-trapezoidal", ssm.F32, "real"); c.Checks != 2 || c.Failures != 1 || c.Support != "bridge" || named != 1 {
		t.Errorf("merged exp-trapezoidal cell %+v (%d such cells)", *c, named)
	}
}

// TestBackwardGradsInABIOrder: however the checks arrive (tests run in
// parallel), a cell lists its gradients in ABI order, so that the summaries
// of two runs compare line by line.
func TestBackwardGradsInABIOrder(t *testing.T) {
	r := New(LibraryInfo{Path: "lib.so"})
	first := judge.GradComparison{Grads: []judge.GradWorst{{Name: "dinitial_state", Ratio: 0.1}, {Name: "dz", Ratio: 0.2},
		{Name: "du", Ratio: 0.3}}}
	second := judge.GradComparison{Grads: []judge.GradWorst{{Name: "ddelta_bias", Ratio: 0.4}, {Name: "dA", Ratio: 0.5},
		{Name: "du", Ratio: 0.6}, {Name: "dD", Ratio: 0.7}}}
	r.AddBackward("TestOne", ssm.ZOH, ssm.F32, false, first)
	r.AddBackward("TestTwo", ssm.ZOH, ssm.F32, false, second)
	var names []string
	for _, g := range r.cell(ssm.ZOH, ssm.F32, false).Backward.Grads {
		names = append(names, g.Name)
	}
	if want := []string{"du", "dA", "dD", "dz", "ddelta_bias", "dinitial_state"}; !slices.Equal(names, want) {
		t.Errorf("gradients %v, want %v", names, want)
	}
	if s := r.backwardSummary(); !strings.Contains(s, "du 0.6, dA 0.5, dD 0.7, dz 0.2, ddelta_bias 0.4, dinitial_state 0.1") {
		t.Errorf("summary:\n%s", s)
	}
}

// TestDiagnosisTable: the diagnoses are grouped by cause, one entry per
// cause with every cell and test it covers and one example's evidence, the
// named causes first; a 16-bit cell diagnosed as a precision loss takes the
// formula diagnosis of the same method's fp32 cell, keeping its own in Own.
func TestDiagnosisTable(t *testing.T) {
	r := New(LibraryInfo{Path: "lib.so"})
	sign := Finding{Tag: "bilinear-sign", Cause: "Ā = (1 − x/2)/(1 + x/2)", Where: "out wrong at 4 of 4", Evidence: []string{"probe of 56 pairs"}}
	r.AddDiagnosis("TestAccuracy/realistic", ssm.Bilinear, ssm.F32, false, sign)
	r.AddDiagnosis("TestGolden", ssm.Bilinear, ssm.F64, false, sign)
	r.AddDiagnosis("TestChunkBoundaries/2047", ssm.Bilinear, ssm.F32, false, sign)
	r.AddDiagnosis("TestNarrowAccuracy/realistic", ssm.Bilinear, ssm.F16, false, Finding{Tag: "narrow:11-bit", Cause: "rounding with 11-bit significands", Where: "out wrong at 3 of 4"})
	r.AddDiagnosis("TestNarrowEveryCombination", ssm.Bilinear, ssm.BF16, false, Finding{Tag: "none", Cause: "no diagnosis fits"})
	r.AddBackwardDiagnosis("TestBackwardAccuracy", ssm.Bilinear, ssm.F32, false, Finding{Tag: "none", Cause: "no single slip of the backward explains the gradients"})
	r.AddDiagnosis("TestNarrowAccuracy/stress", ssm.ZOH, ssm.BF16, false, Finding{Tag: "narrow:8-bit", Cause: "rounding with 8-bit significands"})
	r.AddBackwardDiagnosis("TestBackwardAccuracy", ssm.RK4, ssm.F32, true, Finding{Tag: "bwd-no-softplus", Cause: "softplus' derivative dropped"})
	r.RecordTest("TestAccuracy", Failed)
	r.Finish()
	gs := r.DiagnosisGroups()
	if len(gs) != 3 {
		t.Fatalf("%d groups, want 3 (bilinear-sign with bilinear's backward, narrow:8-bit of zoh, rk4's backward): %+v", len(gs), gs)
	}
	g := gs[0]
	if g.Tag != "bilinear-sign" || g.Backward || strings.Join(g.Cells, ",") != "bilinear/fp32/real,bilinear/fp64/real" ||
		strings.Join(g.Inherited, ",") != "bilinear/fp16/real,bilinear/bf16/real,bilinear/fp32/real backward" ||
		strings.Join(g.Tests, ",") != "TestAccuracy,TestGolden,TestChunkBoundaries,TestNarrowAccuracy,TestNarrowEveryCombination,TestBackwardAccuracy" {
		t.Errorf("first group %+v: want bilinear-sign over the fp32 and fp64 cells, the 16-bit ones and the backward as theirs, and six tests", g)
	}
	for _, d := range r.Diagnoses {
		if d.DType == "fp16" && (d.Tag != "bilinear-sign" || d.As != "bilinear/fp32/real" || !strings.Contains(d.Own, "narrow:11-bit") || d.Where != "out wrong at 3 of 4") {
			t.Errorf("the fp16 cell's diagnosis %+v: want bilinear-sign as its fp32 cell's, its own kept, its own where", d)
		}
		if d.Backward && d.Method == "bilinear" && (d.Tag != "bilinear-sign" || d.As != "bilinear/fp32/real forward" || !strings.Contains(d.Own, "no single slip")) {
			t.Errorf("bilinear's backward diagnosis %+v: want the forward's bilinear-sign, its own kept", d)
		}
		if d.Method == "zoh" && d.Tag != "narrow:8-bit" {
			t.Errorf("zoh's bf16 diagnosis became %q: no wider zoh cell names a formula", d.Tag)
		}
	}
	if g := gs[len(gs)-1]; g.Tag != "bwd-no-softplus" || !g.Backward || strings.Join(g.Cells, ",") != "rk4/fp32/complex" {
		t.Errorf("the last group %+v: want rk4's own backward diagnosis, its forward being right", g)
	}
	table := DiagnosisTable(gs, "  ")
	if strings.Count(table, "Ā = (1 − x/2)/(1 + x/2)") != 1 || !strings.Contains(table, "e.g. TestAccuracy/realistic bilinear/fp32/real: out wrong at 4 of 4; probe of 56 pairs") {
		t.Errorf("the table does not give each cause once with its example:\n%s", table)
	}
	if s := r.Summary(); !strings.Contains(s, "diagnoses: 3 causes") || strings.Index(s, "diagnoses: 3 causes") < strings.Index(s, "failed tests") {
		t.Errorf("the summary does not end with the causes:\n%s", s)
	}
}

// TestOneEntryPerCause: diagnoses of one tag whose words differ (a fitted
// constant, a count) are one cause in the groups, with the other wordings
// counted; two "none"s with different words stay apart.
func TestOneEntryPerCause(t *testing.T) {
	r := New(LibraryInfo{})
	r.AddDiagnosis("TestAccuracy/a", ssm.ZOH, ssm.F32, false, Finding{Tag: "exp-scaled", Cause: "c = 1.0000034"})
	r.AddDiagnosis("TestAccuracy/b", ssm.ZOH, ssm.F64, false, Finding{Tag: "exp-scaled", Cause: "c = 1.0000035"})
	r.AddDiagnosis("TestAccuracy/c", ssm.FOH, ssm.F32, false, Finding{Tag: "none", Cause: "no slip fits"})
	r.AddDiagnosis("TestAccuracy/d", ssm.FOH, ssm.F64, false, Finding{Tag: "none", Cause: "no slip of the discretization fits"})
	gs := r.DiagnosisGroups()
	if len(gs) != 3 || gs[0].Tag != "exp-scaled" || gs[0].Variants != 1 || len(gs[0].Cells) != 2 || !strings.Contains(gs[0].VariantNote(), "1 more wording") {
		t.Fatalf("groups %+v", gs)
	}
}

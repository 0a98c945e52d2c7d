package report

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"ssmverify/judge"
	"ssmverify/ssm"
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
	r.Verdict("TestCheck1IdenticalInputs", Passed)
	r.Verdict("TestCheck1DecisionCatchesDifferentInputs", Passed)
	r.Undecide("TestCheck3Threading", "timing", "the CPU build scales by design")
	r.Verdict("TestCheck3Threading", Passed)
	r.Undecide("TestCheck6MicroBenchmarks", "", "every figure noisy")
	r.Verdict("TestCheck6MicroBenchmarks", Undecided)
	r.Verdict("TestCheck7MethodComparison", Failed)
	r.Verdict("TestAccuracy", Failed)
	r.Finish()
	s := r.Summary()
	first := strings.SplitN(s, "\n", 2)[0]
	if !strings.HasPrefix(first, "ssmverify FAIL — lib.so") {
		t.Errorf("first line %q, want the verdict", first)
	}
	for _, want := range []string{"max ratio: the largest", "  Check1 pass\n", "  Check3 pass; undecided: timing: the CPU build scales by design\n",
		"  Check6 undecided: every figure noisy\n", "  Check7 FAIL\n", "undecided: could not decide on this machine, not a pass",
		"failed tests: TestAccuracy, TestCheck7MethodComparison", "foh/fp32/real: 1 of 1 checks failed"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}

// TestMerge: a run split over two processes reports as one.
func TestMerge(t *testing.T) {
	lib := LibraryInfo{Path: "lib.so"}
	first := New(lib)
	first.Verdict("TestCheck7MethodComparison", Failed)
	first.AddTable(Table{Name: "Check7"})
	second := New(lib)
	second.Add("TestAccuracy", ssm.ZOH, ssm.F32, false, 0.5, 1, true, "")
	first.Add("TestAccuracy", ssm.ZOH, ssm.F32, false, 9, 100, false, "out[0]")
	second.Verdict("TestAccuracy", Passed)
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

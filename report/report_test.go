package report

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

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

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
	r.Verdict("TestCheck1IdenticalInputs", true)
	r.Verdict("TestCheck1DecisionCatchesDifferentInputs", true)
	r.Verdict("TestCheck7MethodComparison", false)
	r.Verdict("TestAccuracy", false)
	r.Finish()
	s := r.Summary()
	first := strings.SplitN(s, "\n", 2)[0]
	if !strings.HasPrefix(first, "ssmverify FAIL — lib.so") {
		t.Errorf("first line %q, want the verdict", first)
	}
	for _, want := range []string{"max ratio: the largest", "performance checks (CHECKS.md; check1.json … check7.json): Check1 pass, Check7 FAIL",
		"failed tests: TestAccuracy, TestCheck7MethodComparison", "foh/fp32/real: 1 of 1 checks failed"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}

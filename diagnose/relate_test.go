package diagnose

import (
	"testing"

	"ssmverify/judge"
	"ssmverify/ssm"
)

// TestRelateAtOutputULP: a 16-bit gradient within one unit in the last
// place of the reference everywhere is a precision finding, not a
// structure. The values are those of the H200 campaign's fp16 dB finding
// (|dB| ≈ 2e-8, below fp16's normal range: kernel −5.96e-8, one subnormal
// spacing, for −2.26e-8, 0.621 ulp), which Relate named "wrong-slot"; that
// input has elements beyond one ulp as well and is still misnamed (the
// journal's open row: the error model lacks a 16-bit operand's absolute
// error). A dB whose elements sit in the wrong slots by far more than an
// ulp stays "wrong-slot".
func TestRelateAtOutputULP(t *testing.T) {
	const spacing = 0x1p-24 // fp16's subnormal spacing, the ulp below 2^-14
	want := []float64{-2.2603302656659663e-08, 1.1e-08, -3.3e-08, 2.0e-08, 0, -1.6e-08}
	got := []float64{-spacing, 0, -spacing, spacing, 0, -spacing} // each within one spacing
	array := func(got, want []float64) judge.Array {
		n := len(want)
		sc, tiny := make([]float64, n), make([]float64, n)
		for i := range sc {
			sc[i], tiny[i] = 1e-8, 1
		}
		return judge.Array{Name: "dB", Got: got, Want: want, Scale: sc, Tiny: tiny, Stored: ssm.F16, Computed: ssm.F32,
			Index: func(i int) []int { return []int{i} }}
	}
	th := judge.Threshold(ssm.F32)
	a := array(got, want)
	if ok, _ := ssdJudged([]judge.Array{a}); ok {
		t.Fatal("the case must fail its judgement to test the diagnosis")
	}
	if c, ok := Relate(a, nil, th); !ok || c.Tag != "output-ulp" {
		t.Errorf("within an ulp everywhere: Relate = %q (%v), want output-ulp", c.Tag, ok)
	}
	// the same total in other slots, far beyond an ulp
	big := []float64{0.5, -0.25, 0.125, 0.75, -1, 0.375}
	moved := append([]float64(nil), big...)
	moved[0], moved[3] = moved[3], moved[0]
	if c, ok := Relate(array(moved, big), nil, th); !ok || c.Tag != "wrong-slot" {
		t.Errorf("swapped elements: Relate = %q (%v), want wrong-slot", c.Tag, ok)
	}
	// a float32 array is never at a 16-bit output's resolution
	b := array(got, want)
	b.Stored = ssm.F32
	if atOutputULP(b) {
		t.Error("atOutputULP holds for a float32 array")
	}
	if atOutputULP(array(append([]float64(nil), want...), want)) {
		t.Error("atOutputULP holds for an exact array (nothing differs)")
	}
}

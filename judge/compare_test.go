package judge

import (
	"math"
	"strings"
	"testing"

	"ssmverify/ssm"
)

// TestCompareScanNamesProblemsBeyondRange: a problem whose exact output
// exceeds float32's largest number (one state, Ā = 1, C·Δ·B·u = 10⁴⁰) fails
// in float32 whatever the kernel returns, and the failure says that the
// problem, not the kernel, left the range; in float64, and with C = 1 in
// float32, the same exact values pass without a note.
func TestCompareScanNamesProblemsBeyondRange(t *testing.T) {
	problem := func(c float64) *ssm.Problem {
		return &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 1, Dstate: 1, Groups: 1, Method: ssm.ZOH,
			U: []float64{1e5}, Delta: []float64{1}, A: []float64{0}, B: []float64{1e30}, C: []float64{c}}
	}
	for _, tc := range []struct {
		name     string
		c        float64
		dt       ssm.DType
		out      float64 // the kernel's output
		pass     bool
		noteWant string // "" : no note
	}{
		{"float32 beyond range", 1e5, ssm.F32, math.Inf(1), false, "may leave float32's range"},
		{"float32 beyond range, finite garbage", 1e5, ssm.F32, 3e38, false, "may leave float32's range"},
		{"float32 within range", 1, ssm.F32, 1e35, true, ""},
		{"float64", 1e5, ssm.F64, 1e40, true, ""},
	} {
		p := problem(tc.c)
		got := &ssm.Output{Out: []float64{tc.out}, LastState: []float64{1e35}}
		c, err := CompareScan(p, got, tc.dt, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.Passed(tc.dt) != tc.pass {
			t.Errorf("%s: passed %t, want %t (%s)", tc.name, c.Passed(tc.dt), tc.pass, c.Worst)
		}
		if tc.noteWant == "" {
			if c.Worst.Note != "" || c.Beyond != 0 {
				t.Errorf("%s: note %q, beyond %g; want none", tc.name, c.Worst.Note, c.Beyond)
			}
			continue
		}
		if !strings.Contains(c.Worst.String(), tc.noteWant) || c.Beyond < 9.9e39 || math.IsNaN(c.Worst.ULP) {
			t.Errorf("%s: worst %q, beyond %g; want the note %q, a bound of 1e40 and an ulp distance", tc.name, c.Worst, c.Beyond, tc.noteWant)
		}
	}
}

// TestULPs: distances in the dtype's last place, at the ends of its range.
func TestULPs(t *testing.T) {
	for _, tc := range []struct {
		got, want float64
		dt        ssm.DType
		ulps      float64
	}{
		{1, 1, ssm.F32, 0},
		{1 + 0x1p-23, 1, ssm.F32, 1},
		{1 + 0x1p-52, 1, ssm.F64, 1},
		{-2, -2 - 0x1p-22, ssm.F32, 1}, // want's ulp above 2 is 2⁻²²
		{0, 0x1p-149, ssm.F32, 1},      // below the smallest normal: its ulp, 2⁻¹⁴⁹
		{math.MaxFloat32, 1e40, ssm.F32, (1e40 - math.MaxFloat32) / 0x1p104},
		{math.Inf(1), 1, ssm.F32, math.Inf(1)},
		{math.NaN(), 1, ssm.F64, math.Inf(1)},
	} {
		if got := ULPs(tc.got, tc.want, tc.dt); got != tc.ulps {
			t.Errorf("ULPs(%g, %g, %v) = %g, want %g", tc.got, tc.want, tc.dt, got, tc.ulps)
		}
	}
}

// TestCompareScanNonFiniteReference: where the reference is NaN or ±Inf
// the kernel must give the same; a finite value there is counted and
// fails (it used to pass silently).
func TestCompareScanNonFiniteReference(t *testing.T) {
	p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 2, Dstate: 1, Groups: 1, Method: ssm.ZOH,
		U: []float64{1, 1}, Delta: []float64{0.5, 0.5}, A: []float64{-1}, B: []float64{1}, C: []float64{1}}
	nan, inf := math.NaN(), math.Inf(1)
	for _, tc := range []struct {
		name      string
		want, got float64
		unmatched int
	}{
		{"NaN matched by NaN", nan, nan, 0},
		{"NaN answered with a finite value", nan, 0.25, 1},
		{"+Inf matched", inf, inf, 0},
		{"+Inf answered with −Inf", inf, -inf, 1},
		{"+Inf answered with a finite value", inf, 3e38, 1},
	} {
		ref := &ssm.Output{Out: []float64{0.5, tc.want}, LastState: []float64{0.7}}
		got := &ssm.Output{Out: []float64{0.5, tc.got}, LastState: []float64{0.7}}
		c, err := CompareScan(p, got, ssm.F64, ref, nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Unmatched != tc.unmatched || c.Passed(ssm.F64) != (tc.unmatched == 0) {
			t.Errorf("%s: unmatched %d, passed %t; want %d, %t", tc.name, c.Unmatched, c.Passed(ssm.F64), tc.unmatched, tc.unmatched == 0)
		}
	}
}

// TestULPsOf: the normwise ulp measure: an error against the magnitude of
// the terms, not against a value that cancelled to near 0.
func TestULPsOf(t *testing.T) {
	for _, c := range []struct {
		diff, mag float64
		dt        ssm.DType
		want      float64
	}{
		{0, 1, ssm.F32, 0},
		{0x1p-23, 1, ssm.F32, 1},
		{0x1p-52, 1, ssm.F64, 1},
		{-3 * 0x1p-23, 1, ssm.F32, 3},
		{0x1p-23, 1e-30, ssm.F32, 0x1p100}, // float32's ulp at 1e-30 is 2⁻¹²³
		{math.NaN(), 1, ssm.F64, math.Inf(1)},
	} {
		got := ULPsOf(c.diff, c.mag, c.dt)
		if !(got == c.want || math.Abs(got-c.want) <= 1e-9*c.want) {
			t.Errorf("ULPsOf(%g, %g, %v) = %g, want %g", c.diff, c.mag, c.dt, got, c.want)
		}
	}
	// A value near 0 by cancellation, one float32 ulp of its terms off:
	// ULPs counts millions, ULPsOf one.
	if u := ULPs(1e-7+0x1p-23, 1e-7, ssm.F32); u < 1e6 {
		t.Errorf("ULPs near 0 = %g: the test's premise", u)
	}
	if u := ULPsOf(0x1p-23, math.Max(1e-7, 1), ssm.F32); u != 1 {
		t.Errorf("ULPsOf against the terms' magnitude = %g, want 1", u)
	}
}

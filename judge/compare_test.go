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

// TestCompareScanNarrowOutput: a 16-bit dtype's output is held to one
// rounding of the float32 result to nearest: the nearest value passes,
// the truncated one fails, fp16's overflow is ∞ exactly where the value
// passes 65520, and its subnormals round like its normals.
func TestCompareScanNarrowOutput(t *testing.T) {
	inf := math.Inf(1)
	for _, tc := range []struct {
		name string
		dt   ssm.DType
		u, b float64 // y = u·b exactly (zoh, a = 0, Δ = 1, C = 1)
		out  float64
		pass bool
	}{
		{"fp16 nearest", ssm.F16, 1, 1 + 0.75*0x1p-10, 1 + 0x1p-10, true},
		{"fp16 truncated", ssm.F16, 1, 1 + 0.75*0x1p-10, 1, false},
		{"fp16 exact", ssm.F16, 3, 1, 3, true},
		{"fp16 one ulp off", ssm.F16, 3, 1, 3 + 0x1p-9, false},
		{"bf16 nearest", ssm.BF16, 1, 1 + 0.75*0x1p-7, 1 + 0x1p-7, true},
		{"bf16 truncated", ssm.BF16, 1, 1 + 0.75*0x1p-7, 1, false},
		{"bf16 negative nearest", ssm.BF16, -1, 1 + 0.75*0x1p-7, -1 - 0x1p-7, true},
		{"fp16 overflow to inf", ssm.F16, 60000, 1.2, inf, true},
		{"fp16 overflow kept finite", ssm.F16, 60000, 1.2, ssm.Float16Max, false},
		{"fp16 largest is not inf", ssm.F16, ssm.Float16Max, 1, inf, false},
		{"fp16 overflow, wrong sign", ssm.F16, -60000, 1.2, inf, false},
		{"fp16 subnormal tie to even", ssm.F16, ssm.Float16MinSub, 1.5, 2 * ssm.Float16MinSub, true},
		{"fp16 subnormal flushed", ssm.F16, ssm.Float16MinSub, 1.5, 0, false},
		{"fp32 unchanged", ssm.F32, 1, 1 + 0.75*0x1p-10, 1 + 0x1p-10, false},
	} {
		p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 1, Dstate: 1, Groups: 1, Method: ssm.ZOH,
			U: []float64{tc.u}, Delta: []float64{1}, A: []float64{0}, B: []float64{tc.b}, C: []float64{1}}
		state := float64(float32(tc.u * tc.b))
		c, err := CompareScan(p, &ssm.Output{Out: []float64{tc.out}, LastState: []float64{state}}, tc.dt, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if c.Passed(tc.dt) != tc.pass {
			t.Errorf("%s: passed %t, want %t (%s; %d non-finite)", tc.name, c.Passed(tc.dt), tc.pass, c.Worst, c.NonFinite)
		}
	}
}

// TestOutputRatio: the ratio of a 16-bit output is the error beyond half
// an ulp of the narrow type, in units of the float32 model.
func TestOutputRatio(t *testing.T) {
	const scale = 1.0 // u·S = 2⁻²⁴
	model := 0x1p-24
	for _, tc := range []struct {
		diff, want float64
		dt         ssm.DType
		ratio      float64
	}{
		{0x1p-12, 1, ssm.F16, 0},                         // within half an ulp (2⁻¹¹)
		{0x1p-11 + 4*model, 1, ssm.F16, 3.5 - 4*0x1p-11}, // half an ulp plus 4u; ρ also covers the threshold's reach (4u·2⁻¹¹) and half the subnormal spacing (2⁻²⁵)
		{0x1p-8 + 8*model, 1, ssm.BF16, 8 - 4*0x1p-8},    // bf16: half an ulp is 2⁻⁸
		{3 * model, 1, ssm.F32, 3},                       // fp32: Ratio
		{math.NaN(), 1, ssm.F16, math.NaN()},             //
		{ssm.Float16MinSub / 2, 0, ssm.F16, 0},           // half the subnormal spacing
	} {
		got := OutputRatio(tc.diff, tc.want, scale, 0, tc.dt)
		if !(got == tc.ratio || math.IsNaN(got) && math.IsNaN(tc.ratio) || math.Abs(got-tc.ratio) < 1e-9) {
			t.Errorf("OutputRatio(%g, %g, %v) = %g, want %g", tc.diff, tc.want, tc.dt, got, tc.ratio)
		}
	}
}

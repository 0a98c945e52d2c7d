package judge

import (
	"math"
	"slices"
	"testing"

	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// TestCompareGradsNarrow: in a 16-bit dtype the input-typed gradients (du
// here: du = dout·B for zoh at a = 0, Δ = 1, C = 1, one step) may carry
// their one rounding to nearest and no more, fp16's may overflow to ±Inf
// only where the value passes 65520, and the weights' (dD = dout·u) are
// judged in float32 as in F32.
func TestCompareGradsNarrow(t *testing.T) {
	inf := math.Inf(1)
	const x = 1 + 0x1p-10 // an fp16 value whose square is not one
	for _, tc := range []struct {
		name       string
		dt         ssm.DType
		dout, b, u float64
		du, dD     float64 // NaN: the reference's own value
		pass       bool
	}{
		{"fp16 du nearest", ssm.F16, 1, 1 + 0.75*0x1p-10, 1, 1 + 0x1p-10, math.NaN(), true},
		{"fp16 du truncated", ssm.F16, 1, 1 + 0.75*0x1p-10, 1, 1, math.NaN(), false},
		{"bf16 du nearest", ssm.BF16, 1, 1 + 0.75*0x1p-7, 1, 1 + 0x1p-7, math.NaN(), true},
		{"bf16 du truncated", ssm.BF16, 1, 1 + 0.75*0x1p-7, 1, 1, math.NaN(), false},
		{"bf16 du negative nearest", ssm.BF16, -1, 1 + 0.75*0x1p-7, 1, -1 - 0x1p-7, math.NaN(), true},
		{"fp16 du overflow to inf", ssm.F16, 60000, 1.25, 1, inf, math.NaN(), true},
		{"fp16 du overflow kept finite", ssm.F16, 60000, 1.25, 1, ssm.Float16Max, math.NaN(), false},
		{"fp16 du largest is not inf", ssm.F16, ssm.Float16Max, 1, 1, inf, math.NaN(), false},
		{"fp16 dD in float", ssm.F16, x, 1, x, math.NaN(), x * x, true},
		{"fp16 dD rounded to fp16", ssm.F16, x, 1, x, math.NaN(), ssm.RoundFloat16(x * x), false},
		{"fp32 du rounded like fp16", ssm.F32, 1, 1 + 0.75*0x1p-10, 1, 1 + 0x1p-10, math.NaN(), false},
	} {
		p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 1, Dstate: 1, Groups: 1, Method: ssm.ZOH,
			U: []float64{tc.u}, Delta: []float64{1}, A: []float64{0}, B: []float64{tc.b}, C: []float64{1}, D: []float64{0}} // D = 0: du = dout·B, dD = dout·u
		ct := &ssm.Cotangent{Out: []float64{tc.dout}}
		want, sc := referenceGrads(t, p, ct, tc.dt)
		// got: every gradient stored as a correct kernel stores it, then du
		// and dD as the case says.
		got := &ssm.Grads{}
		gf, wf := []*[]float64{&got.U, &got.Delta, &got.A, &got.B, &got.C, &got.D}, want.Fields()
		for k, f := range wf[:len(gf)] {
			v := make([]float64, len(f.Values))
			for i, w := range f.Values {
				v[i] = tc.dt.Weight().Round(w)
				if ssm.InputTyped(p, f.Name) {
					v[i] = tc.dt.Round(w)
				}
			}
			*gf[k] = v
		}
		if !math.IsNaN(tc.du) {
			got.U[0] = tc.du
		}
		if !math.IsNaN(tc.dD) {
			got.D[0] = tc.dD
		}
		c := CompareGrads(p, got, tc.dt, want, sc)
		if c.Passed(tc.dt) != tc.pass {
			t.Errorf("%s: passed %t, want %t (worst %s; %d non-finite)", tc.name, c.Passed(tc.dt), tc.pass, c.Worst(), c.NonFinite)
		}
	}
}

// TestCompareGradsNamesNonFinite: a NaN gradient where the reference is
// finite fails, and the comparison names the first such element.
func TestCompareGradsNamesNonFinite(t *testing.T) {
	p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 2, Dstate: 1, Groups: 1, Method: ssm.ZOH,
		U: []float64{1, 2}, Delta: []float64{0.5, 0.25}, A: []float64{-1}, B: []float64{1}, C: []float64{1}}
	ct := &ssm.Cotangent{Out: []float64{1, -1}}
	want, sc := referenceGrads(t, p, ct, ssm.F32)
	got := &ssm.Grads{U: slices.Clone(want.U), Delta: slices.Clone(want.Delta), A: slices.Clone(want.A),
		B: slices.Clone(want.B), C: slices.Clone(want.C)}
	got.Delta[1] = math.NaN()
	got.A[0] = math.Inf(1)
	c := CompareGrads(p, got, ssm.F32, want, sc)
	if c.Passed(ssm.F32) || c.NonFinite != 2 {
		t.Fatalf("passed %t with %d non-finite, want a failure with 2", c.Passed(ssm.F32), c.NonFinite)
	}
	if w := c.FirstNonFinite; w.Name != "ddelta" || w.Index != 1 || !math.IsNaN(w.Got) || w.Want != want.Delta[1] {
		t.Errorf("the first non-finite gradient is %+v, want ddelta[1] (NaN against %g)", w, want.Delta[1])
	}
}

// referenceGrads is the reference's gradients of p for ct and their error
// scale in dt's arithmetic.
func referenceGrads(t *testing.T, p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType) (*ssm.Grads, *mamba1.GradScale) {
	t.Helper()
	want, err := mamba1.ScanGrad(p, ct, false)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := mamba1.GradErrorScale(p, ct, false, dt.Precision())
	if err != nil {
		t.Fatal(err)
	}
	return want, sc
}

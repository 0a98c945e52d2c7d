package diagnose

import (
	"math"
	"testing"

	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// TestDiscretizedSubnormalX: ssmk_discretize outputs that are wrong only
// where x = Δ·a has a subnormal part are diagnosed as such (a half-angle
// foh made φ1 28/27 of 1 there); failures that reach a normal x are not,
// whatever else explains them.
func TestDiscretizedSubnormalX(t *testing.T) {
	sub := math.SmallestNonzeroFloat64
	as := []complex128{complex(0, 27*sub), complex(0, 401*sub), complex(-1, 3), complex(0.25, -0.5), complex(0, 1e-300)}
	for _, tc := range []struct {
		name      string
		failed    []bool
		subnormal bool // the diagnosis wanted: subnormal-x, or anything else
	}{
		{"only at subnormal x", []bool{true, true, false, false, false}, true},
		{"at a normal x too", []bool{true, false, true, false, false}, false},
		{"at a tiny normal x", []bool{false, false, false, false, true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			delta := make([]float64, len(as))
			abar, bcoef := make([]complex128, len(as)), make([]complex128, len(as))
			for i, a := range as {
				delta[i] = 1
				ab, g := mamba1.Complex(ssm.FOH, a)
				if tc.failed[i] {
					g *= 28.0 / 27
				}
				abar[i], bcoef[i] = ab, g
			}
			f := Discretized(ssm.FOH, ssm.F64, true, delta, as, abar, bcoef, tc.failed)
			if (f.Tag == "subnormal-x") != tc.subnormal {
				t.Errorf("tag %q (%s), want subnormal-x: %t", f.Tag, f.Cause, tc.subnormal)
			}
		})
	}
}

// TestDiscretizedNarrowGuard: foh's φ1 failing just outside a guard narrowed
// to |x| < 0.03, with the scatter a device exponential gives the errors (the
// CUDA build's points under mutant 14, fp32), is named phi1-narrow-guard;
// Ā = 0 where e^x underflows the dtype (x = −110 in float32) is its
// rounding, not an error of Ā. A g wrong at |x| ≥ 1 is not a narrow guard.
func TestDiscretizedNarrowGuard(t *testing.T) {
	xs := []float64{-0.0316228, 0.0464159, 0.0618966, 0.5, -110.069418, -3}
	for _, tc := range []struct {
		name string
		rel  []float64 // relative error of g at each point (0: exact)
		want bool
	}{
		{"scattered, an underflowing Ā beside them", []float64{1.47e-6, 1.25e-6, 1.83e-6, 0, 0, 0}, true},
		{"a g wrong at |x| = 3 too", []float64{1.47e-6, 1.25e-6, 1.83e-6, 0, 0, 1e-3}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			delta := make([]float64, len(xs))
			as := make([]complex128, len(xs))
			abar, bcoef := make([]complex128, len(xs)), make([]complex128, len(xs))
			failed := make([]bool, len(xs))
			for i, x := range xs {
				delta[i], as[i] = 1, complex(x, 0)
				ab, g := mamba1.Real(ssm.FOH, x)
				ab = float64(float32(ab)) // 0 at x = −110
				failed[i] = tc.rel[i] != 0
				abar[i], bcoef[i] = complex(ab, 0), complex(g*(1+tc.rel[i]), 0)
			}
			f := Discretized(ssm.FOH, ssm.F32, false, delta, as, abar, bcoef, failed)
			if (f.Tag == "phi1-narrow-guard") != tc.want {
				t.Errorf("tag %q (%s), want phi1-narrow-guard: %t", f.Tag, f.Cause, tc.want)
			}
		})
	}
}

// TestFitsUnderflow: a probed Ā of 0 where e^x underflows the dtype (x =
// −110 in float32, e^x = 1.6e-48) fits the method; 1e-40, a normal-range
// miss in float64, does not.
func TestFitsUnderflow(t *testing.T) {
	ref := func(pt point) complex128 { a, _ := mamba1.Coef(ssm.ZOH, false, pt.x); return a }
	for _, tc := range []struct {
		dt   ssm.DType
		abar complex128
		want bool
	}{
		{ssm.F32, 0, true},
		{ssm.F64, 1e-40, false},
	} {
		pt := point{delta: 1, a: -110, x: -110, abar: tc.abar, aKnown: true}
		if ok, worst := fits([]point{pt}, tc.dt, true, ref); ok != tc.want {
			t.Errorf("%v: Ā = %v at x = −110 fits: %t (worst %.3g tolerances), want %t", tc.dt, tc.abar, ok, worst, tc.want)
		}
	}
}

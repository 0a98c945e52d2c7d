package diagnose

import (
	"math"
	"testing"

	"ssmverify/reference"
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
				ab, g := reference.Complex(ssm.FOH, a)
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

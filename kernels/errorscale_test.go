package kernels

import (
	"fmt"
	"math"
	"math/cmplx"
	"testing"

	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// The error scales bound from below. An error scale is only as useful as
// it is tight: a scale many times the error a correct kernel makes lets
// bugs of that size pass (foh's scale near x = 0 once admitted 28u on g,
// and a series guard narrowed to |x| < 0.05 passed). These tests hold the
// scales against the project's own float32 kernels, plain evaluations of
// the same formulas: over the generators, the largest error must reach a
// fixed fraction of the scale. float64 is left out: the CPU build and the
// reference evaluate some formulas identically in float64 (bilinear's
// complex Ā, to the bit), and an error of 0 says nothing about a scale.
const (
	// minWorstDiscretize: the largest ratio of ssmk_discretize's outputs
	// over the sweep of x must reach 1/5 (measured on the CPU build,
	// 2026-11-25: 0.30 to 0.74 by method, real and complex; foh's Bcoef on
	// its series branch 0.37 and 0.29).
	minWorstDiscretize = 0.2
	// minWorstScan: the largest ratio of the scan over the problems below
	// must reach 1/10 (measured on the CPU build: 0.28 to 0.75; the scan's scale sums
	// first-order bounds of every rounding, which a correct kernel's
	// errors, of random signs, reach only in part).
	minWorstScan = 0.1
)

// TestDiscretizeScaleIsTight: over mamba1.SweepGrid, per method and real or
// complex A, and for foh's Bcoef = Δ·φ1 again on 10⁻³ ≤ |x| < 1/2 alone
// (its series branch), the largest ratio reaches minWorstDiscretize. With
// the series branch's former scale (28u·φ1(|x|), Horner's generic bound)
// the last fails: 0.065 for real A, 0.045 for complex (CPU build).
func TestDiscretizeScaleIsTight(t *testing.T) {
	l := open(t)
	for _, m := range ssm.Methods() {
		for _, isComplex := range []bool{false, true} {
			delta, a := mamba1.SweepGrid(ssm.F32, isComplex, uint64(m)+1)
			abar, bcoef, err := l.Discretize(m, ssm.F32, isComplex, delta, a)
			if err != nil {
				t.Fatal(err)
			}
			worst, nearWorst := 0.0, 0.0
			for _, pt := range judge.CompareDiscretize(m, ssm.F32, isComplex, delta, a, abar, bcoef) {
				worst = math.Max(worst, pt.Ratio())
				if ax := cmplx.Abs(pt.X); ax >= 1e-3 && ax < 0.5 {
					nearWorst = math.Max(nearWorst, pt.RatioBcoef)
				}
			}
			name := fmt.Sprintf("%v fp32 %s", m, ssm.AKind(isComplex))
			t.Logf("%s: largest ratio %.3g (Bcoef on 10⁻³ ≤ |x| < 1/2: %.3g)", name, worst, nearWorst)
			if !(worst >= minWorstDiscretize) {
				t.Errorf("%s: the largest ratio over the sweep is %.3g < %g: DiscretizeScale is more than %g× the error of a plain evaluation",
					name, worst, minWorstDiscretize, 1/minWorstDiscretize)
			}
			if m == ssm.FOH && !(nearWorst >= minWorstDiscretize) {
				t.Errorf("%s: Bcoef's largest ratio on 10⁻³ ≤ |x| < 1/2 is %.3g < %g: φ1's series branch has a loose scale", name, nearWorst, minWorstDiscretize)
			}
		}
	}
}

// TestScanScaleIsTight: the scan's largest ratio per method and real or
// complex A, over Mamba-block problems and generated ones of both
// distributions, reaches minWorstScan.
func TestScanScaleIsTight(t *testing.T) {
	l := open(t)
	for _, m := range ssm.Methods() {
		for _, isComplex := range []bool{false, true} {
			worst := 0.0
			for seed := uint64(1); seed <= 4; seed++ {
				for _, s := range []mamba1.Spec{
					mamba1.MambaBlock(m, 1, 16, 256, 16),
					{Batch: 2, Dim: 4, Seqlen: 300, Dstate: 8, Groups: 2, Method: m, VariableB: true, VariableC: true,
						Softplus: true, HasD: true, HasZ: true, HasBias: true, Dist: mamba1.Realistic},
					{Batch: 2, Dim: 4, Seqlen: 64, Dstate: 8, Groups: 1, Method: m, VariableB: true, HasD: true, Dist: mamba1.Stress},
				} {
					s.Complex = isComplex
					r, _ := scanRatio(t, l, mamba1.Generate(s, seed), ssm.F32)
					worst = math.Max(worst, r)
				}
			}
			name := fmt.Sprintf("%v fp32 %s", m, ssm.AKind(isComplex))
			t.Logf("%s: largest scan ratio %.3g", name, worst)
			if !(worst >= minWorstScan) {
				t.Errorf("%s: the largest scan ratio is %.3g < %g: ErrorScale is more than %g× the error of a plain evaluation",
					name, worst, minWorstScan, 1/minWorstScan)
			}
		}
	}
}

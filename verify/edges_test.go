package verify

import (
	"math"
	"testing"

	"ssmverify/ssm"
)

// discretizeEdges is a table of special values of a for ssmk_discretize, in
// the manner of the standard library's math tests: where a kernel's
// algebra meets the ends of its number format. The sweep's grid (|x| from
// 1e-8) does not reach them. Each entry is (Re a, Im a) in units named by
// scale: the weight type's least subnormal (sub), its least normal (norm),
// or 1. Im z tiny with Re z = 0 is where φ1(z) = sin(b)/b must stay 1: a
// half-angle form of foh's e^z (sin b = 2·sin(b/2)·cos(b/2)) made it 28/27
// there, because b/2 is inexact below the normal range (fuzz, 2026-11-27).
var discretizeEdges = []struct {
	re, im float64
	scale  string
	real   bool // also a point for real A (im = 0)
}{
	{0, 0, "1", true},
	{1, 0, "sub", true},
	{-27, 0, "sub", true},
	{-1, 0, "norm", true},
	{3, 0, "norm", true},
	{0, 1, "sub", false},
	{0, -3, "sub", false},
	{0, 27, "sub", false},
	{0, 401, "sub", false},
	{-27, 27, "sub", false},
	{0, 1, "norm", false},
	{-1, 5, "norm", false},
	{0, 1e-30, "1", false},
	{-1e-30, 1e-30, "1", false},
	{0, 1e-200, "1", false},
}

// TestDiscretizeEdges: ssmk_discretize at discretizeEdges, Δ = 1/2, 1 and 2,
// per method, dtype and real/complex A, against the reference within the
// threshold, as TestDiscretizeSweep judges its grid.
func TestDiscretizeEdges(t *testing.T) {
	track(t)
	forEachDiscretized(t, func(m ssm.Method, dt ssm.DType, isComplex bool) {
		prec := dt.Weight().Precision()
		sub := math.SmallestNonzeroFloat64
		if prec == ssm.Float32 {
			sub = math.SmallestNonzeroFloat32
		}
		unit := map[string]float64{"sub": sub, "norm": prec.Tiny(), "1": 1}
		var delta, a []float64
		for _, e := range discretizeEdges {
			re, im := e.re*unit[e.scale], e.im*unit[e.scale]
			if (!isComplex && !e.real) || (prec == ssm.Float32 && (float64(float32(re)) != re || float64(float32(im)) != im)) {
				continue // a complex point, or not a float32 weight (1e-200)
			}
			for _, d := range []float64{0.5, 1, 2} {
				delta = append(delta, d)
				if a = append(a, re); isComplex {
					a = append(a, im)
				}
			}
		}
		if st := judgeDiscretized(t, m, dt, isComplex, delta, a, "edge points"); st != nil && len(st.ratios) == 0 {
			t.Errorf("%v %v %s: no edge point judged", m, dt, ssm.AKind(isComplex))
		}
	})
}

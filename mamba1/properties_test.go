package mamba1

import (
	"math"
	"math/cmplx"
	"testing"

	"ssmverify/ssm"

	"pgregory.net/rapid"
)

const u64 = 0x1p-53

// logUniform draws a magnitude in [lo, hi], uniform in its logarithm.
func logUniform(t *rapid.T, lo, hi float64, label string) float64 {
	e := rapid.Float64Range(math.Log(lo), math.Log(hi)).Draw(t, label)
	return math.Exp(e)
}

// drawA draws a diagonal entry a: real, or complex with a random imaginary
// part, with |Re a| in [lo, hi] and the given sign of Re a (0: either).
func drawA(t *rapid.T, isComplex bool, lo, hi float64, sign int) complex128 {
	re := logUniform(t, lo, hi, "ln|Re a|")
	switch {
	case sign < 0:
		re = -re
	case sign == 0 && rapid.Bool().Draw(t, "negative"):
		re = -re
	}
	if !isComplex {
		return complex(re, 0)
	}
	return complex(re, rapid.Float64Range(-hi, hi).Draw(t, "Im a"))
}

func coef(m ssm.Method, x complex128, isComplex bool) (abar, g complex128) {
	if isComplex {
		return Complex(m, x)
	}
	a, gg := Real(m, real(x))
	return complex(a, 0), complex(gg, 0)
}

// As Δ → 0 every method tends to the identity: Ā → 1 and B̄/Δ = g → 1, and
// the gaps shrink linearly, |Ā − 1| ≤ 1.1·|x| and |g − 1| ≤ 0.6·|x| for
// |x| ≤ 0.1 (first Taylor terms x and x/2, with room for the rest).
func TestPropLimitDeltaToZero(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.SampledFrom(ssm.Methods()).Draw(t, "method")
		isComplex := rapid.Bool().Draw(t, "complex")
		a := drawA(t, isComplex, 1e-3, 1e3, 0)
		for delta := 0.1 / cmplx.Abs(a); delta > 1e-30; delta /= 1000 {
			x := complex(delta, 0) * a
			abar, g := coef(m, x, isComplex)
			if d := cmplx.Abs(abar - 1); d > 1.1*cmplx.Abs(x)+2*u64 {
				t.Fatalf("%v: |Ā − 1| = %g at x = %v, want ≤ 1.1|x| = %g", m, d, x, 1.1*cmplx.Abs(x))
			}
			if d := cmplx.Abs(g - 1); d > 0.6*cmplx.Abs(x)+2*u64 {
				t.Fatalf("%v: |g − 1| = %g at x = %v, want ≤ 0.6|x| = %g", m, d, x, 0.6*cmplx.Abs(x))
			}
		}
		abar, g := coef(m, 0, isComplex)
		if abar != 1 || g != 1 {
			t.Fatalf("%v at x = 0: (Ā, g) = (%v, %v), want (1, 1)", m, abar, g)
		}
	})
}

// The complex forms at a real argument equal the real forms (to 2 ulp:
// complex exp and division take other routes than their real counterparts).
func TestPropRealComplexAgree(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.SampledFrom(ssm.Methods()).Draw(t, "method")
		x := drawA(t, false, 1e-12, 50, 0)
		ra, rg := Real(m, real(x))
		ca, cg := Complex(m, x)
		for _, pair := range [][2]float64{{ra, real(ca)}, {rg, real(cg)}} {
			if !tolerance(pair[1], pair[0], 4*u64) {
				t.Fatalf("%v(%g): complex %.17g, real %.17g", m, real(x), pair[1], pair[0])
			}
		}
		if imag(ca) != 0 || imag(cg) != 0 {
			t.Fatalf("%v(%g): complex form has imaginary parts %g, %g", m, real(x), imag(ca), imag(cg))
		}
	})
}

// slope fits log2(err) against log2(Δ) by least squares.
func slope(deltas, errs []float64) float64 {
	var sx, sy, sxx, sxy float64
	n := float64(len(deltas))
	for i := range deltas {
		x, y := math.Log2(deltas[i]), math.Log2(errs[i])
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

// Convergence order against the exact input integral Δ·φ1(x): the local
// error Δ·|g(x) − φ1(x)| of B̄/B shrinks as Δ^(p+1) with p = 1 (zoh),
// 2 (highorder), 3 (poly), 4 (rk4); bilinear's Ā − e^x and its B̄ error
// shrink as Δ³. Δ is halved six times from |x| ∈ [0.05, 0.2], where the
// truncation error (≥ |x|⁵/120 ≈ 4e-16 relative at the smallest step for
// rk4, far more for the others) dominates rounding; the fitted slope must be
// within ±0.3 of the order. foh is exact: its error stays at rounding level.
func TestPropConvergenceOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.SampledFrom(ssm.Methods()).Draw(t, "method")
		isComplex := rapid.Bool().Draw(t, "complex")
		a := drawA(t, isComplex, 0.3, 3, 0)
		x0 := rapid.Float64Range(0.05, 0.2).Draw(t, "|x0|")
		delta0 := x0 / cmplx.Abs(a)
		var deltas, errB, errA []float64
		for k := 0; k < 7; k++ {
			delta := math.Ldexp(delta0, -k)
			x := complex(delta, 0) * a
			abar, g := coef(m, x, isComplex)
			var phi complex128
			if isComplex {
				phi = Phi1Complex(x)
			} else {
				phi = complex(Phi1(real(x)), 0)
			}
			deltas = append(deltas, delta)
			errB = append(errB, delta*cmplx.Abs(g-phi))
			errA = append(errA, cmplx.Abs(abar-cmplx.Exp(x)))
		}
		if m == ssm.FOH {
			for i, e := range errB {
				if e > 4*u64*deltas[i]*2 {
					t.Fatalf("foh: B̄ error %g at Δ = %g, want rounding level (≤ %g)", e, deltas[i], 8*u64*deltas[i])
				}
			}
			return
		}
		want := float64(m.Order() + 1)
		if s := slope(deltas, errB); math.Abs(s-want) > 0.3 {
			t.Fatalf("%v: B̄ error slope %.3f, want %g ± 0.3 (errors %g)", m, s, want, errB)
		}
		if m == ssm.Bilinear {
			if s := slope(deltas, errA); math.Abs(s-3) > 0.3 {
				t.Fatalf("bilinear: Ā − e^x slope %.3f, want 3 ± 0.3 (errors %g)", s, errA)
			}
		}
	})
}

// Stability: for Re(a) < 0 and Δ > 0, |Ā| ≤ 1 for every method and every Δ,
// bilinear included at Δ up to 10⁶/|a|. Strictly below 1 where rounding
// allows it: e^x rounds to 1 for |x| < 2⁻⁵⁴, and (1 + x/2)/(1 − x/2) rounds
// to −1 once x/2 swamps the 1.
func TestPropStability(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := rapid.SampledFrom(ssm.Methods()).Draw(t, "method")
		isComplex := rapid.Bool().Draw(t, "complex")
		a := drawA(t, isComplex, 1e-6, 1e4, -1)
		delta := logUniform(t, 1e-6, 1e6, "ln(Δ|a|)") / cmplx.Abs(a)
		x := complex(delta, 0) * a
		abar, _ := coef(m, x, isComplex)
		mag := cmplx.Abs(abar)
		if !(mag <= 1) {
			t.Fatalf("%v: |Ā| = %.17g > 1 at x = %v", m, mag, x)
		}
		if rx := -real(x); rx > 1e-15 && rx < 1e15 && !(mag < 1) {
			t.Fatalf("%v: |Ā| = %.17g, want < 1 at x = %v", m, mag, x)
		}
	})
}

package reference

import (
	"math"
	"math/cmplx"
)

// float is the precision a reference evaluation runs in: float64 for the
// reference proper, float32 for the evaluation mode that rounds every
// intermediate to single precision.
//
// Go rounds every float32 operation to float32, and an explicit conversion
// forbids the compiler to fuse across it, so code written once over T gives
// both the float64 reference and a faithful "natural float32" evaluation.
// Library functions (exp, expm1, log1p, complex division) are evaluated in
// float64 and rounded once to T: that is what a correctly rounded float32
// libm returns.
type float interface{ ~float32 | ~float64 }

func expT[T float](x T) T   { return T(math.Exp(float64(x))) }
func expm1T[T float](x T) T { return T(math.Expm1(float64(x))) }

// phi1T is φ1(x) = (e^x − 1)/x with its limit φ1(0) = 1. expm1 keeps the
// numerator accurate near 0, where e^x − 1 would cancel to nothing.
func phi1T[T float](x T) T {
	if x == 0 {
		return 1
	}
	return expm1T(x) / x
}

// The input coefficients g(x) of the polynomial methods and bilinear, by
// Horner's rule in T; small enough to inline into the scan's row loops.
func gHighOrder[T float](x T) T { return 1 + x/2 }
func gPoly[T float](x T) T      { return 1 + x*(T(1.0/2)+x*T(1.0/6)) }
func gRK4[T float](x T) T       { return 1 + x*(T(1.0/2)+x*(T(1.0/6)+x*T(1.0/24))) }

// bilinearT is (Ā, g) = ((1 + x/2)/(1 − x/2), 1/(1 − x/2)).
func bilinearT[T float](x T) (abar, g T) {
	half := x / 2
	den := 1 - half
	return (1 + half) / den, 1 / den
}

// realCoef is the method table of the ABI for real x = Δ·a.
func realCoef[T float](m Method, x T) (abar, g T) {
	switch m {
	case ZOH:
		return expT(x), 1
	case FOH:
		return expT(x), phi1T(x)
	case Bilinear:
		return bilinearT(x)
	case Poly:
		return expT(x), gPoly(x)
	case HighOrder:
		return expT(x), gHighOrder(x)
	case RK4:
		return expT(x), gRK4(x)
	}
	return T(math.NaN()), T(math.NaN())
}

// Real returns the method's (Ā, g) for real x = Δ·a in float64; the discrete
// input coefficient is B̄ = Δ·g·B. An invalid method gives NaNs.
func (m Method) Real(x float64) (abar, g float64) { return realCoef(m, x) }

// Complex returns the method's (Ā, g) for complex x = Δ·a in complex128.
func (m Method) Complex(x complex128) (abar, g complex128) {
	a, gg := complexCoef(m, cpx[float64]{real(x), imag(x)})
	return a.c128(), gg.c128()
}

// Phi1 returns φ1(x) = (e^x − 1)/x, with φ1(0) = 1, to within an ulp or two:
// expm1 avoids the cancellation of e^x − 1 near 0.
func Phi1(x float64) float64 { return phi1T(x) }

// Expm1Complex returns e^z − 1 accurately for small |z|, where computing
// e^z − 1 directly cancels. With z = a + ib,
//
//	Re(e^z − 1) = e^a·cos b − 1 = expm1(a)·cos b − 2·sin²(b/2)
//	Im(e^z − 1) = e^a·sin b
//
// Both terms of the real part are computed without cancellation, so the
// result is accurate in norm (the only cancellation left is between two
// terms whose difference is small compared with |Im|, which then dominates).
func Expm1Complex(z complex128) complex128 {
	a, b := real(z), imag(z)
	if b == 0 {
		return complex(math.Expm1(a), b)
	}
	s := math.Sin(b / 2)
	return complex(math.Expm1(a)*math.Cos(b)-2*s*s, math.Exp(a)*math.Sin(b))
}

// Phi1Complex returns φ1(z) = (e^z − 1)/z with φ1(0) = 1, accurate in norm
// for every z including |z| → 0 (through Expm1Complex, no series needed).
func Phi1Complex(z complex128) complex128 {
	if z == 0 {
		return 1
	}
	return Expm1Complex(z) / z
}

// cpx is a complex number over T, so the complex scan can run in float32
// with every product and sum rounded to float32.
type cpx[T float] struct{ re, im T }

func (a cpx[T]) add(b cpx[T]) cpx[T] { return cpx[T]{a.re + b.re, a.im + b.im} }
func (a cpx[T]) mul(b cpx[T]) cpx[T] {
	return cpx[T]{a.re*b.re - a.im*b.im, a.re*b.im + a.im*b.re}
}
func (a cpx[T]) scale(s T) cpx[T]           { return cpx[T]{a.re * s, a.im * s} }
func (a cpx[T]) c128() complex128           { return complex(float64(a.re), float64(a.im)) }
func (a cpx[T]) abs() float64               { return cmplx.Abs(a.c128()) }
func fromC128[T float](z complex128) cpx[T] { return cpx[T]{T(real(z)), T(imag(z))} }

// complexCoef is the method table for complex x. exp, φ1 and the divisions
// of bilinear are library operations (float64, rounded once to T); the
// polynomials are Horner's rule in T.
func complexCoef[T float](m Method, x cpx[T]) (abar, g cpx[T]) {
	one := cpx[T]{1, 0}
	switch m {
	case ZOH:
		return fromC128[T](cmplx.Exp(x.c128())), one
	case FOH:
		return fromC128[T](cmplx.Exp(x.c128())), fromC128[T](Phi1Complex(x.c128()))
	case Bilinear:
		half := x.scale(0.5)
		num := cpx[T]{1 + half.re, half.im}
		den := cpx[T]{1 - half.re, -half.im}
		return fromC128[T](num.c128() / den.c128()), fromC128[T](1 / den.c128())
	case Poly:
		// 1 + x(1/2 + x/6)
		inner := x.scale(T(1.0 / 6)).add(cpx[T]{T(1.0 / 2), 0})
		return fromC128[T](cmplx.Exp(x.c128())), x.mul(inner).add(one)
	case HighOrder:
		return fromC128[T](cmplx.Exp(x.c128())), x.scale(0.5).add(one)
	case RK4:
		// 1 + x(1/2 + x(1/6 + x/24))
		in2 := x.scale(T(1.0 / 24)).add(cpx[T]{T(1.0 / 6), 0})
		in1 := x.mul(in2).add(cpx[T]{T(1.0 / 2), 0})
		return fromC128[T](cmplx.Exp(x.c128())), x.mul(in1).add(one)
	}
	nan := T(math.NaN())
	return cpx[T]{nan, nan}, cpx[T]{nan, nan}
}

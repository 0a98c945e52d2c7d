package mamba1

import (
	"math"

	"ssmverify/ssm"
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

// natural64 is float64 for the Float64Natural evaluation: the same
// arithmetic, but the elementary functions below skip the scaling that keeps
// the float64 reference finite at the top of the range.
type natural64 float64

// scaled reports whether T is the float64 reference proper, whose e^x, φ1
// and complex e^z are evaluated through e^{x/2} for x > 709 so that no
// intermediate overflows: math.Exp(709.782712893384) is +Inf although e^x
// is below MaxFloat64 there, and e^a·cos b or (e^x − 1)/x can be finite
// where e^a is not.
func scaled[T float]() bool {
	_, ok := any(T(0)).(float64)
	return ok
}

// bigExp is the threshold above which the scaled evaluation is used.
const bigExp = 709

func expT[T float](x T) T {
	if scaled[T]() && x > bigExp {
		h := math.Exp(float64(x) / 2)
		return T(h * h)
	}
	return T(math.Exp(float64(x)))
}
func expm1T[T float](x T) T { return T(math.Expm1(float64(x))) }

// phi1T is φ1(x) = (e^x − 1)/x with its limit φ1(0) = 1. expm1 keeps the
// numerator accurate near 0, where e^x − 1 would cancel to nothing.
func phi1T[T float](x T) T {
	if x == 0 {
		return 1
	}
	if scaled[T]() && x > bigExp {
		h := math.Exp(float64(x) / 2)
		return T(h * (h / float64(x))) // the −1 is below an ulp here
	}
	return expm1T(x) / x
}

// cexpT is e^z = e^a·(cos b + i sin b) for z = a + ib, with the real
// exponential exactly on the real axis (b = 0, so that real and complex A
// agree). cos and sin are library functions, rounded once to T; the
// products are in T, so a float32 evaluation overflows with e^a as a
// float32 kernel does. For infinite b the value has no limit and IEEE 754
// arithmetic gives NaN (cos ∞ = NaN): that is the ABI's value, not C99
// Annex G's convention.
func cexpT[T float](z cpx[T]) cpx[T] {
	if z.im == 0 {
		return cpx[T]{expT(z.re), z.im}
	}
	c, s := T(math.Cos(float64(z.im))), T(math.Sin(float64(z.im)))
	if scaled[T]() && z.re > bigExp {
		h := T(math.Exp(float64(z.re) / 2))
		return cpx[T]{h * (h * c), h * (h * s)}
	}
	e := expT(z.re)
	return cpx[T]{e * c, e * s}
}

// cphi1T is φ1(z) = (e^z − 1)/z. The float64 reference is Phi1Complex
// (scaled above Re z = 709); the other evaluations form e^z − 1 as
// Expm1Complex does, with every product in T, and divide (a library
// operation, rounded once), so their intermediates overflow where a kernel's
// do.
func cphi1T[T float](z cpx[T]) cpx[T] {
	if scaled[T]() {
		if z.re > bigExp {
			h := math.Exp(float64(z.re) / 2)
			w := quo(complex(h*math.Cos(float64(z.im)), h*math.Sin(float64(z.im))), z.c128())
			return fromC128[T](complex(h*real(w), h*imag(w)))
		}
		return fromC128[T](Phi1Complex(z.c128()))
	}
	if z.re == 0 && z.im == 0 {
		return cpx[T]{1, 0}
	}
	if z.im == 0 {
		return cpx[T]{phi1T(z.re), z.im}
	}
	s := T(math.Sin(float64(z.im / 2)))
	em1 := cpx[T]{expm1T(z.re)*T(math.Cos(float64(z.im))) - 2*s*s, expT(z.re) * T(math.Sin(float64(z.im)))}
	return fromC128[T](quo(em1.c128(), z.c128()))
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
func realCoef[T float](m ssm.Method, x T) (abar, g T) {
	switch m {
	case ssm.ZOH:
		return expT(x), 1
	case ssm.FOH:
		return expT(x), phi1T(x)
	case ssm.Bilinear:
		return bilinearT(x)
	case ssm.Poly:
		return expT(x), gPoly(x)
	case ssm.HighOrder:
		return expT(x), gHighOrder(x)
	case ssm.RK4:
		return expT(x), gRK4(x)
	}
	return T(math.NaN()), T(math.NaN())
}

// Real returns method m's (Ā, g) for real x = Δ·a in float64; the discrete
// input coefficient is B̄ = Δ·g·B. An invalid method gives NaNs.
func Real(m ssm.Method, x float64) (abar, g float64) { return realCoef(m, x) }

// Complex returns method m's (Ā, g) for complex x = Δ·a in complex128.
func Complex(m ssm.Method, x complex128) (abar, g complex128) {
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
// for every z including |z| → 0 (through Expm1Complex, no series needed)
// and |z| near the float64 range, where φ1 is a subnormal near −1/z.
func Phi1Complex(z complex128) complex128 {
	if z == 0 {
		return 1
	}
	return quo(Expm1Complex(z), z)
}

// quo returns n/m rounded about once, where Go's complex division (Smith's
// algorithm) can overflow although the quotient is representable: its
// denominator |Re m| + (Im m/Re m)·Im m, or the mirror, reaches twice m's
// larger part (for m = −1.11e308 + 1.40e308i it is +Inf and 1/m came out 0),
// and its numerator Re n + Im n·(Im m/Re m) twice n's. A large m is divided
// by 4 together with n, which leaves the quotient unchanged and is exact
// unless n is near the subnormal range (where the quotient underflows
// anyway); a large n alone is divided by 4 and the quotient multiplied back.
// FuzzScan/e350f31099f8e7c6: foh with Δ = DBL_MAX, whose input coefficient
// Δ·φ1(x) = (e^x − 1)/a is −1/a, came out 0.
func quo(n, m complex128) complex128 {
	const big = 0x1p1020
	quarter := func(z complex128) complex128 { return complex(real(z)/4, imag(z)/4) }
	switch {
	case math.Max(math.Abs(real(m)), math.Abs(imag(m))) > big:
		return quarter(n) / quarter(m)
	case math.Max(math.Abs(real(n)), math.Abs(imag(n))) > big:
		q := quarter(n) / m
		return complex(real(q)*4, imag(q)*4)
	}
	return n / m
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
func fromC128[T float](z complex128) cpx[T] { return cpx[T]{T(real(z)), T(imag(z))} }

// complexCoef is the method table for complex x. exp, φ1 and the divisions
// of bilinear are library operations (float64, rounded once to T); the
// polynomials are Horner's rule in T.
func complexCoef[T float](m ssm.Method, x cpx[T]) (abar, g cpx[T]) {
	one := cpx[T]{1, 0}
	switch m {
	case ssm.ZOH:
		return cexpT(x), one
	case ssm.FOH:
		return cexpT(x), cphi1T(x)
	case ssm.Bilinear:
		half := x.scale(0.5)
		num := cpx[T]{1 + half.re, half.im}
		den := cpx[T]{1 - half.re, -half.im}
		return fromC128[T](quo(num.c128(), den.c128())), fromC128[T](quo(1, den.c128()))
	case ssm.Poly:
		// 1 + x(1/2 + x/6)
		inner := x.scale(T(1.0 / 6)).add(cpx[T]{T(1.0 / 2), 0})
		return cexpT(x), x.mul(inner).add(one)
	case ssm.HighOrder:
		return cexpT(x), x.scale(0.5).add(one)
	case ssm.RK4:
		// 1 + x(1/2 + x(1/6 + x/24))
		in2 := x.scale(T(1.0 / 24)).add(cpx[T]{T(1.0 / 6), 0})
		in1 := x.mul(in2).add(cpx[T]{T(1.0 / 2), 0})
		return cexpT(x), x.mul(in1).add(one)
	}
	nan := T(math.NaN())
	return cpx[T]{nan, nan}, cpx[T]{nan, nan}
}

// DiscretizeAt returns what ssmk_discretize computes at (Δ, a): Ā and
// Bcoef = Δ·g at x = Δ·a, evaluated in prec. Float64 is the reference;
// Float32 rounds x, every operation of the method (library functions once)
// and the product Δ·g to single precision, as a natural float32 kernel
// would, and Float64Natural is its float64 counterpart. Where the natural
// evaluation differs from the reference by more than the error model
// allows, an intermediate result has left the dtype's range (x = Δ·a
// overflowing, e^x overflowing inside φ1 or e^a·cos b): that is how the
// fuzzers' non-finite policy tells IEEE 754 behaviour in the dtype from a
// kernel bug. For real A the
// imaginary parts are 0 and a's imaginary part is ignored.
func DiscretizeAt(m ssm.Method, prec ssm.Precision, isComplex bool, delta float64, a complex128) (abar, bcoef complex128) {
	switch prec {
	case ssm.Float32:
		return discretizeAt[float32](m, isComplex, float32(delta), fromC128[float32](a))
	case ssm.Float64Natural:
		return discretizeAt[natural64](m, isComplex, natural64(delta), fromC128[natural64](a))
	}
	return discretizeAt[float64](m, isComplex, delta, cpx[float64]{real(a), imag(a)})
}

func discretizeAt[T float](m ssm.Method, isComplex bool, delta T, a cpx[T]) (abar, bcoef complex128) {
	if isComplex {
		ab, g := complexCoef(m, a.scale(delta))
		return ab.c128(), g.scale(delta).c128()
	}
	ab, g := realCoef(m, delta*a.re)
	return complex(float64(ab), 0), complex(float64(delta*g), 0)
}

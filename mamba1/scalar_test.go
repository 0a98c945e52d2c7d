package mamba1

import (
	"math"
	"math/big"
	"math/cmplx"
	"strings"
	"testing"

	"ssmverify/ssm"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tolerance, close and veryclose follow the Go standard library's math
// tests: a relative tolerance, with exact equality required at 0 and for
// special values.
func tolerance(a, b, e float64) bool {
	if a == b {
		return true
	}
	if math.IsNaN(a) && math.IsNaN(b) {
		return true
	}
	d := a - b
	if d < 0 {
		d = -d
	}
	if b != 0 {
		e = e * b
		if e < 0 {
			e = -e
		}
	}
	return d < e
}

func close(a, b float64) bool     { return tolerance(a, b, 1e-14) }
func veryclose(a, b float64) bool { return tolerance(a, b, 4e-16) }

// alike is the math tests' exact match that also equates NaNs and
// distinguishes signed zeros.
func alike(a, b float64) bool {
	switch {
	case math.IsNaN(a) && math.IsNaN(b):
		return true
	case a == b:
		return math.Signbit(a) == math.Signbit(b)
	}
	return false
}

func TestParseMethod(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ssm.Method
	}{
		{"zoh", ssm.ZOH}, {"ZOH", ssm.ZOH}, {" foh ", ssm.FOH}, {"Bilinear", ssm.Bilinear}, {"poly", ssm.Poly},
		{"HighOrder", ssm.HighOrder}, {"rk4", ssm.RK4}, {"RK4", ssm.RK4},
	} {
		got, err := ssm.ParseMethod(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
		assert.Equal(t, strings.ToLower(strings.TrimSpace(tc.in)), got.String())
	}
	for _, bad := range []string{"", "tustin", "zoh2", "rk-4"} {
		_, err := ssm.ParseMethod(bad)
		require.Error(t, err, bad)
		for _, m := range ssm.Methods() {
			assert.Contains(t, err.Error(), m.String(), "the error for %q lists the valid names", bad)
		}
	}
	ms, err := ssm.ParseMethods("rk4,ZOH,rk4")
	require.NoError(t, err)
	assert.Equal(t, []ssm.Method{ssm.RK4, ssm.ZOH}, ms)
	ms, err = ssm.ParseMethods("all")
	require.NoError(t, err)
	assert.Equal(t, ssm.Methods(), ms)
	_, err = ssm.ParseMethods("zoh,nope")
	assert.ErrorContains(t, err, `"nope"`)
	assert.Equal(t, "method(9)", ssm.Method(9).String())
	for i, m := range ssm.Methods() {
		assert.Equal(t, ssm.Method(i), m, "ABI code of %v", m)
	}
}

// Ordinary values, computed by hand from the closed forms.
var coefTable = []struct {
	m       ssm.Method
	x       float64
	abar, g float64
}{
	{ssm.ZOH, 0, 1, 1},
	{ssm.ZOH, -1, 0.36787944117144233, 1},
	{ssm.FOH, 1, 2.718281828459045, 1.718281828459045},               // e − 1
	{ssm.FOH, -1, 0.36787944117144233, 0.6321205588285577},           // 1 − 1/e
	{ssm.FOH, 1e-10, 1.0000000001, 1.00000000005},                    // 1 + x/2
	{ssm.FOH, -40, 4.248354255291589e-18, 0.025},                     // (e^−40 − 1)/−40
	{ssm.Bilinear, -1, 1.0 / 3, 2.0 / 3},                             // 0.5/1.5, 1/1.5
	{ssm.Bilinear, 1, 3, 2},                                          // 1.5/0.5, 1/0.5
	{ssm.Bilinear, -2, 0, 0.5},                                       // the zero of 1 + x/2
	{ssm.Bilinear, -1e9, -0.999999996, 1.999999996000000008e-9},      // → −1 as x → −∞
	{ssm.Poly, 1, 2.718281828459045, 1 + 0.5 + 1.0/6},                //
	{ssm.Poly, -3, 0.049787068367863944, 1 - 1.5 + 1.5},              // 1 + x/2 + x²/6 at −3
	{ssm.HighOrder, -2, 0.1353352832366127, 0},                       // 1 + x/2 at −2
	{ssm.RK4, 1, 2.718281828459045, 1 + 0.5 + 1.0/6 + 1.0/24},        //
	{ssm.RK4, -2, 0.1353352832366127, 1 + (-2.0)/2 + 4.0/6 - 8.0/24}, // = 1/3
	{ssm.RK4, 0.5, 1.6487212707001282, 1 + 0.25 + 0.25/6 + 0.125/24}, //
}

func TestCoefTable(t *testing.T) {
	for _, tc := range coefTable {
		a, g := Real(tc.m, tc.x)
		if !close(a, tc.abar) || !close(g, tc.g) {
			t.Errorf("Real(%v, %g) = (%.17g, %.17g), want (%.17g, %.17g)", tc.m, tc.x, a, g, tc.abar, tc.g)
		}
		ca, cg := Complex(tc.m, complex(tc.x, 0))
		if !close(real(ca), tc.abar) || !close(real(cg), tc.g) || imag(ca) != 0 || imag(cg) != 0 {
			t.Errorf("Complex(%v, %g) = (%v, %v), want (%.17g, %.17g)", tc.m, tc.x, ca, cg, tc.abar, tc.g)
		}
	}
}

// Special values: IEEE 754 throughout, with φ1(0) = 1 the only special case
// (the ABI's rule).
var specialTable = []struct {
	m       ssm.Method
	x       float64
	abar, g float64
}{
	{ssm.ZOH, math.Inf(-1), 0, 1},
	{ssm.ZOH, math.Inf(1), math.Inf(1), 1},
	{ssm.ZOH, math.NaN(), math.NaN(), 1},
	{ssm.FOH, 0, 1, 1},
	{ssm.FOH, math.Copysign(0, -1), 1, 1},
	{ssm.FOH, 5e-324, 1, 1},
	{ssm.FOH, math.Inf(-1), 0, 0},                      // −1/−∞ = +0
	{ssm.FOH, math.Inf(1), math.Inf(1), math.NaN()},    // ∞/∞
	{ssm.FOH, 800, math.Inf(1), math.Inf(1)},           // expm1 overflows
	{ssm.FOH, math.NaN(), math.NaN(), math.NaN()},      //
	{ssm.Bilinear, 2, math.Inf(1), math.Inf(1)},        // the pole of unstable A
	{ssm.Bilinear, math.Inf(-1), math.NaN(), 0},        // −∞/∞, 1/∞
	{ssm.Bilinear, math.NaN(), math.NaN(), math.NaN()}, //
	{ssm.HighOrder, math.Inf(-1), 0, math.Inf(-1)},     //
	{ssm.Poly, math.Inf(-1), 0, math.Inf(1)},           // 1 + x(1/2 + x/6): (−∞)(−∞)
	{ssm.RK4, math.Inf(-1), 0, math.Inf(-1)},           //
	{ssm.RK4, math.Inf(1), math.Inf(1), math.Inf(1)},   //
}

func TestSpecialValues(t *testing.T) {
	for _, tc := range specialTable {
		a, g := Real(tc.m, tc.x)
		if !alike(a, tc.abar) || !alike(g, tc.g) {
			t.Errorf("Real(%v, %g) = (%g, %g), want (%g, %g)", tc.m, tc.x, a, g, tc.abar, tc.g)
		}
	}
	if v := Phi1(0); v != 1 {
		t.Errorf("Phi1(0) = %g, want 1", v)
	}
	if v := Phi1Complex(0); v != 1 {
		t.Errorf("Phi1Complex(0) = %v, want 1", v)
	}
	a, g := Real(ssm.Method(17), 1)
	assert.True(t, math.IsNaN(a) && math.IsNaN(g), "an invalid method gives NaNs")
}

// φ1 near 0: the naive (e^x − 1)/x loses all digits there, expm1 keeps them.
// Expected values are the Taylor series 1 + x/2 + x²/6 + x³/24 + x⁴/120, exact to
// double precision at these magnitudes.
func TestPhi1Small(t *testing.T) {
	for _, x := range []float64{1e-300, -1e-300, 1e-17, -1e-17, 1e-12, -1e-12, 1e-8, -3e-8, 1e-5, -1e-5, 1e-3} {
		want := 1 + x*(0.5+x*(1.0/6+x*(1.0/24+x/120)))
		if got := Phi1(x); !veryclose(got, want) {
			t.Errorf("Phi1(%g) = %.17g, want %.17g", x, got, want)
		}
		for _, z := range []complex128{complex(x, 0), complex(0, x), complex(x, x), complex(-x, 2*x)} {
			want := 1 + z*(0.5+z*(1.0/6+z*(1.0/24+z/120)))
			got := Phi1Complex(z)
			if cmplx.Abs(got-want) > 4e-16*cmplx.Abs(want) {
				t.Errorf("Phi1Complex(%v) = %v, want %v", z, got, want)
			}
		}
	}
}

// Expm1Complex against the direct formula where that one is accurate
// (|z| not small), and against its series where it is not.
func TestExpm1Complex(t *testing.T) {
	for _, z := range []complex128{1 + 1i, -2 + 3i, 0.5 - 7i, -30 + 0.1i, 3 + 100i} {
		want := cmplx.Exp(z) - 1
		got := Expm1Complex(z)
		if cmplx.Abs(got-want) > 1e-14*cmplx.Abs(want) {
			t.Errorf("Expm1Complex(%v) = %v, want %v", z, got, want)
		}
	}
	// On the imaginary axis e^{ib} − 1 = (cos b − 1) + i sin b; cos b − 1
	// cancels in the direct formula but not here.
	got := Expm1Complex(1e-9i)
	assert.True(t, veryclose(real(got), -5e-19), "Re(expm1(1e-9 i)) = %g, want −b²/2 = −5e-19", real(got))
	assert.True(t, veryclose(imag(got), 1e-9))
}

// exactQuo is n/m from n·conj(m)/|m|² in 256-bit arithmetic, whose exponent
// range has no overflow, rounded once to float64 per part.
func exactQuo(n, m complex128) complex128 {
	f := func(x float64) *big.Float { return new(big.Float).SetPrec(256).SetFloat64(x) }
	mul := func(x, y *big.Float) *big.Float { return new(big.Float).SetPrec(256).Mul(x, y) }
	nr, ni, mr, mi := f(real(n)), f(imag(n)), f(real(m)), f(imag(m))
	den := new(big.Float).SetPrec(256).Add(mul(mr, mr), mul(mi, mi))
	re := new(big.Float).SetPrec(256).Add(mul(nr, mr), mul(ni, mi))
	im := new(big.Float).SetPrec(256).Sub(mul(ni, mr), mul(nr, mi))
	r, _ := re.Quo(re, den).Float64()
	i, _ := im.Quo(im, den).Float64()
	return complex(r, i)
}

// quoClose: got is within four units of roundoff of the quotient want in
// norm, and two of the smallest subnormal for a quotient in the subnormal
// range.
func quoClose(got, want complex128) bool {
	return cmplx.Abs(got-want) <= 4*0x1p-53*cmplx.Abs(want)+2*math.SmallestNonzeroFloat64
}

// TestQuo: quo is the quotient to within a few units of the last place,
// subnormal results included, where Go's complex division (Smith's
// algorithm) overflows an intermediate; smith records that it does, so each
// row exercises the case it names.
func TestQuo(t *testing.T) {
	const dblMax = math.MaxFloat64
	for _, tc := range []struct {
		name  string
		n, m  complex128
		smith bool // Go's n/m is wrong here
	}{
		{"ordinary", 1 + 2i, 3 - 4i, false},
		{"large m, quotient a subnormal", 1, complex(-1.11e308, 1.40e308), true},
		{"φ1's numerator over the FuzzScan pole", complex(-1, 1e-17), complex(-1.11e308, 1.40e308), true},
		{"m at the top of the range", -0.5 + 2i, complex(dblMax, dblMax), true},
		{"large n, representable quotient", complex(dblMax, dblMax), 2 + 1.9i, true},
		{"large n and m", complex(dblMax, -dblMax/3), complex(dblMax/2, dblMax), true},
		{"tiny n, large m: underflows to 0", 1e-300, complex(1e308, 1e308), false},
	} {
		want := exactQuo(tc.n, tc.m)
		got := quo(tc.n, tc.m)
		if !quoClose(got, want) {
			t.Errorf("%s: quo(%v, %v) = %v, want %v", tc.name, tc.n, tc.m, got, want)
		}
		naive := tc.n / tc.m
		if smith := !(cmplx.Abs(naive-want) <= 1e-10*cmplx.Abs(want)); smith != tc.smith {
			t.Errorf("%s: Go's %v/%v = %v against %v: the row says its overflow is %t", tc.name, tc.n, tc.m, naive, want, tc.smith)
		}
	}
	for _, tc := range []struct{ n, m, want complex128 }{
		{1, 0, complex(math.Inf(1), math.NaN())},
		{complex(math.Inf(1), 0), 1e308 + 1e308i, complex(math.Inf(1), math.Inf(-1))},
		{complex(math.Inf(1), 0), 2 + 1i, complex(math.Inf(1), math.Inf(-1))},
		{complex(math.NaN(), 1), 1e308, complex(math.NaN(), math.NaN())},
	} {
		// Special values stay Go's (C99 Annex G's), scaled or not.
		got := quo(tc.n, tc.m)
		if !alike(real(got), real(tc.want)) || !alike(imag(got), imag(tc.want)) {
			t.Errorf("quo(%v, %v) = %v, want %v", tc.n, tc.m, got, tc.want)
		}
	}
}

// φ1 and foh's Δ·φ1 with x near the float64 range: FuzzScan/e350f31099f8e7c6
// had Δ = DBL_MAX and a = −0.62 + 0.78i, x = −1.11e308 + 1.40e308i. There
// e^x = 0, so φ1(x) = −1/x (a subnormal) and Δ·φ1(x) = −1/a, modulus 1.005;
// the reference had 0 for both.
func TestPhi1ComplexNearTheRange(t *testing.T) {
	a := complex(-0.6206896551724138, 0.7835703001579778)
	x := complex(math.MaxFloat64, 0) * a
	require.False(t, cmplx.IsInf(x), "x = %v", x)
	if got, want := Phi1Complex(x), exactQuo(-1, x); !quoClose(got, want) {
		t.Errorf("Phi1Complex(%v) = %v, want −1/x = %v", x, got, want)
	}
	for _, prec := range []ssm.Precision{ssm.Float64, ssm.Float64Natural} {
		_, bcoef := DiscretizeAt(ssm.FOH, prec, true, math.MaxFloat64, a)
		if want := -1 / a; cmplx.Abs(bcoef-want) > 1e-14*cmplx.Abs(want) {
			t.Errorf("DiscretizeAt(FOH, %v, Δ = DBL_MAX, a = %v): Δ·φ1 = %v, want −1/a = %v", prec, a, bcoef, want)
		}
	}
}

// TestDiscretizeAt: the Float64 evaluation is (Ā, Δ·g) of Real and Complex;
// the Float32 evaluation is within the error model of it for ordinary
// arguments, and follows IEEE 754 in float32 where an intermediate leaves
// the range (the cases the fuzzers' non-finite policy relies on).
func TestDiscretizeAt(t *testing.T) {
	for _, m := range ssm.Methods() {
		for _, tc := range []struct{ delta, a float64 }{{0.5, -3}, {1, 2.5}, {0.01, -100}, {2, 0}, {0.25, 7}} {
			x := tc.delta * tc.a
			ra, rg := Real(m, x)
			ab, bc := DiscretizeAt(m, ssm.Float64, false, tc.delta, complex(tc.a, 0))
			if ab != complex(ra, 0) || bc != complex(tc.delta*rg, 0) {
				t.Errorf("%v Float64 at Δ=%g a=%g: (%v, %v), want (%v, %v)", m, tc.delta, tc.a, ab, bc, ra, tc.delta*rg)
			}
			ca, cg := Complex(m, complex(x, x/3))
			zb, zc := DiscretizeAt(m, ssm.Float64, true, tc.delta, complex(tc.a, tc.a/3))
			if cmplx.Abs(zb-ca) > 1e-15*cmplx.Abs(ca) || cmplx.Abs(zc-complex(tc.delta, 0)*cg) > 1e-15*cmplx.Abs(cg)*tc.delta {
				t.Errorf("%v complex Float64 at Δ=%g a=%g: (%v, %v), want (%v, %v)", m, tc.delta, tc.a, zb, zc, ca, complex(tc.delta, 0)*cg)
			}
			for _, isComplex := range []bool{false, true} {
				a := complex(tc.a, 0)
				if isComplex {
					a = complex(tc.a, -tc.a/5)
				}
				a = complex(float64(float32(real(a))), float64(float32(imag(a))))
				wa, wb := DiscretizeAt(m, ssm.Float64, isComplex, tc.delta, a)
				fa, fb := DiscretizeAt(m, ssm.Float32, isComplex, tc.delta, a)
				sa, sb := DiscretizeScale(m, tc.delta, a, isComplex)
				if r := Ratio(cmplx.Abs(fa-wa), sa, 2, ssm.Float32); r > 1 {
					t.Errorf("%v complex=%t Float32 Ā at Δ=%g a=%v: ratio %.3g", m, isComplex, tc.delta, a, r)
				}
				if r := Ratio(cmplx.Abs(fb-wb), sb, 2, ssm.Float32); r > 1 {
					t.Errorf("%v complex=%t Float32 Δg at Δ=%g a=%v: ratio %.3g", m, isComplex, tc.delta, a, r)
				}
			}
		}
	}
	// x = Δ·a = −1e60 overflows float32 to −Inf: φ1(−Inf) = 0 there, while
	// the exact value Δ·φ1(x) = 1/|a| = 1e-30 is representable.
	_, exact := DiscretizeAt(ssm.FOH, ssm.Float64, false, 1e30, -1e30)
	_, f32 := DiscretizeAt(ssm.FOH, ssm.Float32, false, 1e30, -1e30)
	if math.Abs(real(exact)-1e-30) > 1e-45 || f32 != 0 {
		t.Errorf("foh at x = -1e60: Float64 %v (want 1e-30), Float32 %v (want 0)", exact, f32)
	}
	// e^89 overflows float32 inside φ1 although φ1(89) = e^89/89 ≈ 5e36 does not.
	_, exact = DiscretizeAt(ssm.FOH, ssm.Float64, false, 1, 89)
	_, f32 = DiscretizeAt(ssm.FOH, ssm.Float32, false, 1, 89)
	if !(real(exact) < math.MaxFloat32) || !math.IsInf(real(f32), 1) {
		t.Errorf("foh at x = 89: Float64 %v (want finite in float32), Float32 %v (want +Inf)", exact, f32)
	}
}

// TestFloat64NaturalAtTheTop: the reference scales e^x, φ1 and complex e^z
// above x = 709 and stays finite where the true value is; the natural
// float64 evaluation overflows there, as a plain float64 kernel does.
func TestFloat64NaturalAtTheTop(t *testing.T) {
	x := 709.782712893384 // just below log(MaxFloat64); math.Exp says +Inf
	for _, tc := range []struct {
		m         ssm.Method
		isComplex bool
		a         complex128
		which     int // 0: Ā, 1: Δ·g
	}{
		{ssm.ZOH, false, complex(x, 0), 0},
		{ssm.FOH, false, complex(709.9, 0), 1},  // φ1 = e^x/x ≈ 2.5e305
		{ssm.ZOH, true, complex(709.9, 2.5), 0}, // e^a ≈ 2.0e308 overflows, e^a·cos b does not
		{ssm.FOH, true, complex(709.9, 2.5), 1},
	} {
		ab, bc := DiscretizeAt(tc.m, ssm.Float64, tc.isComplex, 1, tc.a)
		nb, nc := DiscretizeAt(tc.m, ssm.Float64Natural, tc.isComplex, 1, tc.a)
		got, nat := ab, nb
		if tc.which == 1 {
			got, nat = bc, nc
		}
		if cmplx.IsInf(got) || cmplx.IsNaN(got) {
			t.Errorf("%v complex=%t at %v: reference %v, want finite", tc.m, tc.isComplex, tc.a, got)
		}
		if !cmplx.IsInf(nat) {
			t.Errorf("%v complex=%t at %v: natural evaluation %v, want an overflow", tc.m, tc.isComplex, tc.a, nat)
		}
	}
	if e := real(must(DiscretizeAt(ssm.ZOH, ssm.Float64, false, 1, complex(x, 0)))); math.Abs(e-1.7976931348622732e308) > 1e295 {
		t.Errorf("e^%v = %v, want 1.7976931348622732e308", x, e)
	}
}

func must(a, _ complex128) complex128 { return a }

package reference

import (
	"math"
	"math/cmplx"
	"strings"
	"testing"

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
		want Method
	}{
		{"zoh", ZOH}, {"ZOH", ZOH}, {" foh ", FOH}, {"Bilinear", Bilinear}, {"poly", Poly},
		{"HighOrder", HighOrder}, {"rk4", RK4}, {"RK4", RK4},
	} {
		got, err := ParseMethod(tc.in)
		require.NoError(t, err, tc.in)
		assert.Equal(t, tc.want, got, tc.in)
		assert.Equal(t, strings.ToLower(strings.TrimSpace(tc.in)), got.String())
	}
	for _, bad := range []string{"", "tustin", "zoh2", "rk-4"} {
		_, err := ParseMethod(bad)
		require.Error(t, err, bad)
		for _, m := range Methods() {
			assert.Contains(t, err.Error(), m.String(), "the error for %q lists the valid names", bad)
		}
	}
	ms, err := ParseMethods("rk4,ZOH,rk4")
	require.NoError(t, err)
	assert.Equal(t, []Method{RK4, ZOH}, ms)
	ms, err = ParseMethods("all")
	require.NoError(t, err)
	assert.Equal(t, Methods(), ms)
	_, err = ParseMethods("zoh,nope")
	assert.ErrorContains(t, err, `"nope"`)
	assert.Equal(t, "method(9)", Method(9).String())
	for i, m := range Methods() {
		assert.Equal(t, Method(i), m, "ABI code of %v", m)
	}
}

// Ordinary values, computed by hand from the closed forms.
var coefTable = []struct {
	m       Method
	x       float64
	abar, g float64
}{
	{ZOH, 0, 1, 1},
	{ZOH, -1, 0.36787944117144233, 1},
	{FOH, 1, 2.718281828459045, 1.718281828459045},               // e − 1
	{FOH, -1, 0.36787944117144233, 0.6321205588285577},           // 1 − 1/e
	{FOH, 1e-10, 1.0000000001, 1.00000000005},                    // 1 + x/2
	{FOH, -40, 4.248354255291589e-18, 0.025},                     // (e^−40 − 1)/−40
	{Bilinear, -1, 1.0 / 3, 2.0 / 3},                             // 0.5/1.5, 1/1.5
	{Bilinear, 1, 3, 2},                                          // 1.5/0.5, 1/0.5
	{Bilinear, -2, 0, 0.5},                                       // the zero of 1 + x/2
	{Bilinear, -1e9, -0.999999996, 1.999999996000000008e-9},      // → −1 as x → −∞
	{Poly, 1, 2.718281828459045, 1 + 0.5 + 1.0/6},                //
	{Poly, -3, 0.049787068367863944, 1 - 1.5 + 1.5},              // 1 + x/2 + x²/6 at −3
	{HighOrder, -2, 0.1353352832366127, 0},                       // 1 + x/2 at −2
	{RK4, 1, 2.718281828459045, 1 + 0.5 + 1.0/6 + 1.0/24},        //
	{RK4, -2, 0.1353352832366127, 1 - 1 + 4.0/6 - 8.0/24},        // = 1/3
	{RK4, 0.5, 1.6487212707001282, 1 + 0.25 + 0.25/6 + 0.125/24}, //
}

func TestCoefTable(t *testing.T) {
	for _, tc := range coefTable {
		a, g := tc.m.Real(tc.x)
		if !close(a, tc.abar) || !close(g, tc.g) {
			t.Errorf("%v.Real(%g) = (%.17g, %.17g), want (%.17g, %.17g)", tc.m, tc.x, a, g, tc.abar, tc.g)
		}
		ca, cg := tc.m.Complex(complex(tc.x, 0))
		if !close(real(ca), tc.abar) || !close(real(cg), tc.g) || imag(ca) != 0 || imag(cg) != 0 {
			t.Errorf("%v.Complex(%g) = (%v, %v), want (%.17g, %.17g)", tc.m, tc.x, ca, cg, tc.abar, tc.g)
		}
	}
}

// Special values: IEEE 754 throughout, with φ1(0) = 1 the only special case
// (the ABI's rule).
var specialTable = []struct {
	m       Method
	x       float64
	abar, g float64
}{
	{ZOH, math.Inf(-1), 0, 1},
	{ZOH, math.Inf(1), math.Inf(1), 1},
	{ZOH, math.NaN(), math.NaN(), 1},
	{FOH, 0, 1, 1},
	{FOH, math.Copysign(0, -1), 1, 1},
	{FOH, 5e-324, 1, 1},
	{FOH, math.Inf(-1), 0, 0},                      // −1/−∞ = +0
	{FOH, math.Inf(1), math.Inf(1), math.NaN()},    // ∞/∞
	{FOH, 800, math.Inf(1), math.Inf(1)},           // expm1 overflows
	{FOH, math.NaN(), math.NaN(), math.NaN()},      //
	{Bilinear, 2, math.Inf(1), math.Inf(1)},        // the pole of unstable A
	{Bilinear, math.Inf(-1), math.NaN(), 0},        // −∞/∞, 1/∞
	{Bilinear, math.NaN(), math.NaN(), math.NaN()}, //
	{HighOrder, math.Inf(-1), 0, math.Inf(-1)},     //
	{Poly, math.Inf(-1), 0, math.Inf(1)},           // 1 + x(1/2 + x/6): (−∞)(−∞)
	{RK4, math.Inf(-1), 0, math.Inf(-1)},           //
	{RK4, math.Inf(1), math.Inf(1), math.Inf(1)},   //
}

func TestSpecialValues(t *testing.T) {
	for _, tc := range specialTable {
		a, g := tc.m.Real(tc.x)
		if !alike(a, tc.abar) || !alike(g, tc.g) {
			t.Errorf("%v.Real(%g) = (%g, %g), want (%g, %g)", tc.m, tc.x, a, g, tc.abar, tc.g)
		}
	}
	if v := Phi1(0); v != 1 {
		t.Errorf("Phi1(0) = %g, want 1", v)
	}
	if v := Phi1Complex(0); v != 1 {
		t.Errorf("Phi1Complex(0) = %v, want 1", v)
	}
	a, g := Method(17).Real(1)
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

package mamba1

import (
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"

	"ssmverify/ssm"
)

// exactProd is the product of fs in big.Float (exponents unbounded),
// rounded once to float64.
func exactProd(fs ...float64) float64 {
	p := new(big.Float).SetPrec(0).SetFloat64(1)
	p.SetPrec(2000)
	for _, f := range fs {
		p.Mul(p, new(big.Float).SetFloat64(f))
	}
	v, _ := p.Float64()
	return v
}

// prod is within one rounding per factor of the exact product (and of the
// smallest subnormal where that is below the normal range) wherever a
// partial product leaves float64's normal range, and gives IEEE
// multiplication's special values.
func TestProd(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	for _, tc := range []struct {
		name string
		fs   []float64
		want float64 // NaN: want NaN; 0: the exact product
	}{
		{"ordinary", []float64{3, 5, 7}, 0},
		{"a partial product underflows to 0 (FuzzScan: Δ·|B|·u·sg)", []float64{0.357, 2.03e-81, 3.66e-264, 1.04e111}, 0},
		{"a partial product is subnormal: bits lost", []float64{1e-300, 1e-20, 1e250}, 0},
		{"a partial product overflows", []float64{1e300, 1e300, 1e-300}, 0},
		{"the whole is subnormal", []float64{1e-300, 1e-20}, 0},
		{"the whole underflows", []float64{1e-300, 1e-300}, 0},
		{"the whole overflows", []float64{1e300, 1e300, 2}, 0},
		{"many small factors", []float64{1e-100, 1e-100, 1e-100, 1e-100, 1e-100, 1e100, 1e100, 1e100, 1e100, 1e100}, 0},
		{"a zero factor", []float64{1e-300, 1e-300, 0, 1e300}, 0},
		{"a zero factor after a partial product overflows", []float64{1e300, 1e300, 0}, 0},
		{"an infinite factor after a partial product underflows", []float64{1e-300, 1e-300, inf}, inf},
		{"an infinite factor", []float64{1e-300, inf}, inf},
		{"0·∞ is NaN, as in IEEE", []float64{0, 1e-300, inf}, nan},
		{"NaN", []float64{1, nan, 1e-300, 1e-300}, nan},
		{"no factors", nil, 1},
	} {
		got := prod(tc.fs...)
		switch {
		case math.IsNaN(tc.want):
			assert.True(t, math.IsNaN(got), "%s: got %v", tc.name, got)
		case tc.want != 0:
			assert.Equal(t, tc.want, got, tc.name)
		default:
			want := exactProd(tc.fs...)
			tol := math.Max(float64(len(tc.fs))*0x1p-53*math.Abs(want), 0x1p-1074)
			if math.IsInf(want, 0) || want == 0 {
				tol = 0
			}
			assert.InDelta(t, want, got, tol, tc.name)
		}
	}
}

// flushLoss counts a partial product of Δ·g·B·u below float32's η/u (2⁻¹⁰²)
// at twice the product of the factors outside it, the largest such; nothing
// where no partial product is that small, where a factor is 0, or where the
// factors outside overflow float64 but the partial product is above
// float64's η/u (2⁻⁹⁶⁹: no float64 kernel flushes it, and the bound would
// be ∞).
func TestFlushLoss(t *testing.T) {
	for _, tc := range []struct {
		name        string
		dt, g, b, u float64
		want        float64
	}{
		{"ordinary factors", 0.01, 1.2, 0.5, 3, 0},
		{"Δ·B subnormal in float32, u = 2.7e38 (FuzzScan/904e6309af6a319c)", 1.04e-21, 1, 1.04e-21, 2.7e38, 2 * 2.7e38},
		{"Δ·u below 2⁻¹⁰², times g·B", 1e-20, 2, 1e3, 1e-90, 2 * 2e3},
		{"Δ·u below 2⁻¹⁰², g·B = 1", 1e-30, 1, 1, 1e-75, 2 * 1},
		{"every partial product at least 2⁻¹⁰², the whole 1e-40: its flush is counted apart", 1e-10, 1e-10, 1e-10, 1e-10, 0},
		{"a zero factor: β is exactly 0", 1e-30, 1, 1e-30, 0, 0},
		{"float64: Δ·g = 1e-280, above 2⁻⁹⁶⁹, is skipped where B·u overflows; Δ·g·B = 1e-80 counts, times u", 1e-280, 1, 1e200, 1e200, 2e200},
		{"float64: the partial product is below 2⁻⁹⁶⁹, the bound overflows", 1e-300, 1e-300, 1e200, 1e200, math.Inf(1)},
	} {
		assert.Equal(t, tc.want, flushLoss(tc.dt, tc.g, tc.b, tc.u), tc.name)
	}
}

// TestFlushFastPaths: flushLoss and termFlush decide the common case from
// smallestPartial alone; on factors spread over the whole float64 range,
// with zeros, infinities and NaN among them, they must equal the subset
// enumeration and the logarithms they skip.
func TestFlushFastPaths(t *testing.T) {
	// Where the smallest partial product takes a factor just below 1
	// besides the two smallest, and is just below 2⁻¹⁰² with it.
	for _, c := range []struct {
		fs            []float64
		flush, term32 float64 // flush: flushLoss's, for four factors only
	}{
		{[]float64{0.3, 0x1p-100, 0.7, 4}, 8, 8},
		{[]float64{1, 1, 0.25, 0x1p-100, 0.5}, 0, 2},
	} {
		if len(c.fs) == 4 {
			if got := flushLoss(c.fs...); got != c.flush {
				t.Errorf("flushLoss(%v) = %g, want %g", c.fs, got, c.flush)
			}
		}
		if got := termFlush(ssm.Float32, c.fs...); math.Abs(got-c.term32) > 1e-12*c.term32 {
			t.Errorf("termFlush(float32, %v) = %g, want %g", c.fs, got, c.term32)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(3, 9).Draw(t, "n")
		fs := make([]float64, n)
		for i := range fs {
			switch rapid.IntRange(0, 19).Draw(t, "kind") {
			case 0:
				fs[i] = 0
			case 1:
				fs[i] = math.Inf(1)
			case 2:
				fs[i] = math.NaN()
			case 3, 4, 5, 6:
				fs[i] = math.Ldexp(rapid.Float64Range(1, 2).Draw(t, "m"), rapid.IntRange(-1074, 1023).Draw(t, "e"))
			case 7, 8, 9:
				fs[i] = math.Ldexp(rapid.Float64Range(0.5, 2).Draw(t, "m"), rapid.IntRange(-560, 2).Draw(t, "e"))
			default: // partial products near 2⁻¹⁰² (float32's η/u), factors near 1 among them
				fs[i] = math.Ldexp(rapid.Float64Range(0.5, 2).Draw(t, "m"), rapid.IntRange(-60, 2).Draw(t, "e"))
			}
		}
		if n == 4 {
			got, want := flushLoss(fs...), flushLossSubsets(fs)
			if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
				t.Fatalf("flushLoss(%v) = %g, the enumeration %g", fs, got, want)
			}
		}
		for _, prec := range []ssm.Precision{ssm.Float32, ssm.Float64} {
			got, want := termFlush(prec, fs...), termFlushLogs(prec, fs)
			if got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
				t.Fatalf("termFlush(%v, %v) = %g, the logarithms %g", prec, fs, got, want)
			}
		}
	})
}

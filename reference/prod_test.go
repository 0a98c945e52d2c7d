package reference

import (
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
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

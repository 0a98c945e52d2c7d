package ssm

import (
	"math"
	"testing"
)

// The special values of the 16-bit formats, in the manner of the standard
// library's math/all_test.go: each input with its exact result.
func TestRoundFloat16(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	for _, c := range []struct{ x, want float64 }{
		{1, 1},
		{0.1, 0.0999755859375},
		{1 + 0x1p-11, 1},                     // a tie: to the even 1
		{1 + 3*0x1p-11, 1 + 0x1p-9},          // a tie: to the even 1 + 2⁻⁹
		{1 + 0x1p-11 + 0x1p-30, 1 + 0x1p-10}, // just above the tie
		{Float16Max, Float16Max},
		{65519.99, Float16Max},
		{float16Overflow, inf},
		{-float16Overflow, -inf},
		{1e300, inf},
		{Float16MinNormal, Float16MinNormal},
		{Float16MinSub, Float16MinSub},
		{0x1p-25, 0},                     // half the smallest subnormal: a tie, to the even 0
		{3 * 0x1p-26, Float16MinSub},     // three quarters of it
		{5 * 0x1p-25, 2 * Float16MinSub}, // 2.5 subnormal quanta: a tie, to the even 2
		{-0.5, -0.5},
		{inf, inf},
		{-inf, -inf},
	} {
		if got := RoundFloat16(c.x); got != c.want {
			t.Errorf("RoundFloat16(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if got := RoundFloat16(nan); !math.IsNaN(got) {
		t.Errorf("RoundFloat16(NaN) = %v", got)
	}
	if got := RoundFloat16(math.Copysign(0, -1)); got != 0 || !math.Signbit(got) {
		t.Errorf("RoundFloat16(-0) = %v, want -0", got)
	}
}

func TestRoundBFloat16(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct{ x, want float64 }{
		{1, 1},
		{1 + 0x1p-8, 1},            // a tie: to the even 1
		{1 + 3*0x1p-8, 1 + 0x1p-6}, // a tie: to the even 1 + 2⁻⁶
		{0.1, 0.10009765625},
		{BFloat16Max, BFloat16Max},
		{math.MaxFloat32, inf}, // beyond the halfway point to 2¹²⁸
		{bfloat16Overflow, inf},
		{0x1p-126, 0x1p-126},
		{BFloat16MinSub, BFloat16MinSub},
		{0x1p-134, 0}, // a tie: to the even 0
	} {
		if got := RoundBFloat16(c.x); got != c.want {
			t.Errorf("RoundBFloat16(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	// Agreement with the bit rounding of float32 (round to nearest even on
	// the upper 16 bits) wherever float64 → float32 is exact.
	for _, f := range []float32{1.5, 3.14159, -2.7182817, 1e-30, 6.5e4, 123456.79, -3e38, 1e-40} {
		b := math.Float32bits(f)
		b = (b + 0x7fff + (b>>16)&1) &^ 0xffff
		if got, want := RoundBFloat16(float64(f)), float64(math.Float32frombits(b)); got != want {
			t.Errorf("RoundBFloat16(%v) = %v, the bit rounding gives %v", f, got, want)
		}
	}
}

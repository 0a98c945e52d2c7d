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
		{Float16Overflow, inf},
		{-Float16Overflow, -inf},
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
		{BFloat16Overflow, inf},
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

// The encodings against known bit patterns (IEEE 754-2008 binary16, and
// bfloat16 as float32's upper half), both ways.
func TestNarrowBits(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct {
		x           float64
		f16, bf16   uint16
		f16v, bf16v float64 // the decoded values (x rounded)
	}{
		{0, 0x0000, 0x0000, 0, 0},
		{1, 0x3c00, 0x3f80, 1, 1},
		{-2, 0xc000, 0xc000, -2, -2},
		{0.1, 0x2e66, 0x3dcd, 0.0999755859375, 0.10009765625},
		{Float16Max, 0x7bff, 0x4780, Float16Max, 65536},
		{Float16MinNormal, 0x0400, 0x3880, Float16MinNormal, Float16MinNormal},
		{Float16MinSub, 0x0001, 0x3380, Float16MinSub, Float16MinSub},
		{3 * Float16MinSub, 0x0003, 0x3440, 3 * Float16MinSub, 3 * Float16MinSub},
		{1e5, 0x7c00, 0x47c3, inf, 99840},
		{-inf, 0xfc00, 0xff80, -inf, -inf},
		{BFloat16Max, 0x7c00, 0x7f7f, inf, BFloat16Max},
	} {
		if got := Float16Bits(c.x); got != c.f16 {
			t.Errorf("Float16Bits(%v) = %#04x, want %#04x", c.x, got, c.f16)
		}
		if got := BFloat16Bits(c.x); got != c.bf16 {
			t.Errorf("BFloat16Bits(%v) = %#04x, want %#04x", c.x, got, c.bf16)
		}
		if got := Float16FromBits(c.f16); got != c.f16v {
			t.Errorf("Float16FromBits(%#04x) = %v, want %v", c.f16, got, c.f16v)
		}
		if got := BFloat16FromBits(c.bf16); got != c.bf16v {
			t.Errorf("BFloat16FromBits(%#04x) = %v, want %v", c.bf16, got, c.bf16v)
		}
	}
	if !math.IsNaN(Float16FromBits(Float16Bits(math.NaN()))) || !math.IsNaN(BFloat16FromBits(BFloat16Bits(math.NaN()))) {
		t.Error("NaN does not survive its encoding")
	}
	// Every finite encoding decodes to a value that encodes back to it.
	for b := 0; b < 1<<16; b++ {
		if v := Float16FromBits(uint16(b)); !math.IsNaN(v) && Float16Bits(v) != uint16(b) {
			t.Fatalf("fp16 %#04x decodes to %v, which encodes to %#04x", b, v, Float16Bits(v))
		}
		if v := BFloat16FromBits(uint16(b)); !math.IsNaN(v) && BFloat16Bits(v) != uint16(b) {
			t.Fatalf("bf16 %#04x decodes to %v, which encodes to %#04x", b, v, BFloat16Bits(v))
		}
	}
}

package ssm

import "math"

// The 16-bit floating-point formats models train in, as float64 values:
// IEEE binary16 (fp16: 11-bit significand, exponents −14…15, subnormals to
// 2⁻²⁴) and bfloat16 (float32's exponent range, 8-bit significand).
const (
	Float16Max       = 65504       // the largest finite fp16
	Float16MinNormal = 0x1p-14     // the smallest normal fp16
	Float16MinSub    = 0x1p-24     // the smallest subnormal fp16
	BFloat16Max      = 0x1.fep+127 // the largest finite bfloat16, (2 − 2⁻⁷)·2¹²⁷
	BFloat16MinSub   = 0x1p-133    // the smallest subnormal bfloat16
	Float16Overflow  = 65520       // fp16 rounds this and above to +Inf: 65504 and half its ulp
	BFloat16Overflow = 0x1.ffp+127 // bfloat16 rounds this and above to +Inf
)

// RoundFloat16 rounds x to the nearest fp16, ties to even, overflowing to
// ±Inf from 65520 on, in one rounding from float64 (no double rounding
// through float32).
func RoundFloat16(x float64) float64 {
	return roundNarrow(x, 11, -14, Float16Overflow)
}

// RoundBFloat16 rounds x to the nearest bfloat16, ties to even, in one
// rounding from float64.
func RoundBFloat16(x float64) float64 {
	return roundNarrow(x, 8, -126, BFloat16Overflow)
}

// roundNarrow rounds x to a binary format of p significand bits whose
// smallest normal exponent is emin, with overflow to ±Inf at and above
// overflow (the first value that rounds past the largest finite one).
func roundNarrow(x float64, p, emin int, overflow float64) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	a := math.Abs(x)
	if a >= overflow {
		return math.Copysign(math.Inf(1), x)
	}
	_, e := math.Frexp(a) // a = f·2^e, f ∈ [0.5, 1): a ∈ [2^(e−1), 2^e)
	e = max(e-1, emin)    // below the normal range the quantum stays that of emin
	q := math.Ldexp(1, e-(p-1))
	return math.Copysign(math.RoundToEven(a/q)*q, x)
}

// Float16Bits is the binary16 encoding of x rounded to fp16 (RoundFloat16).
func Float16Bits(x float64) uint16 {
	r := RoundFloat16(x)
	var s uint16
	if math.Signbit(r) {
		s = 0x8000
	}
	a := math.Abs(r)
	switch {
	case math.IsNaN(r):
		return 0x7e00
	case math.IsInf(r, 0):
		return s | 0x7c00
	case a < Float16MinNormal: // subnormal or zero: a = m·2⁻²⁴
		return s | uint16(a/Float16MinSub)
	}
	f, e := math.Frexp(a) // a = f·2^e, f ∈ [0.5, 1): biased exponent e−1+15
	return s | uint16(e+14)<<10 | uint16((2*f-1)*1024)
}

// Float16FromBits decodes a binary16 encoding exactly.
func Float16FromBits(b uint16) float64 {
	s := 1.0
	if b&0x8000 != 0 {
		s = -1
	}
	e, m := int(b>>10&0x1f), float64(b&0x3ff)
	switch e {
	case 0:
		return s * m * Float16MinSub
	case 31:
		if m != 0 {
			return math.NaN()
		}
		return s * math.Inf(1)
	}
	return s * math.Ldexp(1+m/1024, e-15)
}

// BFloat16Bits is the bfloat16 encoding of x rounded to bfloat16
// (RoundBFloat16): the upper half of its float32 encoding.
func BFloat16Bits(x float64) uint16 {
	r := RoundBFloat16(x)
	if math.IsNaN(r) {
		return 0x7fc0
	}
	return uint16(math.Float32bits(float32(r)) >> 16)
}

// BFloat16FromBits decodes a bfloat16 encoding exactly.
func BFloat16FromBits(b uint16) float64 {
	return float64(math.Float32frombits(uint32(b) << 16))
}

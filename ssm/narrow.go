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
	float16Overflow  = 65520       // fp16 rounds this and above to +Inf
	bfloat16Overflow = 0x1.ffp+127 // bfloat16 rounds this and above to +Inf
)

// RoundFloat16 rounds x to the nearest fp16, ties to even, overflowing to
// ±Inf from 65520 on, in one rounding from float64 (no double rounding
// through float32).
func RoundFloat16(x float64) float64 {
	return roundNarrow(x, 11, -14, float16Overflow)
}

// RoundBFloat16 rounds x to the nearest bfloat16, ties to even, in one
// rounding from float64.
func RoundBFloat16(x float64) float64 {
	return roundNarrow(x, 8, -126, bfloat16Overflow)
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

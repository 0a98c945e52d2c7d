package ssm

import (
	"fmt"
	"math"
	"strings"
)

// DType is the ABI's dtype word. F32 and F64 are the type of every
// floating-point array of a call, and the library computes in it. F16 and
// BF16 (the mixed-precision extension, SSMK_CAP_NARROW_INPUTS) are the type
// of the inputs — u, Δ, variable B and C, z and out — while the weights —
// A, constant B and C, D, delta_bias and the states — are float32, as in
// Mamba's kernels: the library computes in float32 and rounds each output
// once to the input type.
type DType int32

const (
	F32  DType = 0 // SSMK_F32: float
	F64  DType = 1 // SSMK_F64: double
	F16  DType = 2 // SSMK_F16: IEEE binary16 inputs, float32 weights
	BF16 DType = 3 // SSMK_BF16: bfloat16 inputs, float32 weights
)

// DTypes returns the two full-precision dtypes, F32 and F64, which every
// part of the suite judges.
func DTypes() []DType { return []DType{F32, F64} }

// NarrowDTypes returns the 16-bit input types, which the mixed-precision
// tests judge (verify's TestNarrow…).
func NarrowDTypes() []DType { return []DType{F16, BF16} }

// AllDTypes returns every dtype of the ABI.
func AllDTypes() []DType { return []DType{F32, F64, F16, BF16} }

func (d DType) String() string {
	switch d {
	case F32:
		return "fp32"
	case F64:
		return "fp64"
	case F16:
		return "fp16"
	case BF16:
		return "bf16"
	}
	return fmt.Sprintf("dtype(%d)", int32(d))
}

// Valid reports whether d is one of the ABI's dtypes.
func (d DType) Valid() bool { return d >= F32 && d <= BF16 }

// Narrow reports whether d is a 16-bit input type (F16, BF16).
func (d DType) Narrow() bool { return d == F16 || d == BF16 }

// Size is the size in bytes of an input element (u, Δ, variable B and C,
// z, out): 4, 8, 2, 2.
func (d DType) Size() int {
	switch d {
	case F64:
		return 8
	case F16, BF16:
		return 2
	}
	return 4
}

// Weight is the dtype of the weights and states (A, constant B and C, D,
// delta_bias, initial and last state): d itself for F32 and F64, F32 for
// the 16-bit input types.
func (d DType) Weight() DType {
	if d == F64 {
		return F64
	}
	return F32
}

// Precision is the arithmetic a kernel of this dtype computes in: the
// reference precision whose unit roundoff scales its errors (Float32 for
// the 16-bit input types, whose kernels compute in float).
func (d DType) Precision() Precision {
	if d == F64 {
		return Float64
	}
	return Float32
}

// OutputRoundoff is the unit roundoff of the output's final rounding
// beyond the arithmetic: 2⁻¹¹ for fp16, 2⁻⁸ for bf16 (half an ulp, relative
// to the value), 0 for F32 and F64, whose output is the arithmetic's own.
func (d DType) OutputRoundoff() float64 {
	switch d {
	case F16:
		return 0x1p-11
	case BF16:
		return 0x1p-8
	}
	return 0
}

// OutputSpacing is the spacing of the output type's subnormals, below
// which the relative rounding bound no longer holds (the absolute error is
// at most half of it): 2⁻²⁴ for fp16, 2⁻¹³³ for bf16, 0 otherwise.
func (d DType) OutputSpacing() float64 {
	switch d {
	case F16:
		return Float16MinSub
	case BF16:
		return BFloat16MinSub
	}
	return 0
}

// OutputLargest is the largest finite output value: 65504 for fp16, the
// bfloat16 maximum, else the precision's.
func (d DType) OutputLargest() float64 {
	switch d {
	case F16:
		return Float16Max
	case BF16:
		return BFloat16Max
	}
	return d.Precision().Largest()
}

// OutputOverflow is the magnitude from which rounding to the output type
// gives ±Inf: 65520 for fp16 (65504 and half its ulp), 2¹²⁸·(1 − 2⁻⁹) for
// bf16, +Inf for F32 and F64 (whose kernels overflow in their arithmetic,
// which the error scale's range check covers).
func (d DType) OutputOverflow() float64 {
	switch d {
	case F16:
		return Float16Overflow
	case BF16:
		return BFloat16Overflow
	}
	return math.Inf(1)
}

// Round rounds x to the nearest value of the input type (float32 for F32,
// x itself for F64).
func (d DType) Round(x float64) float64 {
	switch d {
	case F32:
		return float64(float32(x))
	case F16:
		return RoundFloat16(x)
	case BF16:
		return RoundBFloat16(x)
	}
	return x
}

// RoundAll returns a copy of v with every value rounded (Round); nil for
// nil, so that an absent optional array stays absent.
func (d DType) RoundAll(v []float64) []float64 {
	if v == nil {
		return nil
	}
	out := make([]float64, len(v))
	ParallelBlocks(len(v), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			out[i] = d.Round(v[i])
		}
	})
	return out
}

// RoundInPlace rounds every element of v to d where it lies: RoundAll
// without the copy, for the arrays of billions of elements whose copy
// would not fit beside them.
func (d DType) RoundInPlace(v []float64) {
	ParallelBlocks(len(v), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			v[i] = d.Round(v[i])
		}
	})
}

// Scaled returns a copy of v times k; nil for nil, as RoundAll keeps an
// absent array absent (the error models' scales of optional gradients).
func Scaled(v []float64, k float64) []float64 {
	if v == nil {
		return nil
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x * k
	}
	return out
}

// Ones returns an array of ones as long as v; nil for nil.
func Ones(v []float64) []float64 {
	if v == nil {
		return nil
	}
	out := make([]float64, len(v))
	for i := range out {
		out[i] = 1
	}
	return out
}

// RoundFinite is Round with overflow saturated at the largest finite
// value: a generator's inputs stay finite in every type.
func (d DType) RoundFinite(x float64) float64 {
	r := d.Round(x)
	if math.IsInf(r, 0) && !math.IsInf(x, 0) {
		return math.Copysign(d.OutputLargest(), x)
	}
	return r
}

// ParseDType accepts fp32/f32/float32/float, fp64/f64/float64/double,
// fp16/f16/float16/half and bf16/bfloat16.
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "fp32", "f32", "float32", "float":
		return F32, nil
	case "fp64", "f64", "float64", "double":
		return F64, nil
	case "fp16", "f16", "float16", "half":
		return F16, nil
	case "bf16", "bfloat16":
		return BF16, nil
	}
	return 0, fmt.Errorf("unknown dtype %q: want fp32, fp64, fp16 or bf16", s)
}

package ssm

import (
	"fmt"
	"strings"
)

// DType is the ABI's element type: every floating-point array of a call is
// of this type and the library computes in it.
type DType int32

const (
	F32 DType = 0 // SSMK_F32: float
	F64 DType = 1 // SSMK_F64: double
)

// DTypes returns both element types.
func DTypes() []DType { return []DType{F32, F64} }

func (d DType) String() string {
	switch d {
	case F32:
		return "fp32"
	case F64:
		return "fp64"
	}
	return fmt.Sprintf("dtype(%d)", int32(d))
}

// Size is the element size in bytes.
func (d DType) Size() int {
	if d == F64 {
		return 8
	}
	return 4
}

// Precision is the arithmetic a kernel of this dtype computes in: the
// reference precision whose unit roundoff scales its errors.
func (d DType) Precision() Precision {
	if d == F64 {
		return Float64
	}
	return Float32
}

// ParseDType accepts fp32/f32/float32/float and fp64/f64/float64/double.
func ParseDType(s string) (DType, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "fp32", "f32", "float32", "float":
		return F32, nil
	case "fp64", "f64", "float64", "double":
		return F64, nil
	}
	return 0, fmt.Errorf("unknown dtype %q: want fp32 or fp64", s)
}

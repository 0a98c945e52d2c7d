package cudalib

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

// Caps is the result of ssmk_capabilities.
type Caps uint32

const (
	CapSupported          Caps = 1 // SSMK_CAP_SUPPORTED
	CapComplexZOHFallback Caps = 2 // SSMK_CAP_COMPLEX_ZOH_FALLBACK
)

// Supported reports bit 0.
func (c Caps) Supported() bool { return c&CapSupported != 0 }

// ComplexZOHFallback reports bit 1: with complex A the method computes zoh.
func (c Caps) ComplexZOHFallback() bool { return c&CapComplexZOHFallback != 0 }

// Status is an ABI status code.
type Status int32

const (
	OK           Status = 0
	EInval       Status = 1
	EUnsupported Status = 2
	ENoDevice    Status = 3
	EDevice      Status = 4
	ENoMem       Status = 5
)

func (s Status) String() string {
	switch s {
	case OK:
		return "SSMK_OK"
	case EInval:
		return "SSMK_EINVAL"
	case EUnsupported:
		return "SSMK_EUNSUPPORTED"
	case ENoDevice:
		return "SSMK_ENODEVICE"
	case EDevice:
		return "SSMK_EDEVICE"
	case ENoMem:
		return "SSMK_ENOMEM"
	}
	return fmt.Sprintf("status(%d)", int32(s))
}

// Error is a non-zero status from the library with its ssmk_last_error().
// errors.Is(err, cudalib.EInval) matches on the status.
type Error struct {
	Func   string
	Status Status
	Msg    string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %v: %s", e.Func, e.Status, e.Msg) }

// Is lets errors.Is(err, cudalib.ENoDevice) test the status.
func (e *Error) Is(target error) bool {
	s, ok := target.(Status)
	return ok && s == e.Status
}

// Error makes a Status usable as an errors.Is target.
func (s Status) Error() string { return s.String() }

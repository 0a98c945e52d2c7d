package ssm

import (
	"fmt"
	"math"
)

// Precision is an arithmetic in which a scan is evaluated: the reference
// proper (Float64), the plain evaluation of a float32 kernel (Float32), or of a
// float64 kernel (Float64Natural). Its unit roundoff and range scale the
// error model.
type Precision int

const (
	// Float64 is the reference proper: every operation in double precision.
	Float64 Precision = iota
	// Float32 rounds every input, intermediate and library-function result to
	// single precision, as a float32 kernel without extra precision would.
	// Its distance from the Float64 result is the problem's natural float32
	// error, the yardstick for a float32 kernel.
	Float32
	// Float64Natural is float64 arithmetic with the elementary functions
	// written the plain way, as a float64 kernel writes them: e^x near the
	// top of the range, (e^x − 1)/x and e^a·(cos b + i sin b) overflow in an
	// intermediate where Float64 (which scales them) stays finite. It is the
	// float64 counterpart of Float32 for the fuzzers' non-finite policy;
	// everywhere else it equals Float64 bit for bit.
	Float64Natural
)

func (p Precision) String() string {
	switch p {
	case Float64:
		return "float64"
	case Float32:
		return "float32"
	case Float64Natural:
		return "float64-natural"
	}
	return fmt.Sprintf("precision(%d)", int(p))
}

// UnitRoundoff returns u, half the distance from 1 to the next number:
// 2⁻⁵³ for Float64, 2⁻²⁴ for Float32.
func (p Precision) UnitRoundoff() float64 {
	if p == Float32 {
		return 0x1p-24
	}
	return 0x1p-53 // Float64, Float64Natural
}

// Tiny returns η, the smallest positive normal number: 2⁻¹⁰²² for Float64,
// 2⁻¹²⁶ for Float32. Underflow errors are measured in units of η.
func (p Precision) Tiny() float64 {
	if p == Float32 {
		return 0x1p-126
	}
	return 0x1p-1022
}

// Largest returns the largest finite number: math.MaxFloat32 for Float32,
// math.MaxFloat64 otherwise. Beyond it a value of the precision overflows.
func (p Precision) Largest() float64 {
	if p == Float32 {
		return math.MaxFloat32
	}
	return math.MaxFloat64
}

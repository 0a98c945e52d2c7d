package judge

import (
	"fmt"
	"math"
	"math/cmplx"

	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// Class is the IEEE 754 class of a value as the policy sees it: finite,
// +Inf, −Inf or NaN. A complex value follows C99 Annex G.3: it is infinite
// (Inf) when either part is infinite, even if the other is NaN, NaN when a
// part is NaN and neither is infinite, else finite.
type Class int

const (
	Finite Class = iota
	PosInf
	NegInf
	NaN
	Inf // complex infinity: no sign
)

func (c Class) String() string {
	return [...]string{"finite", "+Inf", "-Inf", "NaN", "Inf"}[c]
}

// ClassOf classifies a real value.
func ClassOf(v float64) Class {
	switch {
	case math.IsNaN(v):
		return NaN
	case math.IsInf(v, 1):
		return PosInf
	case math.IsInf(v, -1):
		return NegInf
	}
	return Finite
}

// ClassOfComplex classifies a complex value by C99 Annex G.3.
func ClassOfComplex(z complex128) Class {
	switch {
	case math.IsInf(real(z), 0) || math.IsInf(imag(z), 0):
		return Inf
	case math.IsNaN(real(z)) || math.IsNaN(imag(z)):
		return NaN
	}
	return Finite
}

// Element is one output element under judgement: the kernel's value, the
// float64 reference on the kernel's own (dtype-rounded) inputs, the
// reference evaluated in the kernel's dtype (every operation rounded, as a
// natural kernel of that dtype computes; equal to Exact for float64), and
// the error model's scale S and underflow part (in units of u and η).
// Real values have zero imaginary parts and IsComplex false.
type Element struct {
	Kernel, Exact, InDtype complex128
	Scale, Tiny            float64
	IsComplex              bool
	// Sum marks a value accumulated over many terms and steps (the scan's
	// outputs and states): once an intermediate has overflowed, whether the
	// result is ±Inf or NaN depends on the order of the additions and on the
	// signs of earlier results, which catastrophic cancellation in an
	// unstable recurrence may flip within the error model (FuzzScan found a
	// state that is −48 exactly, 0 in float32 and −8.6e9 in a correct
	// kernel, all within a scale of 1e10, before overflowing with opposite
	// signs). Where the reference is non-finite or beyond the dtype's range,
	// any non-finite value is accepted.
	Sum bool
	// OnInfinity marks an element whose dtype evaluation runs on
	// infinities although its result is finite: x = Δ·a overflows the dtype
	// while Δ and a are finite, or a complex x has an infinite part (where
	// the finite limits of C99 Annex G, which the float64 reference's complex
	// division applies, are a library convention the ABI does not require).
	// For the scan it marks every element of a (batch, dim) row in which
	// the dtype's evaluation overflowed where the reference did not, the
	// elements from the step at which an x = Δ·a of the row overflows, and
	// every element whose terms' magnitude (mamba1.Scale's MagOut,
	// MagState) exceeds the dtype's range, and every element after a run of
	// steps whose decay Π|Ā| does (DecayOut, DecayState: a time-parallel
	// scan forms that product, ∞·0 = NaN on a zero state), and every element
	// on the way to which a state came within its error bound of the range
	// (PathMagOut + τ's part of PathScaleOut, and the same of the state).
	// Whether such an evaluation ends finite, ±Inf or NaN depends on the
	// formula's form and the order of operations, so a non-finite kernel
	// value is accepted there, and so is a finite one within the threshold
	// of the dtype's own evaluation.
	OnInfinity bool
	// Rounded marks an output of a 16-bit dtype: the kernel's float32 value
	// rounded once to the narrow type. Its ratio is OutputRatio's (the
	// error beyond that rounding), and the edge of its range is the narrow
	// type's overflow point (fp16: 65520, from which a correct kernel
	// stores ±Inf).
	Rounded bool
}

// Policy says how much of the non-finite policy an element is held to.
type Policy int

const (
	// FiniteOnly judges what the error model covers (rule 1: a finite
	// reference whose dtype evaluation is finite, within the error model
	// and off the edge of the range) and accepts anything elsewhere: the
	// contract of every library, the accuracy suite's.
	FiniteOnly Policy = iota
	// NonFinitePolicy holds the element to every rule: what a library
	// must return where an intermediate overflows or an input is not
	// finite. A library is held to it when it declares SSMK_CAP_NONFINITE
	// or a run asks for it (SSMK_NONFINITE_POLICY=1, the gate's -nonfinite).
	NonFinitePolicy
)

func (p Policy) String() string {
	return [...]string{"finite only", "the non-finite policy"}[p]
}

// Judge applies the non-finite policy (package fuzz's documentation states
// its rules) to one element computed in dtype dt: the whole policy, or
// under FiniteOnly its rule 1 alone. It returns "" when the kernel's value
// is acceptable, else a sentence saying which rule it broke.
func Judge(v Element, dt ssm.DType, pol Policy) string {
	prec := dt.Precision()
	thr := Threshold(dt)
	max := prec.Largest()
	class := func(z complex128) Class {
		if v.IsComplex {
			return ClassOfComplex(z)
		}
		return ClassOf(real(z))
	}
	ck, ce, cs := class(v.Kernel), class(v.Exact), class(v.InDtype)
	ratioTo := func(z, want complex128) float64 {
		if v.Rounded {
			return OutputRatio(cmplx.Abs(z-want), real(want), v.Scale, v.Tiny, dt)
		}
		return mamba1.Ratio(cmplx.Abs(z-want), v.Scale, v.Tiny, prec)
	}
	ratio := func(z complex128) float64 { return ratioTo(z, v.Exact) }
	within := func(z complex128) bool { return ratio(z) <= thr }
	withinN := func(z complex128) bool { return ratioTo(z, v.InDtype) <= thr }
	if v.Rounded {
		max = dt.OutputOverflow() // a correct float32 value from here on rounds to ±Inf
		if x := real(v.InDtype); cs == Finite && math.Abs(x) >= max {
			// The dtype's own evaluation, rounded to the output type as a
			// kernel must, overflows.
			cs = PosInf
			if x < 0 {
				cs = NegInf
			}
		}
	}
	if pol == FiniteOnly && (ce != Finite || cs != Finite || v.OnInfinity) {
		return "" // beyond the error model: the policy's, not held here
	}
	if ce != Finite {
		// Rule 3: a non-finite reference wants the same class, from the
		// exact evaluation or from the dtype's own; complex values only
		// need to be non-finite (see the package documentation).
		if ck == ce || ck == cs || ((v.IsComplex || v.Sum || v.OnInfinity) && ck != Finite) {
			return ""
		}
		return fmt.Sprintf("reference is %v (in the dtype %v), kernel gives %v (%v)", ce, cs, ck, v.Kernel)
	}
	if math.IsInf(v.Scale, 1) || math.IsInf(v.Tiny, 1) {
		// The error bound itself overflows float64: the terms of this
		// element are beyond every dtype's range, where a correct kernel
		// may overflow and a finite value cannot be judged.
		return ""
	}
	if math.IsNaN(v.Scale) || math.IsNaN(v.Tiny) {
		// The error scale is undefined (a NaN or Inf input that did not
		// reach this element): only the class can be asked, finite unless
		// the dtype's evaluation overflows. The error model does not cover
		// it: under FiniteOnly nothing is asked.
		if pol == FiniteOnly || ck == Finite || cs != Finite || v.OnInfinity {
			return ""
		}
		return fmt.Sprintf("reference is finite (%v, error scale undefined), kernel gives %v", v.Exact, ck)
	}
	tol := thr * (prec.UnitRoundoff()*v.Scale + prec.Tiny()*v.Tiny)
	if math.Max(math.Abs(real(v.Exact)), math.Abs(imag(v.Exact)))+tol >= max {
		if pol == FiniteOnly {
			return ""
		}
		// Rule 1b: at the edge of the dtype's range rounding may overflow.
		inf := Inf
		if !v.IsComplex {
			inf = PosInf
			if real(v.Exact) < 0 {
				inf = NegInf
			}
		}
		if (ck == Finite && within(v.Kernel)) || ck == inf || ck == cs || ((v.Sum || v.IsComplex) && ck != Finite) {
			return ""
		}
		return fmt.Sprintf("reference %v is at the edge of the dtype's range: want a value within the threshold or %v, kernel gives %v", v.Exact, inf, v.Kernel)
	}
	switch {
	case cs != Finite || (v.OnInfinity && ck != Finite):
		// Rule 2: the dtype's own evaluation overflows an intermediate.
		if ck != Finite || within(v.Kernel) {
			return ""
		}
	case mamba1.Ratio(cmplx.Abs(v.InDtype-v.Exact), v.Scale, v.Tiny, prec) > thr:
		if pol == FiniteOnly {
			return ""
		}
		// Rule 2: the dtype's own evaluation leaves the error model (an
		// intermediate overflowed or underflowed): either answer stands.
		// Its value is the arithmetic's, before any output rounding, so it
		// is held to the arithmetic's model, not to OutputRatio's (which
		// would hide up to the rounding's half spacing of it: FuzzScan in
		// CI, fp16, a float32 value 0.116 off at 294.96, 83 times its
		// model, then rounded the other way).
		if ck == Finite && (within(v.Kernel) || withinN(v.Kernel)) {
			return ""
		}
	default:
		// Rule 1: finite and within the threshold (of the dtype's own
		// evaluation too where it ran on an infinity).
		if ck == Finite && (within(v.Kernel) || (v.OnInfinity && withinN(v.Kernel))) {
			return ""
		}
	}
	if ck != Finite {
		return fmt.Sprintf("reference is finite (%v; in the dtype %v), kernel gives %v", v.Exact, v.InDtype, ck)
	}
	return fmt.Sprintf("kernel %v, reference %v (in the dtype %v): ratio %.3g > threshold %g", v.Kernel, v.Exact, v.InDtype, ratio(v.Kernel), thr)
}

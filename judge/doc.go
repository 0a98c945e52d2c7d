// Package judge decides whether a kernel's result is right: the one place
// where the error model's scales become verdicts, shared by the verification
// suite, the fuzzers and the gate.
//
// # The ratio
//
// A difference between a kernel and the float64 reference means nothing
// without a yardstick. For every output element the error model
// (reference.ErrorScaleIn) gives a scale S, a running bound on what any
// correct evaluation in the kernel's precision can err by, and an underflow
// allowance T. The kernel's error in units of that bound is
//
//	ratio = |kernel − reference| / (u·S + η·T)
//
// with u the unit roundoff and η the smallest normal of the dtype's precision
// (ssm.DType.Precision). A correct kernel stays at or below about 1 whatever
// the conditioning of the input; a logic error lands at 10⁶ (fp32) to 10¹⁴
// (fp64). Threshold is 4 for both dtypes: the largest ratio the project's
// correct kernels reached, with a margin for other libm routes and orders of
// summation (its documentation gives the measurements).
//
// # The comparison
//
// CompareScan compares a kernel's scan with the reference element by element,
// outputs and last state (complex states by their modulus), and keeps the
// worst element with its ratio, its distance in ulps of the dtype (ULPs) and
// its position. A NaN or infinite kernel value where the reference is finite
// counts apart (NonFinite) and always fails; where the reference itself is
// NaN or ±Inf the kernel must give the same (NaN, or the same infinity), and
// anything else counts apart (Unmatched) and fails: no silent pass. (The
// fuzzers' own non-finite policy, package fuzz, is wider: it also allows the
// dtype's IEEE 754 behaviour where the float64 reference stays finite.) Where the error model bounds an
// intermediate beyond the dtype's range, the problem itself may leave the
// range; the comparison still fails, and says so (Worst.Note), so that a
// generator's overflow is not read as the kernel's bug.
package judge

// Package ssm is the vocabulary every other package of ssmverify shares: the
// discretization methods with their names and orders, the kernel element
// types (dtypes) with the arithmetic each computes in, the capability word a
// library declares, and the selective-scan problem in the ABI's memory layout.
// It holds declarations and the elementwise passes every family shares;
// the mathematics lives in reference, the judgement in judge, the binding
// to a kernel library in cudalib.
//
// # Methods
//
// A Method is one of the six discretizations of the ABI, with the ABI's codes
// (SSMK_ZOH = 0 … SSMK_RK4 = 5). Each maps x = Δ·a to (Ā, g) with B̄ = Δ·g·B
// (reference's package documentation gives the formulas). Order is the order
// p of a method: its local error shrinks as Δ^(p+1) and the global error of a
// scan of a constant input as Δ^p; foh is exact (Order 0: only rounding
// remains).
//
// # Dtypes and precisions
//
// A DType is the ABI's element type of every floating-point array of a call
// (float or double). Its Precision is the arithmetic the kernel computes in,
// whose unit roundoff u (2⁻²⁴, 2⁻⁵³), smallest normal η and largest finite
// number scale the error model. Precision also names Float64Natural, float64
// arithmetic with the elementary functions written the plain way, the
// fuzzers' model of a float64 kernel's own overflows.
//
// # Problems
//
// A Problem is one forward scan: sizes, method, flags and dense row-major
// arrays of float64 (complex values as interleaved (re, im) pairs), with the
// shapes
//
//	U, Delta, Z       [Batch][Dim][Seqlen]
//	A                 [Dim][Dstate] ×2
//	B, C constant     [Dim][Dstate] ×2
//	B, C variable     [Batch][Groups][Dstate][Seqlen] ×2
//	D, DeltaBias      [Dim]
//
// ("×2" when Complex). The same Problem feeds the reference and, converted to
// the kernel's dtype, the kernel under test, so that both see identical
// inputs. Validate checks it and names the offending field.
//
// # Arrays of billions of elements
//
// The deployment sizes' arrays (x past 2³¹ elements, pools of thousands of
// states) take minutes per pass on one core. ParallelBlocks spreads an
// elementwise pass over the cores in blocks of ParallelGrain elements, each
// written by one goroutine, so that its result never depends on the
// schedule (RoundAll and RoundInPlace use it, the bridge's encoding and
// decoding too); Normals draws an array of BigArray elements or more in
// blocks of streams of its own, keyed by one draw of the caller's
// generator, so that the same seed still gives the same problem.
package ssm

// Package fuzz is coverage-guided fuzzing of a kernel library against the
// reference: Go native fuzz targets over the ssmk ABI (through purego, any
// library: the CPU build, the CUDA build, a user's) and, in native/, a
// libFuzzer harness compiled with the CPU backend's source.
//
//	go test ./fuzz                                  replay the committed corpus (CI)
//	go test ./fuzz -run '^$' -fuzz '^FuzzScan$'     fuzz one target (until a failure or ^C)
//	make fuzz FUZZTIME=60s                          each target for 60 s, with a table of execs/s
//	make fuzz-native FUZZTIME=60s                   the libFuzzer harness (clang, ASan, UBSan)
//	SSMK_LIB=build/libssmk_cuda.so make fuzz        the same targets against the CUDA build
//
// # Targets
//
// FuzzDiscretize(method, dtype, isComplex, data) calls ssmk_discretize once
// on up to 64 (Δ, a) pairs decoded from data; FuzzScan(method, dtype, flags,
// batch, dim, seqlen, dstate, groups, data) calls ssmk_scan_fwd once on a
// problem of batch ≤ 2, dim ≤ 4, seqlen ≤ 40, dstate ≤ 16 or the library's
// maximum, with the feature flags (complex, variable B and C, softplus, D,
// z, delta_bias, last_state NULL) from the flag byte; a batch byte of 128
// or more makes the problem long, its time series repeated to LongSteps
// more steps, so that a GPU kernel's full tiles, where its fast paths run,
// see the decoded special values. Values are decoded by
// Values: a tag byte names one of the Specials (0, ±1, ±2 and 2 ± ulp for
// bilinear's pole, 20 ± ulp for softplus's threshold, the subnormal and
// normal limits, ±max, log(max) where e^x overflows, ±Inf, NaN, …) or
// starts an ordinary value (±10^e, e in [−3, 2)) or raw dtype bits; past the
// end of data, values are drawn as in a Mamba block, so short inputs are
// complete problems. Every input is exactly representable in its dtype, so
// the kernel and the reference read the same numbers.
//
// Each call runs under a deadline (HangLimit) and the binding's one guard
// mechanism: every array sits between guard regions and the inputs are
// checksummed around the call (a write outside a buffer or into an input is
// a cudalib.MemoryError); every output starts as cudalib.Unwritten's NaNs,
// so an element the kernel never writes fails, and a last_state of NULL
// must leave the buffer kept for it untouched. A library that declares a
// combination unsupported (ssmk_capabilities) may refuse it with
// SSMK_EUNSUPPORTED; a declared complex-A fallback is judged against zoh.
//
// # The non-finite policy
//
// Every output element is judged by Judge from four numbers: the kernel's
// value k; the reference E, reference.Scan or reference.DiscretizeAt in
// Float64 on the kernel's own inputs (for a scan row whose float64
// recurrence goes non-finite on finite inputs, reference.ScanRowUnbounded:
// a state beyond float64's range that a later Ā of 0 annihilates is ∞·0 =
// NaN in float64, but the value is finite, and a time-parallel kernel, which
// forms the product of the Ā first, computes it); the dtype evaluation N, the same
// formulas evaluated the way a plain kernel of the dtype does (Float32, or
// Float64Natural: every operation rounded to the dtype, elementary functions
// rounded once, e^x, (e^x − 1)/x and e^a·cos b written plainly so that their
// intermediates overflow where a kernel's do); and the error model's scale
// S and underflow part T (reference.ErrorScaleIn, DiscretizeScale), giving the
// tolerance τ = 4·(u·S + η·T), the verification suite's threshold.
//
//  1. E finite and N finite and within τ of E: k must be finite and within
//     τ of E.
//  2. E finite but N is not, or N is more than τ from E (the dtype's own
//     evaluation overflows or underflows an intermediate, e.g. x = Δ·a
//     beyond float32's range, or e^89 inside float32's φ1(89) = 5e36): k may
//     be non-finite, or finite within τ of E or of N. The same holds where
//     x = Δ·a overflows the dtype or a complex x has an infinite part
//     (Value.OnInfinity), in a scan row from the step at which one of its
//     x overflows on, and after a run of steps whose decay Π|Ā| exceeds the
//     dtype's range (reference.Scale's DecayOut): a time-parallel scan, like
//     the CUDA build's and Mamba's, forms that product where the
//     sequential recurrence never does, and ∞·0 = NaN on a zero state.
//     The same products may flush below η, losing terms that the
//     sequential recurrence damps step by step and keeps: τ's underflow part
//     T grows by min(Peak, Reach/η) (reference.Scale's PeakOut, ReachOut).
//  3. E is ±Inf or NaN: k must be non-finite of the class of E or of N.
//
// At the edge of the range (|E| + τ ≥ the dtype's largest finite number,
// E itself possibly beyond it) k may be finite within τ, an infinity of E's
// sign, or N's class. A scan element is treated as rule 2's when a state on
// the way to it was at the edge (reference.Scale's PathMag + τ's part of
// PathScale ≥ the largest number), although the element has decayed well
// inside the range since: one rounding up at that step makes the state ∞
// for good. A scan element is reached by a NaN or Inf input that its states
// read by its step (u, Δ as the recurrence reads it — after delta_bias and
// softplus, so that a raw −Inf under softplus is the finite step 0 — B,
// their a), its row's D, or its own step's C or z; another step's C or z
// does not reach it. Where S is NaN (a NaN or Inf input that never reached
// the element) k must be finite unless N is not; where S overflows float64
// the element's terms are beyond every dtype's range and it is not judged;
// so is a scan element whose inputs are finite but whose terms' magnitude
// (reference.Scale's MagOut) overflows float64, where the reference's own
// sums may overflow although the true value does not.
//
// Two refinements say what IEEE 754 does not decide. Complex values are
// classified by C99 Annex G.3 (infinite if either part is), but only finite
// versus non-finite is required of them: whether (re, im) arithmetic ends
// in an infinity or a NaN part depends on the formula's form (Inf·0 inside a
// product, Smith's division by ∞), and C99's recovery rules are a library
// convention the ABI does not ask for. Likewise for the scan's outputs and
// states, sums over many terms and steps (Value.Sum): once an intermediate
// has overflowed, ±Inf versus NaN depends on the order of the additions and
// on signs that cancellation can flip within the error model, so where the
// reference is non-finite or beyond the dtype's range any non-finite value
// is accepted, and in a row where the dtype's evaluation overflowed, a
// non-finite value is accepted where the reference is finite.
//
// What the policy found in the project's own code is recorded in the README
// (Fuzzing): a spurious overflow of math.Exp at x = 709.782712893384 in the
// reference (Go returns +Inf where e^x < MaxFloat64) and an overflow of
// Smith's division in the kernels' complex arithmetic (foh, float32, Δ =
// FLT_MAX gave 0 instead of 0.5 + 0.5i); both are fixed, and the inputs
// that showed them stay in the corpus.
package fuzz

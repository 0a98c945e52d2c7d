// Package diagnose says what a failing kernel computes instead of the
// selective scan of the ABI (cudalib/include/ssmk.h).
//
// A failure is a comparison with the float64 reference whose scaled error
// ratio exceeds the threshold (package judge). A diagnosis tests
// hypotheses about it, each against the same error model and threshold, and
// names the first that holds:
//
//  1. A slip of the whole scan (mamba1.Slips, the family's catalogue, as
//     mamba2.Slips and mamba3.Slips are the chunked families'): the
//     reference of p with one usual mistake (D·u dropped, delta_bias ignored, softplus before the bias, groups
//     indexed d mod n_groups, conj(C), the complex factor 2 missing, y read
//     before the state update, the gate as y·σ(z) or missing, the last state
//     without B, another method's formula). A slip that is the ABI's scan of
//     another problem is judged with that problem's own error scale.
//  2. The discretization, probed through the kernel's own scan (so that a
//     library without ssmk_discretize is diagnosed too): one channel per
//     (Δ, a), dstate 1, B = C = 1 and u = 1 at t = 0 give Bcoef = Δ·g with
//     seqlen 1 and Ā·Bcoef with seqlen 2; u = 0 must give 0. Ā and g are held to the
//     method's within 8u·(4 + |x|), x = Δ·a (e^x's condition number is |x|),
//     and otherwise to candidates with fitted constants: a flipped sign, an
//     exponent or rotation scaled by c, a constant or Δ^p factor, a
//     polynomial term c·x^k, truncated Taylor series of φ0, φ1, φ2, another
//     method, φ1's cancellation near 0; or g is found not to be a function of
//     x alone.
//  3. Softplus and the SiLU gate, probed with a = 0, where Ā = g = 1.
//  4. A ratio kernel/reference that is constant or follows an input.
//
// Independently, each feature of p is switched off in turn (keeping the
// steps Δ) to say which the failure needs, and where it shows is located
// (output or last state, real or imaginary part, from which step). A
// refusal of the problem is explained by halving one size at a time.
//
// The chunked families behind the bridge are diagnosed likewise against
// their catalogues (mamba2.Slips, mamba3.Slips), and a Mamba-2 prefill that
// no catalogued slip explains by its structure: the kernel's own operator
// (y's and the final state's response to x and to the initial state),
// measured with impulses and related to the reference's region by region —
// the diagonal, within a chunk, across chunk and sequence boundaries — by
// a fitted relation (a factor lacking or extra, a decay off by a step, an
// exponent scaled, B and C swapped, a path missing, an offset); see
// operator.go and docs/diagnosis.md. Mamba-3's operator likewise
// (operator_mamba3.go); and where neither names the fault (in Mamba-3's
// forward and backward, Mamba-2's backward), the problem's slices
// (slices.go, with each family's layouts in slices_mamba3.go and
// slices_ssd.go): the layer is a separate computation per sequence and
// head, so a kernel's failure that stays at its batch or head indices when
// they are permuted, results that move with another slice's input, or with
// what an earlier call left in memory, name an offset (a stride dropped, a
// sign, a store the backward reads put at another head's place) whatever
// values the kernel computes there. A property of the arithmetic (the
// angles in bf16) is named as a failure's cause only where it produces
// that failure: its variant fails the problem alone, or brings the
// failure's bulk halfway to the threshold.
//
// Each hypothesis has a test that plants it in a fake kernel and requires
// its tag (diagnose_test.go); the planted mutants of cmd/mutants are the
// test set on a real library, where make mutants requires 90% of them to be
// named. The tags are stable: report.json and the mutation harness use them.
package diagnose

// Package verify is the verification suite: it compares a kernel library
// (cudalib.OpenDefault — the CPU build in CI, the CUDA build on a GPU
// machine, SSMK_LIB for a user's library) with the float64 references of
// package mamba1 and says, with evidence, whether every discretization
// method computes what it claims.
//
// Every comparison is a scaled error ratio (reference.Ratio), judged by package
// judge:
//
//	ratio = |kernel − reference| / (u·S + η·T)
//
// with S the running-error scale of reference.ErrorScaleIn (or
// reference.DiscretizeScale), u the kernel dtype's unit roundoff and η·T an
// underflow allowance. S bounds what a correct implementation can err by, so
// correct kernels stay below 1 whatever the conditioning of the input; the
// thresholds (judge.ThresholdF32, judge.ThresholdF64 = 4) are measured maxima
// with a margin, and a logic error lands at 10⁶–10¹⁴.
//
// The tests group by topic, so `go test ./verify -run X` selects them:
//
//	Accuracy    rapid properties over random shapes (batch 1–3, dim 1–64, seqlen
//	            1–300, dstate 1–64 and the library's maximum), feature toggles,
//	            methods, real/complex, fp32/fp64, realistic (Mamba's S4D
//	            initialisations, softplus dt in 1e-3…1e-1) and stressing inputs;
//	            a failure prints the shrunk case and its worst element. Plus one
//	            fixed case of every combination (AccuracyEveryCombination).
//	            RAPID_CHECKS=N (or -rapid.checks=N) lengthens the campaign;
//	            RAPID_SEED=N pins its draws (CI and make gate pin them, so that
//	            a commit gets one verdict; unset, each run draws afresh).
//	Sweep       ssmk_discretize over x = Δ·a, |x| in 1e-8…1e3, both signs, 0, and
//	            complex grids: the ratio and ulp distribution per method × dtype.
//	Edges       ssmk_discretize at a table of edge values of a (subnormal and
//	            least normal parts, Im a tiny with Re a = 0), where a kernel's
//	            algebra meets the ends of its number format.
//	Bilinear    the scalar form equals gonum's (I − ΔA/2)⁻¹(I + ΔA/2) for diagonal
//	            A, near the pole x = 2 too; for A = diag + ε·offdiag the shortcut's
//	            error is first order in ε and vanishes at ε = 0.
//	Stability   |Ā| ≤ 1 for Re(a) < 0, every method, Δ·|a| up to 1e6.
//	ComplexFallback  capabilities held to their word: native methods match the
//	            complex reference and differ from zoh; declared fallbacks equal zoh.
//	ErrorByDType  every dtype (fp64, fp32, bf16, fp16) per method on one Mamba
//	            block: against the reference of its rounded inputs (judged) and
//	            end to end, against that of the unrounded ones (the table of
//	            what each method loses in each type).
//	Narrow      the mixed-precision dtypes (fp16, bf16 inputs; float32 weights
//	            and state): rapid properties, every combination, and the
//	            special values of the 16-bit types (fp16's overflow at 65520
//	            and subnormals, a 4096-step accumulation that needs a float32
//	            state, large |Δ·a|, Δ after softplus). Their outputs are judged
//	            by judge.OutputRatio: float32 arithmetic plus one rounding to
//	            nearest of the output.
//	Backward    the backward pass (ABI extension SSMK_CAP_BACKWARD): every
//	            gradient against the float64 adjoint (reference.ScanGrad)
//	            under the reverse scan's error model (judge.CompareGrads):
//	            rapid properties, every combination, the options that decide
//	            where dB and dC go, rows across a GPU's chunks, fp64 against the
//	            library's own forward (gradcheck), determinism.
//	NarrowBackward  the backward in fp16 and bf16 (SSMK_CAP_BWD_NARROW): the
//	            input-typed gradients rounded once to the type, the weights'
//	            float; properties, every combination, special values (a
//	            group's 64-channel sums, fp16's overflow, dz near ties).
//	GradErrorByDType  the gradients' counterpart of ErrorByDType: what each
//	            method's du, ddelta, dA and dB lose in each dtype, end to end.
//	Golden      every golden case (golden/), checksums verified; with its
//	            backward where the case holds one (GoldenBackward).
//	ConvergenceOrder  each method's global order, fitted from the library's
//	            fp64 scan of h' = −h + 1 as Δ shrinks, against ssm.Method.Order.
//	Check1 … Check7  the seven performance checks (CHECKS.md).
//
// A library that declares its features (ssmk_scan_features: the options
// and shapes it takes, an engine's fused op) is asked only for those: every
// test, forward and backward, draws its problems within the declaration
// (mamba1.Spec.Within) and fits them (ssm.Features.Fit); what cannot be fitted
// is reported as not supported, never failed.
//
// TestMain writes report.json and summary.txt when given -report DIR (make
// verify does); the checks write check1.json … check7.json beside them.
// Package report declares both, and the gate reads them. cmd/mutants proves the
// suite catches bugs: it builds the CPU library with each planted bug of its
// catalogue and requires every one to fail the suite, and a CPU build that
// declares an engine's features to pass it.
package verify

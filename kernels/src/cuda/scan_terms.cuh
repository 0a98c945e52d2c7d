/*
 * scan_terms.cuh — the coefficients of one state update on the scan's paths.
 *
 * ssmk_methods.h holds the methods' arithmetic, shared with the CPU build;
 * this file holds the forms the GPU scan takes of it where a whole tile (or a
 * state's run) is known to lie in a range: e^x by one MUFU.EX2, foh's near
 * and far branches, bilinear's one reciprocal, zoh's and bilinear's input term
 * from Δ·u, the Taylor methods' Δ·g as a polynomial in Δ, and the votes that
 * establish those ranges. Each form equals the exact path's answer up to
 * rounding the error model allows; the accuracy tests judge that on the GPU.
 */
#ifndef SSMK_SCAN_TERMS_CUH
#define SSMK_SCAN_TERMS_CUH

#include <float.h>

#include <type_traits>

#include "../ssmk_methods.h"
#include "scan_ops.cuh"
#include "scan_policy.cuh"

namespace ssmk {

/* Δ·g of a Taylor method (g = 1 + Σ_{k=1..deg} c_k·x^k, x = Δ·a:
 * taylor_g) as a polynomial in Δ with per-state coefficients
 * (ScanTraits::kPolyDeltaG):
 * Δ·g = Δ + (Δ·r)·Δ, r = Σ_k (c_k·a^k)·Δ^(k−1) by Horner's rule in Δ. No
 * x = Δ·a is formed, so an update takes one product fewer than x, g by
 * Horner, then Δ·g (rk4: 4 instructions for 5), and the coefficients
 * d[k] = c_{k+1}·a^(k+1) cost 2·deg − 1 products once per state per tile,
 * amortised over the lane's K = 8 steps (for foh's degree-5 φ1 that cost
 * eats the gain). Rounding: d[k] is rounded
 * k + 1 times where Horner's rule in x rounds x once, a few u more in g's
 * terms, within the update's error model (the accuracy tests pass against
 * it on the H200). Where every a of the row is 0 or 2^-20 ≤ |a| ≤ 2^20
 * (dpoly_row_ok; any other a fails the row's fast vote), every d[k] is 0
 * or normal (≥ 2^-5·2^-60) and finite; on the fast path |x| ≤ 126·ln 2, so Δ < 2^27
 * and every term |d[k]|·Δ^(k+1) ≤ |x|^(k+1) is finite too. Outside that
 * range a coefficient would underflow or overflow (|a| = 10^-30 makes
 * a³/24 zero: cudalib's TestScanFastPathScales fails without the vote). */
struct DCoefs {
    float d[3];
};
template <int M>
__device__ __forceinline__ DCoefs dpoly_coefs(float a) {
    DCoefs c{};
    float ak = a;
#pragma unroll
    for (int k = 1; k <= taylor_degree<M>(); k++) {
        c.d[k - 1] = taylor_coef<M, float>(k) * ak;
        ak *= a;
    }
    return c;
}
template <int M, typename V>
__device__ __forceinline__ DCoefs dpoly_coefs(V) {
    return DCoefs{};
} /* unused: double and complex kernels */
template <int M>
__device__ __forceinline__ float dpoly_dg(const DCoefs &c, float dt) {
    constexpr int deg = taylor_degree<M>();
    float r = c.d[deg - 1];
#pragma unroll
    for (int k = deg - 2; k >= 0; k--) r = fmaf(r, dt, c.d[k]);
    return fmaf(r * dt, dt, dt);
}
__device__ __forceinline__ bool dpoly_row_ok(float a) {
    const float m = fabsf(a);
    return m == 0.0f || (m >= 0x1p-20f && m <= 0x1p20f);
}

/* (Ā, Δ·g·B·u) of one state update of real A: the method at x = Δ·a, with
 * e^x (where the method uses it) on the float fast path as exp2 of Δ·a2,
 * a2 = a·log2e formed once per state (a_coef), elsewhere as the CPU build
 * forms it (sexp); then the input term as ((Δ·g)·B)·u, the CPU build's
 * order. FAST: the tile passed its method's vote (run_stable_above) —
 * every Δ·a·log2e in [−126, 0] (ex2_normal) for the exp methods, in
 * [−2^20, 0] for bilinear, whose a2 here is −a/2 and 1 − x/2 one FFMA of
 * Δ. NEAR (foh: a float tile that passed FAST, or any double tile): every
 * x of the state's tile is in (−near_max, 0] (float) or (−1/2, 1/2)
 * (double), and there φ1 is
 * phi1_near and Ā = 1 + x·φ1(x) = e^x, one FMA instead of the exp;
 * FOH_FAR (foh, a float tile that passed FAST): every x of the state's
 * tile is at most −1/2, and there Δ·φ1 = (e^x − 1)/a from the exp. DU
 * (zoh and bilinear, FAST): the input term from du = Δ·u formed once per
 * step, B·du for zoh (g = 1), B·(du·g) for bilinear, a product fewer per
 * update, where run_du_exact holds for the tile: Δ·u may overflow where Δ·g
 * does not (bilinear at Δ = FLT_MAX, g = 2/(Δ·a): golden case
 * fuzz-bilinear-real-delta-flt-max), and there the CPU build's order is
 * taken. */
template <typename T, int M, bool FAST, bool DU, int NEAR, bool DP>
__device__ __forceinline__ void update_terms(T a, T a2, T ia, T dt, T u, T du, T bv, T &ab, T &bb, const DCoefs &dc) {
    using Policy = MethodPolicy<M>;
    static_assert(!DU || Policy::kDeltaU, "B·(Δ·u·g): the fast input term of a method whose policy has it");
    static_assert(NEAR == FOH_EXACT || Policy::kFohBranches, "the near and far branches are foh's");
    static_assert(NEAR != FOH_FAR || (FAST && std::is_same<T, float>::value),
                  "foh's far branch is the float fast path's");
    static_assert(!DP || (FAST && std::is_same<T, float>::value && taylor_degree<M>() > 0),
                  "Δ·g as a polynomial in Δ: the Taylor methods' float fast path");
    if constexpr (NEAR == FOH_FAR) {
        /* Δ·φ1(x) = (e^x − 1)/a (ia = 1/a) by one FFMA, rounded once.
         * e^x's error of (2 + |x|)·u becomes (2 + |x|)·e^x/(1 − e^x) ≤ 3.9u
         * relative at x ≤ −1/2; the error model's bound for a kernel that
         * forms (e^x − 1)/x there is 2u larger (reference's doc), room for
         * MUFU.RCP's ulp and the FFMA's rounding. Then the CPU build's
         * order, ((Δ·g)·B)·u. */
        (void)a, (void)du, (void)dc;
        ab = ex2_normal(dt * a2);
        bb = (sfma(ab, ia, -ia) * bv) * u;
        return;
    }
    (void)ia;
    if constexpr (DP) {
        (void)du;
        ab = ex2_normal(dt * a2);
        bb = (dpoly_dg<M>(dc, dt) * bv) * u;
        return;
    }
    (void)dc;
    const T x = dt * a;
    T e = T(0), g;
    if constexpr (uses_exp<M>()) {
        /* Off the fast path e^x is the CPU build's exp2f(x·log2e): a·log2e
         * overflows for |a| > FLT_MAX/log2e, and Δ = 0 then gave
         * 0·∞ = NaN for Ā = 1 (FuzzScan on the H200: highorder, a =
         * FLT_MAX, a softplus Δ of 0). The fast path's vote excludes it. */
        if constexpr (FAST && std::is_same<T, float>::value)
            e = ex2_normal(dt * a2);
        else
            e = sexp(x);
    }
    (void)a2;
    if constexpr (NEAR != FOH_EXACT) {
        /* within 2.1 ulp of e^x in float (phi1_near), as close as
         * MUFU.EX2's, and within 2 ulp in double; the exp above is then
         * dead code */
        g = phi1_near(x);
        ab = sfma(x, g, T(1));
        (void)e;
    } else if constexpr (Policy::kReciprocalG && DU) {
        /* method_real_e's bilinear where the fast vote holds: the
         * same g (sdiv(1, d) is exactly 1/d's reciprocal for d in
         * [1, 2^19 + 1]) and Ā, without the test for an infinite x. */
        g = rcp_normal(fmaf(dt, a2, T(1))); /* a2 = −a/2 here (a_coef) */
        ab = T(2) * g - T(1);
    } else {
        method_real_e<M>(x, e, ab, g);
    }
#if defined(SSMK_SLOW_WORK) && SSMK_SLOW_WORK > 0
    /* A deliberately slowed build (SSMK_NVCC_EXTRA=-DSSMK_SLOW_WORK=n): n
     * redundant evaluations per state update whose results feed a select the
     * compiler cannot drop; the answers are unchanged. It exists to prove
     * that the gate's baseline comparison catches a slowdown (scripts/gpu.sh
     * gate); like make mutants' patches, a planted fault, never set in a release
     * build. */
    for (int r = 0; r < SSMK_SLOW_WORK; r++) {
        T ab2, g2;
        method_real_m<M>(x * (T(1) + T(r + 1) * T(1e-3)), ab2, g2); /* a perturbed x: not the one above */
        ab = (ab2 == ab2 || ab != ab) ? ab : g2;
    }
#endif
    if constexpr (DU && Policy::kUnitG) {
        (void)g, (void)dt, (void)u;
        bb = bv * du;
    } else if constexpr (DU) {
        (void)dt, (void)u;
        bb = bv * (du * g);
    } else {
        (void)du;
        bb = ((dt * g) * bv) * u;
    }
}
/* The same for complex A, through the runtime method table. */
template <typename T>
__device__ __forceinline__ void update_terms_c(int method, cplx<T> a, T dt, T u, cplx<T> bv, cplx<T> &ab, cplx<T> &bb) {
    cplx<T> g;
    method_complex(method, cscale(a, dt), ab, g);
    bb = cscale(cmul(cscale(g, dt), bv), u);
}

/* The terms of one state update: real A with the method known at compile
 * time, complex A through the runtime table. */
template <int M, bool FAST, bool DU, int NEAR, bool DP, typename T>
__device__ __forceinline__ void step_terms(int, T a, T a2, T ia, T dt, T u, T du, T bv, T &ab, T &bb,
                                           const DCoefs &dc) {
    update_terms<T, M, FAST, DU, NEAR, DP>(a, a2, ia, dt, u, du, bv, ab, bb, dc);
}
template <int M, bool FAST, bool DU, int NEAR, bool DP, typename T>
__device__ __forceinline__ void step_terms(int method, cplx<T> a, cplx<T>, cplx<T>, T dt, T u, T, cplx<T> bv,
                                           cplx<T> &ab, cplx<T> &bb, const DCoefs &) {
    update_terms_c(method, a, dt, u, bv, ab, bb);
}

/* The real float kernels' fast vote: whether every Δ·a2 of a lane's run —
 * its steps' dt in [dmin, dmax], against every state of the row, a2 =
 * a·log2e in [a2min, a2max] — is in [lo, 0]: with Δ ≥ 0 and a ≤ 0 the least
 * is dmax·a2min. Then no product of the run's Ā exceeds 1 in magnitude (the
 * scan's test for overflowed products is not needed), and
 *   - lo = −126 (the exp methods): the run may take ex2_normal;
 *   - lo = −2^20 (bilinear): every x = Δ·a is in [−2^20, 0], so 1 − x/2 is
 *     in [1, 2^19 + 1] and g = 1/(1 − x/2) in [2^-20, 1] is one reciprocal
 *     (no scaling for __fdividef's top of range, no test for an infinite
 *     x), and du·g is within 2^20 of du (run_du_exact).
 * An infinite or NaN bound compares false (the exact path). A NaN Δ or a,
 * which fminf passes over, makes only NaN exponents, for which ex2_normal
 * and exp2f agree, and NaN on both of bilinear's paths. */
__device__ __forceinline__ bool run_stable_above(float dmin, float dmax, float a2min, float a2max, float lo) {
    return dmin >= 0.0f && a2max <= 0.0f && dmax * a2min >= lo;
}

/* Whether the fast input terms of a lane's run — zoh's B·du, bilinear's
 * B·(du·g), du = Δ·u — are those of the CPU build's ((Δ·g)·B)·u up to
 * rounding: every du is finite with |du| ≥ lo, or an exact zero (Δ or u is
 * 0). Then no intermediate overflows or underflows where Δ·g·B·u does not:
 * lo = FLT_MIN for zoh (g = 1); 2^-100 for bilinear, whose du·g is then at
 * least 2^-120 (g ≥ 2^-20: run_stable_above). A NaN or infinite du takes
 * the CPU build's order. */
template <typename T, int K>
__device__ __forceinline__ bool run_du_exact(const T (&dt)[K], const T (&u)[K], const T (&du)[K], T lo) {
    static_assert(std::is_same<T, float>::value, "the Δ·u input terms are the float kernels'");
    bool ok = true;
#pragma unroll
    for (int i = 0; i < K; i++) ok = ok && isfinite(du[i]) && (fabsf(du[i]) >= lo || dt[i] == T(0) || u[i] == T(0));
    return ok;
}

/* The largest |x| = |Δ·a| of a lane's run for state a, its largest |Δ| being
 * dabs: foh's near test compares it with near_max (NaN compares false, and
 * so does complex A's NaN). */
template <typename T>
__device__ __forceinline__ T run_xmax(T dabs, T a) {
    return dabs * sabs(a);
}
template <typename T>
__device__ __forceinline__ T run_xmax(T, cplx<T>) {
    return T(NAN);
}

/* foh's FAR branch of a float state's tile, whose smallest Δ (≥ 0) is dmin:
 * whether every x = Δ·a (a ≤ 0) of it has |x| ≥ 1/2, where (e^x − 1)/a
 * loses at most a bit to cancellation, and 1/a is normal (far_inv, by one
 * MUFU.RCP). */
__device__ __forceinline__ bool run_far(float dmin, float a) {
    return dmin * fabsf(a) >= 0.5f && fabsf(a) >= 0x1p-100f;
}
template <typename T, typename V>
__device__ __forceinline__ bool run_far(T, V) {
    return false;
}
__device__ __forceinline__ float far_inv(float a) {
#ifdef __CUDA_ARCH__
    return rcp_normal(a);
#else
    return 1.0f / a; /* the host pass only */
#endif
}
template <typename V>
__device__ __forceinline__ V far_inv(V) {
    return V{};
}

/* Re(C·h): the state's contribution to the output (2·Re Σ for complex A). */
template <typename T>
__device__ __forceinline__ T out_part(T c, T h) {
    return c * h;
}
template <typename T>
__device__ __forceinline__ T out_part(cplx<T> c, cplx<T> h) {
    return c_times_h(c, h).re;
}

/* e^{a·ΣΔ} of a scan window from a·log2e and the window's ΣΔ (EXPSUM in
 * scan_kernel: real float kernels only; the other overload is never used).
 * Below 2^-126 it is 0 where the product of the steps' Ā may be subnormal:
 * an absolute error under 2^-126 of the state it multiplies, which the
 * error model allows (a flushed Ā). */
__device__ __forceinline__ float window_decay(float a2, float w) { return ex2_normal(a2 * w); }
template <typename V>
__device__ __forceinline__ V window_decay(V, float) {
    return V{};
}

template <typename T>
__device__ __forceinline__ T a_log2e(T a) {
    return a * T(SSMK_LOG2E_F);
}
/* The per-state factor of the fast path's update (the a2 of update_terms):
 * a·log2e for the exp methods, −a/2 for bilinear, whose 1 − x/2 is then one
 * FFMA of Δ, rounded once. */
template <int M, typename T>
__device__ __forceinline__ T a_coef(T a) {
    if constexpr (MethodPolicy<M>::kReciprocalG)
        return a * T(-0.5);
    else
        return a_log2e(a);
}
template <int M, typename T>
__device__ __forceinline__ cplx<T> a_coef(cplx<T> a) {
    return a;
} /* unused: complex A takes cexp */

} /* namespace ssmk */

#endif

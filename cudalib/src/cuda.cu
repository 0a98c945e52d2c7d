/*
 * cuda.cu — the CUDA build of the ssmk ABI (build/libssmk_cuda.so).
 *
 * The scan kernel is time-parallel: SEG lanes of a warp per (batch, dim)
 * row (32, or 16 or 8 for some methods on large grids), lane l holding K
 * consecutive steps (32 bytes of the element type) of each tile of SEG·K
 * steps; per state, each lane composes its K updates into one affine map, a
 * log2(SEG)-level shuffle scan of the maps gives every lane the state
 * entering its steps, and a second pass adds C·h to the lane's own outputs
 * (see scan_kernel). Ā and g come from the shared method arithmetic
 * (ssmk_methods.h). One launch per scan, any seqlen, dstate up to 256.
 * bench/NOTES.md records the variants and their timings.
 *
 * Every CUDA call and launch is checked; failures become SSMK_EDEVICE (or
 * SSMK_ENODEVICE when there is no usable GPU) with the runtime's message.
 * The process is never exited.
 */
#include <cuda_runtime.h>
#include <float.h>
#include <stdlib.h>

#include <new>
#include <type_traits>
#include <vector>

#include "ssmk.h"
#include "ssmk_host.h"
#include "ssmk_methods.h"

using namespace ssmk;

namespace {


/* ---- error handling ---- */

int32_t cuda_fail(cudaError_t e, const char *what) {
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInitializationError ||
        e == cudaErrorStubLibrary || e == cudaErrorDevicesUnavailable)
        return fail(SSMK_ENODEVICE, "no usable CUDA device: %s (%s) in %s", cudaGetErrorString(e), cudaGetErrorName(e),
                    what);
    if (e == cudaErrorMemoryAllocation)
        return fail(SSMK_ENOMEM, "out of device memory: %s in %s", cudaGetErrorString(e), what);
    return fail(SSMK_EDEVICE, "CUDA error %s: %s in %s", cudaGetErrorName(e), cudaGetErrorString(e), what);
}

#define CU(call)                                                       \
    do {                                                               \
        cudaError_t e_ = (call);                                       \
        if (e_ != cudaSuccess) return cuda_fail(e_, #call);            \
    } while (0)

int32_t ensure_device() {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) return cuda_fail(e, "cudaGetDeviceCount");
    if (n == 0) return fail(SSMK_ENODEVICE, "no usable CUDA device: cudaGetDeviceCount found none");
    return SSMK_OK;
}

/* ---- kernels ---- */

struct ScanParams {
    int batch, dim, seqlen, dstate, n_groups;
    int method, is_variable_B, is_variable_C, softplus;
    long long rows;
    const void *u, *delta, *A, *B, *C, *D, *z, *delta_bias;
    void *out, *last_state;
};

/* Warps per block of the scan; each runs 32/SEG rows (scan_kernel). 4
 * measured best: 1, 8 and 16 were 4–8 % slower for zoh, 2 the same
 * (bench/NOTES.md, variant 58). */
#ifndef SSMK_SCAN_ROWS
#define SSMK_SCAN_ROWS 4
#endif
constexpr int kRows = SSMK_SCAN_ROWS;
/* The real methods whose float kernels take EXPSUM (scan_kernel), a bit per
 * Method: poly, highorder and rk4, where it measured 9, 1.5 and 7 % faster
 * (8×2048×4096×16); zoh and foh were slower (bench/NOTES.md, variants 26, 29). */
#ifndef SSMK_EXPSUM_MASK
#define SSMK_EXPSUM_MASK ((1 << POLY) | (1 << HIGHORDER) | (1 << RK4))
#endif
/* The real methods whose float kernels hold the next state's C in flight
 * as well as its a and B (WIDE in scan_kernel), a bit per Method: all but
 * foh. foh's longer update covers C's latency when C is loaded after the
 * state's pass 1 (SSMK_LATEC_MASK) or at the start of its own state, and
 * without C's 8 registers in flight through pass 1 its schedule is 5 %
 * shorter (1338 → 1270 µs at 8×2048×4096×16); the other
 * methods lost 1–14 % without the prefetch (zoh 14 %: bench/NOTES.md,
 * variant 61). */
#ifndef SSMK_WIDE_MASK
#define SSMK_WIDE_MASK (0x3F & ~(1 << FOH))
#endif
/* The Taylor methods whose float kernels form Δ·g on the fast path as a
 * polynomial in Δ (dpoly_coefs), a bit per Method: poly and rk4, where it
 * measured 1–2 and 1–3 % faster (8×2048×4096×16); highorder gained nothing,
 * and foh's near branch, by the same means, was 2–3 % slower
 * (bench/NOTES.md, variant 57). */
#ifndef SSMK_DPOLY_MASK
#define SSMK_DPOLY_MASK ((1 << POLY) | (1 << RK4))
#endif
/* 1: foh's float kernels take the far branch (update_terms' FOH_FAR) for a
 * state whose every x of the tile is at most −1/2: Δ·φ1 = (e^x − 1)/a from
 * the exp, with no polynomial, division or select per update. 0 measures
 * without it (bench/NOTES.md, variant 66: foh 2 % and 1 % faster at the
 * two sizes). */
#ifndef SSMK_FOH_FAR
#define SSMK_FOH_FAR 1
#endif
/* 1: the real float kernels' state loop is unrolled by two in the source
 * (scan_kernel's states) rather than by #pragma unroll 2, so that its form
 * does not depend on the compiler: nvcc 11.8 left foh's loop rolled, with
 * copies of the next state's loads, and built zoh and bilinear 4–5 % and
 * 2–4 % slower than written out; nvcc 13 builds both forms within 1 % of
 * each other (bench/NOTES.md, variant 72). 0 measures the pragma's loop. */
#ifndef SSMK_UNROLL2
#define SSMK_UNROLL2 1
#endif
/* The real methods whose float kernels' unrolled state loop runs the pairs
 * of states that have a state after them, then the last one or two states
 * apart, so that the next state's pointers advance without a test and
 * selects (PEEL in scan_kernel), a bit per Method. With SSMK_PIN_MASK:
 * rk4 4–5 %, poly 3 %, highorder 2–3 %, foh 1 % faster at both sizes. zoh
 * and bilinear, with 8 % fewer instructions in the loop, were 4–13 %
 * slower (ptxas moved the next states' loads from the second state's first
 * pass to the end of the loop), and with the loads pinned 1–2 % slower
 * (bench/NOTES.md, variants 74–77). */
#ifndef SSMK_PEEL_MASK
#define SSMK_PEEL_MASK ((1 << POLY) | (1 << HIGHORDER) | (1 << RK4) | (1 << FOH))
#endif
/* The real methods whose float kernels issue the next state's loads at the
 * start of the state (PIN in scan_kernel), a bit per Method: where the loop
 * is peeled, ptxas otherwise sinks them (highorder 4 % slower than without
 * the peel; bench/NOTES.md, variant 77). Not foh, whose late C (LATEC) was
 * 2–7 % slower pinned (variant 78). */
#ifndef SSMK_PIN_MASK
#define SSMK_PIN_MASK ((1 << POLY) | (1 << HIGHORDER) | (1 << RK4))
#endif
/* The real methods whose float kernels load the next state's C after the
 * state's first pass (LATEC in scan_kernel; those of SSMK_WIDE_MASK load it
 * at the state's start), a bit per Method: foh, whose C is then in flight
 * through the scan and pass 2 but not through its longer pass 1. With foh out
 * of SSMK_PIN_MASK, 2 % faster at 8×512×1024×16 in three visits, within
 * ±0.7 % at 8×2048×4096×16; pinned, 2 % and 7 % slower; for every method
 * instead of WIDE, zoh unchanged, poly and rk4 3 % slower (bench/NOTES.md,
 * variant 78). */
#ifndef SSMK_LATEC_MASK
#define SSMK_LATEC_MASK (1 << FOH)
#endif
enum { NEXT_TEST, NEXT_YES, NEXT_NO }; /* scan_kernel's state: whether a next state is loaded */
/* Lanes per row of the scan (scan_kernel's SEG): 0 (or 32) is 32 lanes;
 * 8 or 16 makes every scan kernel use it where its block's carries fit
 * (the GPU tests of the narrow scans, bench/NOTES.md's variants). */
#ifndef SSMK_SCAN_SEG
#define SSMK_SCAN_SEG 0
#endif
/* Blocks per SM the register allocation must allow (__launch_bounds__):
 * 0 leaves it to the compiler. SSMK_SCAN_NO_BOUNDS drops the attribute, so
 * that nvcc's -maxrregcount sets the registers. Fewer registers buy warps
 * only in steps of one per scheduler: 112 or 104 with 1-warp blocks still
 * ran 16 warps per SM, and only 96 would give 20 (variant 58). */
#ifndef SSMK_SCAN_MIN_BLOCKS
#define SSMK_SCAN_MIN_BLOCKS 0
#endif
#ifdef SSMK_SCAN_NO_BOUNDS
#define SSMK_SCAN_BOUNDS
#else
#define SSMK_SCAN_BOUNDS __launch_bounds__(32 * kRows, SSMK_SCAN_MIN_BLOCKS)
#endif

/* 1: scan_kernel reads u, Δ, z and writes out with the evict-first hint
 * (load_run, store_run): each element of them is touched once, and the
 * hint keeps the caches for B and C, which every row of a batch reads;
 * 0 measures without (bench/NOTES.md, variant 42). */
#ifndef SSMK_STREAM
#define SSMK_STREAM 1
#endif

/* Bytes of each array a lane holds per tile: 32, or 16 for the measurement
 * of bench/NOTES.md's variant 36 (half the registers, 6 blocks per SM, and
 * twice the time: the scan's latency per state then has half the work to
 * hide behind). */
#ifndef SSMK_RUN_BYTES
#define SSMK_RUN_BYTES 32
#endif
static_assert(SSMK_RUN_BYTES == 16 || SSMK_RUN_BYTES == 32, "a lane's run: one or two 16-byte words");
/* Time steps per lane: 32 bytes of the element type (8 float, 4 double or
 * complex float, 2 complex double), so that a lane's run of B or C is two
 * 16-byte loads and a 32-lane tile of 32·K steps is 1 KiB per array. */
constexpr int steps_per_lane(size_t elem) { return elem >= SSMK_RUN_BYTES ? 1 : (int)(SSMK_RUN_BYTES / elem); }

/* A lane's run of K elements seen as 16-byte words. */
template <typename E, int K>
union RunWords {
    uint4 q[K * sizeof(E) / 16];
    E e[K];
};

/* Loads (or stores) a lane's run of K elements. Full runs of a VEC kernel
 * (seqlen a multiple of K, 16-byte aligned arrays) move as 16-byte words;
 * partial runs — the tail of the sequence — element by element, with zero
 * for the elements past its end. STREAM: the words with the evict-first
 * hint (ld.global.cs, st.global.cs), for arrays each element of which is
 * read or written once (scan_kernel's u, Δ, z and out). */
template <typename E, int K, bool VEC, bool STREAM = false>
__device__ __forceinline__ void load_run(const E *p, int avail, E (&v)[K]) {
    if (avail >= K) {
        if constexpr (VEC && (K * sizeof(E)) % 16 == 0) {
            RunWords<E, K> w;
            const uint4 *s = reinterpret_cast<const uint4 *>(p);
#pragma unroll
            for (int i = 0; i < (int)(K * sizeof(E) / 16); i++) w.q[i] = STREAM ? __ldcs(s + i) : s[i];
#pragma unroll
            for (int i = 0; i < K; i++) v[i] = w.e[i];
        } else {
#pragma unroll
            for (int i = 0; i < K; i++) v[i] = p[i];
        }
    } else {
#pragma unroll
        for (int i = 0; i < K; i++) v[i] = i < avail ? p[i] : E{};
    }
}

template <typename E, int K, bool VEC, bool STREAM = false>
__device__ __forceinline__ void store_run(E *p, int avail, const E (&v)[K]) {
    if (avail >= K) {
        if constexpr (VEC && (K * sizeof(E)) % 16 == 0) {
            RunWords<E, K> w;
#pragma unroll
            for (int i = 0; i < K; i++) w.e[i] = v[i];
            uint4 *s = reinterpret_cast<uint4 *>(p);
#pragma unroll
            for (int i = 0; i < (int)(K * sizeof(E) / 16); i++) {
                if constexpr (STREAM)
                    __stcs(s + i, w.q[i]);
                else
                    s[i] = w.q[i];
            }
        } else {
#pragma unroll
            for (int i = 0; i < K; i++) p[i] = v[i];
        }
    } else {
#pragma unroll
        for (int i = 0; i < K; i++)
            if (i < avail) p[i] = v[i];
    }
}

/* Shuffles within segments of SEG lanes (a row's lanes; scan_kernel). */
template <int SEG, typename T>
__device__ __forceinline__ T shfl_up(T v, int off) { return __shfl_up_sync(0xffffffffu, v, off, SEG); }
template <int SEG, typename T>
__device__ __forceinline__ cplx<T> shfl_up(cplx<T> v, int off) {
    return cmake(__shfl_up_sync(0xffffffffu, v.re, off, SEG), __shfl_up_sync(0xffffffffu, v.im, off, SEG));
}

/* v of lane src of the segment, to every lane of it */
template <int SEG, typename T>
__device__ __forceinline__ T shfl_from(T v, int src) { return __shfl_sync(0xffffffffu, v, src, SEG); }
template <int SEG, typename T>
__device__ __forceinline__ cplx<T> shfl_from(cplx<T> v, int src) {
    return cmake(__shfl_sync(0xffffffffu, v.re, src, SEG), __shfl_sync(0xffffffffu, v.im, src, SEG));
}

/* Whether v is finite (both parts, for complex). */
template <typename T>
__device__ __forceinline__ bool vfinite(T v) { return isfinite(v); }
template <typename T>
__device__ __forceinline__ bool vfinite(cplx<T> v) { return isfinite(v.re) && isfinite(v.im); }

template <typename T>
__device__ __forceinline__ T vmul(T a, T b) { return a * b; }
template <typename T>
__device__ __forceinline__ cplx<T> vmul(cplx<T> a, cplx<T> b) { return cmul(a, b); }
/* a·b + c */
template <typename T>
__device__ __forceinline__ T vfma(T a, T b, T c) { return a * b + c; }
template <typename T>
__device__ __forceinline__ cplx<T> vfma(cplx<T> a, cplx<T> b, cplx<T> c) { return cadd(cmul(a, b), c); }
/* a·b + c rounded once, in the precision of its operands */
__device__ __forceinline__ float sfma(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double sfma(double a, double b, double c) { return fma(a, b, c); }
template <typename V>
__device__ __forceinline__ V vone() { return V(1); }
template <>
__device__ __forceinline__ cplx<float> vone() { return cmake(1.0f, 0.0f); }
template <>
__device__ __forceinline__ cplx<double> vone() { return cmake(1.0, 0.0); }

/* 2^xl by one MUFU.EX2 (ex2.approx.ftz), the instruction exp2f uses too:
 * exp2f's further instructions only produce subnormal results, so this is
 * exp2f wherever xl ≥ −126, which the kernel establishes for a whole run of
 * steps before it takes this path. */
__device__ __forceinline__ float ex2_normal(float xl) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(xl));
    return r;
}

/* Δ·g of a Taylor method (g = 1 + Σ_{k=1..deg} c_k·x^k, x = Δ·a:
 * taylor_g) as a polynomial in Δ with per-state coefficients (DPOLY):
 * Δ·g = Δ + (Δ·r)·Δ, r = Σ_k (c_k·a^k)·Δ^(k−1) by Horner's rule in Δ. No
 * x = Δ·a is formed, so an update takes one product fewer than x, g by
 * Horner, then Δ·g (rk4: 4 instructions for 5), and the coefficients
 * d[k] = c_{k+1}·a^(k+1) cost 2·deg − 1 products once per state per tile,
 * amortised over the lane's K = 8 steps (for foh's degree-5 φ1 that cost
 * ate the gain: bench/NOTES.md, variant 57). Rounding: d[k] is rounded
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
__device__ __forceinline__ DCoefs dpoly_coefs(V) { return DCoefs{}; } /* unused: double and complex kernels */
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

/* foh's branches for a state's tile (update_terms' NEAR): the exact path
 * (every method's; for foh φ1 by phi1_from_exp); NEAR, φ1 by phi1_near
 * where every x of the tile is in (−near_max, 0] (float) or (−1/2, 1/2)
 * (double); FAR (float), where every x is at most −1/2 and 1/a is normal. */
enum FohBranch { FOH_EXACT = 0, FOH_NEAR = 1, FOH_FAR = 2 };

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
 * phi1_near and Ā = 1 + x·φ1(x) = e^x, one FMA instead of the exp
 * (bench/NOTES.md, variants 48, 51 and 53); FOH_FAR (foh, a float tile
 * that passed FAST): every x of the state's tile is at most −1/2, and
 * there Δ·φ1 = (e^x − 1)/a from the exp (variant 66). DU
 * (zoh and bilinear, FAST): the input term from du = Δ·u formed once per
 * step, B·du for zoh (g = 1), B·(du·g) for bilinear, a product fewer per
 * update, where run_du_exact holds for the tile: Δ·u may overflow where Δ·g
 * does not (bilinear at Δ = FLT_MAX, g = 2/(Δ·a): golden case
 * fuzz-bilinear-real-delta-flt-max), and there the CPU build's order is
 * taken. */
template <typename T, int M, bool FAST, bool DU, int NEAR, bool DP>
__device__ __forceinline__ void update_terms(T a, T a2, T ia, T dt, T u, T du, T bv, T &ab, T &bb,
                                             const DCoefs &dc) {
    static_assert(!DU || M == ZOH || M == BILINEAR, "B·(Δ·u·g): zoh's and bilinear's fast input term");
    static_assert(NEAR == FOH_EXACT || M == FOH, "the near and far branches are foh's");
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
    } else if constexpr (M == BILINEAR && DU) {
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
     * that the gate's baseline comparison catches a slowdown (README,
     * "Gating kernel changes"). */
    for (int r = 0; r < SSMK_SLOW_WORK; r++) {
        T ab2, g2;
        method_real_m<M>(x * (T(1) + T(r + 1) * T(1e-3)), ab2, g2); /* a perturbed x: not the one above */
        ab = (ab2 == ab2 || ab != ab) ? ab : g2;
    }
#endif
    if constexpr (DU && M == ZOH) {
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
__device__ __forceinline__ void update_terms_c(int method, cplx<T> a, T dt, T u, cplx<T> bv, cplx<T> &ab,
                                               cplx<T> &bb) {
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
    for (int i = 0; i < K; i++)
        ok = ok && isfinite(du[i]) && (fabsf(du[i]) >= lo || dt[i] == T(0) || u[i] == T(0));
    return ok;
}

/* The largest |x| = |Δ·a| of a lane's run for state a, its largest |Δ| being
 * dabs: foh's near test compares it with near_max (NaN compares false, and
 * so does complex A's NaN). */
template <typename T>
__device__ __forceinline__ T run_xmax(T dabs, T a) { return dabs * sabs(a); }
template <typename T>
__device__ __forceinline__ T run_xmax(T, cplx<T>) { return T(NAN); }

/* foh's FAR branch of a float state's tile, whose smallest Δ (≥ 0) is dmin:
 * whether every x = Δ·a (a ≤ 0) of it has |x| ≥ 1/2, where (e^x − 1)/a
 * loses at most a bit to cancellation, and 1/a is normal (far_inv, by one
 * MUFU.RCP). */
__device__ __forceinline__ bool run_far(float dmin, float a) {
    return dmin * fabsf(a) >= 0.5f && fabsf(a) >= 0x1p-100f;
}
template <typename T, typename V>
__device__ __forceinline__ bool run_far(T, V) { return false; }
__device__ __forceinline__ float far_inv(float a) {
#ifdef __CUDA_ARCH__
    return rcp_normal(a);
#else
    return 1.0f / a; /* the host pass only */
#endif
}
template <typename V>
__device__ __forceinline__ V far_inv(V) { return V{}; }

/* Re(C·h): the state's contribution to the output (2·Re Σ for complex A). */
template <typename T>
__device__ __forceinline__ T out_part(T c, T h) { return c * h; }
template <typename T>
__device__ __forceinline__ T out_part(cplx<T> c, cplx<T> h) { return c_times_h(c, h).re; }

/* e^{a·ΣΔ} of a scan window from a·log2e and the window's ΣΔ (EXPSUM in
 * scan_kernel: real float kernels only; the other overload is never used).
 * Below 2^-126 it is 0 where the product of the steps' Ā may be subnormal:
 * an absolute error under 2^-126 of the state it multiplies, which the
 * error model allows (a flushed Ā). */
__device__ __forceinline__ float window_decay(float a2, float w) { return ex2_normal(a2 * w); }
template <typename V>
__device__ __forceinline__ V window_decay(V, float) { return V{}; }

template <typename T>
__device__ __forceinline__ T a_log2e(T a) { return a * T(SSMK_LOG2E_F); }
/* The per-state factor of the fast path's update (the a2 of update_terms):
 * a·log2e for the exp methods, −a/2 for bilinear, whose 1 − x/2 is then one
 * FFMA of Δ, rounded once. */
template <int M, typename T>
__device__ __forceinline__ T a_coef(T a) { if constexpr (M == BILINEAR) return a * T(-0.5); else return a_log2e(a); }
template <int M, typename T>
__device__ __forceinline__ cplx<T> a_coef(cplx<T> a) { return a; } /* unused: complex A takes cexp */

/*
 * The scan, time-parallel: each segment of SEG lanes of a warp runs one row
 * (b, d) (32/SEG rows per warp; SEG = 32 but in the builds that force
 * SSMK_SCAN_SEG); the row's time runs in tiles of SEG·K steps, lane l of the segment
 * holding steps t0 + l·K … t0 + l·K + K − 1 of a tile. For each state n in
 * turn a lane forms its K updates h ← Ā_t·h + b_t (b_t = Δ_t·g_t·B_t·u_t)
 * and composes them into one affine map (Π Ā, h from 0); an inclusive
 * Kogge–Stone scan of those maps over the segment's lanes (log2(SEG)
 * shuffle levels, the state entering the tile composed into its lane 0
 * first) gives each lane the state entering its run, and a second pass over
 * the K stored (Ā, b) adds C_t·h_t to the lane's K outputs. Outputs are
 * sums over states kept in registers — no reduction across lanes — and the
 * only cross-lane work is the scan: log2(SEG) levels per state per K steps.
 * The carry between tiles (zero before the first) is one value per state
 * and row in shared memory, written by the segment's last lane and read by
 * all its lanes. Per tile, one
 * warp vote picks the fast path of the real float kernels (e^x by one
 * MUFU.EX2, and the scan's products of Ā as e^{a·ΣΔ} for poly, highorder
 * and rk4; poly's and rk4's Δ·g as a polynomial in Δ; zoh's B·(Δ·u);
 * bilinear's one reciprocal and B·(Δ·u·g)), and per
 * state foh's near and far branches; the answers are those of the exact path up to
 * rounding. Full tiles run without bounds checks; only
 * the sequence's last, partial tile checks. u, Δ, z and out, each element of
 * which is touched once, move with the evict-first hint (SSMK_STREAM), and
 * each step's softplus is selected rather than branched on (step_dt<true>).
 *
 * The rescan. The scan multiplies Ā over a lane's run and over windows of
 * runs, products that the sequential recurrence never forms, and for an
 * unstable input they can overflow where the state stays finite: Ā = e^388,
 * e^388, then 0 in double, whose product is ∞·0 = NaN while the sequential
 * state is cleared by the 0 (FuzzScan on the H200: poly, complex, fp64).
 * ∞ and NaN survive further products, so every product the scan forms that
 * is not finite leaves its lane's last window product (Ap) not finite: one
 * vote per state finds them, and then the states entering the runs are
 * passed from lane to lane instead — lane j runs its K updates from the
 * state lane j − 1 left, SEG rounds of K FMAs and a shuffle: the sequential
 * recurrence. Where a tile passed its fast vote, every |Ā| ≤ 1 and the vote
 * is left out (bench/NOTES.md, variant 53).
 *
 * bench/NOTES.md records
 * this design's predecessors and timings.
 */
template <typename T, bool CPLX, int M, bool VEC, int SEG>
__global__ void SSMK_SCAN_BOUNDS scan_kernel(const ScanParams p) {
    typedef typename std::conditional<CPLX, cplx<T>, T>::type V;
    static_assert(SEG == 8 || SEG == 16 || SEG == 32, "a row's lanes: a power of two segment of the warp");
    constexpr int K = steps_per_lane(sizeof(V));
    constexpr int TILE = SEG * K;
    constexpr int RPW = 32 / SEG; /* rows per warp */
    constexpr int LEVELS = SEG == 32 ? 5 : SEG == 16 ? 4 : 3;
    constexpr bool FASTEXP = !CPLX && std::is_same<T, float>::value && uses_exp<M>();
    constexpr bool ZOHDU = FASTEXP && M == ZOH;
    /* foh's near branch (update_terms' NEAR): real float tiles that passed
     * the fast vote, and every real double tile, whose exact path evaluates
     * exp() and an IEEE division per update where the near branch needs
     * neither (bench/NOTES.md, variant 51). */
    constexpr bool FOHNEAR = !CPLX && M == FOH;
    /* Bilinear's fast path (real float): where the tile's every x = Δ·a is
     * in [−2^20, 0] (run_stable_above), g = 1/(1 − x/2) is one
     * reciprocal and the input term B·(Δ·u·g) (update_terms). */
    constexpr bool FASTBIL = !CPLX && std::is_same<T, float>::value && M == BILINEAR;
    /* The kernels with a per-tile fast path, decided from the ranges of Δ
     * and a·log2e; those whose fast input term is formed from Δ·u. */
    constexpr bool FASTK = FASTEXP || FASTBIL;
    constexpr bool DUK = ZOHDU || FASTBIL;
    constexpr bool EXPSUM_M = FASTEXP && ((SSMK_EXPSUM_MASK >> M) & 1); /* see EXPSUM in states */
    constexpr bool FOHFAR = FASTEXP && M == FOH && SSMK_FOH_FAR != 0;
    /* Δ·g as a polynomial in Δ on the fast path (dpoly_coefs), where every
     * a of the row allows it (dpoly_row_ok, through a2max) */
    constexpr bool DPK = FASTEXP && ((SSMK_DPOLY_MASK >> M) & 1) && taylor_degree<M>() > 0;
    /* Real float kernels run the state loop unrolled by two, so that the
     * buffers of the next state's loads trade places without copies; those
     * of SSMK_WIDE_MASK hold the next state's C in flight as well as its a
     * and B. Double and complex kernels, whose elements take two or four
     * registers, load C at the start of its own state and run the loop
     * rolled: the wide form cost them 20–35 % (3 blocks per SM instead of 4;
     * bench/NOTES.md). */
    constexpr bool REALF = !CPLX && std::is_same<T, float>::value;
    constexpr bool WIDE = REALF && ((SSMK_WIDE_MASK >> M) & 1);
    constexpr bool LATEC = REALF && !WIDE && ((SSMK_LATEC_MASK >> M) & 1);
    constexpr bool CNEXT = WIDE || LATEC; /* C from the buffers, loaded a state ahead */
    constexpr bool PEEL = REALF && SSMK_UNROLL2 && ((SSMK_PEEL_MASK >> M) & 1);
    constexpr bool PIN = REALF && ((SSMK_PIN_MASK >> M) & 1);
    constexpr bool STREAM = SSMK_STREAM != 0;
    extern __shared__ __align__(16) unsigned char smem[];
    const int lane = (int)(threadIdx.x & 31), warp = (int)(threadIdx.x >> 5);
    const int seg = lane / SEG, sl = lane & (SEG - 1); /* the warp's row segment, the lane in it */
    const long long row0 = ((long long)blockIdx.x * kRows + warp) * RPW;
    if (row0 >= p.rows) return; /* a whole warp: no shuffle is left waiting */
    /* A segment past the last row runs the last row again, storing nothing:
     * its lanes still take part in the warp's shuffles and votes. */
    const bool live = row0 + seg < p.rows;
    const long long row = live ? row0 + seg : p.rows - 1;
    const int L = p.seqlen, N = p.dstate;
    V *carry = reinterpret_cast<V *>(smem) + (warp * RPW + seg) * N;
    const int b = (int)(row / p.dim), d = (int)(row % p.dim);
    const int grp = group_of(d, p.dim, p.n_groups);
    const long long base = row * L;
    const T *u = (const T *)p.u + base, *delta = (const T *)p.delta + base;
    const T *z = p.z ? (const T *)p.z + base : nullptr;
    T *out = (T *)p.out + base;
    const V *A = (const V *)p.A + (long long)d * N;
    const long long vbase = ((long long)b * p.n_groups + grp) * N * L;
    /* variable B, C: element (n, t) at n·L + t from here; fixed: n from Bf, Cf */
    const V *Bv = VEC || p.is_variable_B ? (const V *)p.B + vbase : nullptr;
    const V *Cv = VEC || p.is_variable_C ? (const V *)p.C + vbase : nullptr;
    const V *Bf = (const V *)p.B + (long long)d * N, *Cf = (const V *)p.C + (long long)d * N;

    /* The state before the sequence, and the range of a·log2e over the
     * row's states for the tiles' fast-path test. */
    float a2min = 0.0f, a2max = 0.0f;
    if constexpr (FASTK) {
        a2min = INFINITY, a2max = -INFINITY;
        for (int n = sl; n < N; n += SEG) {
            float a2 = a_log2e(A[n]);
            /* An a that a fast path cannot take sends the row to the exact
             * path (a2 = ∞ fails run_stable_above): bilinear's halves a
             * (a_coef), and a subnormal a's half may round; DPOLY's
             * coefficients need dpoly_row_ok. */
            if (FASTBIL && A[n] != 0.0f && fabsf(A[n]) < 0x1p-125f) a2 = INFINITY;
            if (DPK && !dpoly_row_ok(A[n])) a2 = INFINITY;
            a2min = fminf(a2min, a2);
            a2max = fmaxf(a2max, a2);
        }
#pragma unroll
        for (int off = SEG / 2; off > 0; off >>= 1) {
            a2min = fminf(a2min, __shfl_xor_sync(0xffffffffu, a2min, off, SEG));
            a2max = fmaxf(a2max, __shfl_xor_sync(0xffffffffu, a2max, off, SEG));
        }
    }
    for (int n = sl; n < N; n += SEG) carry[n] = V{};

    auto tile = [&](auto full_tag, const int t0) {
        constexpr bool FULL = decltype(full_tag)::value;
        const int tl = t0 + sl * K; /* this lane's first step */
        const int avail = FULL ? K : L - tl; /* steps of its run inside the sequence (≤ 0: none) */
        __syncwarp(); /* the carries written by each segment's last lane (zeros before the first tile) are visible */
        T dt[K], uu[K], y[K];
        T dmin = T(0), dmax = T(0);
        load_run<T, K, VEC, STREAM>(u + tl, avail, uu);
        {
            T dl[K];
            load_run<T, K, VEC, STREAM>(delta + tl, avail, dl);
#pragma unroll
            for (int i = 0; i < K; i++) {
                /* Past the end Δ = 0 (and below, Ā = 1, b = 0). */
                dt[i] = FULL || i < avail ? step_dt<true>(dl[i], (const T *)p.delta_bias, d, p.softplus) : T(0);
                y[i] = T(0);
                if constexpr (FASTK) {
                    dmin = i == 0 ? dt[0] : fminf(dmin, dt[i]);
                    dmax = i == 0 ? dt[0] : fmaxf(dmax, dt[i]);
                }
            }
        }
        /* the largest |Δ| of the lane's run (foh's near test; a NaN Δ, which
         * this passes over, gives NaN on both branches) */
        T dabs = T(0);
        if constexpr (FOHNEAR && FASTK) {
            dabs = sabs(dmin) > sabs(dmax) ? sabs(dmin) : sabs(dmax);
        } else if constexpr (FOHNEAR) {
#pragma unroll
            for (int i = 0; i < K; i++) dabs = sabs(dt[i]) > dabs ? sabs(dt[i]) : dabs;
        } else {
            (void)dabs;
        }
        /* zoh's and bilinear's fast input terms from Δ·u, formed once per
         * step (see run_du_exact). */
        T du[K] = {};
        if constexpr (DUK) {
#pragma unroll
            for (int i = 0; i < K; i++) du[i] = dt[i] * uu[i];
        }
        /* State n's a and its runs of B and C (or its fixed B and C), from
         * pointers that advance by one state per iteration. */
        const V *bq = Bv ? Bv + tl : Bf, *cq = Cv ? Cv + tl : Cf;
        const long long bstep = Bv ? L : 1, cstep = Cv ? L : 1;
        auto load_b = [&](const V *ap, const V *bs, V &a, V (&bv)[K]) {
            a = *ap;
            if (VEC || Bv) {
                load_run<V, K, VEC>(bs, avail, bv);
            } else {
                const V f = *bs;
#pragma unroll
                for (int i = 0; i < K; i++) bv[i] = f;
            }
        };
        auto load_c = [&](const V *cs, V (&cv)[K]) {
            if (VEC || Cv) {
                load_run<V, K, VEC>(cs, avail, cv);
            } else {
                const V f = *cs;
#pragma unroll
                for (int i = 0; i < K; i++) cv[i] = f;
            }
        };
        auto states = [&](auto fast_tag) {
            constexpr bool FAST = decltype(fast_tag)::value;
            /* EXPSUM: the products of Ā that the scan needs — over a lane's
             * run and over the windows of 2, 4, 8 and 16 runs of its levels —
             * as e^{a·ΣΔ}, one exp2 each of a·log2e times the window's ΣΔ,
             * instead of 7 products per run and a shuffle and a product per
             * level: 10 instructions for 15 and 4 shuffles fewer on the
             * scan's chain, at the price of 5 MUFU.EX2 per state. The ΣΔ are
             * state-independent: summed once per tile, in double and rounded
             * once, so that an exponent carries one rounding, as a single
             * step's does. Taken where Ā = e^x by one MUFU.EX2 (FAST) and the
             * update has arithmetic enough beside its exp that the MUFU pipe
             * has room (SSMK_EXPSUM_MASK: poly, highorder, rk4; zoh was 17 %
             * and foh 27 % slower with it). wsum[k]: the ΣΔ of the 2^k runs
             * ending with this lane's (lanes below 2^k − 1: unused). */
            constexpr bool EXPSUM = EXPSUM_M && FAST;
            float wsum[LEVELS] = {};
            if constexpr (EXPSUM) {
                double w = 0.0;
#pragma unroll
                for (int i = 0; i < K; i++) w += (double)dt[i];
                wsum[0] = (float)w;
#pragma unroll
                for (int k = 1; k < LEVELS; k++) {
                    w += __shfl_up_sync(0xffffffffu, w, 1 << (k - 1), SEG);
                    wsum[k] = (float)w;
                }
            }
            /* The next state's a and B (and C, WIDE; LATEC: after pass 1)
             * are loaded before this state's arithmetic, so that their
             * latency (an L2 round trip: B and C are shared by the batch's
             * rows) overlaps it. The last state loads itself again rather
             * than nothing: a load under a condition would keep the old
             * values by copies. */
            const V *ap = A, *bs = bq, *cs = cq;
            V *cy = carry;
            /* State n: its a, B (and C, CNEXT) from the buffers (ca, cb, cc),
             * the next state's loaded into (na, nb, nc). */
            /* nx, a constant at every call: NEXT_TEST, whether a next state
             * exists is tested (n + 1 < N; the last state loads itself
             * again); NEXT_YES, it does; NEXT_NO, this is the last state and
             * loads nothing. */
            auto state = [&](const int nx, const int n, const V &ca, const V (&cb)[K], const V (&cc)[K], V &na,
                             V (&nb)[K], V (&nc)[K]) {
                const V a = ca;
                V bv[K], cv[K];
#pragma unroll
                for (int i = 0; i < K; i++) bv[i] = cb[i];
                if constexpr (CNEXT) {
#pragma unroll
                    for (int i = 0; i < K; i++) cv[i] = cc[i];
                } else {
                    (void)cc;
                    load_c(cs, cv);
                }
                if (nx == NEXT_YES || (nx == NEXT_TEST && n + 1 < N)) ap += 1, bs += bstep, cs += cstep;
                if (nx != NEXT_NO) {
                    load_b(ap, bs, na, nb);
                    if constexpr (WIDE) load_c(cs, nc);
                }
                /* ptxas does not move a load past a warp barrier: the loads
                 * above are issued here, a state ahead of their use, not
                 * sunk to the end of the loop (SSMK_PIN_MASK) */
                if constexpr (PIN) __syncwarp();
                const V a2 = a_coef<M>(a);
                DCoefs dc{};
                if constexpr (DPK && FAST) dc = dpoly_coefs<M>(a);
                const V hin = *cy; /* the state entering the tile */
                /* Pass 1: the run's updates, and their composition: the map
                 * h ↦ Ap·h + hp of the whole run. */
                V ab[K], bb[K];
                auto pass1 = [&](auto near_tag, const V ia) {
#pragma unroll
                    for (int i = 0; i < K; i++) {
                        step_terms<M, FAST, DUK && FAST, decltype(near_tag)::value, DPK && FAST>(
                            p.method, a, a2, ia, dt[i], uu[i], du[i], bv[i], ab[i], bb[i], dc);
                        /* The steps past the end are made identities here,
                         * not by Δ = 0 alone, which gives x = 0·a = NaN for
                         * an infinite a. */
                        if (!FULL && i >= avail) {
                            ab[i] = vone<V>();
                            bb[i] = V{};
                        }
                    }
                };
                /* foh where every |Δ·a| of the tile is below near_max (in a
                 * float tile that passed FAST every x is ≤ 0 too) takes
                 * phi1_near alone and Ā = 1 + x·φ1: no far branch's
                 * division, no exp; a float state whose every x is at most
                 * −1/2 (run_far) takes FAR: Ā = e^x and Δ·φ1 = (e^x − 1)/a,
                 * no polynomial, division or select. */
                using exact_b = std::integral_constant<int, FOH_EXACT>;
                constexpr bool FARB = FOHFAR && FAST; /* a float tile that passed FAST: every Δ ≥ 0, a ≤ 0 */
                if constexpr (FOHNEAR && (FAST || !FASTK)) {
                    if (__all_sync(0xffffffffu, run_xmax(dabs, a) < near_max<T>()))
                        pass1(std::integral_constant<int, FOH_NEAR>{}, V{});
                    else if (FARB && __all_sync(0xffffffffu, run_far(dmin, a)))
                        pass1(std::integral_constant<int, FARB ? FOH_FAR : FOH_EXACT>{}, far_inv(a));
                    else
                        pass1(exact_b{}, V{});
                } else {
                    pass1(exact_b{}, V{});
                }
                /* LATEC: the next state's C, into the registers this
                 * state's B has left */
                if constexpr (LATEC) {
                    if (nx != NEXT_NO) load_c(cs, nc);
                    if constexpr (PIN) __syncwarp();
                }
                V Ap = ab[0], hp = bb[0];
                V Aw[LEVELS]; /* EXPSUM: Ā's product over the window of scan level k */
                if constexpr (EXPSUM) {
#pragma unroll
                    for (int k = 0; k < LEVELS; k++) Aw[k] = window_decay(a2, wsum[k]);
                    Ap = Aw[0];
                }
#pragma unroll
                for (int i = 1; i < K; i++) {
                    if constexpr (!EXPSUM) Ap = vmul(ab[i], Ap);
                    hp = vfma(ab[i], hp, bb[i]);
                }
                /* Lane 0 composes the state entering the tile into its map —
                 * also h = 0 before the sequence, so that a non-finite Ā of
                 * the first step gives NaN·0 = NaN as the sequential
                 * recurrence does (FuzzScan on the H200: bilinear, complex,
                 * Δ = DBL_MAX gave a finite state without it). */
                if (sl == 0) hp = vfma(Ap, hin, hp);
                /* Inclusive scan of the maps over the lanes: hp becomes the
                 * state after this lane's last step. */
#pragma unroll
                for (int k = 0; k < LEVELS; k++) {
                    const int off = 1 << k;
                    if constexpr (EXPSUM) {
                        const V hq = shfl_up<SEG>(hp, off);
                        if (sl >= off) hp = vfma(Aw[k], hq, hp);
                    } else {
                        const V Aq = off < SEG / 2 ? shfl_up<SEG>(Ap, off) : Ap;
                        const V hq = shfl_up<SEG>(hp, off);
                        if (sl >= off) {
                            hp = vfma(Ap, hq, hp);
                            if (off < SEG / 2) Ap = vmul(Ap, Aq);
                        }
                    }
                }
                /* The state entering the lane's run: from the scan, or
                 * where the scan formed a product of Ā that is not finite,
                 * from the previous lane's run, lane by lane (the rescan:
                 * see the kernel's comment). */
                V h;
                if (FAST || !__any_sync(0xffffffffu, !vfinite(Ap))) {
                    h = shfl_up<SEG>(hp, 1);
                    if (sl == 0) h = hin;
                } else {
                    /* hp: the state entering lane j's run, then leaving it */
                    hp = hin;
                    h = hin;
#pragma unroll 1
                    for (int j = 0; j < SEG; j++) {
                        if (sl == j) h = hp;
                        V t = h;
#pragma unroll
                        for (int i = 0; i < K; i++) t = vfma(ab[i], t, bb[i]);
                        hp = shfl_from<SEG>(t, j);
                    }
                }
                /* Pass 2: the states of the run from the state entering it. */
                __syncwarp(); /* every lane has read carry[n] before its segment's last lane replaces it */
                if (sl == SEG - 1) *cy = hp;
                cy++;
#pragma unroll
                for (int i = 0; i < K; i++) {
                    h = vfma(ab[i], h, bb[i]);
                    y[i] += out_part(cv[i], h);
                }
            };
            V a0, b0[K], c0[K];
            load_b(ap, bs, a0, b0);
            if constexpr (CNEXT) load_c(cs, c0);
            if constexpr (REALF && SSMK_UNROLL2) {
                /* two states per iteration, written out: the buffers trade
                 * places by the call, not by copies (see SSMK_UNROLL2) */
                V a1, b1[K], c1[K];
                /* PEEL: the pairs with a state after them, then the last one
                 * or two states, with no test or select per state for the
                 * next state's pointers; else every pair, then the odd
                 * state, each testing */
                constexpr int mid = PEEL ? NEXT_YES : NEXT_TEST, last = PEEL ? NEXT_NO : NEXT_TEST;
                int n = 0;
#pragma unroll 1
                for (; n + (PEEL ? 3 : 2) <= N; n += 2) {
                    state(mid, n, a0, b0, c0, a1, b1, c1);
                    state(mid, n + 1, a1, b1, c1, a0, b0, c0);
                }
                if (PEEL && n + 2 <= N) {
                    state(mid, n, a0, b0, c0, a1, b1, c1);
                    state(last, n + 1, a1, b1, c1, a0, b0, c0);
                } else if (PEEL || n < N) { /* PEEL: N − n is 1 here */
                    state(last, n, a0, b0, c0, a1, b1, c1);
                }
            } else {
#pragma unroll(REALF ? 2 : 1)
                for (int n = 0; n < N; n++)
                    state(NEXT_TEST, n, a0, b0, c0, a0, b0, c0);
            }
        };
        if constexpr (FASTK && FULL) {
            bool fast = run_stable_above(dmin, dmax, a2min, a2max, FASTBIL ? -0x1p20f : -126.0f);
            if constexpr (DUK) fast = fast && run_du_exact(dt, uu, du, T(FASTBIL ? 0x1p-100f : FLT_MIN));
            /* EXPSUM's ΣΔ of up to 32 runs must stay finite in float: a = 0
             * would give 0·∞ = NaN where the products are 1. */
            if constexpr (EXPSUM_M) fast = fast && fabsf(dmin) < 1e36f && fabsf(dmax) < 1e36f;
            if (__all_sync(0xffffffffu, fast))
                states(std::true_type{});
            else
                states(std::false_type{});
        } else {
            (void)dmin, (void)dmax, (void)a2min, (void)a2max;
            states(std::false_type{});
        }
        if (live && (FULL || avail > 0)) {
            T zz[K] = {}, o[K];
            if (z) load_run<T, K, VEC, STREAM>(z + tl, avail, zz);
#pragma unroll
            for (int i = 0; i < K; i++) {
                const T yy = CPLX ? complex_output(y[i]) : y[i];
                o[i] = finish_output(yy, uu[i], (const T *)p.D, d, z != nullptr, zz[i]);
            }
            store_run<T, K, VEC, STREAM>(out + tl, avail, o);
        }
    };
    int t0 = 0;
    for (; t0 + TILE <= L; t0 += TILE) tile(std::true_type{}, t0);
    if (t0 < L) tile(std::false_type{}, t0);
    if (p.last_state && live) {
        /* The segment's last lane's state after the last tile is the state
         * after step L − 1 (the steps past the end are identities). */
        __syncwarp();
        V *s = (V *)p.last_state + row * N;
        for (int n = sl; n < N; n += SEG) s[n] = carry[n];
    }
}

template <typename T, bool CPLX>
__global__ void discretize_kernel(int method, long long n, const T *delta, const void *A, void *abar, void *bcoef) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const T dl = delta[i];
        if constexpr (CPLX) {
            cplx<T> ab, g;
            method_complex(method, cscale(((const cplx<T> *)A)[i], dl), ab, g);
            ((cplx<T> *)abar)[i] = ab;
            ((cplx<T> *)bcoef)[i] = cscale(g, dl);
        } else {
            T ab, g;
            method_real(method, dl * ((const T *)A)[i], ab, g);
            ((T *)abar)[i] = ab;
            ((T *)bcoef)[i] = dl * g;
        }
    }
}

/* ---- launchers ---- */

/* Rows per block of a scan with SEG lanes per row, and the bytes of their
 * carries (the kernel's dynamic shared memory). */
constexpr int rows_per_block(int seg) { return kRows * (32 / seg); }
size_t carry_bytes(int seg, const ScanParams &p, size_t velem) {
    return (size_t)rows_per_block(seg) * p.dstate * velem;
}

/* Two instantiations per method and width: the Mamba case (variable B and
 * C, every row of u, Δ, z, out, B and C a run of 16-byte words) and every
 * other case, which tests each flag at run time and loads element by
 * element. */
template <typename T, bool CPLX, int M, int SEG>
void launch_scan_seg(const ScanParams &p, bool vec, size_t velem, cudaStream_t s) {
    constexpr int RPB = rows_per_block(SEG);
    const dim3 grid((unsigned)((p.rows + RPB - 1) / RPB));
    const size_t smem = carry_bytes(SEG, p, velem);
    if (vec)
        scan_kernel<T, CPLX, M, true, SEG><<<grid, 32 * kRows, smem, s>>>(p);
    else
        scan_kernel<T, CPLX, M, false, SEG><<<grid, 32 * kRows, smem, s>>>(p);
}

/* The carries of a block of narrow rows must fit the 48 KiB of dynamic
 * shared memory a launch gets without opting in: 16 rows of 256 complex
 * double states do not (a forced SSMK_SCAN_SEG=8 build; FuzzScan). */
constexpr size_t kMaxCarryBytes = 48 * 1024;

template <typename T, bool CPLX, int M>
void launch_scan_m(const ScanParams &p, bool vec, size_t velem, cudaStream_t s) {
    /* Every method runs 32 lanes per row. A narrower scan has fewer shuffle
     * levels per state but 32/SEG rows per warp, so 32/SEG times fewer
     * warps; bilinear (8 lanes) and poly (16) gained from it on large grids
     * while their updates were longer, and lost it when the updates got
     * shorter: bilinear 1288 µs with 8 lanes against 1113 µs with 32 at
     * 8×2048×4096×16 on the H200 (bench/NOTES.md, variants 31–34, 45, 47).
     * SSMK_SCAN_SEG=8 or 16 forces a narrow scan on every launch whose
     * carries fit (scripts/gpu.sh run tests those builds). */
    constexpr int NS = SSMK_SCAN_SEG;
    if constexpr (NS != 0 && NS != 32) {
        if (carry_bytes(NS, p, velem) <= kMaxCarryBytes) return launch_scan_seg<T, CPLX, M, NS>(p, vec, velem, s);
    }
    launch_scan_seg<T, CPLX, M, 32>(p, vec, velem, s);
}

template <typename T, bool CPLX>
void launch_scan_t(const ScanParams &p, bool vec, size_t velem, cudaStream_t s) {
    /* The switch sits in the else branch so that complex kernels are not
     * instantiated once per method (code after an if-constexpr return is). */
    if constexpr (CPLX) {
        launch_scan_m<T, CPLX, -1>(p, vec, velem, s);
    } else {
        switch (p.method) {
        case ZOH:
            return launch_scan_m<T, CPLX, ZOH>(p, vec, velem, s);
        case FOH:
            return launch_scan_m<T, CPLX, FOH>(p, vec, velem, s);
        case BILINEAR:
            return launch_scan_m<T, CPLX, BILINEAR>(p, vec, velem, s);
        case POLY:
            return launch_scan_m<T, CPLX, POLY>(p, vec, velem, s);
        case HIGHORDER:
            return launch_scan_m<T, CPLX, HIGHORDER>(p, vec, velem, s);
        default:
            return launch_scan_m<T, CPLX, RK4>(p, vec, velem, s);
        }
    }
}

bool aligned16(const void *q) { return ((uintptr_t)q & 15) == 0; }

int32_t launch_scan(const ssmk_scan_args &a, cudaStream_t s) {
    ScanParams p;
    p.batch = a.batch;
    p.dim = a.dim;
    p.seqlen = a.seqlen;
    p.dstate = a.dstate;
    p.n_groups = a.n_groups;
    p.method = a.method;
    p.is_variable_B = a.is_variable_B;
    p.is_variable_C = a.is_variable_C;
    p.softplus = a.delta_softplus;
    p.rows = (long long)a.batch * a.dim;
    p.u = a.u;
    p.delta = a.delta;
    p.A = a.A;
    p.B = a.B;
    p.C = a.C;
    p.D = a.D;
    p.z = a.z;
    p.delta_bias = a.delta_bias;
    p.out = a.out;
    p.last_state = a.last_state;
    const size_t elem = a.dtype == SSMK_F64 ? 8 : 4, velem = elem * (a.is_complex ? 2 : 1);
    /* 16-byte runs need every run to start on a multiple of K elements
     * (seqlen a multiple of K) and 16-byte aligned arrays (device buffers
     * from cudaMalloc are 256-byte aligned). */
    const int K = steps_per_lane(velem);
    const bool vec = a.is_variable_B && a.is_variable_C && a.seqlen % K == 0 && aligned16(a.u) &&
                     aligned16(a.delta) && aligned16(a.out) && (!a.z || aligned16(a.z)) && aligned16(a.B) &&
                     aligned16(a.C);
    if (a.dtype == SSMK_F64) {
        if (a.is_complex)
            launch_scan_t<double, true>(p, vec, velem, s);
        else
            launch_scan_t<double, false>(p, vec, velem, s);
    } else {
        if (a.is_complex)
            launch_scan_t<float, true>(p, vec, velem, s);
        else
            launch_scan_t<float, false>(p, vec, velem, s);
    }
    CU(cudaGetLastError());
    return SSMK_OK;
}

int32_t launch_discretize(int32_t method, int32_t dtype, int32_t is_complex, int64_t n, const void *delta,
                          const void *A, void *abar, void *bcoef, cudaStream_t s) {
    long long blocks = (n + 255) / 256;
    dim3 grid((unsigned)(blocks < 65535 * 16 ? blocks : 65535 * 16));
    if (dtype == SSMK_F64) {
        if (is_complex)
            discretize_kernel<double, true><<<grid, 256, 0, s>>>(method, n, (const double *)delta, A, abar, bcoef);
        else
            discretize_kernel<double, false><<<grid, 256, 0, s>>>(method, n, (const double *)delta, A, abar, bcoef);
    } else {
        if (is_complex)
            discretize_kernel<float, true><<<grid, 256, 0, s>>>(method, n, (const float *)delta, A, abar, bcoef);
        else
            discretize_kernel<float, false><<<grid, 256, 0, s>>>(method, n, (const float *)delta, A, abar, bcoef);
    }
    CU(cudaGetLastError());
    return SSMK_OK;
}

} /* namespace */

/* A plan owns device buffers, a stream and two events. */
struct ssmk_plan {
    bool is_scan = false, launched = false;
    ssmk_scan_args dargs{}; /* device pointers */
    ScanSizes sz{};
    int32_t method = 0, dtype = 0, is_complex = 0;
    int64_t n = 0;
    void *d_delta = nullptr, *d_A = nullptr, *d_abar = nullptr, *d_bcoef = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t ev0 = nullptr, ev1 = nullptr;
    std::vector<void *> dbufs;

    ~ssmk_plan() {
        if (stream) cudaStreamSynchronize(stream);
        for (void *p : dbufs) cudaFree(p);
        if (ev0) cudaEventDestroy(ev0);
        if (ev1) cudaEventDestroy(ev1);
        if (stream) cudaStreamDestroy(stream);
    }

    int32_t init() {
        CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        CU(cudaEventCreate(&ev0));
        CU(cudaEventCreate(&ev1));
        return SSMK_OK;
    }

    /* A device copy of host array src (count elements of elem bytes), or
     * nullptr for an absent one. */
    int32_t upload(const void *src, int64_t count, size_t elem, const void **dst) {
        *dst = nullptr;
        if (!src) return SSMK_OK;
        void *p = nullptr;
        CU(cudaMalloc(&p, (size_t)count * elem));
        dbufs.push_back(p);
        CU(cudaMemcpyAsync(p, src, (size_t)count * elem, cudaMemcpyHostToDevice, stream));
        *dst = p;
        return SSMK_OK;
    }

    int32_t alloc(int64_t count, size_t elem, void **dst) {
        CU(cudaMalloc(dst, (size_t)count * elem));
        dbufs.push_back(*dst);
        return SSMK_OK;
    }
};

namespace {

int32_t plan_scan(const ssmk_scan_args *args, ssmk_plan **out) {
    ssmk_plan *p = new (std::nothrow) ssmk_plan;
    if (!p) return fail(SSMK_ENOMEM, "out of host memory for the plan");
    p->is_scan = true;
    p->dargs = *args;
    p->sz = scan_sizes(args);
    const ScanSizes &s = p->sz;
    int32_t st = p->init();
    const struct {
        const void *src;
        int64_t count;
        const void **dst;
    } ins[] = {{args->u, s.seq, &p->dargs.u},         {args->delta, s.seq, &p->dargs.delta},
               {args->A, s.a, &p->dargs.A},           {args->B, s.b, &p->dargs.B},
               {args->C, s.c, &p->dargs.C},           {args->D, s.dim, &p->dargs.D},
               {args->z, s.seq, &p->dargs.z},         {args->delta_bias, s.dim, &p->dargs.delta_bias}};
    for (auto &in : ins)
        if (!st) st = p->upload(in.src, in.count, s.elem, in.dst);
    if (!st) st = p->alloc(s.seq, s.elem, &p->dargs.out);
    if (!st) st = p->alloc(s.state, s.elem, &p->dargs.last_state);
    if (!st) {
        cudaError_t e = cudaStreamSynchronize(p->stream); /* host inputs may be freed after return */
        if (e != cudaSuccess) st = cuda_fail(e, "cudaStreamSynchronize(upload)");
    }
    if (st) {
        delete p;
        return st;
    }
    *out = p;
    return SSMK_OK;
}

int32_t fetch(ssmk_plan *p, void *out, void *last_state) {
    CU(cudaStreamSynchronize(p->stream));
    if (p->is_scan) {
        CU(cudaMemcpy(out, p->dargs.out, (size_t)p->sz.seq * p->sz.elem, cudaMemcpyDeviceToHost));
        if (last_state)
            CU(cudaMemcpy(last_state, p->dargs.last_state, (size_t)p->sz.state * p->sz.elem, cudaMemcpyDeviceToHost));
        return SSMK_OK;
    }
    size_t bytes = (size_t)p->n * (p->is_complex ? 2 : 1) * (p->dtype == SSMK_F64 ? 8 : 4);
    CU(cudaMemcpy(out, p->d_abar, bytes, cudaMemcpyDeviceToHost));
    if (last_state) CU(cudaMemcpy(last_state, p->d_bcoef, bytes, cudaMemcpyDeviceToHost));
    return SSMK_OK;
}

int32_t launch(ssmk_plan *p) {
    if (p->is_scan) return launch_scan(p->dargs, p->stream);
    return launch_discretize(p->method, p->dtype, p->is_complex, p->n, p->d_delta, p->d_A, p->d_abar, p->d_bcoef,
                             p->stream);
}

} /* namespace */

extern "C" {

SSMK_API int32_t ssmk_abi_version(void) { return SSMK_ABI_VERSION; }

SSMK_API const char *ssmk_backend(void) { return "cuda"; }

SSMK_API int32_t ssmk_device_name(char *buf, int32_t len) {
    if (int32_t st = validate_name_buffer(buf, len)) return st;
    int32_t st = ensure_device();
    if (st) return st;
    int dev = 0;
    CU(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, dev));
    snprintf(buf, (size_t)len, "%s (sm_%d%d)", prop.name, prop.major, prop.minor);
    return SSMK_OK;
}

SSMK_API int32_t ssmk_max_dstate(void) { return SSMK_MAX_DSTATE; }

SSMK_API uint32_t ssmk_capabilities(int32_t method, int32_t dtype, int32_t is_complex) {
    return native_capabilities(method, dtype, is_complex);
}

/* The CUDA build uses one host thread: the value is recorded and returned,
 * and has no effect on the kernels (Check3 verifies that). */
static int g_threads = 1;

SSMK_API int32_t ssmk_set_num_threads(int32_t n) {
    int prev = __atomic_load_n(&g_threads, __ATOMIC_RELAXED);
    if (n > 0) __atomic_store_n(&g_threads, n, __ATOMIC_RELAXED);
    return prev;
}

SSMK_API const char *ssmk_last_error(void) { return error_buffer(); }

SSMK_API int32_t ssmk_plan_create(const ssmk_scan_args *args, ssmk_plan **plan) {
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    int32_t st = validate_scan(args, SSMK_MAX_DSTATE);
    if (st) return st;
    st = ensure_device();
    if (st) return st;
    return plan_scan(args, plan);
}

SSMK_API int32_t ssmk_plan_create_discretize(int32_t method, int32_t dtype, int32_t is_complex, int64_t n,
                                             const void *delta, const void *A, ssmk_plan **plan) {
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    int32_t st = validate_discretize(method, dtype, is_complex, n, delta, A, plan, plan);
    if (st) return st;
    st = ensure_device();
    if (st) return st;
    ssmk_plan *p = new (std::nothrow) ssmk_plan;
    if (!p) return fail(SSMK_ENOMEM, "out of host memory for the plan");
    p->method = method;
    p->dtype = dtype;
    p->is_complex = is_complex;
    p->n = n;
    size_t elem = dtype == SSMK_F64 ? 8 : 4;
    int64_t cw = is_complex ? 2 : 1;
    st = p->init();
    const void *dd = nullptr, *da = nullptr;
    if (!st) st = p->upload(delta, n, elem, &dd);
    if (!st) st = p->upload(A, n * cw, elem, &da);
    if (!st) st = p->alloc(n * cw, elem, &p->d_abar);
    if (!st) st = p->alloc(n * cw, elem, &p->d_bcoef);
    if (!st) {
        cudaError_t e = cudaStreamSynchronize(p->stream);
        if (e != cudaSuccess) st = cuda_fail(e, "cudaStreamSynchronize(upload)");
    }
    if (st) {
        delete p;
        return st;
    }
    p->d_delta = (void *)dd;
    p->d_A = (void *)da;
    *plan = p;
    return SSMK_OK;
}

SSMK_API int32_t ssmk_plan_launch(ssmk_plan *p) {
    if (!p) return fail(SSMK_EINVAL, "plan is NULL");
    int32_t st = launch(p);
    if (!st) p->launched = true;
    return st;
}

SSMK_API int32_t ssmk_plan_sync(ssmk_plan *p) {
    if (!p) return fail(SSMK_EINVAL, "plan is NULL");
    CU(cudaStreamSynchronize(p->stream));
    return SSMK_OK;
}

SSMK_API int32_t ssmk_plan_time(ssmk_plan *p, int32_t iters, double *ms_total) {
    int32_t st = validate_plan_time(p, iters, ms_total);
    if (st) return st;
    CU(cudaEventRecord(p->ev0, p->stream));
    for (int32_t i = 0; i < iters; i++) {
        st = launch(p);
        if (st) return st;
    }
    p->launched = true;
    CU(cudaEventRecord(p->ev1, p->stream));
    CU(cudaEventSynchronize(p->ev1));
    float ms = 0;
    CU(cudaEventElapsedTime(&ms, p->ev0, p->ev1));
    *ms_total = ms;
    return SSMK_OK;
}

SSMK_API int32_t ssmk_plan_fetch(ssmk_plan *p, void *out, void *last_state) {
    if (int32_t st = validate_fetch(p, out, p && p->launched)) return st;
    return fetch(p, out, last_state);
}

SSMK_API void ssmk_plan_destroy(ssmk_plan *p) { delete p; }

SSMK_API int32_t ssmk_discretize(int32_t method, int32_t dtype, int32_t is_complex, int64_t n, const void *delta,
                                 const void *A, void *Abar, void *Bcoef) {
    int32_t st = validate_discretize(method, dtype, is_complex, n, delta, A, Abar, Bcoef);
    if (st) return st;
    ssmk_plan *p = nullptr;
    st = ssmk_plan_create_discretize(method, dtype, is_complex, n, delta, A, &p);
    if (!st) st = ssmk_plan_launch(p);
    if (!st) st = fetch(p, Abar, Bcoef);
    ssmk_plan_destroy(p);
    return st;
}

SSMK_API int32_t ssmk_scan_fwd(const ssmk_scan_args *args) {
    int32_t st = validate_scan(args, SSMK_MAX_DSTATE);
    if (st) return st;
    ssmk_plan *p = nullptr;
    st = ssmk_plan_create(args, &p);
    if (!st) st = ssmk_plan_launch(p);
    if (!st) st = fetch(p, args->out, args->last_state);
    ssmk_plan_destroy(p);
    return st;
}

SSMK_API int32_t ssmk_copy_bandwidth(int64_t bytes, int32_t iters, double *gbytes_per_s) {
    if (int32_t st = validate_copy_bandwidth(bytes, iters, gbytes_per_s)) return st;
    int32_t st = ensure_device();
    if (st) return st;
    ssmk_plan p; /* for its stream, events and buffer bookkeeping */
    st = p.init();
    void *src = nullptr, *dst = nullptr;
    if (!st) st = p.alloc(bytes, 1, &src);
    if (!st) st = p.alloc(bytes, 1, &dst);
    if (st) return st;
    CU(cudaMemsetAsync(src, 1, (size_t)bytes, p.stream));
    CU(cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDeviceToDevice, p.stream)); /* warm-up */
    CU(cudaEventRecord(p.ev0, p.stream));
    for (int32_t i = 0; i < iters; i++)
        CU(cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDeviceToDevice, p.stream));
    CU(cudaEventRecord(p.ev1, p.stream));
    CU(cudaEventSynchronize(p.ev1));
    float ms = 0;
    CU(cudaEventElapsedTime(&ms, p.ev0, p.ev1));
    *gbytes_per_s = ms > 0 ? 2.0 * (double)bytes * iters / ((double)ms * 1e6) : 0;
    return SSMK_OK;
}

} /* extern "C" */

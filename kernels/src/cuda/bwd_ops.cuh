/*
 * bwd_ops.cuh — the backward kernel's building blocks (backward.cu): affine
 * maps x → a·x + b and their scans over a warp in both directions, shuffles
 * and atomics of real or complex values, each method's coefficients (Ā, g)
 * with their derivatives at x = a·Δ (the method known at compile time),
 * vector loads from shared memory, and the in-order sum over batch of
 * per-row partials.
 *
 * A recurrence x_t = a_t·x_{t−1} + b_t is the composition of the maps
 * (a_t, b_t); composition is associative, so a warp scans its lanes' maps
 * in log2(32) steps: forward, lane i ends with lanes 0..i composed (lane 0's
 * first), and backward, lane i with lanes 31..i (lane 31's first), as the
 * adjoint runs from the end of the sequence.
 */
#ifndef SSMK_BWD_OPS_CUH
#define SSMK_BWD_OPS_CUH

#include <cuda_runtime.h>
#include <float.h>

#include <type_traits>

#include "../ssmk_derivs.h"
#include "../ssmk_methods.h"
#include "scan_policy.cuh"
#include "static_switch.cuh"

namespace ssmk {
namespace bwd {

/* An affine map x → a·x + b. */
template <typename V>
struct Aff {
    V a, b;
};

template <typename V>
__device__ __forceinline__ Aff<V> aff_id() {
    return Aff<V>{vone(V{}), V{}};
}
/* first, then second: x → s.a·(f.a·x + f.b) + s.b */
template <typename V>
__device__ __forceinline__ Aff<V> then(Aff<V> f, Aff<V> s) {
    return Aff<V>{vmul(s.a, f.a), vadd(vmul(s.a, f.b), s.b)};
}
template <typename V>
__device__ __forceinline__ V apply(Aff<V> f, V x) {
    return vadd(vmul(f.a, x), f.b);
}

/* A full-warp shuffle (op on one real word) of a real or complex value. */
template <typename T, typename Op>
__device__ __forceinline__ T shuffle(T v, Op op) {
    return op(v);
}
template <typename T, typename Op>
__device__ __forceinline__ cplx<T> shuffle(cplx<T> v, Op op) {
    return cmake(op(v.re), op(v.im));
}
template <typename V>
__device__ __forceinline__ V sh_up(V v, int o) {
    return shuffle(v, [o](auto x) { return __shfl_up_sync(0xffffffffu, x, o); });
}
template <typename V>
__device__ __forceinline__ V sh_down(V v, int o) {
    return shuffle(v, [o](auto x) { return __shfl_down_sync(0xffffffffu, x, o); });
}
template <typename V>
__device__ __forceinline__ V sh_xor(V v, int o) {
    return shuffle(v, [o](auto x) { return __shfl_xor_sync(0xffffffffu, x, o); });
}
template <typename V>
__device__ __forceinline__ V warp_sum(V v) {
    for (int o = 16; o > 0; o /= 2) v = vadd(v, sh_xor(v, o));
    return v;
}

/* Inclusive scans of affine maps over a warp: forward (lane 31 ends with
 * the warp's composition) and backward (lane 0 does, lane 31's map first). */
template <typename V>
__device__ __forceinline__ Aff<V> scan_fwd(Aff<V> x, int lane) {
    for (int o = 1; o < 32; o *= 2) {
        const Aff<V> y{sh_up(x.a, o), sh_up(x.b, o)};
        if (lane >= o) x = then(y, x);
    }
    return x;
}
template <typename V>
__device__ __forceinline__ Aff<V> scan_bwd(Aff<V> x, int lane) {
    for (int o = 1; o < 32; o *= 2) {
        const Aff<V> y{sh_down(x.a, o), sh_down(x.b, o)};
        if (lane + o < 32) x = then(y, x);
    }
    return x;
}
/* The exclusive value of an inclusive scan: the neighbour's (identity at the edge). */
template <typename V>
__device__ __forceinline__ Aff<V> excl_fwd(Aff<V> x, int lane) {
    const Aff<V> y{sh_up(x.a, 1), sh_up(x.b, 1)};
    return lane == 0 ? aff_id<V>() : y;
}
template <typename V>
__device__ __forceinline__ Aff<V> excl_bwd(Aff<V> x, int lane) {
    const Aff<V> y{sh_down(x.a, 1), sh_down(x.b, 1)};
    return lane == 31 ? aff_id<V>() : y;
}

/* Four consecutive floats added to global memory by one 16-byte reduction
 * (sm_90, PTX 8.1), elsewhere by four. p must be 16-byte aligned. */
__device__ __forceinline__ void red_add4(float *p, const float (&v)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 &&                                                                  \
    (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 1))
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(__cvta_generic_to_global(p)), "f"(v[0]),
                 "f"(v[1]), "f"(v[2]), "f"(v[3])
                 : "memory");
#else
    for (int e = 0; e < 4; e++) atomicAdd(p + e, v[e]);
#endif
}

template <typename T, typename V>
__device__ __forceinline__ void atomic_addv(V *p, V v) {
    if constexpr (std::is_same<T, V>::value) {
        atomicAdd(p, v);
    } else {
        atomicAdd(&p->re, v.re);
        atomicAdd(&p->im, v.im);
    }
}

/* (Ā, g) of method M at x = a·Δ, and with their derivatives in x. */
template <int M, typename T>
__device__ __forceinline__ void coef(T a, T dt, T &ab, T &g) {
    method_real_m<M>(a * dt, ab, g);
}
template <int M, typename T>
__device__ __forceinline__ void coef(cplx<T> a, T dt, cplx<T> &ab, cplx<T> &g) {
    method_complex(M, cscale(a, dt), ab, g);
}
/* The least and greatest Δ of a thread's run of steps (with 0), and the
 * least |Δ| (0 where the run has a step past seqlen). */
template <typename T>
struct DtRange {
    T lo, hi, mabs;
};

/* foh's branch for a thread's run of one state (FohBranch), whose φ1 and
 * φ1' are a series below |x| = 1/2 and a quotient above (phi1_from_exp,
 * dphi1): FOH_NEAR and FOH_FAR where all steps agree, FOH_EXACT where each
 * step chooses (and for every other method, and complex A). Decided from
 * the run's Δ: |a|·max|Δ| < 1/2, or |a|·min|Δ| ≥ 1/2; rounding is monotone,
 * so every step's |a·Δ| lies on the same side, and a branch computes the
 * values the per-step choice selects, without the other side's arithmetic.
 * A NaN, which the range passes over, is NaN on either side. */
template <int M, typename V, typename T>
__device__ __forceinline__ FohBranch run_branch(V a, DtRange<T> r) {
    if constexpr (MethodPolicy<M>::kFohBranches && std::is_same<V, T>::value) {
        const T aa = fabs(a);
        if (aa * fmax(-r.lo, r.hi) < T(0.5)) return FOH_NEAR;
        if (aa * r.mabs >= T(0.5)) return FOH_FAR;
    }
    (void)a, (void)r;
    return FOH_EXACT;
}

/* (Ā, g) of method M at real x given e = e^x, on a run of branch Br. */
template <int M, int Br, typename T>
__device__ __forceinline__ void coef_e(T x, T e, T &ab, T &g) {
    if constexpr (MethodPolicy<M>::kFohBranches && Br == FOH_NEAR) {
        ab = e, g = phi1_series(x);
    } else if constexpr (MethodPolicy<M>::kFohBranches && Br == FOH_FAR) {
        ab = e, g = sdiv(e - T(1), x);
    } else {
        method_real_e<M>(x, e, ab, g);
    }
}

/* (Ā, g) of method M for a thread's run of K steps of one state. For real
 * float A, where every step's exponent Δ·a2 (a2 = a·log2e) is at least
 * −126 — the least of lo·a2 and hi·a2, a finite — e^x is ex2_normal(Δ·a2),
 * exp2f's value in one instruction for its five, as the forward kernel's
 * fast path forms it; elsewhere the CPU build's sexp(Δ·a). A NaN Δ, which
 * the range passes over, gives NaN on both paths. */
template <int M, int Br, typename T, int K>
__device__ __forceinline__ void run_coefs(T a, DtRange<T> range, const T (&dt)[K], T (&ab)[K], T (&g)[K]) {
    if constexpr (std::is_same<T, float>::value && uses_exp<M>()) {
        const float a2 = a * SSMK_LOG2E_F;
        if (fabsf(a2) <= FLT_MAX && fminf(range.lo * a2, range.hi * a2) >= -126.0f) {
#pragma unroll
            for (int k = 0; k < K; k++) coef_e<M, Br>(a * dt[k], ex2_normal(dt[k] * a2), ab[k], g[k]);
            return;
        }
    }
#pragma unroll
    for (int k = 0; k < K; k++) coef_e<M, Br>(a * dt[k], uses_exp<M>() ? sexp(a * dt[k]) : T(0), ab[k], g[k]);
}
template <int M, int Br, typename T, int K>
__device__ __forceinline__ void run_coefs(cplx<T> a, DtRange<T>, const T (&dt)[K], cplx<T> (&ab)[K], cplx<T> (&g)[K]) {
#pragma unroll
    for (int k = 0; k < K; k++) coef<M>(a, dt[k], ab[k], g[k]);
}
/* The same on a run of branch br, known at run time. */
template <int M, typename T, int K, typename V>
__device__ __forceinline__ void run_coefs_on(FohBranch br, V a, DtRange<T> range, const T (&dt)[K], V (&ab)[K],
                                             V (&g)[K]) {
    foh_branch_switch(br, [&](auto b) { run_coefs<M, decltype(b)::value, T, K>(a, range, dt, ab, g); });
}

/* Whether the gradient pass takes g from the forward pass, kept in
 * registers, rather than forming it again: foh's in double (a degree-13
 * series or a division, where the kernels hold 178–238 registers at one
 * block per SM) and for complex A (e^Re z, sin, cos, expm1 and a division;
 * the float kernel still fits two blocks). Float real foh's φ1 is cheap and
 * that kernel is at 128: it forms g again (kept in shared memory, it was
 * slower, docs/performance.md). The kept g is the value the gradient pass
 * would form (the same function of the same x): the gradients are the same. */
template <int M, typename V>
constexpr bool keeps_g() {
    return MethodPolicy<M>::kBwdKeepsG && !std::is_same<V, float>::value;
}

/* g and the derivatives at x = a·Δ, given Ā there (ab, as coef formed it),
 * and g too where keeps_g: a method whose Ā is e^x takes it for its
 * exponential, which is then not evaluated again; foh on a run of one
 * branch Br only that side's. */
template <int M, int Br, typename T>
__device__ __forceinline__ void coef_d(T a, T dt, T ab, T &g, T &dab, T &dg) {
    const T x = a * dt;
    constexpr bool kept = keeps_g<M, T>();
    if constexpr (MethodPolicy<M>::kFohBranches && Br == FOH_NEAR) {
        if constexpr (!kept) g = phi1_series(x);
        dab = ab, dg = dphi1_series(x);
    } else if constexpr (MethodPolicy<M>::kFohBranches && Br == FOH_FAR) {
        if constexpr (!kept) g = sdiv(ab - T(1), x);
        dab = ab, dg = sdiv(ab - g, x);
    } else if constexpr (kept) {
        method_real_deriv(M, x, ab, g, dab, dg); /* foh's Ā is e^x = ab */
    } else {
        T abar;
        method_real_e<M>(x, uses_exp<M>() ? ab : T(0), abar, g);
        method_real_deriv(M, x, abar, g, dab, dg);
    }
}
/* Complex A: Ā is the forward pass's (the same function of the same x), and
 * g too where keeps_g (the caller passes it in); otherwise g is formed
 * again, inline (a polynomial or a quotient). */
template <int M, int Br, typename T>
__device__ __forceinline__ void coef_d(cplx<T> a, T dt, cplx<T> ab, cplx<T> &g, cplx<T> &dab, cplx<T> &dg) {
    const cplx<T> x = cscale(a, dt);
    if constexpr (!keeps_g<M, cplx<T>>()) g = method_complex_g<M>(x);
    method_complex_deriv_m<M>(x, ab, g, dab, dg);
}

/* K values from a 16-byte aligned run in shared memory, in 16-byte vectors. */
template <typename T, int K>
__device__ __forceinline__ void sload(const T *seg, T (&v)[K]) {
    if constexpr (sizeof(T) == 4 && K % 4 == 0) {
#pragma unroll
        for (int i = 0; i < K / 4; i++) {
            const float4 x = reinterpret_cast<const float4 *>(seg)[i];
            v[4 * i] = x.x, v[4 * i + 1] = x.y, v[4 * i + 2] = x.z, v[4 * i + 3] = x.w;
        }
    } else if constexpr (sizeof(T) == 8 && K % 2 == 0) {
#pragma unroll
        for (int i = 0; i < K / 2; i++) {
            const double2 x = reinterpret_cast<const double2 *>(seg)[i];
            v[2 * i] = x.x, v[2 * i + 1] = x.y;
        }
    } else {
#pragma unroll
        for (int k = 0; k < K; k++) v[k] = seg[k];
    }
}

/* out[d·per + j] = Σ_b part[(b·dim + d)·per + j], in order: the sums over
 * batch of per-row partials. */
template <typename V>
__global__ void reduce_rows(const V *part, V *out, int dim, int per, int batch) {
    const long long total = (long long)dim * per;
    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < total;
         o += (long long)gridDim.x * blockDim.x) {
        V acc{};
        for (int b = 0; b < batch; b++) acc = vadd(acc, part[(long long)b * total + o]);
        out[o] = acc;
    }
}

} /* namespace bwd */
} /* namespace ssmk */

#endif /* SSMK_BWD_OPS_CUH */

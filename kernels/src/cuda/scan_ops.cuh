/*
 * scan_ops.cuh — the scan's device building blocks: a lane's run of K
 * elements loaded and stored as 16-byte words, shuffles within a row's
 * lanes, and arithmetic that reads the same for real and complex elements.
 */
#ifndef SSMK_SCAN_OPS_CUH
#define SSMK_SCAN_OPS_CUH

#include <type_traits>

#include "../ssmk_derivs.h" /* vmul, shared with the backward */
#include "../ssmk_methods.h"
#include "../ssmk_narrow.h"

namespace ssmk {

/* A lane's run of K elements seen as 16-byte words (and, for the 16-bit
 * types, as 32-bit words of two elements). */
template <typename E, int K>
union RunWords {
    uint4 q[K * sizeof(E) / 16];
    uint32_t w[K * sizeof(E) / 4];
    E e[K];
};

/* The 16-byte words of a lane's whole run of K elements. */
template <typename E, int K, bool STREAM>
__device__ __forceinline__ void load_words(const E *p, RunWords<E, K> &w) {
    const uint4 *s = reinterpret_cast<const uint4 *>(p);
#pragma unroll
    for (int i = 0; i < (int)(K * sizeof(E) / 16); i++) w.q[i] = STREAM ? __ldcs(s + i) : s[i];
}

/* Stores the 16-byte words of a lane's whole run of K elements. */
template <typename E, int K, bool STREAM>
__device__ __forceinline__ void store_words(E *p, const RunWords<E, K> &w) {
    uint4 *s = reinterpret_cast<uint4 *>(p);
#pragma unroll
    for (int i = 0; i < (int)(K * sizeof(E) / 16); i++) {
        if constexpr (STREAM)
            __stcs(s + i, w.q[i]);
        else
            s[i] = w.q[i];
    }
}

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
            load_words<E, K, STREAM>(p, w);
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
            store_words<E, K, STREAM>(p, w);
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

/* load_run of an array of the input type E widened to V (float from the
 * 16-bit types, as it is otherwise): K·sizeof(E) bytes, as 16-byte words
 * where they make whole words. */
template <typename E, typename V, int K, bool VEC, bool STREAM = false>
__device__ __forceinline__ void load_run_as(const E *p, int avail, V (&v)[K]) {
    if constexpr (std::is_same<E, V>::value) {
        load_run<E, K, VEC, STREAM>(p, avail, v);
    } else {
        if constexpr (std::is_same<E, bfloat16>::value && VEC && (K * sizeof(E)) % 16 == 0) {
            /* bfloat16 pairs widened from their 32-bit word: w << 16 and
             * w & 0xffff0000, one instruction each, where widening the
             * halves one by one costs the high half an extraction and a shift */
            if (avail >= K) {
                RunWords<E, K> w;
                load_words<E, K, STREAM>(p, w);
#pragma unroll
                for (int i = 0; i < K / 2; i++) {
                    v[2 * i] = bits_float(w.w[i] << 16);
                    v[2 * i + 1] = bits_float(w.w[i] & 0xffff0000u);
                }
                return;
            }
        }
        E e[K];
        load_run<E, K, VEC, STREAM>(p, avail, e);
#pragma unroll
        for (int i = 0; i < K; i++) v[i] = widen(e[i]);
    }
}

/* store_run of values V narrowed to the input type E: each rounded once. */
template <typename E, typename V, int K, bool VEC, bool STREAM = false>
__device__ __forceinline__ void store_run_as(E *p, int avail, const V (&v)[K]) {
    if constexpr (std::is_same<E, V>::value) {
        store_run<E, K, VEC, STREAM>(p, avail, v);
    } else {
        if constexpr (VEC && (K * sizeof(E)) % 16 == 0) {
            /* a whole run rounded in pairs: one cvt.rn for two elements, which
             * it packs into their 32-bit word, the rounding of narrow<E> */
            if (avail >= K) {
                RunWords<E, K> w;
#pragma unroll
                for (int i = 0; i < K / 2; i++) w.w[i] = narrow_pair<E>(v[2 * i], v[2 * i + 1]);
                store_words<E, K, STREAM>(p, w);
                return;
            }
        }
        E e[K];
#pragma unroll
        for (int i = 0; i < K; i++) e[i] = narrow<E>(v[i]);
        store_run<E, K, VEC, STREAM>(p, avail, e);
    }
}

/* Shuffles within a row's 32 lanes (the warp). */
template <typename T>
__device__ __forceinline__ T shfl_up(T v, int off) {
    return __shfl_up_sync(0xffffffffu, v, off);
}
template <typename T>
__device__ __forceinline__ cplx<T> shfl_up(cplx<T> v, int off) {
    return cmake(__shfl_up_sync(0xffffffffu, v.re, off), __shfl_up_sync(0xffffffffu, v.im, off));
}

/* v of lane src, to every lane */
template <typename T>
__device__ __forceinline__ T shfl_from(T v, int src) {
    return __shfl_sync(0xffffffffu, v, src);
}
template <typename T>
__device__ __forceinline__ cplx<T> shfl_from(cplx<T> v, int src) {
    return cmake(__shfl_sync(0xffffffffu, v.re, src), __shfl_sync(0xffffffffu, v.im, src));
}

/* Whether v is finite (both parts, for complex). */
template <typename T>
__device__ __forceinline__ bool vfinite(T v) {
    return isfinite(v);
}
template <typename T>
__device__ __forceinline__ bool vfinite(cplx<T> v) {
    return isfinite(v.re) && isfinite(v.im);
}

/* a·b + c */
template <typename T>
__device__ __forceinline__ T vfma(T a, T b, T c) {
    return a * b + c;
}
template <typename T>
__device__ __forceinline__ cplx<T> vfma(cplx<T> a, cplx<T> b, cplx<T> c) {
    return cadd(cmul(a, b), c);
}
/* a·b + c rounded once, in the precision of its operands */
__device__ __forceinline__ float sfma(float a, float b, float c) { return fmaf(a, b, c); }
__device__ __forceinline__ double sfma(double a, double b, double c) { return fma(a, b, c); }
template <typename V>
__device__ __forceinline__ V vone() {
    return V(1);
}
template <>
__device__ __forceinline__ cplx<float> vone() {
    return cmake(1.0f, 0.0f);
}
template <>
__device__ __forceinline__ cplx<double> vone() {
    return cmake(1.0, 0.0);
}

} /* namespace ssmk */

#endif

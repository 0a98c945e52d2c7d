/*
 * ssmk_complex.h — complex numbers for the discretization arithmetic
 * (ssmk_methods.h), __host__ __device__ under nvcc and plain inline under a
 * host compiler, in float and double.
 *
 * cplx<T> is a pair of T with the products and quotients written out, so
 * that the CPU build and the CUDA kernels round alike: a product is within
 * √5·u of the exact one; a quotient is Smith's algorithm (no |b|², so no
 * overflow for large |b|), within a few u.
 */
#ifndef SSMK_COMPLEX_H
#define SSMK_COMPLEX_H

#include <math.h>

#ifdef __CUDACC__
#define SSMK_HD __host__ __device__ __forceinline__
/* The complex method table is called, not inlined, on the GPU: inlining its
 * sin/cos (with their large-argument slow paths) into every unrolled step of
 * every kernel multiplied nvcc's time by 30 for a few percent of speed. */
#define SSMK_HD_CALL __host__ __device__ __noinline__
#else
#define SSMK_HD inline
#define SSMK_HD_CALL inline
#endif

namespace ssmk {

SSMK_HD float sabs(float x) { return fabsf(x); }
SSMK_HD double sabs(double x) { return fabs(x); }

template <typename T>
struct cplx {
    T re, im;
};

template <typename T>
SSMK_HD cplx<T> cmake(T re, T im) {
    cplx<T> c;
    c.re = re;
    c.im = im;
    return c;
}
template <typename T>
SSMK_HD cplx<T> cadd(cplx<T> a, cplx<T> b) {
    return cmake(a.re + b.re, a.im + b.im);
}
template <typename T>
SSMK_HD cplx<T> cmul(cplx<T> a, cplx<T> b) {
    return cmake(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re);
}
template <typename T>
SSMK_HD cplx<T> cscale(cplx<T> a, T s) {
    return cmake(a.re * s, a.im * s);
}

/* Smith's algorithm: a/b without forming |b|². Its denominator
 * d = b.re + b.im·r overflows for |b| near the top of the range, where the
 * quotient returned 0 instead of ~1 (found by FuzzDiscretize: foh, fp32,
 * Δ = FLT_MAX, a = −1 + i); there d is taken as b.re·(1 + r²), which
 * cannot overflow but rounds once more, so only there. Its numerators
 * p = a.re + a.im·r, q = a.im − a.re·r overflow for |a| near the top of the
 * range although a/b may not (found by FuzzDiscretize in CI: foh, fp32,
 * x = 88.72 − 79.45i, e^x − 1 ≈ 3e38): there a is divided by 4 first and the
 * quotient multiplied back, both exact. */
template <typename T>
SSMK_HD cplx<T> cdiv_smith(cplx<T> a, cplx<T> b, bool &overflow) {
    const bool re_major = sabs(b.re) >= sabs(b.im);
    const T big = re_major ? b.re : b.im, small = re_major ? b.im : b.re;
    const T r = small / big, d = big + small * r;
    /* a/b = (p + i·q)/d with p, q from a and r; the sign of q's terms
     * depends on which part of b is the larger. */
    const T p = re_major ? a.re + a.im * r : a.re * r + a.im;
    const T q = re_major ? a.im - a.re * r : a.im * r - a.re;
    overflow = (isinf(p) || isinf(q)) && !isinf(a.re) && !isinf(a.im) && !isinf(r);
    if (isinf(d) && !isinf(big)) {
        const T t = T(1) / (T(1) + r * r);
        return cmake(p * t / big, q * t / big);
    }
    return cmake(p / d, q / d);
}

template <typename T>
SSMK_HD cplx<T> cdiv(cplx<T> a, cplx<T> b) {
    bool overflow;
    const cplx<T> z = cdiv_smith(a, b, overflow);
    if (!overflow) return z;
    const cplx<T> w = cdiv_smith(cscale(a, T(0.25)), b, overflow);
    return cscale(w, T(4));
}

/* 1/b, and a/b beside it, by Smith's algorithm with one division for its
 * denominator d: the quotients are p·(1/d) rather than p/d, one rounding
 * more than cdiv's (a relative 2u against its u) for one division fewer, or
 * two where 1/b is wanted too (bilinear's Ā and g; foh's φ1 and φ1'). Where
 * 1/d is not a normal number (|d| > 1/(4·the least normal), or so small that
 * 1/d overflows; b = 0, inf, NaN) or a numerator overflows (|a| near the top
 * of the range), they are cdiv's. */
template <typename T>
SSMK_HD void crecip_quo(cplx<T> b, cplx<T> *w, cplx<T> a, cplx<T> *q) {
    const bool re_major = sabs(b.re) >= sabs(b.im);
    const T big = re_major ? b.re : b.im, small = re_major ? b.im : b.re;
    const T r = small / big, d = big + small * r;
    /* 2^-126·4, 2^-1022·4: the least normal numbers' quadruples */
    const T tiny4 = sizeof(T) == 4 ? T(4.701977403289551e-38) : T(8.900295434028806e-308);
    const T p = re_major ? a.re + a.im * r : a.re * r + a.im;
    const T qi = re_major ? a.im - a.re * r : a.im * r - a.re;
    const T t = T(1) / d;
    if (!(sabs(t) > tiny4) || isinf(t) || (q && (isinf(p) || isinf(qi)))) {
        if (w) *w = cdiv(cmake(T(1), T(0)), b);
        if (q) *q = cdiv(a, b);
        return;
    }
    if (w) *w = re_major ? cmake(t, -r * t) : cmake(r * t, -t);
    if (q) *q = cmake(p * t, qi * t);
}

} /* namespace ssmk */

#endif /* SSMK_COMPLEX_H */

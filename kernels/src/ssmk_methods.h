/*
 * ssmk_methods.h — the one source of the discretization arithmetic.
 *
 * Every function here is __host__ __device__ under nvcc and plain inline
 * under a host compiler, so the CUDA kernels and the CPU build compute (Ā, g)
 * with the same code, in float and double, for real and complex x = Δ·a.
 * The formulas are the ABI's (see ssmk.h); how they are evaluated is this
 * file's engineering, and the verification suite judges it:
 *
 *   - float e^x is exp2f(x·log2e), the route of Mamba's kernel (one MUFU.EX2
 *     on the GPU after range handling); double e^x is exp(). The GPU scan
 *     forms it as exp2 of Δ·(a·log2e) and passes it in (method_real_e),
 *     by a bare MUFU.EX2 where every e^x of the tile is in [2^-126, 1];
 *     there it also forms zoh's input term as B·(Δ·u) (one product fewer),
 *     where every Δ·u of the tile is normal, and takes foh's φ1 from
 *     phi1_near where every x of a state's tile is in (−3/4, 0] (in double,
 *     every |x| below 1/2), and there Ā as 1 + x·φ1, and Δ·φ1 as
 *     (e^x − 1)/a where every x of a state's tile is at most −1/2 (float).
 *     Bilinear's g there is
 *     one reciprocal where every x of the tile is in [−2^20, 0]. Poly's and
 *     rk4's Δ·g there is a polynomial in Δ whose coefficients are
 *     taylor_coef's times powers of a (scan_terms.cuh's dpoly_coefs), where every
 *     a of the row is 0 or within 2^±20 in magnitude.
 *   - real φ1(x): a polynomial for |x| < 1/2 (minimax in float and
 *     double; phi1_series), (e^x − 1)/x from the
 *     exp already computed beyond, selected without a branch; for complex z = a + ib,
 *     e^z − 1 = (expm1(a)·cos b − 2·sin²(b/2)) + i·e^a·sin b, which does not
 *     cancel near 0.
 *   - the polynomials by Horner's rule; bilinear with one division
 *     (g = 1/(1 − x/2), Ā = 2g − 1); for complex x both from one
 *     denominator of Smith's algorithm (ssmk_complex.h's crecip_quo).
 */
#ifndef SSMK_METHODS_H
#define SSMK_METHODS_H

#include <math.h>

#include "ssmk_complex.h"

namespace ssmk {

enum Method { ZOH = 0, FOH = 1, BILINEAR = 2, POLY = 3, HIGHORDER = 4, RK4 = 5 };

/* ---- precision-generic scalar functions ---- */

#define SSMK_LOG2E_F 1.4426950408889634f

SSMK_HD float sexp(float x) { return exp2f(x * SSMK_LOG2E_F); }
SSMK_HD double sexp(double x) { return exp(x); }
SSMK_HD float sexpm1(float x) { return expm1f(x); }
SSMK_HD double sexpm1(double x) { return expm1(x); }
SSMK_HD float slog1p(float x) { return log1pf(x); }
SSMK_HD double slog1p(double x) { return log1p(x); }
SSMK_HD float ssin(float x) { return sinf(x); }
SSMK_HD double ssin(double x) { return sin(x); }
SSMK_HD float scos(float x) { return cosf(x); }
SSMK_HD double scos(double x) { return cos(x); }

/* 1/b by one MUFU.RCP (rcp.approx.ftz) on the GPU: where b is normal (or
 * 0 or ±∞) and 1/b is at least 2^-126, it is the reciprocal that
 * __fdividef multiplies by. __fdividef itself is built on the non-ftz
 * rcp.approx, which adds a test and a scaling for a subnormal b to every
 * call (five instructions for one). */
#ifdef __CUDA_ARCH__
__device__ __forceinline__ float rcp_normal(float b) {
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(b));
    return r;
}
#endif

#ifdef __CUDACC__
/* 2^xl by one MUFU.EX2 (ex2.approx.ftz), the instruction exp2f uses too:
 * exp2f's further instructions only produce subnormal results, so this is
 * exp2f wherever xl ≥ −126, which the GPU kernels establish for a run of
 * steps before they take it. */
__device__ __forceinline__ float ex2_normal(float xl) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(xl));
    return r;
}
#endif

/* a/b for the per-state divisions of bilinear and foh. On the GPU in float it
 * is __fdividef's arithmetic (a reciprocal and a product, within 2 ulp): the
 * IEEE division routine cost those methods ~15% of the scan. __fdividef returns 0 (NaN for
 * an infinite a) when 2^126 < |b| < 2^128, although a/b need not be small
 * there, nor Δ·(a/b) after it: bilinear and foh at Δ = FLT_MAX, a = −1 gave
 * Bcoef = 0 instead of 2 and 1 (found by FuzzDiscretize on the H200). Both
 * operands are scaled by 1/4, which is exact for the quotients of this
 * header: foh divides e^x − 1 by x only for |x| ≥ 1/2 (|e^x − 1| ≥ 0.39),
 * bilinear 1 by 1 − x/2 (a multiple of 2^-24 or 0), so neither operand is
 * small enough for the scaling to round. For the same reason b/4 is never
 * subnormal where a quotient is used (a foh quotient at |x| < 1/2 is
 * computed and not selected), so the reciprocal is rcp_normal's: the same
 * values as __fdividef(a/4, b/4) with four instructions fewer. Elsewhere a/b. */
SSMK_HD float sdiv(float a, float b) {
#ifdef __CUDA_ARCH__
    return (a * 0.25f) * rcp_normal(b * 0.25f);
#else
    return a / b;
#endif
}
SSMK_HD double sdiv(double a, double b) { return a / b; }

/* φ1(x) = (e^x − 1)/x, φ1(0) = 1, by expm1 (used for complex x's real axis). */
template <typename T>
SSMK_HD T phi1(T x) {
    return x == T(0) ? T(1) : sexpm1(x) / x;
}

/* c[0]·x^(N−1) + … + c[N−1] by Horner's rule, each step p·x + c (one FMA
 * on the GPU): the evaluation of this header's polynomials (the double
 * phi1_series writes the same loop out: see there). */
template <typename T, int N>
SSMK_HD T horner(const T (&c)[N], T x) {
    T p = c[0];
    for (int k = 1; k < N; k++) p = p * x + c[k];
    return p;
}

/* φ1 near 0, |x| < 1/2, without a division or a branch (Horner's rule). In
 * float a degree-6 polynomial whose coefficients minimise the relative
 * error on [−1/2, 1/2] (Remez exchange, scripts/explore/phi1_minimax.py):
 * 3.0e-9 ≈ u/20, and evaluated in float within 1.11 · 2^-24 of φ1 over that
 * interval, as the degree-7 Taylor polynomial it replaces (1.07 · 2^-24,
 * x⁸/9! ≤ 1.1e-8), one FFMA fewer per foh update. In double a degree-12
 * minimax polynomial (below). */
SSMK_HD float phi1_series(float x) {
    const float c[7] = {0.0001984119153348729f,
                        0.0013997324276715517f,
                        0.008333634585142136f,
                        0.041665319353342056f,
                        0.16666662693023682f,
                        0.5000000596046448f,
                        1.0f};
    return horner(c, x);
}
SSMK_HD double phi1_series(double x) {
    /* Degree 12, minimax relative error on [−1/2, 1/2]: 3.4e-19, evaluated
     * within 1.00 · 2^-53 as the degree-14 Taylor polynomial it replaces
     * (scripts/explore/phi1_double_minimax.py). The same arithmetic as
     * horner(), written out: through horner() nvcc gives the double foh scan
     * kernels more than 128 registers (docs/performance.md). */
    const double c[12] = {1.6059021490784938e-10, 2.096992109430394e-09, 2.505238017878723e-08,  2.7557028750300385e-07,
                          2.755731820621513e-06,  2.480158773586144e-05, 0.00019841269842751482, 0.001388888888857361,
                          0.008333333333332409,   0.04166666666666765,   0.16666666666666669,    0.5};
    double p = c[0];
    for (int k = 1; k < 12; k++) p = p * x + c[k];
    return p * x + 1.0;
}

/* foh's near branch on the GPU (scan_terms.cuh's update_terms): φ1(x) where x is
 * known to lie in (−near_max, 0] in float — a tile that passed the fast
 * vote, which holds only where every x ≤ 0 — and in (−1/2, 1/2) in double
 * (phi1_series). One-sided, a degree-5 polynomial reaches float accuracy
 * over a wider interval than degree 6 does on both sides: the minimax one
 * on [−3/4, 0] (scripts/explore/phi1_minimax.py) errs by 1.5e-9 and
 * evaluates within 1.65 · 2^-24 of φ1, and 1 + x·φ1 within 2.1 ulp of
 * e^x. Against degree 6 on |x| < 1/2: one FFMA fewer per update, and more
 * of a realistic problem's states take the branch. */
template <typename T>
constexpr T near_max();
template <>
constexpr float near_max<float>() {
    return 0.75f;
}
template <>
constexpr double near_max<double>() {
    return 0.5;
}
SSMK_HD float phi1_near(float x) {
    const float c[6] = {0.001008491381071508f, 0.008026577532291412f, 0.041548699140548706f,
                        0.16664579510688782f,  0.49999862909317017f,  1.0f};
    return horner(c, x);
}
SSMK_HD double phi1_near(double x) { return phi1_series(x); }

/* φ1(x) given e = e^x already computed: the series near 0, (e − 1)/x beyond,
 * where the subtraction loses at most a couple of bits (|x| ≥ 1/2: ≤ 3u).
 * Both are computed and one selected, so GPU lanes with |x| on either side
 * of 1/2 do not diverge; (e − 1)/x at x = 0 is a NaN that is never taken. */
template <typename T>
SSMK_HD T phi1_from_exp(T x, T e) {
    const T far = sdiv(e - T(1), x);
    const T near = phi1_series(x);
    return sabs(x) < T(0.5) ? near : far;
}

/* Which form of foh's φ1 a GPU kernel's run of steps takes, decided once
 * for the run by the kernel's vote on its x = Δ·a: FOH_EXACT, each step
 * chooses (phi1_from_exp, and every other method); FOH_NEAR, the series
 * side alone; FOH_FAR, the quotient side alone. What a run must satisfy for
 * each is the kernel's (scan_terms.cuh, bwd_ops.cuh). */
enum FohBranch { FOH_EXACT = 0, FOH_NEAR = 1, FOH_FAR = 2 };

/* ---- complex functions ---- */

/* e^z; exactly the real exponential on the real axis. */
template <typename T>
SSMK_HD cplx<T> cexp(cplx<T> z) {
    T e = sexp(z.re);
    if (z.im == T(0)) return cmake(e, z.im);
    return cmake(e * scos(z.im), e * ssin(z.im));
}

/* φ1(z) = (e^z − 1)/z, with e^z − 1 written without cancellation, and e^z
 * (cexp's value, bitwise) from the same e^Re z, cos and sin of Im z: foh
 * needs both, and sin and cos, with their large-argument paths, are not
 * merged by the compiler when cexp is called beside a φ1 of its own.
 * Re(e^z − 1) = expm1(a)·cos b − (1 − cos b), and 1 − cos b = sin²b/(1 + cos b)
 * where cos b ≥ 0 (no cancellation near b = 0, and no second range
 * reduction for sin(b/2)); where cos b < 0, 1 − cos b has none either. */
template <typename T>
SSMK_HD void cexp_phi1(cplx<T> z, cplx<T> &e, cplx<T> &g) {
    const T er = sexp(z.re);
    if (z.im == T(0)) {
        e = cmake(er, z.im);
        g = z.re == T(0) ? cmake(T(1), T(0)) : cmake(phi1(z.re), z.im);
        return;
    }
    const T c = scos(z.im), sn = ssin(z.im);
    const T omc = c >= T(0) ? sn * sn / (T(1) + c) : T(1) - c;
    e = cmake(er * c, er * sn);
    crecip_quo(z, (cplx<T> *)nullptr, cmake(sexpm1(z.re) * c - omc, er * sn), &g);
}

/* ---- the method table ---- */

/* Whether method M's Ā is e^x (every method but bilinear). */
template <int M>
constexpr bool uses_exp() {
    return M != BILINEAR;
}

/* The Taylor methods' g = 1 + Σ_{k=1..deg} c_k·x^k: highorder to degree 1,
 * poly to 2, rk4 to 3, with c_k = 1/(k+1)! — the one table of their
 * coefficients, read by method_real_e and by the GPU scan's fast path,
 * which forms Δ·g as a polynomial in Δ (scan_terms.cuh's dpoly_coefs). */
template <int M>
constexpr int taylor_degree() {
    return M == HIGHORDER ? 1 : M == POLY ? 2 : M == RK4 ? 3 : 0;
}
template <int M, typename T>
SSMK_HD constexpr T taylor_coef(int k) {
    return k == 1 ? T(0.5) : k == 2 ? T(1.0 / 6.0) : T(1.0 / 24.0);
}
/* g of a Taylor method by Horner's rule: 1 + x·(c_1 + x·(c_2 + x·c_3)). */
template <int M, typename T>
SSMK_HD T taylor_g(T x) {
    constexpr int deg = taylor_degree<M>();
    T c[deg + 1];
    for (int i = 0; i < deg; i++) c[i] = taylor_coef<M, T>(deg - i);
    c[deg] = T(1);
    return horner(c, x);
}

/* (Ā, g) of method M at real x, M known at compile time, given e = e^x
 * when uses_exp<M>() (ignored otherwise): the GPU kernels are instantiated
 * per method so that a run of time steps is straight-line code, and they
 * form e^x themselves as exp2 of Δ·(a·log2e), with a·log2e once per state. */
template <int M, typename T>
SSMK_HD void method_real_e(T x, T e, T &abar, T &g) {
    if constexpr (M == ZOH) {
        (void)x;
        abar = e;
        g = T(1);
    } else if constexpr (M == FOH) {
        abar = e;
        g = phi1_from_exp(x, abar);
    } else if constexpr (M == BILINEAR) {
        /* One division: g = 1/(1 − x/2) and Ā = (1 + x/2)/(1 − x/2) = 2g − 1.
         * For x ≤ 0, 0 ≤ g ≤ 1, so the computed Ā stays in [−1, 1] (2g is
         * exact): stable for every Δ, where (1 + x/2)·g can round to 1 + ulp.
         * Near Ā = 0 (x ≈ −2) the subtraction costs an absolute u, which the
         * error model allows. */
        T half = x * T(0.5);
        g = sdiv(T(1), T(1) - half);
        /* At x = ±∞ the ABI's quotient is ∞/∞ = NaN; 2g − 1 would say −1. */
        abar = isinf(x) ? T(NAN) : T(2) * g - T(1);
        (void)e;
    } else if constexpr (M == POLY || M == HIGHORDER || M == RK4) {
        abar = e;
        g = taylor_g<M>(x);
    } else {
        (void)x, (void)e;
        abar = g = T(NAN);
    }
}

/* (Ā, g) of method M at real x. */
template <int M, typename T>
SSMK_HD void method_real_m(T x, T &abar, T &g) {
    method_real_e<M>(x, uses_exp<M>() ? sexp(x) : T(0), abar, g);
}

/* (Ā, g) of method m at real x, m known at run time. */
template <typename T>
SSMK_HD void method_real(int m, T x, T &abar, T &g) {
    switch (m) {
    case ZOH:
        return method_real_m<ZOH>(x, abar, g);
    case FOH:
        return method_real_m<FOH>(x, abar, g);
    case BILINEAR:
        return method_real_m<BILINEAR>(x, abar, g);
    case POLY:
        return method_real_m<POLY>(x, abar, g);
    case HIGHORDER:
        return method_real_m<HIGHORDER>(x, abar, g);
    case RK4:
        return method_real_m<RK4>(x, abar, g);
    default:
        return method_real_m<-1>(x, abar, g);
    }
}

/* Bilinear's Ā = (1 + x/2)/(1 − x/2) and g = 1/(1 − x/2) at complex x (either
 * NULL where it is not wanted), from one denominator (crecip_quo). */
template <typename T>
SSMK_HD void bilinear_complex(cplx<T> x, cplx<T> *abar, cplx<T> *g) {
    const cplx<T> half = cscale(x, T(0.5));
    crecip_quo(cmake(T(1) - half.re, -half.im), g, cmake(T(1) + half.re, half.im), abar);
}

/* g of method M at complex x: the one definition of each method's complex
 * input coefficient, read by method_complex and by the GPU backward, which
 * has Ā from its forward pass and needs g alone. */
template <int M, typename T>
SSMK_HD cplx<T> method_complex_g(cplx<T> x) {
    const cplx<T> one = cmake(T(1), T(0));
    if constexpr (M == ZOH) {
        (void)x;
        return one;
    } else if constexpr (M == FOH) {
        cplx<T> e, g;
        cexp_phi1(x, e, g);
        return g;
    } else if constexpr (M == BILINEAR) {
        cplx<T> w;
        bilinear_complex(x, (cplx<T> *)nullptr, &w);
        return w;
    } else if constexpr (M == POLY) {
        return cadd(one, cmul(x, cadd(cmake(T(0.5), T(0)), cscale(x, T(1.0 / 6.0)))));
    } else if constexpr (M == HIGHORDER) {
        return cadd(one, cscale(x, T(0.5)));
    } else if constexpr (M == RK4) {
        return cadd(one, cmul(x, cadd(cmake(T(0.5), T(0)),
                                      cmul(x, cadd(cmake(T(1.0 / 6.0), T(0)), cscale(x, T(1.0 / 24.0)))))));
    } else {
        (void)x;
        return cmake(T(NAN), T(NAN));
    }
}

/* Ā of method M at complex x: e^x, or bilinear's (1 + x/2)/(1 − x/2). */
template <int M, typename T>
SSMK_HD cplx<T> method_complex_abar(cplx<T> x) {
    if constexpr (M == BILINEAR) {
        cplx<T> q;
        bilinear_complex(x, &q, (cplx<T> *)nullptr);
        return q;
    } else if constexpr (M >= ZOH && M <= RK4) {
        return cexp(x);
    } else {
        (void)x;
        return cmake(T(NAN), T(NAN));
    }
}

template <int M, typename T>
SSMK_HD void method_complex_m(cplx<T> x, cplx<T> &abar, cplx<T> &g) {
    if constexpr (M == FOH) {
        cexp_phi1(x, abar, g);
    } else if constexpr (M == BILINEAR) {
        bilinear_complex(x, &abar, &g);
    } else {
        abar = method_complex_abar<M>(x);
        g = method_complex_g<M>(x);
    }
}

/* (Ā, g) of method m at complex x. */
template <typename T>
SSMK_HD_CALL void method_complex(int m, cplx<T> x, cplx<T> &abar, cplx<T> &g) {
    switch (m) {
    case ZOH:
        return method_complex_m<ZOH>(x, abar, g);
    case FOH:
        return method_complex_m<FOH>(x, abar, g);
    case BILINEAR:
        return method_complex_m<BILINEAR>(x, abar, g);
    case POLY:
        return method_complex_m<POLY>(x, abar, g);
    case HIGHORDER:
        return method_complex_m<HIGHORDER>(x, abar, g);
    case RK4:
        return method_complex_m<RK4>(x, abar, g);
    default:
        return method_complex_m<-1>(x, abar, g);
    }
}

/* ---- the per-element parts of the scan ---- */

/* log1p(t) for t in [0, 1] in float, without log1pf's range reduction and
 * branches: t + t²·Q(t), Q the degree-8 polynomial whose coefficients
 * minimise the relative error of (log1p(t) − t)/t² on [0, 1] (Remez
 * exchange, scripts/explore/softplus_minimax.py: 5.6e-8), evaluated in float
 * within 1.93 · 2^-24 of log1p(t) over that interval (log1pf: within 1 ulp).
 * t alone carries the leading term exactly; the correction, at most 31% of
 * the result, carries Q's and t²'s roundings. A subnormal t gives t. */
SSMK_HD float log1p_unit(float t) {
    const float c[9] = {-0.004519076086580753f, 0.025438491255044937f, -0.06711190938949585f,
                        0.11592396348714828f,   -0.15862220525741577f, 0.19857943058013916f,
                        -0.24987022578716278f,  0.3333286643028259f,   -0.4999999701976776f};
    return fmaf(t * t, horner(c, t), t);
}

/* softplus(v) = log1p(e^v), below the threshold 20: in float as
 * max(v, 0) + log1p(e^−|v|), whose exponential is at most 1 and whose
 * logarithm is log1p_unit's (a step's own work was about a third of the
 * GPU scan's instructions: docs/performance.md); the error model's
 * softplus term (reference/scale.go's deltaScale) is σ(v)·(1.25·|v| + 2) u for
 * e^v and 2 u of the result, which this form keeps within. v = −∞ gives 0,
 * a NaN a NaN. In double log1p(exp(v)), as the reference computes it. */
SSMK_HD float ssoftplus(float v) { return fmaxf(v, 0.0f) + log1p_unit(sexp(-fabsf(v))); }
SSMK_HD double ssoftplus(double v) { return slog1p(sexp(v)); }

/* 1/d for d in [1, 2]: one MUFU.RCP refined by one Newton step on the GPU
 * (within an ulp, no branch; the IEEE division's slow path was a branch per
 * step), 1/d on the host. */
SSMK_HD float srcp_unit(float d) {
#ifdef __CUDA_ARCH__
    const float r = rcp_normal(d);
    return fmaf(r, fmaf(-d, r, 1.0f), r);
#else
    return 1.0f / d;
#endif
}

/* σ(z) = 1/(1 + e^−z) in float from e = e^−|z| ≤ 1, never a reciprocal of
 * an overflowing 1 + e: 1/(1 + e) for z ≥ 0, e/(1 + e) below, so that σ of a
 * large negative z is e's subnormal value, not a flush to 0. ±∞ gives 1 and
 * 0, a NaN a NaN. In double 1/(1 + exp(−z)). */
SSMK_HD float ssigmoid(float z) {
    const float e = sexp(-fabsf(z)), r = srcp_unit(1.0f + e);
    return z >= 0.0f ? r : e * r;
}
SSMK_HD double ssigmoid(double z) { return 1.0 / (1.0 + sexp(-z)); }

/* The SiLU gate y·z·σ(z): in float by ssigmoid, a product instead of the
 * IEEE division; in double y·z/(1 + e^−z). The error model's gate term is
 * (5 + 1.25·(1 − σ(z))·|z|) u of |y| (reference's doc). */
SSMK_HD float sgate(float y, float z) { return y * z * ssigmoid(z); }
SSMK_HD double sgate(double y, double z) { return y * z / (1.0 + sexp(-z)); }

/* The gate's derivative d(z·σ(z))/dz = σ·(1 + z·(1 − σ)) from σ = σ(z),
 * which the backwards have formed already for the gate itself; dz is
 * dout·y times it (the CPU backward multiplies dout·y first, the GPU
 * backwards dout, then y). */
template <typename T>
SSMK_HD T sgate_deriv(T z, T sig) {
    return sig * (T(1) + z * (T(1) - sig));
}

/* dt from the raw delta: bias, then softplus with its threshold at 20.
 * SELECT (the GPU scan): softplus is evaluated for every value and selected
 * below the threshold, the same values without a branch, which on the GPU
 * serialised a lane's K per-step chains. */
template <bool SELECT = false, typename T>
SSMK_HD T step_dt(T delta, const T *delta_bias, int d, int softplus) {
    T dt = delta + (delta_bias ? delta_bias[d] : T(0));
    if constexpr (SELECT) {
        const T sp = ssoftplus(dt);
        return softplus && dt <= T(20) ? sp : dt;
    }
    if (softplus && dt <= T(20)) dt = ssoftplus(dt);
    return dt;
}

/* d dt / d delta for step_dt, from v = delta + bias: σ(v) where softplus
 * applies (v ≤ 20), else 1 (dt = v, or softplus off). */
template <typename T>
SSMK_HD T step_dt_deriv(T v, int softplus) {
    return softplus && v <= T(20) ? ssigmoid(v) : T(1);
}

/* y + D·u, then the SiLU gate y·z·σ(z) where there is a z (gated); the
 * caller loads z, so that the GPU kernel can load it with its other
 * per-step inputs in one vectorised load. */
template <typename T>
SSMK_HD T finish_output(T y, T u, const T *D, int d, bool gated, T zz) {
    if (D) y += D[d] * u;
    if (gated) y = sgate(y, zz);
    return y;
}

/* The output of complex A: 2·Re(Σ C·h). */
template <typename T>
SSMK_HD T complex_output(T re_sum) {
    return T(2) * re_sum;
}

/* C·h for complex A (mutant 10 conjugates C). */
template <typename T>
SSMK_HD cplx<T> c_times_h(cplx<T> c, cplx<T> h) {
    return cmul(c, h);
}

/* The group that channel d reads variable B and C from. */
SSMK_HD int group_of(int d, int dim, int n_groups) { return d / (dim / n_groups); }

} /* namespace ssmk */

#endif /* SSMK_METHODS_H */

/*
 * ssmk_derivs.h — the derivatives of the method table in x = Δ·a, for the
 * backward pass: dĀ/dx and dg/dx of every method, real and complex, in
 * float and double, built on ssmk_methods.h's arithmetic (the same exp,
 * division and Horner's rule), __host__ __device__ under nvcc.
 *
 *   method      dĀ/dx               dg/dx
 *   zoh         e^x                 0
 *   foh         e^x                 φ1'(x) = (e^x − φ1(x))/x, 1/2 at 0
 *   bilinear    g²                  g²/2          (g = 1/(1 − x/2))
 *   poly        e^x                 1/2 + x/3
 *   highorder   e^x                 1/2
 *   rk4         e^x                 1/2 + x/3 + x²/8
 *
 * Each takes (Ā, g) already computed at x, so that a backward step forms
 * one exp and at most one division.
 */
#ifndef SSMK_DERIVS_H
#define SSMK_DERIVS_H

#include "ssmk_methods.h"

namespace ssmk {

/* Real and complex values alike, for code written once over V = T or
 * cplx<T> (the backward's adjoint): conj is the identity on reals. */
template <typename T>
SSMK_HD T vconj(T x) {
    return x;
}
template <typename T>
SSMK_HD cplx<T> vconj(cplx<T> x) {
    return cmake(x.re, -x.im);
}
template <typename T>
SSMK_HD T vmul(T a, T b) {
    return a * b;
}
template <typename T>
SSMK_HD cplx<T> vmul(cplx<T> a, cplx<T> b) {
    return cmul(a, b);
}
template <typename T>
SSMK_HD T vadd(T a, T b) {
    return a + b;
}
template <typename T>
SSMK_HD cplx<T> vadd(cplx<T> a, cplx<T> b) {
    return cadd(a, b);
}
template <typename T>
SSMK_HD T vscale(T a, T s) {
    return a * s;
}
template <typename T>
SSMK_HD cplx<T> vscale(cplx<T> a, T s) {
    return cscale(a, s);
}
template <typename T>
SSMK_HD T vre(T a) {
    return a;
}
template <typename T>
SSMK_HD T vre(cplx<T> a) {
    return a.re;
}
template <typename T>
SSMK_HD T vone(T) {
    return T(1);
}
template <typename T>
SSMK_HD cplx<T> vone(cplx<T>) {
    return cmake(T(1), T(0));
}

/* φ1'(x) = Σ_{k≥1} k·x^(k−1)/(k+1)! near 0, where (e^x − φ1)/x cancels:
 * for |x| < 1/2 in float the series to degree 8 (the first term left out,
 * 10·2⁻⁹/11!, is below u/100 of φ1' ≥ 0.38), in double a degree-12
 * minimax polynomial (below). */
SSMK_HD float dphi1_series(float x) {
    const float c[9] = {1.0f / 403200.0f, 1.0f / 45360.0f, 1.0f / 5760.0f, 1.0f / 840.0f, 1.0f / 144.0f,
                        1.0f / 30.0f,     1.0f / 8.0f,     1.0f / 3.0f,    0.5f};
    return horner(c, x);
}
SSMK_HD double dphi1_series(double x) {
    /* degree 12, minimax relative error on [−1/2, 1/2]: 6.4e-19, evaluated
     * within 1.13 · 2^-53 (the degree-15 series: 1.20;
     * scripts/explore/phi1_double_minimax.py) */
    const double c[13] = {1.4889997850639604e-10,
                          1.9357666084063268e-09,
                          2.2964851624810654e-08,
                          2.5051838239905395e-07,
                          2.480158588751642e-06,
                          2.2045855782101928e-05,
                          0.00017361111113093562,
                          0.0011904761904470277,
                          0.006944444444443232,
                          0.033333333333334235,
                          0.12500000000000003,
                          0.3333333333333333,
                          0.5};
    return horner(c, x);
}

/* φ1'(x) given e = e^x and p = φ1(x): the series near 0, (e − p)/x beyond
 * (|x| ≥ 1/2, where the subtraction loses at most a few bits). */
template <typename T>
SSMK_HD T dphi1(T x, T e, T p) {
    return sabs(x) < T(0.5) ? dphi1_series(x) : sdiv(e - p, x);
}

/* The Taylor methods' g'(x) = Σ_{k=1..deg} k·c_k·x^(k−1), by Horner's rule. */
template <int M, typename T>
SSMK_HD T taylor_dg(T x) {
    constexpr int deg = taylor_degree<M>();
    T p = T(deg) * taylor_coef<M, T>(deg);
    for (int k = deg - 1; k >= 1; k--) p = p * x + T(k) * taylor_coef<M, T>(k);
    return p;
}

/* dĀ/dx and dg/dx of method m at real x, given (Ā, g) at x:
 *   zoh e^x, 0;  foh e^x, φ1'(x);  bilinear g², g²/2 (g = 1/(1 − x/2));
 *   poly, highorder, rk4 e^x and their polynomial's derivative. */
template <typename T>
SSMK_HD void method_real_deriv(int m, T x, T abar, T g, T &dabar, T &dg) {
    switch (m) {
    case ZOH:
        dabar = abar, dg = T(0);
        return;
    case FOH:
        dabar = abar, dg = dphi1(x, abar, g);
        return;
    case BILINEAR:
        dabar = g * g, dg = T(0.5) * g * g;
        return;
    case POLY:
        dabar = abar, dg = taylor_dg<POLY>(x);
        return;
    case HIGHORDER:
        dabar = abar, dg = taylor_dg<HIGHORDER>(x);
        return;
    case RK4:
        dabar = abar, dg = taylor_dg<RK4>(x);
        return;
    default:
        dabar = dg = T(NAN);
    }
}

/* The same at complex x, M known at compile time (inlined: the GPU
 * backward is instantiated per method). foh's φ1' is the series for
 * |x| < 1/2 (complex Horner), (e^x − φ1)/x beyond (crecip_quo). */
template <int M, typename T>
SSMK_HD void method_complex_deriv_m(cplx<T> x, cplx<T> abar, cplx<T> g, cplx<T> &dabar, cplx<T> &dg) {
    dabar = abar;
    if constexpr (M == ZOH) {
        (void)x, (void)g;
        dg = cmake(T(0), T(0));
    } else if constexpr (M == FOH) {
        if (x.re * x.re + x.im * x.im < T(0.25)) {
            /* the coefficients of dphi1_series, as a complex Horner */
            const T c[9] = {T(1.0 / 403200.0), T(1.0 / 45360.0), T(1.0 / 5760.0), T(1.0 / 840.0), T(1.0 / 144.0),
                            T(1.0 / 30.0),     T(1.0 / 8.0),     T(1.0 / 3.0),    T(0.5)};
            const T cd[7] = {T(1.0 / 22230464256000.0), T(1.0 / 1394852659200.0), T(1.0 / 93405312000.0),
                             T(1.0 / 6706022400.0),     T(1.0 / 518918400.0),     T(1.0 / 43545600.0),
                             T(1.0 / 3991680.0)};
            cplx<T> p = cmake(T(0), T(0));
            if (sizeof(T) == 8)
                for (int k = 0; k < 7; k++) p = cadd(cmul(p, x), cmake(cd[k], T(0)));
            for (int k = 0; k < 9; k++) p = cadd(cmul(p, x), cmake(c[k], T(0)));
            dg = p;
        } else {
            crecip_quo(x, (cplx<T> *)nullptr, cmake(abar.re - g.re, abar.im - g.im), &dg);
        }
    } else if constexpr (M == BILINEAR) {
        (void)x;
        dabar = cmul(g, g);
        dg = cscale(dabar, T(0.5));
    } else if constexpr (M == POLY) { /* 1/2 + x/3 */
        (void)g;
        dg = cadd(cmake(T(0.5), T(0)), cscale(x, T(1.0 / 3.0)));
    } else if constexpr (M == HIGHORDER) {
        (void)x, (void)g;
        dg = cmake(T(0.5), T(0));
    } else if constexpr (M == RK4) { /* 1/2 + x·(1/3 + x/8) */
        (void)g;
        dg = cadd(cmake(T(0.5), T(0)), cmul(x, cadd(cmake(T(1.0 / 3.0), T(0)), cscale(x, T(1.0 / 8.0)))));
    } else {
        (void)x, (void)g;
        dabar = dg = cmake(T(NAN), T(NAN));
    }
}

/* The same, m known at run time. */
template <typename T>
SSMK_HD_CALL void method_complex_deriv(int m, cplx<T> x, cplx<T> abar, cplx<T> g, cplx<T> &dabar, cplx<T> &dg) {
    switch (m) {
    case ZOH:
        return method_complex_deriv_m<ZOH>(x, abar, g, dabar, dg);
    case FOH:
        return method_complex_deriv_m<FOH>(x, abar, g, dabar, dg);
    case BILINEAR:
        return method_complex_deriv_m<BILINEAR>(x, abar, g, dabar, dg);
    case POLY:
        return method_complex_deriv_m<POLY>(x, abar, g, dabar, dg);
    case HIGHORDER:
        return method_complex_deriv_m<HIGHORDER>(x, abar, g, dabar, dg);
    case RK4:
        return method_complex_deriv_m<RK4>(x, abar, g, dabar, dg);
    default:
        return method_complex_deriv_m<-1>(x, abar, g, dabar, dg);
    }
}

/* (Ā, g) of method m at x and their derivatives in x, real or complex. */
template <typename T>
SSMK_HD void coef_deriv(int m, T x, T &ab, T &g, T &dab, T &dg) {
    method_real(m, x, ab, g);
    method_real_deriv(m, x, ab, g, dab, dg);
}
template <typename T>
SSMK_HD void coef_deriv(int m, cplx<T> x, cplx<T> &ab, cplx<T> &g, cplx<T> &dab, cplx<T> &dg) {
    method_complex(m, x, ab, g);
    method_complex_deriv(m, x, ab, g, dab, dg);
}

} /* namespace ssmk */

#endif /* SSMK_DERIVS_H */

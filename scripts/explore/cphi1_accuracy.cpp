// scripts/explore/cphi1_accuracy.cpp: the largest normwise errors of complex foh's e^z and φ1(z) = (e^z − 1)/z in
// float and double, in units of the precision, against a long-double evaluation of the same rounded z, for the
// forms of cexp_phi1 tried (docs/performance.md). Built against the tree's headers (crecip_quo, sexp, …):
//
//   g++ -O2 -std=c++17 -Ikernels/src -Icudalib/include -o /tmp/cphi1 scripts/explore/cphi1_accuracy.cpp && /tmp/cphi1
//
// Arguments: 2·10⁶ with |z| log-uniform in [10⁻⁶, 300] at a uniform angle (a tenth with Re z ≤ 0), and 2·10⁵ with
// Im z subnormal, where b/2 is inexact (half of them with Re z = 0, where φ1 is (sin b)/b). Points where e^Re z is below float's normal range are left out of float's
// e^z column (its relative error is the subnormal's).
#include <cmath>
#include <complex>
#include <cstdio>
#include <limits>
#include <random>

#include "ssmk_methods.h"

using namespace ssmk;

// The form committed before the one sincos (2026-11-27): cos b, sin b and sin(b/2), two range reductions.
template <typename T>
void form_three_trig(cplx<T> z, cplx<T> &e, cplx<T> &g) {
    const T er = sexp(z.re), c = scos(z.im), sn = ssin(z.im), s = ssin(z.im / T(2));
    e = cmake(er * c, er * sn);
    crecip_quo(z, (cplx<T> *)nullptr, cmake(sexpm1(z.re) * c - T(2) * s * s, er * sn), &g);
}

// The half angle (764d04c, reverted): cos b = (c − s)(c + s), sin b = 2·s·c from b/2's.
template <typename T>
void form_half_angle(cplx<T> z, cplx<T> &e, cplx<T> &g) {
    const T er = sexp(z.re), s = ssin(z.im / T(2)), ch = scos(z.im / T(2));
    const T c = (ch - s) * (ch + s), sn = T(2) * s * ch;
    e = cmake(er * c, er * sn);
    crecip_quo(z, (cplx<T> *)nullptr, cmake(sexpm1(z.re) * c - T(2) * s * s, er * sn), &g);
}

// One sincos: 1 − cos b = sin²b/(1 + cos b) where cos b ≥ 0, else 1 − cos b.
template <typename T>
void form_one_sincos(cplx<T> z, cplx<T> &e, cplx<T> &g) {
    const T er = sexp(z.re), c = scos(z.im), sn = ssin(z.im);
    const T omc = c >= T(0) ? sn * sn / (T(1) + c) : T(1) - c;
    e = cmake(er * c, er * sn);
    crecip_quo(z, (cplx<T> *)nullptr, cmake(sexpm1(z.re) * c - omc, er * sn), &g);
}

using L = long double;

template <typename T>
void measure(const char *name) {
    using Form = void (*)(cplx<T>, cplx<T> &, cplx<T> &);
    const Form forms[] = {form_three_trig<T>, form_half_angle<T>, form_one_sincos<T>};
    const char *names[] = {"cos b, sin b, sin(b/2)", "half angle", "one sincos, sin²b/(1 + cos b)"};
    const double u = std::ldexp(1.0, -std::numeric_limits<T>::digits);
    double worst[3][2] = {};
    std::mt19937_64 rng(1);
    std::uniform_real_distribution<double> U(0, 1);
    const double lo = std::log(1e-6), hi = std::log(300.0);
    for (int i = 0; i < 2200000; i++) {
        cplx<T> z;
        if (i < 2000000) {
            const double mag = std::exp(lo + U(rng) * (hi - lo)), ang = U(rng) * 2 * M_PI;
            z = cmake(T(mag * std::cos(ang)), T(mag * std::sin(ang)));
            if (i % 10 == 0) z.re = -std::fabs(z.re);
        } else { // Im z subnormal: a few to a few hundred multiples of the least subnormal
            z = cmake(i % 2 ? T(0) : T(U(rng) - 0.5),
                      std::numeric_limits<T>::denorm_min() * T(1 + std::floor(U(rng) * 400)));
        }
        const L a = z.re, b = z.im;
        if (sizeof(T) == 4 && a > 88) continue; // e^z overflows float
        const std::complex<L> zz(a, b), ref_e(expl(a) * cosl(b), expl(a) * sinl(b));
        const std::complex<L> ref_g =
            std::complex<L>(expm1l(a) * cosl(b) - 2 * sinl(b / 2) * sinl(b / 2), expl(a) * sinl(b)) / zz;
        for (int k = 0; k < 3; k++) {
            cplx<T> e, g;
            forms[k](z, e, g);
            const double eg = (double)(std::abs(std::complex<L>(g.re, g.im) - ref_g) / std::abs(ref_g)) / u;
            if (eg > worst[k][0]) worst[k][0] = eg;
            if (sizeof(T) == 4 && expl(a) < 1e-36L) continue;
            const double ee = (double)(std::abs(std::complex<L>(e.re, e.im) - ref_e) / std::abs(ref_e)) / u;
            if (ee > worst[k][1]) worst[k][1] = ee;
        }
    }
    for (int k = 0; k < 3; k++)
        std::printf("%-7s %-32s φ1 %9.2f u   e^z %7.2f u\n", name, names[k], worst[k][0], worst[k][1]);
}

int main() {
    measure<float>("float");
    measure<double>("double");
}

/*
 * ssmk_fuzz.cpp — libFuzzer harness for the CPU build of the ssmk ABI
 * (make fuzz-native).
 *
 * The CPU backend's source is compiled into this harness, so libFuzzer's
 * coverage guidance sees the branches of the C++ kernel code (the method
 * table, φ1's series/exp selection, Smith's division, the scan's feature
 * paths), which Go's fuzzer cannot see through purego, and AddressSanitizer
 * and UndefinedBehaviorSanitizer check every call: any write outside a
 * buffer (the buffers are allocated to their exact sizes) and any undefined
 * operation aborts with a report. IEEE 754 division by zero is not undefined
 * behaviour and is not flagged.
 *
 * The first input byte selects the target:
 *   even: ssmk_discretize on up to 64 (Δ, a) pairs from raw dtype bits,
 *         compared element by element with a long double evaluation of the
 *         ABI's formulas (below) under the error model of
 *         reference.DiscretizeScale, ported here: rule 1 of the fuzzers'
 *         non-finite policy (finite and within 4·(u·S + 2η)) wherever it
 *         applies without the dtype-evaluation reference (x finite and below
 *         the exp overflow threshold, Δ and both results representable), and
 *         NaN in, NaN out for real A;
 *   odd:  ssmk_scan_fwd on a small problem (shape and flags from the next
 *         bytes, inputs from raw bits), in both dtypes; the inputs must come
 *         back unchanged, NaN in u/delta/B/C must reach the outputs as NaN
 *         for real problems, and for moderate inputs each dtype's output is
 *         compared with a long double scan (tolerance below).
 * Go's FuzzDiscretize and FuzzScan apply the whole policy with the Go
 * reference; this harness is for what only native instrumentation finds.
 */
#include "../../kernels/src/cpu.cpp"
#include "../../kernels/src/cpu_backward.cpp"

#include <complex>
#include <cstdio>
#include <cstring>

#ifndef SCAN_TOL
#define SCAN_TOL 1024.0L
#endif

namespace {

using ld = long double;
using cld = std::complex<ld>;

[[noreturn]] void fail(const char *what) {
    fprintf(stderr, "ssmk_fuzz: %s\n", what);
    abort();
}

struct Reader {
    const uint8_t *p;
    size_t n;
    uint8_t byte() {
        if (n == 0) return 0;
        n--;
        return *p++;
    }
    double value(int dtype) {
        if (dtype == SSMK_F32) {
            uint32_t b = 0;
            for (int i = 0; i < 4; i++) b |= uint32_t(byte()) << (8 * i);
            float f;
            memcpy(&f, &b, 4);
            return f;
        }
        uint64_t b = 0;
        for (int i = 0; i < 8; i++) b |= uint64_t(byte()) << (8 * i);
        double d;
        memcpy(&d, &b, 8);
        return d;
    }
};

/* Host arrays of one dtype. */
struct Buf {
    int dtype;
    std::vector<float> f;
    std::vector<double> d;
    Buf(int dt, size_t n) : dtype(dt) {
        if (dt == SSMK_F32)
            f.assign(n, 0.0f);
        else
            d.assign(n, 0.0);
    }
    void set(size_t i, double v) {
        if (dtype == SSMK_F32)
            f[i] = float(v);
        else
            d[i] = v;
    }
    double get(size_t i) const { return dtype == SSMK_F32 ? double(f[i]) : d[i]; }
    size_t size() const { return dtype == SSMK_F32 ? f.size() : d.size(); }
    void *ptr() { return dtype == SSMK_F32 ? (void *)f.data() : (void *)d.data(); }
    bool same(const Buf &o) const {
        return dtype == SSMK_F32 ? memcmp(f.data(), o.f.data(), f.size() * 4) == 0
                                 : memcmp(d.data(), o.d.data(), d.size() * 8) == 0;
    }
};

/* ---- the ABI's formulas in long double ---- */

cld g_of(int m, cld x) {
    switch (m) {
    case FOH:
        if (x == cld(0)) return 1;
        if (x.imag() == 0) return expm1l(x.real()) / x.real();
        {
            ld s = sinl(x.imag() / 2);
            cld em1(expm1l(x.real()) * cosl(x.imag()) - 2 * s * s, expl(x.real()) * sinl(x.imag()));
            return em1 / x;
        }
    case BILINEAR:
        return ld(1) / (ld(1) - x / ld(2));
    case POLY:
        return ld(1) + x * (ld(0.5) + x / ld(6));
    case HIGHORDER:
        return ld(1) + x / ld(2);
    case RK4:
        return ld(1) + x * (ld(0.5) + x * (ld(1) / 6 + x / ld(24)));
    }
    return 1;
}
cld abar_of(int m, cld x) {
    if (m == BILINEAR) return (ld(1) + x / ld(2)) / (ld(1) - x / ld(2));
    if (x.imag() == 0) return expl(x.real());
    return std::exp(x);
}

/* The error scale of reference.DiscretizeScale (scale.go, boundCoef), in
 * units of u: x carries |x|·u, Ā and g propagate it through their
 * derivatives and add their own evaluation error, Δ·g one more u. */
void discretize_scale(int m, ld delta, cld a, bool cx, double &sA, double &sB) {
    cld x = delta * a;
    ld r = std::abs(x), cf = cx ? 2 : 1;
    ld abar, dabar, evalA, g, dg, evalG;
    if (m == BILINEAR) {
        ld dn = std::abs(ld(1) - x / ld(2));
        abar = std::abs((ld(1) + x / ld(2)) / (ld(1) - x / ld(2)));
        dabar = 1 / (dn * dn);
        evalA = cf * ((1 + r / 2) * (1 + abar) / dn + 2 * abar);
        g = 1 / dn;
        dg = 0.5 / (dn * dn);
        evalG = cf * ((1 + r / 2) / (dn * dn) + 2 / dn);
    } else {
        ld e = expl(x.real());
        abar = dabar = e;
        evalA = cf * (2 + r) * e;
        auto horner = [&](int k, std::initializer_list<ld> c) {
            ld s = 0, p = 1;
            for (ld ci : c) {
                s += fabsl(ci) * p;
                p *= r;
            }
            return 2 * k * cf * s;
        };
        switch (m) {
        case ZOH:
            g = 1;
            dg = 0;
            evalG = 0;
            break;
        case FOH: {
            cld phi = g_of(FOH, x);
            g = std::abs(phi);
            cld d = r < 0.5 ? ld(0.5) + x * (ld(1) / 3 + x * (ld(1) / 8 + x / ld(30))) : (std::exp(x) - phi) / x;
            dg = std::abs(d);
            evalG = 4 * cf * g;
            if (r < 0.5)
                evalG = std::max(evalG, 28 * cf * std::abs(g_of(FOH, cld(r))));
            else
                evalG = std::max(evalG, cf * ((2 + r) * e + 2 * std::abs(std::exp(x) - ld(1))) / r);
            break;
        }
        case HIGHORDER:
            g = std::abs(ld(1) + x / ld(2));
            dg = 0.5;
            evalG = horner(1, {1, 0.5});
            break;
        case POLY:
            g = std::abs(ld(1) + x * (ld(0.5) + x / ld(6)));
            dg = std::abs(ld(0.5) + x / ld(3));
            evalG = horner(2, {1, 0.5, 1.0L / 6});
            break;
        default: /* RK4 */
            g = std::abs(ld(1) + x * (ld(0.5) + x * (ld(1) / 6 + x / ld(24))));
            dg = std::abs(ld(0.5) + x * (ld(1) / 3 + x / ld(8)));
            evalG = horner(3, {1, 0.5, 1.0L / 6, 1.0L / 24});
        }
    }
    ld sx = r * (cx ? 2 : 1);
    sA = double(dabar * sx + evalA);
    sB = double(fabsl(delta) * (dg * sx + evalG) + fabsl(delta) * g);
}

bool finite_c(cld z) { return isfinite(z.real()) && isfinite(z.imag()); }

void fuzz_discretize(Reader &rd) {
    int m = rd.byte() % 6, dt = rd.byte() % 2;
    bool cx = rd.byte() & 1;
    size_t esz = (dt == SSMK_F32 ? 4 : 8) * (cx ? 3 : 2);
    int64_t n = std::min<int64_t>(64, std::max<int64_t>(1, rd.n / esz));
    int w = cx ? 2 : 1;
    Buf delta(dt, n), a(dt, n * w), ab(dt, n * w), bc(dt, n * w);
    for (int64_t i = 0; i < n; i++) {
        delta.set(i, rd.value(dt));
        for (int k = 0; k < w; k++) a.set(i * w + k, rd.value(dt));
    }
    Buf delta0 = delta, a0 = a;
    if (ssmk_discretize(m, dt, cx, n, delta.ptr(), a.ptr(), ab.ptr(), bc.ptr()) != SSMK_OK)
        fail("ssmk_discretize failed on valid arguments");
    if (!delta.same(delta0) || !a.same(a0)) fail("ssmk_discretize modified its inputs");
    const double u = dt == SSMK_F32 ? 0x1p-24 : 0x1p-53, eta = dt == SSMK_F32 ? 0x1p-126 : 0x1p-1022;
    const double big = dt == SSMK_F32 ? 3.4028234663852886e38 : 1.7976931348623157e308;
    const double xmax = dt == SSMK_F32 ? 80 : 700;
    for (int64_t i = 0; i < n; i++) {
        ld d = delta.get(i);
        cld av(a.get(i * w), cx ? a.get(i * w + 1) : 0);
        cld ka(ab.get(i * w), cx ? ab.get(i * w + 1) : 0), kb(bc.get(i * w), cx ? bc.get(i * w + 1) : 0);
        bool nan_in = isnan(d) || isnan(av.real()) || isnan(av.imag());
        if (nan_in) {
            /* x is NaN in every precision: where the formula gives NaN (all
             * but zoh's Bcoef = Δ with a NaN a) the kernel must too. */
            cld x = d * av;
            if (!cx && ((isnan(abar_of(m, x).real()) && !isnan(ka.real())) ||
                        (isnan((d * g_of(m, x)).real()) && !isnan(kb.real()))))
                fail("NaN input, the formula gives NaN, the kernel does not (real A)");
            continue;
        }
        if (!isfinite(d) || !finite_c(av) || fabsl(d) > 1e30L) continue;
        cld x = d * av;
        /* Rule 1 applies where the dtype's own evaluation cannot overflow
         * an intermediate: |x| within exp's range and x representable. */
        if (std::abs(x) > xmax || std::abs(x) > big) continue;
        if (m == BILINEAR && std::abs(ld(1) - x / ld(2)) < 1e-3L)
            continue; /* the pole: error model holds, but skip the overflow band */
        cld wa = abar_of(m, x), wb = d * g_of(m, x);
        if (!finite_c(wa) || !finite_c(wb)) continue;
        if (fabsl(wa.real()) > big / 2 || fabsl(wa.imag()) > big / 2 || fabsl(wb.real()) > big / 2 ||
            fabsl(wb.imag()) > big / 2)
            continue;
        double sA, sB;
        discretize_scale(m, d, av, cx, sA, sB);
        double tolA = 4 * (u * sA + 2 * eta), tolB = 4 * (u * sB + 2 * eta);
        if (!(double(std::abs(ka - wa)) <= tolA) || !(double(std::abs(kb - wb)) <= tolB)) {
            fprintf(stderr,
                    "method %d dtype %d complex %d at delta %.17Lg a (%.17Lg, %.17Lg): Abar (%.17Lg, %.17Lg) want "
                    "(%.17Lg, %.17Lg) tol %g; Bcoef (%.17Lg, %.17Lg) want (%.17Lg, %.17Lg) tol %g\n",
                    m, dt, cx, d, av.real(), av.imag(), ka.real(), ka.imag(), wa.real(), wa.imag(), tolA, kb.real(),
                    kb.imag(), wb.real(), wb.imag(), tolB);
            fail("ssmk_discretize outside the error model");
        }
    }
}

/* ---- the scan ---- */

struct ScanCase {
    int batch, dim, L, N, groups, method, cx, varB, varC, softplus;
    bool hasD, hasZ, hasBias, state;
    std::vector<double> u, delta, A, B, C, D, z, bias;
};

size_t bc_len(const ScanCase &s, bool variable) {
    return size_t(variable ? s.batch * s.groups * s.N * s.L : s.dim * s.N) * (s.cx ? 2 : 1);
}

/* Runs the scan in dtype dt; out and state receive the results. */
void run_scan(const ScanCase &s, int dt, std::vector<double> &out, std::vector<double> &state) {
    auto mk = [&](const std::vector<double> &v) {
        Buf b(dt, v.size());
        for (size_t i = 0; i < v.size(); i++) b.set(i, v[i]);
        return b;
    };
    Buf u = mk(s.u), delta = mk(s.delta), A = mk(s.A), B = mk(s.B), C = mk(s.C), D = mk(s.D), z = mk(s.z),
        bias = mk(s.bias);
    std::vector<Buf *> ins = {&u, &delta, &A, &B, &C, &D, &z, &bias};
    std::vector<Buf> copies;
    for (Buf *b : ins) copies.push_back(*b);
    size_t nout = size_t(s.batch) * s.dim * s.L, nstate = size_t(s.batch) * s.dim * s.N * (s.cx ? 2 : 1);
    Buf o(dt, nout), st(dt, nstate);
    ssmk_scan_args a{};
    a.batch = s.batch;
    a.dim = s.dim;
    a.seqlen = s.L;
    a.dstate = s.N;
    a.n_groups = s.groups;
    a.method = s.method;
    a.dtype = dt;
    a.is_complex = s.cx;
    a.is_variable_B = s.varB;
    a.is_variable_C = s.varC;
    a.delta_softplus = s.softplus;
    a.u = u.ptr();
    a.delta = delta.ptr();
    a.A = A.ptr();
    a.B = B.ptr();
    a.C = C.ptr();
    a.D = s.hasD ? D.ptr() : nullptr;
    a.z = s.hasZ ? z.ptr() : nullptr;
    a.delta_bias = s.hasBias ? bias.ptr() : nullptr;
    a.out = o.ptr();
    a.last_state = s.state ? st.ptr() : nullptr;
    if (ssmk_scan_fwd(&a) != SSMK_OK) fail("ssmk_scan_fwd failed on valid arguments");
    for (size_t i = 0; i < ins.size(); i++)
        if (!ins[i]->same(copies[i])) fail("ssmk_scan_fwd modified an input");
    out.resize(nout);
    for (size_t i = 0; i < nout; i++) out[i] = o.get(i);
    state.resize(nstate);
    for (size_t i = 0; i < nstate; i++) state[i] = st.get(i);
}

/* The scan in long double, and for every output the magnitude M of its
 * terms (Σ|C|·H with H = |Ā|H + |Δ·g·B·u|, plus |D·u|, times the gate's
 * magnitude): the quantity the error model's bound is proportional to. */
void ref_scan(const ScanCase &s, std::vector<ld> &out, std::vector<ld> &mag, std::vector<ld> &tiny) {
    size_t nout = size_t(s.batch) * s.dim * s.L;
    out.assign(nout, 0);
    mag.assign(nout, 0);
    tiny.assign(nout, 0);
    int w = s.cx ? 2 : 1, per = s.dim / s.groups;
    for (int b = 0; b < s.batch; b++)
        for (int d = 0; d < s.dim; d++) {
            std::vector<cld> h(s.N, 0);
            std::vector<ld> H(s.N, 0);
            int g = d / per;
            for (int t = 0; t < s.L; t++) {
                size_t i = (size_t(b) * s.dim + d) * s.L + t;
                ld dt = s.delta[i] + (s.hasBias ? s.bias[d] : 0);
                const ld v = fabsl(dt);
                if (s.softplus && dt <= 20) dt = log1pl(expl(dt));
                ld xmax = 0;
                ld uu = s.u[i];
                cld y = 0;
                ld M = 0;
                for (int n = 0; n < s.N; n++) {
                    cld av(s.A[(d * s.N + n) * w], s.cx ? s.A[(d * s.N + n) * w + 1] : 0);
                    auto at = [&](const std::vector<double> &v, bool variable) {
                        size_t k =
                            variable ? (((size_t(b) * s.groups + g) * s.N + n) * s.L + t) * w : size_t(d * s.N + n) * w;
                        return cld(v[k], s.cx ? v[k + 1] : 0);
                    };
                    cld x = dt * av;
                    xmax = std::max(xmax, std::abs(x));
                    cld bb = at(s.B, s.varB), cc = at(s.C, s.varC);
                    cld ab = abar_of(s.method, x), gb = dt * g_of(s.method, x) * bb * uu;
                    h[n] = ab * h[n] + gb;
                    /* A polynomial g is bounded by Σ|cᵢ||x|ⁱ, not |g|:
                     * complex x can cancel its terms, not their errors. */
                    ld r = std::abs(x), gm = std::abs(g_of(s.method, x));
                    if (s.method == POLY) gm = 1 + r / 2 + r * r / 6;
                    if (s.method == HIGHORDER) gm = 1 + r / 2;
                    if (s.method == RK4) gm = 1 + r / 2 + r * r / 6 + r * r * r / 24;
                    H[n] = std::abs(ab) * H[n] + fabsl(dt) * gm * std::abs(bb * uu);
                    y += cc * h[n];
                    M += std::abs(cc) * H[n];
                }
                ld yr = s.cx ? 2 * y.real() : y.real();
                M *= s.cx ? 2 : 1;
                if (s.hasD) {
                    yr += s.D[d] * uu;
                    M += fabsl(s.D[d] * uu);
                }
                /* Underflow: each of the t + 1 + N + 2 operations may flush a
                 * result below η, which the gate can scale by |z|. */
                tiny[i] = (t + s.N + 3) * (1 + M * (1 + (s.hasZ ? fabsl(s.z[i]) : 0)));
                if (s.hasZ) {
                    ld zz = s.z[i], sg = zz / (1 + expl(-zz));
                    yr *= sg;
                    M = M * fabsl(sg) + fabsl(yr);
                }
                out[i] = yr;
                /* The error model's relative factor, first order, taken
                 * whole: the t + 1 steps of the recurrence and the N-term sum
                 * round, e^x, softplus and the gate's e^−z by the
                 * exp2(x·log2e) route carry |x|·u, |v|·u and |z|·u, a
                 * degree-k g(x) k·|x|·u plus Horner's rounding (4|x| covers
                 * k ≤ 3), the rest a few u; complex operations twice as
                 * many. */
                mag[i] = M * (16 + 2 * (t + 1) + s.N + v + 4 * xmax + (s.hasZ ? fabsl(s.z[i]) : 0)) * (s.cx ? 2 : 1);
            }
        }
}

/* The largest scan ratio |kernel − long double|/(u·S + η·T) seen, per
 * dtype, printed at exit: the measured basis of SCAN_TOL. */
double g_max_ratio[2] = {0, 0};

void print_max_ratio() {
    fprintf(stderr, "ssmk_fuzz: largest scan ratio: float32 %.3g, float64 %.3g (tolerance %.0Lf)\n", g_max_ratio[0],
            g_max_ratio[1], SCAN_TOL);
}

void dump(const ScanCase &s) {
    fprintf(stderr,
            "batch %d dim %d seqlen %d dstate %d groups %d method %d complex %d varB %d varC %d softplus %d D %d z %d "
            "bias %d state %d\n",
            s.batch, s.dim, s.L, s.N, s.groups, s.method, s.cx, s.varB, s.varC, s.softplus, s.hasD, s.hasZ, s.hasBias,
            s.state);
    const char *names[] = {"u", "delta", "A", "B", "C", "D", "z", "delta_bias"};
    const std::vector<double> *arrs[] = {&s.u, &s.delta, &s.A, &s.B, &s.C, &s.D, &s.z, &s.bias};
    for (int k = 0; k < 8; k++) {
        fprintf(stderr, "%s:", names[k]);
        for (size_t i = 0; i < arrs[k]->size() && i < 12; i++) fprintf(stderr, " %.9g", (*arrs[k])[i]);
        fprintf(stderr, arrs[k]->size() > 12 ? " …\n" : "\n");
    }
}

void fuzz_scan(Reader &rd) {
    ScanCase s{};
    s.batch = 1 + rd.byte() % 2;
    s.dim = 1 + rd.byte() % 4;
    s.L = 1 + rd.byte() % 24;
    s.N = 1 + rd.byte() % 16;
    uint8_t f = rd.byte();
    s.method = rd.byte() % 6;
    s.groups = (s.dim % 2 == 0 && (f & 0x80)) ? 2 : 1;
    s.cx = f & 1;
    s.varB = (f >> 1) & 1;
    s.varC = (f >> 2) & 1;
    s.softplus = (f >> 3) & 1;
    s.hasD = f & 0x10;
    s.hasZ = f & 0x20;
    s.hasBias = f & 0x40;
    s.state = rd.byte() & 1;
    if (rd.byte() == 0xff) s.N = ssmk_max_dstate();
    uint8_t mode = rd.byte();
    int vdt = mode % 2;   /* the dtype raw bits are read in */
    bool tame = mode & 2; /* values ±10^e, e in [−3, 2), from 2 bytes each */
    size_t nio = size_t(s.batch) * s.dim * s.L;
    auto fill = [&](std::vector<double> &v, size_t n) {
        v.resize(n);
        for (auto &x : v) {
            if (tame) {
                unsigned bits = rd.byte() | unsigned(rd.byte()) << 8;
                x = pow(10.0, -3 + 5 * double(bits & 0x7fff) / 0x8000) * ((bits & 0x8000) ? -1 : 1);
            } else {
                x = rd.value(vdt);
            }
        }
    };
    fill(s.u, nio);
    fill(s.delta, nio);
    fill(s.A, size_t(s.dim) * s.N * (s.cx ? 2 : 1));
    fill(s.B, bc_len(s, s.varB));
    fill(s.C, bc_len(s, s.varC));
    fill(s.D, s.dim);
    fill(s.z, nio);
    fill(s.bias, s.dim);
    /* Inputs are rounded to float32 so both dtypes see the same values. */
    bool moderate = true;
    for (auto *v : {&s.u, &s.delta, &s.A, &s.B, &s.C, &s.D, &s.z, &s.bias})
        for (auto &x : *v) {
            x = double(float(x));
            if (!(fabs(x) <= 1e3)) moderate = false;
        }
    /* Stable: Δ ≥ 0 after the bias (softplus makes it so) and Re A ≤ 0. */
    for (size_t i = 0; i < nio; i++) {
        if (tame) s.delta[i] = fabs(s.delta[i]);
        if (!s.softplus && s.delta[i] + (s.hasBias ? s.bias[i / s.L % s.dim] : 0) < 0) moderate = false;
    }
    if (tame && s.hasBias && !s.softplus)
        for (auto &b : s.bias) b = fabs(b);
    for (int i = 0; i < s.dim * s.N; i++) {
        double &re = s.A[i * (s.cx ? 2 : 1)];
        if (tame) re = -fabs(re);
        if (re > 0) moderate = false;
    }
    std::vector<ld> ref, mag, tiny;
    ref_scan(s, ref, mag, tiny);
    for (int dt = 0; dt < 2; dt++) {
        std::vector<double> out, state;
        run_scan(s, dt, out, state);
        const ld u = dt == SSMK_F32 ? 0x1p-24L : 0x1p-53L;
        for (size_t i = 0; i < out.size(); i++) {
            if (!s.cx && isnan(ref[i]) && !isnan(out[i]))
                fail("the long double scan is NaN, the kernel's is not (real A)");
            /* Tolerance: for moderate stable inputs (|values| ≤ 1e3, Re A ≤ 0)
             * SCAN_TOL·(u·S + η·T) with S and T from ref_scan: a coarse,
             * first-order form of reference.ErrorScale that ignores how
             * errors cancel and compound (Go's FuzzScan applies the full
             * model at threshold 4, and is the precise gate). S is the
             * magnitude sum M (≥ |y|) times 16 + 2(t + 1) + N + … ≥ 19, so
             * SCAN_TOL = 1024 allows at least 1.2e-3 of M in float32 (2.2e-12
             * in float64) at the first step, growing with t and N (about
             * 1e-2 of M at t = 64, N = 16): far below the O(1) error of a
             * wrong formula, index or flag, not a test of the last bits.
             * The largest ratio measured is printed at exit. */
            if (moderate && isfinite(ref[i]) && isfinite(mag[i]) && mag[i] < 1e30L) {
                const ld eta = dt == SSMK_F32 ? 0x1p-126L : 0x1p-1022L;
                ld tol = SCAN_TOL * (u * mag[i] + eta * tiny[i]);
                ld ratio = fabsl(out[i] - ref[i]) / (u * mag[i] + eta * tiny[i]);
                if (ratio > g_max_ratio[dt]) g_max_ratio[dt] = double(ratio);
                if (!(fabsl(out[i] - ref[i]) <= tol)) {
                    fprintf(stderr,
                            "scan dtype %d method %d complex %d output %zu: kernel %.17g, long double %.17Lg, "
                            "magnitude %.3Lg, tolerance %.3Lg\n",
                            dt, s.method, s.cx, i, out[i], ref[i], mag[i], tol);
                    dump(s);
                    fail("ssmk_scan_fwd outside the tolerance");
                }
            }
        }
    }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    ssmk_set_num_threads(1);
    atexit(print_max_ratio);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    Reader rd{data, size};
    if (rd.byte() % 2 == 0)
        fuzz_discretize(rd);
    else
        fuzz_scan(rd);
    return 0;
}

/*
 * cpu_backward.cpp — the backward pass of the CPU build (SSMK_CAP_BACKWARD).
 *
 * For each (batch, dim) row the forward runs once, keeping the state at the
 * start of every chunk of kChunk steps; then the chunks are taken from the
 * last to the first, each recomputing its states from its start and running
 * the adjoint back through it (λ = ∂L/∂h, k = 1 for real A and 2 for complex
 * A, conj the identity on real values):
 *
 *   λ_t  = conj(Ā_{t+1})·λ_{t+1} + k·dy_t·conj(C_t)       λ after the last step = dlast_state
 *   dC_t += k·dy_t·conj(h_t)         dB_t += conj(Δ·g·u)·λ_t      du_t += Re(λ_t·conj(Δ·g·B))
 *   ∂L/∂x = conj(Ā'(x))·conj(h_{t−1})·λ_t + conj(g'(x))·conj(Δ·u·B)·λ_t
 *   dΔ_t = Re(λ_t·conj(g·B·u)) + Re(∂L/∂x·conj(a)) summed over states, times softplus'
 *   dA   += Δ·∂L/∂x
 *
 * Determinism: the rows of one (batch, group) run in order on one thread,
 * which owns that group's variable dB and dC; the sums over batch (dA, dD,
 * ddelta_bias, constant dB and dC) go through per-row partials added in a
 * fixed order. Two calls give bitwise equal gradients whatever the team.
 */
#include <cmath>
#include <new>
#include <type_traits>
#include <vector>

#include "cpu_plan.h"
#include "ssmk.h"
#include "ssmk_derivs.h"
#include "ssmk_host.h"
#include "ssmk_methods.h"
#include "ssmk_narrow.h"

using namespace ssmk;

namespace {

/* Steps per chunk of the reverse sweep: its states are recomputed from
 * the chunk's first, so memory is (L/kChunk + kChunk)·dstate per row. */
constexpr int kChunk = 64;

/* The method the backward differentiates: the call's, or zoh's whatever
 * the call (mutant 29, the bug of the fork whose autograd ran zoh's
 * backward for every method). */
inline int backward_method(int m) { return m; }

/* One call's arrays, typed: T the dtype's scalar, V it or cplx<T>. */
template <typename T, typename V>
struct Bwd {
    const ssmk_scan_args *a;
    const ssmk_scan_grads *g;
    const V *h0;
    int32_t in_dtype;       /* the caller's dtype (a->dtype is F32 for the 16-bit types, whose inputs are widened) */
    int L, Lp, N, dim, cpg; /* Lp: the steps the sweep runs (L; mutant 32 pads to whole chunks) */
    /* per-row partials of the sums over batch */
    V *pA, *pB, *pC;
    T *pD, *pBias;
    /* saved states (ssmk_plan_create_bwd_saved): every row's chunk starts,
     * or NULL; the stages to run */
    V *saved = nullptr;
    bool states = true, grads = true;

    /* B or C element (n, t) of row (b, d); 0 past the sequence (mutant 32). */
    V bc(const void *p, int32_t variable, int b, int d, int n, int t) const {
        if (!variable) return ((const V *)p)[(int64_t)d * N + n];
        if (t >= L) return V{};
        return ((const V *)p)[(((int64_t)b * a->n_groups + d / cpg) * N + n) * L + t];
    }
    T seq(const void *p, int64_t row, int t) const { return t < L ? ((const T *)p)[row * L + t] : T(0); }
};

/* A running sum of a variable dB or dC over a group's channels, which the
 * backward keeps in float (mutant 38 rounds it to the input type after
 * every channel, as 16-bit atomics into the gradient would). */
template <typename T, typename V>
V sum16(const Bwd<T, V> &w, V v) {
    (void)w;
    return v;
}

/* The forward step t of a row: h ← Ā·h + Δ·g·B·u for every state. */
template <typename T, typename V>
void forward_step(const Bwd<T, V> &w, int b, int d, int t, const V *A, V *h) {
    const ssmk_scan_args *a = w.a;
    const int64_t row = (int64_t)b * w.dim + d;
    const T dt = step_dt(w.seq(a->delta, row, t), (const T *)a->delta_bias, d, a->delta_softplus);
    const T u = w.seq(a->u, row, t);
    const int m = backward_method(a->method);
    for (int n = 0; n < w.N; n++) {
        V ab, g, dab, dg;
        coef_deriv(m, vscale(A[n], dt), ab, g, dab, dg);
        h[n] = vadd(vmul(ab, h[n]), vscale(vmul(g, w.bc(a->B, a->is_variable_B, b, d, n, t)), dt * u));
    }
}

/* The backward of one row (b, d). */
template <typename T, typename V>
void backward_row(const Bwd<T, V> &w, int b, int d) {
    constexpr bool kComplex = !std::is_same<T, V>::value;
    const ssmk_scan_args *a = w.a;
    const ssmk_scan_grads *gr = w.g;
    const int N = w.N, L = w.L, Lp = w.Lp, chunks = (Lp + kChunk - 1) / kChunk;
    const int64_t row = (int64_t)b * w.dim + d;
    const T k = kComplex ? T(2) : T(1);
    const int m = backward_method(a->method);
    const V *A = (const V *)a->A + (int64_t)d * N;
    std::vector<V> own(w.saved ? 0 : (size_t)(chunks + 1) * N), hs((size_t)(kChunk + 1) * N), lam(N), next(N);
    V *starts = w.saved ? w.saved + (size_t)row * (chunks + 1) * N : own.data();
    if (w.states) {
        for (int n = 0; n < N; n++) starts[n] = w.h0 ? w.h0[row * N + n] : V{};
        for (int c = 0; c < chunks; c++) {
            V *h = &starts[(size_t)(c + 1) * N];
            for (int n = 0; n < N; n++) h[n] = h[n - N];
            for (int t = c * kChunk; t < Lp && t < (c + 1) * kChunk; t++) forward_step(w, b, d, t, A, h);
        }
    }
    if (!w.grads) return;
    for (int n = 0; n < N; n++) {
        lam[n] = gr->dlast_state ? ((const V *)gr->dlast_state)[row * N + n] : V{};
        next[n] = vone(V{});
    }
    V *pA = w.pA + row * N;
    for (int c = chunks - 1; c >= 0; c--) {
        const int t0 = c * kChunk, t1 = t0 + kChunk < Lp ? t0 + kChunk : Lp;
        for (int n = 0; n < N; n++) hs[n] = starts[(size_t)c * N + n];
        for (int t = t0; t < t1; t++) {
            for (int n = 0; n < N; n++) hs[(size_t)(t - t0 + 1) * N + n] = hs[(size_t)(t - t0) * N + n];
            forward_step(w, b, d, t, A, &hs[(size_t)(t - t0 + 1) * N]);
        }
        for (int t = t1 - 1; t >= t0; t--) {
            const V *hprev = &hs[(size_t)(t - t0) * N], *hcur = hprev + N;
            const T raw = w.seq(a->delta, row, t), u = w.seq(a->u, row, t);
            const T v = raw + (a->delta_bias ? ((const T *)a->delta_bias)[d] : T(0));
            const T dt = step_dt(raw, (const T *)a->delta_bias, d, a->delta_softplus);
            T dy = t < L ? ((const T *)gr->dout)[row * L + t] : T(0);
            V ysum{};
            for (int n = 0; n < N; n++) ysum = vadd(ysum, vmul(w.bc(a->C, a->is_variable_C, b, d, n, t), hcur[n]));
            if (a->z && t < L) {
                const T z = ((const T *)a->z)[row * L + t], sig = ssigmoid(z);
                T y = k * vre(ysum) + (a->D ? ((const T *)a->D)[d] * u : T(0));
                ((T *)gr->dz)[row * L + t] = dy * y * sgate_deriv(z, sig);
                dy *= z * sig;
            }
            T du = T(0), ddt = T(0);
            for (int n = 0; n < N; n++) {
                const V bv = w.bc(a->B, a->is_variable_B, b, d, n, t), cv = w.bc(a->C, a->is_variable_C, b, d, n, t);
                V ab, g, dab, dg;
                coef_deriv(m, vscale(A[n], dt), ab, g, dab, dg);
                lam[n] = vadd(vmul(vconj(next[n]), lam[n]), vscale(vconj(cv), k * dy));
                const V l = lam[n];
                const V dC = vscale(vconj(hcur[n]), k * dy), dB = vscale(vmul(vconj(g), l), dt * u);
                if (a->is_variable_C) {
                    if (t < L) {
                        V &e = ((V *)gr->dC)[(((int64_t)b * a->n_groups + d / w.cpg) * N + n) * L + t];
                        e = sum16(w, vadd(e, dC));
                    }
                } else {
                    w.pC[row * N + n] = vadd(w.pC[row * N + n], dC);
                }
                if (a->is_variable_B) {
                    if (t < L) {
                        V &e = ((V *)gr->dB)[(((int64_t)b * a->n_groups + d / w.cpg) * N + n) * L + t];
                        e = sum16(w, vadd(e, dB));
                    }
                } else {
                    w.pB[row * N + n] = vadd(w.pB[row * N + n], dB);
                }
                const V lgb = vmul(l, vconj(vmul(g, bv))); /* λ·conj(g·B) */
                du += vre(lgb) * dt;
                const V gxA = vmul(vconj(dab), vmul(vconj(hprev[n]), l));
                const V gxG = vscale(vmul(vconj(dg), vmul(vconj(bv), l)), dt * u);
                ddt += vre(lgb) * u + vre(vmul(vadd(gxA, gxG), vconj(A[n])));
                pA[n] = vadd(pA[n], vscale(vadd(gxA, gxG), dt));
                next[n] = ab;
            }
            if (a->D) {
                du += dy * ((const T *)a->D)[d];
                w.pD[row] += dy * u;
            }
            ddt *= step_dt_deriv(v, a->delta_softplus);
            if (t < L) {
                ((T *)gr->du)[row * L + t] = du;
                ((T *)gr->ddelta)[row * L + t] = ddt;
            }
            if (a->delta_bias) w.pBias[row] += ddt;
        }
    }
    if (gr->dinitial_state)
        for (int n = 0; n < N; n++) ((V *)gr->dinitial_state)[row * N + n] = vmul(vconj(next[n]), lam[n]);
}

template <typename T, typename V>
void backward_t(const ssmk_scan_args *a, const void *h0, const ssmk_scan_grads *g, int32_t in_dtype, BwdSaved *saved) {
    const ScanSizes s = scan_sizes(a);
    const int N = a->dstate, dim = a->dim, G = a->n_groups, B = a->batch;
    const int64_t rows = (int64_t)B * dim;
    const bool grads = !saved || saved->grads;
    std::vector<V> pA(grads ? (size_t)rows * N : 0), pB(a->is_variable_B || !grads ? 0 : (size_t)rows * N),
        pC(a->is_variable_C || !grads ? 0 : (size_t)rows * N);
    std::vector<T> pD(a->D && grads ? rows : 0), pBias(a->delta_bias && grads ? rows : 0);
    Bwd<T, V> w{a,   g,       (const V *)h0, in_dtype,  a->seqlen, a->seqlen, N,
                dim, dim / G, pA.data(),     pB.data(), pC.data(), pD.data(), pBias.data()};
    if (saved) {
        const size_t bytes = (size_t)rows * ((a->seqlen + kChunk - 1) / kChunk + 1) * N * sizeof(V);
        if (saved->starts.size() != bytes) saved->starts.assign(bytes, 0);
        w.saved = (V *)saved->starts.data(), w.states = saved->states, w.grads = saved->grads;
    }
    if (grads && a->is_variable_B) memset(g->dB, 0, (size_t)s.b * s.w);
    if (grads && a->is_variable_C) memset(g->dC, 0, (size_t)s.c * s.w);
    for_rows((int64_t)B * G, [&w, B, G](int64_t task) {
        const int b = (int)(task / G), grp = (int)(task % G);
        (void)B;
        for (int d = grp * w.cpg; d < (grp + 1) * w.cpg; d++) backward_row(w, b, d);
    });
    if (!grads) return;
    /* The sums over batch, in batch order. */
    auto reduce = [rows, dim, B](const auto &part, auto *out, int per) {
        (void)rows;
        for (int64_t j = 0; j < (int64_t)dim * per; j++) {
            auto acc = part[(size_t)j];
            for (int b = 1; b < B; b++) acc = vadd(acc, part[(size_t)b * dim * per + j]);
            out[j] = acc;
        }
    };
    reduce(pA, (V *)g->dA, N);
    if (!a->is_variable_B) reduce(pB, (V *)g->dB, N);
    if (!a->is_variable_C) reduce(pC, (V *)g->dC, N);
    if (a->D) reduce(pD, (T *)g->dD, 1);
    if (a->delta_bias) reduce(pBias, (T *)g->ddelta_bias, 1);
}

/* A gradient of a 16-bit input type's call: the float32 value rounded once
 * to nearest (mutant 35 truncates it toward zero instead). */
template <typename I>
I narrow_grad(float v) {
    return narrow<I>(v);
}

/* The backward of a 16-bit input type I: the inputs (u, Δ, z, variable B/C
 * and dout) widened exactly to float, the float32 backward on them, and
 * each input-typed gradient (du, ddelta, dz, variable dB/dC) rounded once
 * to I; the weight-typed ones (dA, constant dB/dC, dD, ddelta_bias,
 * dinitial_state) are the float32 backward's own. */
template <typename I, typename V>
void backward_narrow(const ssmk_scan_args *a, const void *h0, const ssmk_scan_grads *g, BwdSaved *saved) {
    const ScanSizes s = scan_sizes(a);
    auto wide = [](const void *p, int64_t n) {
        std::vector<float> out(p ? (size_t)n : 0);
        for (size_t i = 0; i < out.size(); i++) out[i] = widen(((const I *)p)[i]);
        return out;
    };
    const std::vector<float> u = wide(a->u, s.seq), delta = wide(a->delta, s.seq), z = wide(a->z, s.seq),
                             B = wide(a->is_variable_B ? a->B : nullptr, s.b),
                             C = wide(a->is_variable_C ? a->C : nullptr, s.c), dout = wide(g->dout, s.seq);
    std::vector<float> du((size_t)s.seq), ddelta((size_t)s.seq), dz(a->z ? (size_t)s.seq : 0),
        dB(a->is_variable_B ? (size_t)s.b : 0), dC(a->is_variable_C ? (size_t)s.c : 0);
    ssmk_scan_args f = *a;
    f.dtype = SSMK_F32;
    f.u = u.data(), f.delta = delta.data(), f.z = a->z ? z.data() : nullptr;
    if (a->is_variable_B) f.B = B.data();
    if (a->is_variable_C) f.C = C.data();
    ssmk_scan_grads fg = *g;
    fg.dout = dout.data(), fg.du = du.data(), fg.ddelta = ddelta.data(), fg.dz = a->z ? dz.data() : nullptr;
    if (a->is_variable_B) fg.dB = dB.data();
    if (a->is_variable_C) fg.dC = dC.data();
    backward_t<float, V>(&f, h0, &fg, a->dtype, saved);
    if (saved && !saved->grads) return;
    auto store = [](const std::vector<float> &from, void *to) {
        for (size_t i = 0; i < from.size(); i++) ((I *)to)[i] = narrow_grad<I>(from[i]);
    };
    store(du, g->du);
    store(ddelta, g->ddelta);
    if (a->z) store(dz, g->dz);
    if (a->is_variable_B) store(dB, g->dB);
    if (a->is_variable_C) store(dC, g->dC);
}

} /* namespace */

namespace ssmk {

void run_backward(const ssmk_scan_args *a, const void *h0, const ssmk_scan_grads *g, BwdSaved *saved) {
    switch (a->dtype) {
    case SSMK_F64:
        if (a->is_complex) return backward_t<double, cplx<double>>(a, h0, g, a->dtype, saved);
        return backward_t<double, double>(a, h0, g, a->dtype, saved);
    case SSMK_F16:
        if (a->is_complex) return backward_narrow<half16, cplx<float>>(a, h0, g, saved);
        return backward_narrow<half16, float>(a, h0, g, saved);
    case SSMK_BF16:
        if (a->is_complex) return backward_narrow<bfloat16, cplx<float>>(a, h0, g, saved);
        return backward_narrow<bfloat16, float>(a, h0, g, saved);
    default:
        if (a->is_complex) return backward_t<float, cplx<float>>(a, h0, g, a->dtype, saved);
        return backward_t<float, float>(a, h0, g, a->dtype, saved);
    }
}

} /* namespace ssmk */

namespace {

int32_t plan_bwd(const ssmk_scan_args *args, const void *initial_state, const ssmk_scan_grads *grads, bool saved,
                 ssmk_plan **plan) {
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    if (int32_t st = validate_bwd_call(args, grads)) return st;
    ssmk_plan *p = new (std::nothrow) ssmk_plan;
    if (!p) return fail(SSMK_ENOMEM, "out of host memory for the plan");
    p->kind = ssmk_plan::BACKWARD;
    p->args = *args;
    p->args.out = p->args.last_state = nullptr;
    p->sz = scan_sizes(args);
    const ScanSizes &s = p->sz;
    bool oom = false;
    auto keep = [p, &oom](const void *src, int64_t count, size_t elem) -> void * {
        void *q = dup(src, count, elem, &oom);
        if (q) p->owned.push_back(q);
        return q;
    };
    auto alloc = [p, &oom](const void *wanted, int64_t count, size_t elem) -> void * {
        if (!wanted) return nullptr;
        void *q = malloc((size_t)count * elem);
        if (!q) oom = true;
        if (q) p->owned.push_back(q);
        return q;
    };
    ssmk_scan_args &a = p->args;
    a.u = keep(a.u, s.seq, s.in);
    a.delta = keep(a.delta, s.seq, s.in);
    a.A = keep(a.A, s.a, s.w);
    a.B = keep(a.B, s.b, s.b_elem);
    a.C = keep(a.C, s.c, s.c_elem);
    a.D = keep(a.D, s.dim, s.w);
    a.z = keep(a.z, s.seq, s.in);
    a.delta_bias = keep(a.delta_bias, s.dim, s.w);
    p->h0 = keep(initial_state, s.state, s.w);
    ssmk_scan_grads &g = p->grads;
    g.dout = keep(grads->dout, s.seq, s.in);
    g.dlast_state = keep(grads->dlast_state, s.state, s.w);
    g.du = alloc(grads->du, s.seq, s.in);
    g.ddelta = alloc(grads->ddelta, s.seq, s.in);
    g.dA = alloc(grads->dA, s.a, s.w);
    g.dB = alloc(grads->dB, s.b, s.b_elem);
    g.dC = alloc(grads->dC, s.c, s.c_elem);
    g.dD = alloc(a.D ? grads->dD : nullptr, s.dim, s.w);
    g.dz = alloc(a.z ? grads->dz : nullptr, s.seq, s.in);
    g.ddelta_bias = alloc(a.delta_bias ? grads->ddelta_bias : nullptr, s.dim, s.w);
    g.dinitial_state = alloc(grads->dinitial_state, s.state, s.w);
    if (oom) {
        delete p;
        return fail(SSMK_ENOMEM, "out of host memory for the plan's buffers");
    }
    if (saved) {
        /* the states a training step's forward saves, once; each launch
         * then runs the gradients alone */
        p->saved = true, p->bwd.grads = false;
        run_backward(&p->args, p->h0, &p->grads, &p->bwd);
        p->bwd.states = false, p->bwd.grads = true;
    }
    *plan = p;
    return SSMK_OK;
}

} /* namespace */

extern "C" {

SSMK_API int32_t ssmk_scan_bwd(const ssmk_scan_args *args, const void *initial_state, const ssmk_scan_grads *grads) {
    if (int32_t st = validate_bwd_call(args, grads)) return st;
    run_backward(args, initial_state, grads);
    return SSMK_OK;
}

SSMK_API int32_t ssmk_plan_create_bwd(const ssmk_scan_args *args, const void *initial_state,
                                      const ssmk_scan_grads *grads, ssmk_plan **plan) {
    return plan_bwd(args, initial_state, grads, false, plan);
}

SSMK_API int32_t ssmk_plan_create_bwd_saved(const ssmk_scan_args *args, const void *initial_state,
                                            const ssmk_scan_grads *grads, ssmk_plan **plan) {
    return plan_bwd(args, initial_state, grads, true, plan);
}

SSMK_API int32_t ssmk_plan_fetch_bwd(ssmk_plan *p, const ssmk_scan_grads *grads) {
    if (!p) return fail(SSMK_EINVAL, "plan is NULL");
    if (p->kind != ssmk_plan::BACKWARD) return fail(SSMK_EINVAL, "plan is not a backward plan (ssmk_plan_create_bwd)");
    if (!grads) return fail(SSMK_EINVAL, "grads is NULL");
    if (!p->launched) return fail(SSMK_EINVAL, "plan has not been launched: nothing to fetch");
    GradCopy outs[kGradCopies];
    if (int32_t st = grad_copies(grads, p->grads, p->sz, outs)) return st;
    for (auto &o : outs)
        if (o.dst) memcpy(o.dst, o.src, o.bytes());
    return SSMK_OK;
}

} /* extern "C" */

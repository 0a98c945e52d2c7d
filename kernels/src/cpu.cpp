/*
 * cpu.cpp — the CPU build of the ssmk ABI (build/libssmk_cpu.so).
 *
 * The same method arithmetic as the CUDA kernels (ssmk_methods.h), run with
 * OpenMP over the batch × dim rows: each row's state lives in a local array
 * across the time loop, exactly as a GPU thread keeps it in registers.
 * Plans run synchronously and are timed with a monotonic clock.
 */
#include <stdlib.h>
#include <time.h>

#include <new>
#include <type_traits>

#include "cpu_plan.h"
#include "ssmk.h"
#include "ssmk_host.h"
#include "ssmk_methods.h"
#include "ssmk_narrow.h"

using namespace ssmk;

namespace {

double now_ms() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* Output element i (row·L + t) with its gate applied: finish_output with z[i]
 * where there is a z, stored in the input type I. */
template <typename I, typename T>
void store_output(const ssmk_scan_args *a, int64_t i, T y, T u, int d) {
    const T v = finish_output(y, u, (const T *)a->D, d, a->z != nullptr, a->z ? T(widen(((const I *)a->z)[i])) : T(0));
    ((I *)a->out)[i] = narrow<I>(v);
}

/* Row row's initial state: h0[row·N …] (the layout of last_state), or 0. */
template <typename V>
V initial_of(const V *h0, int64_t row, int N, int n, int dim) {
    if (!h0) return V{};
    (void)dim;
    return h0[row * N + n];
}

template <typename V>
struct real_of {
    using type = V;
};
template <typename T>
struct real_of<cplx<T>> {
    using type = T;
};

/* B or C as a row reads it: element (n, t) at p + n·ns + t·ts, in V where
 * the array is of the weight type (constant, or any array of a
 * full-precision dtype), else in the input type I (variable, 16-bit),
 * widened. */
template <typename I, typename V>
struct BCRow {
    const void *p;
    int64_t ns, ts;
    bool narrow; /* a variable array of a 16-bit input type */
};

template <typename I, typename V>
V bc_at(const BCRow<I, V> &s, int n, int t) {
    using T = typename real_of<V>::type;
    if constexpr (!std::is_same<I, T>::value) {
        if (s.narrow) {
            const I *e = (const I *)s.p + (n * s.ns + t * s.ts) * (int64_t)(sizeof(V) / sizeof(T));
            if constexpr (std::is_same<V, T>::value)
                return T(widen(e[0]));
            else
                return cmake(T(widen(e[0])), T(widen(e[1])));
        }
    }
    return ((const V *)s.p)[n * s.ns + t * s.ts];
}

template <typename I, typename V>
BCRow<I, V> bc_row(const ssmk_scan_args *a, const void *p, int32_t variable, int64_t row) {
    using T = typename real_of<V>::type;
    const int N = a->dstate, L = a->seqlen, b = (int)(row / a->dim), d = (int)(row % a->dim);
    if (variable) {
        const int64_t off = ((int64_t)b * a->n_groups + group_of(d, a->dim, a->n_groups)) * N * L;
        if (std::is_same<I, T>::value) return {(const V *)p + off, L, 1, false};
        return {(const I *)p + off * (int64_t)(sizeof(V) / sizeof(T)), L, 1, true};
    }
    return {(const V *)p + (int64_t)d * N, 1, 0, false};
}

/* One (batch, dim) row of the scan: inputs of type I (u, delta, variable
 * B/C, z, out), weights and state of type T (real) or cplx<T> (V). */
template <typename I, typename T, typename V>
void scan_row(const ssmk_scan_args *a, const void *h0, int64_t row) {
    constexpr bool kComplex = !std::is_same<T, V>::value;
    const int L = a->seqlen, N = a->dstate, d = (int)(row % a->dim);
    const I *u = (const I *)a->u + row * L, *delta = (const I *)a->delta + row * L;
    const V *A = (const V *)a->A + (int64_t)d * N;
    const BCRow<I, V> Bs = bc_row<I, V>(a, a->B, a->is_variable_B, row);
    const BCRow<I, V> Cs = bc_row<I, V>(a, a->C, a->is_variable_C, row);
    V h[SSMK_MAX_DSTATE];
    for (int n = 0; n < N; n++) h[n] = initial_of((const V *)h0, row, N, n, a->dim);
    for (int t = 0; t < L; t++) {
        const T dt = step_dt(T(widen(delta[t])), (const T *)a->delta_bias, d, a->delta_softplus);
        const T uu = T(widen(u[t]));
        V acc{};
        for (int n = 0; n < N; n++) {
            V ab, g;
            const V bv = bc_at(Bs, n, t), cv = bc_at(Cs, n, t);
            if constexpr (kComplex) {
                method_complex(a->method, cscale(A[n], dt), ab, g);
                const V bu = cscale(cmul(cscale(g, dt), bv), uu);
                h[n] = cadd(cmul(ab, h[n]), bu);
                acc = cadd(acc, c_times_h(cv, h[n]));
            } else {
                method_real(a->method, dt * A[n], ab, g);
                h[n] = ab * h[n] + (dt * g) * bv * uu;
                acc += cv * h[n];
            }
        }
        T y;
        if constexpr (kComplex)
            y = complex_output(acc.re);
        else
            y = acc;
        store_output<I>(a, row * L + t, y, uu, d);
    }
    if (a->last_state) {
        V *s = (V *)a->last_state + row * N;
        for (int n = 0; n < N; n++) s[n] = h[n];
    }
}

template <typename I, typename T>
void run_scan_t(const ssmk_scan_args *a, const void *h0) {
    const int64_t rows = (int64_t)a->batch * a->dim;
    if (a->is_complex)
        for_rows(rows, [a, h0](int64_t r) { scan_row<I, T, cplx<T>>(a, h0, r); });
    else
        for_rows(rows, [a, h0](int64_t r) { scan_row<I, T, T>(a, h0, r); });
}

/* The scan proper, on validated arguments: one instantiation per input
 * type, each computing in its weight type. */
void run_scan(const ssmk_scan_args *a, const void *h0 = nullptr) {
    switch (a->dtype) {
    case SSMK_F64:
        run_scan_t<double, double>(a, h0);
        break;
    case SSMK_F16:
        run_scan_t<half16, float>(a, h0);
        break;
    case SSMK_BF16:
        run_scan_t<bfloat16, float>(a, h0);
        break;
    default:
        run_scan_t<float, float>(a, h0);
        break;
    }
}

template <typename T>
void discretize_t(int32_t method, int32_t is_complex, int64_t n, const void *delta, const void *A, void *abar,
                  void *bcoef) {
    const T *dl = (const T *)delta;
    const int nt = threads();
    if (is_complex) {
        const cplx<T> *a = (const cplx<T> *)A;
        cplx<T> *ab = (cplx<T> *)abar, *bc = (cplx<T> *)bcoef;
#pragma omp parallel for num_threads(nt) schedule(static) if (n > 4096)
        for (int64_t i = 0; i < n; i++) {
            cplx<T> g;
            method_complex(method, cscale(a[i], dl[i]), ab[i], g);
            bc[i] = cscale(g, dl[i]);
        }
    } else {
        const T *a = (const T *)A;
        T *ab = (T *)abar, *bc = (T *)bcoef;
#pragma omp parallel for num_threads(nt) schedule(static) if (n > 4096)
        for (int64_t i = 0; i < n; i++) {
            T g;
            method_real(method, dl[i] * a[i], ab[i], g);
            bc[i] = dl[i] * g;
        }
    }
}

void run_discretize(int32_t method, int32_t dtype, int32_t is_complex, int64_t n, const void *delta, const void *A,
                    void *abar, void *bcoef) {
    if (dtype == SSMK_F64)
        discretize_t<double>(method, is_complex, n, delta, A, abar, bcoef);
    else
        discretize_t<float>(method, is_complex, n, delta, A, abar, bcoef);
}

} /* namespace */

extern "C" {

SSMK_API int32_t ssmk_abi_version(void) { return SSMK_ABI_VERSION; }

SSMK_API const char *ssmk_backend(void) { return "cpu"; }

SSMK_API int32_t ssmk_device_name(char *buf, int32_t len) {
    if (int32_t st = validate_name_buffer(buf, len)) return st;
    char model[256] = "unknown CPU";
    if (FILE *f = fopen("/proc/cpuinfo", "r")) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) == 0) {
                const char *c = strchr(line, ':');
                if (c) {
                    c++;
                    while (*c == ' ') c++;
                    snprintf(model, sizeof model, "%s", c);
                    model[strcspn(model, "\n")] = 0;
                }
                break;
            }
        }
        fclose(f);
    }
    snprintf(buf, (size_t)len, "%s (%d threads)%s", model, threads(),
             SSMK_CPU_ENGINE ? ", an engine's declaration (SSMK_CPU_ENGINE)" : "");
    return SSMK_OK;
}

SSMK_API int32_t ssmk_max_dstate(void) { return SSMK_MAX_DSTATE; }

SSMK_API uint32_t ssmk_capabilities(int32_t method, int32_t dtype, int32_t is_complex) {
    const uint32_t c = native_capabilities(method, dtype, is_complex, kNarrowInputs);
    /* The backward pass (cpu_backward.cpp): every combination the scan
     * takes, the 16-bit ones through their widened inputs; plans on saved
     * states keep every row's chunk states. */
    if (!c) return c;
    return c | SSMK_CAP_BACKWARD | SSMK_CAP_BWD_SAVED | (narrow_dtype(dtype) ? SSMK_CAP_BWD_NARROW : 0u);
}

SSMK_API int32_t ssmk_scan_features(int32_t method, int32_t dtype, int32_t is_complex, ssmk_feature_set *f) {
    const int32_t st = native_scan_features(method, dtype, is_complex, kNarrowInputs, f);
    if (st == SSMK_OK && SSMK_CPU_ENGINE) f->options = kEngineOptions;
    return st;
}

SSMK_API int32_t ssmk_set_num_threads(int32_t n) {
    int prev = threads();
    if (n > 0) __atomic_store_n(&g_threads, n, __ATOMIC_RELAXED);
    return prev;
}

SSMK_API const char *ssmk_last_error(void) { return error_buffer(); }

SSMK_API int32_t ssmk_discretize(int32_t method, int32_t dtype, int32_t is_complex, int64_t n, const void *delta,
                                 const void *A, void *Abar, void *Bcoef) {
    int32_t st = validate_discretize(method, dtype, is_complex, n, delta, A, Abar, Bcoef);
    if (st) return st;
    run_discretize(method, dtype, is_complex, n, delta, A, Abar, Bcoef);
    return SSMK_OK;
}

SSMK_API int32_t ssmk_scan_fwd(const ssmk_scan_args *args) {
    int32_t st = validate_call(args);
    if (st) return st;
    run_scan(args);
    return SSMK_OK;
}

SSMK_API int32_t ssmk_scan_fwd_state(const ssmk_scan_args *args, const void *initial_state) {
    int32_t st = validate_call(args);
    if (st) return st;
    run_scan(args, initial_state);
    return SSMK_OK;
}

SSMK_API int32_t ssmk_plan_create(const ssmk_scan_args *args, ssmk_plan **plan) {
    return ssmk_plan_create_state(args, nullptr, plan);
}

SSMK_API int32_t ssmk_plan_create_state(const ssmk_scan_args *args, const void *initial_state, ssmk_plan **plan) {
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    int32_t st = validate_call(args);
    if (st) return st;
    ssmk_plan *p = new (std::nothrow) ssmk_plan;
    if (!p) return fail(SSMK_ENOMEM, "out of host memory for the plan");
    p->kind = ssmk_plan::SCAN;
    p->args = *args;
    p->sz = scan_sizes(args);
    const ScanSizes &s = p->sz;
    bool oom = false;
    struct {
        const void **dst;
        int64_t count;
        size_t elem;
    } ins[] = {{&p->args.u, s.seq, s.in},   {&p->args.delta, s.seq, s.in},    {&p->args.A, s.a, s.w},
               {&p->args.B, s.b, s.b_elem}, {&p->args.C, s.c, s.c_elem},      {&p->args.D, s.dim, s.w},
               {&p->args.z, s.seq, s.in},   {&p->args.delta_bias, s.dim, s.w}};
    for (auto &in : ins) {
        *in.dst = dup(*in.dst, in.count, in.elem, &oom);
        if (*in.dst) p->owned.push_back((void *)*in.dst);
    }
    if (initial_state) {
        p->h0 = dup(initial_state, s.state, s.w, &oom);
        if (p->h0) p->owned.push_back((void *)p->h0);
    }
    p->args.out = malloc((size_t)s.seq * s.in);
    p->args.last_state = malloc((size_t)s.state * s.w);
    if (p->args.out) p->owned.push_back(p->args.out);
    if (p->args.last_state) p->owned.push_back(p->args.last_state);
    if (oom || !p->args.out || !p->args.last_state) {
        delete p;
        return fail(SSMK_ENOMEM, "out of host memory for the plan's buffers");
    }
    *plan = p;
    return SSMK_OK;
}

SSMK_API int32_t ssmk_plan_create_discretize(int32_t method, int32_t dtype, int32_t is_complex, int64_t n,
                                             const void *delta, const void *A, ssmk_plan **plan) {
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    /* Abar/Bcoef are the plan's own: validate with non-NULL stand-ins. */
    int32_t st = validate_discretize(method, dtype, is_complex, n, delta, A, plan, plan);
    if (st) return st;
    ssmk_plan *p = new (std::nothrow) ssmk_plan;
    if (!p) return fail(SSMK_ENOMEM, "out of host memory for the plan");
    p->kind = ssmk_plan::DISCRETIZE;
    p->method = method;
    p->dtype = dtype;
    p->is_complex = is_complex;
    p->n = n;
    size_t elem = dtype == SSMK_F64 ? 8 : 4, cw = is_complex ? 2 : 1;
    bool oom = false;
    p->delta = dup(delta, n, elem, &oom);
    p->A = dup(A, n * cw, elem, &oom);
    p->abar = malloc((size_t)n * cw * elem);
    p->bcoef = malloc((size_t)n * cw * elem);
    for (void *q : {p->delta, p->A, p->abar, p->bcoef})
        if (q) p->owned.push_back(q);
    if (oom || !p->abar || !p->bcoef) {
        delete p;
        return fail(SSMK_ENOMEM, "out of host memory for the plan's buffers");
    }
    *plan = p;
    return SSMK_OK;
}

SSMK_API int32_t ssmk_plan_launch(ssmk_plan *p) {
    if (!p) return fail(SSMK_EINVAL, "plan is NULL");
    switch (p->kind) {
    case ssmk_plan::SCAN:
        run_scan(&p->args, p->h0);
        break;
    case ssmk_plan::BACKWARD:
        run_backward(&p->args, p->h0, &p->grads, p->saved ? &p->bwd : nullptr);
        break;
    case ssmk_plan::DISCRETIZE:
        run_discretize(p->method, p->dtype, p->is_complex, p->n, p->delta, p->A, p->abar, p->bcoef);
        break;
    }
    p->launched = true;
    return SSMK_OK;
}

SSMK_API int32_t ssmk_plan_sync(ssmk_plan *p) {
    if (!p) return fail(SSMK_EINVAL, "plan is NULL");
    return SSMK_OK; /* launches are synchronous */
}

SSMK_API int32_t ssmk_plan_time(ssmk_plan *p, int32_t iters, double *ms_total) {
    int32_t st = validate_plan_time(p, iters, ms_total);
    if (st) return st;
    double t0 = now_ms();
    for (int32_t i = 0; i < iters; i++) ssmk_plan_launch(p);
    *ms_total = now_ms() - t0;
    return SSMK_OK;
}

SSMK_API int32_t ssmk_plan_fetch(ssmk_plan *p, void *out, void *last_state) {
    if (p && p->kind == ssmk_plan::BACKWARD)
        return fail(SSMK_EINVAL, "plan is a backward plan: fetch it with ssmk_plan_fetch_bwd");
    if (int32_t st = validate_fetch(p, out, p && p->launched)) return st;
    if (p->kind == ssmk_plan::SCAN) {
        memcpy(out, p->args.out, (size_t)p->sz.seq * p->sz.in);
        if (last_state) memcpy(last_state, p->args.last_state, (size_t)p->sz.state * p->sz.w);
        return SSMK_OK;
    }
    size_t bytes = (size_t)p->n * (p->is_complex ? 2 : 1) * (p->dtype == SSMK_F64 ? 8 : 4);
    memcpy(out, p->abar, bytes);
    if (last_state) memcpy(last_state, p->bcoef, bytes);
    return SSMK_OK;
}

SSMK_API void ssmk_plan_destroy(ssmk_plan *p) { delete p; }

SSMK_API int32_t ssmk_copy_bandwidth(int64_t bytes, int32_t iters, double *gbytes_per_s) {
    if (int32_t st = validate_copy_bandwidth(bytes, iters, gbytes_per_s)) return st;
    char *src = (char *)malloc((size_t)bytes), *dst = (char *)malloc((size_t)bytes);
    if (!src || !dst) {
        free(src);
        free(dst);
        return fail(SSMK_ENOMEM, "cannot allocate 2 x %lld bytes", (long long)bytes);
    }
    const int nt = threads();
    const int64_t chunk = (bytes + nt - 1) / nt;
    /* First touch by the threads that will copy, then one untimed copy. */
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int i = 0; i < nt; i++) {
        int64_t lo = i * chunk, hi = lo + chunk < bytes ? lo + chunk : bytes;
        if (lo < hi) {
            memset(src + lo, i + 1, (size_t)(hi - lo));
            memset(dst + lo, 0, (size_t)(hi - lo));
        }
    }
    double t0 = 0;
    for (int32_t it = -1; it < iters; it++) {
        if (it == 0) t0 = now_ms();
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int i = 0; i < nt; i++) {
            int64_t lo = i * chunk, hi = lo + chunk < bytes ? lo + chunk : bytes;
            if (lo < hi) memcpy(dst + lo, src + lo, (size_t)(hi - lo));
        }
    }
    double ms = now_ms() - t0;
    free(src);
    free(dst);
    *gbytes_per_s = ms > 0 ? 2.0 * (double)bytes * iters / (ms * 1e6) : 0;
    return SSMK_OK;
}

} /* extern "C" */

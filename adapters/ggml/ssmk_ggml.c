/*
 * ssmk_ggml.c — the ssmk ABI (cudalib/include/ssmk.h) over ggml's
 * ggml_ssm_scan, the selective scan of llama.cpp's Mamba-1 and Mamba-2
 * models, on ggml's CPU backend or, built with SSMK_GGML_CUDA, its CUDA
 * backend.
 *
 * This file is ours; it includes the user's ggml.h and links the user's
 * libggml (adapters/ggml/build.sh builds both from a ggml or llama.cpp
 * checkout). Each scan is one graph of one op, as llama.cpp builds it:
 *
 *   ggml_ssm_scan(ctx, s, x, dt, A, B, C, ids[, K = 1])
 *     s  {dstate, head_dim, n_head, batch}  the initial state, row ids[b] for sequence b
 *     x  {head_dim, n_head, seqlen, batch}  u, token-major
 *     dt {n_head, seqlen, batch}            Δ before softplus, one per head
 *     A  {dstate, n_head} (Mamba-1) or {1, n_head} (Mamba-2: one per head)
 *     B, C {dstate, n_groups, seqlen, batch}
 *   → y {head_dim, n_head, seqlen, batch} followed by the last state.
 *
 * The ABI's arrays are transposed into these on the host (ggml's layouts
 * are token-major; the ABI's are channel-major). Two modes, chosen by the
 * environment when a call is made:
 *
 *   SSMK_GGML_HEAD_DIM unset or 0 — Mamba-1: every channel is a head of one
 *     (n_head = dim), A per channel and state.
 *   SSMK_GGML_HEAD_DIM = k ≥ 1 — Mamba-2: heads of k channels, A and Δ one
 *     value per head. The library declares that structure
 *     (ssmk_feature_set.head_dim) and refuses inputs without it.
 *
 * The sequence ids are exercised: the initial state of batch row b is
 * stored in row batch−1−b of s and ids[b] = batch−1−b.
 *
 * What ggml_ssm_scan does not do is declared, never emulated here: zoh
 * only, float32 only, real A only, no D, z or delta_bias (llama.cpp applies
 * them with other ops), softplus always, B and C per token (no constant
 * B/C: a Mamba model's are always input-dependent); the CUDA backend's shapes (its
 * supports_op at the commit tested: Mamba-1 dstate 16, dim a multiple of
 * 128, one group; Mamba-2 dstate 128 or 256, head_dim a multiple of 16).
 * Every argument is validated before ggml sees it, because ggml aborts the
 * process on a failed assertion; ggml_backend_supports_op is asked before
 * every compute, so that a shape the declaration got wrong is a refusal,
 * not an abort.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#ifdef SSMK_GGML_CUDA
#include "ggml-cuda.h"
#endif

#include "ssmk.h"

#ifndef SSMK_GGML_COMMIT
#define SSMK_GGML_COMMIT "unknown"
#endif
/* ggml_ssm_scan's last argument K (states kept for rollback) since
 * ggml-org/ggml 66d09fae; build.sh detects it in ggml.h. */
#ifndef SSMK_GGML_SCAN_K
#define SSMK_GGML_SCAN_K 0
#endif

#define MAX_DSTATE 256

static _Thread_local char g_error[1024];

static int32_t fail(int32_t status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_error, sizeof g_error, fmt, ap);
    va_end(ap);
    return status;
}

/* One backend for the library's lifetime; ggml's backends are not safe for
 * concurrent graph computes, so every use holds g_lock. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static ggml_backend_t g_backend;
static int g_threads;

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

/* backend returns the backend, creating it on first use; NULL with the
 * error set when it cannot be created. Called with g_lock held. */
static ggml_backend_t backend(void) {
    if (g_backend) return g_backend;
    ggml_log_set(quiet_log, NULL);
#ifdef SSMK_GGML_CUDA
    g_backend = ggml_backend_cuda_init(0);
    if (!g_backend) fail(SSMK_ENODEVICE, "ggml_backend_cuda_init(0) failed: no usable CUDA device");
#else
    g_backend = ggml_backend_cpu_init();
    if (!g_backend) {
        fail(SSMK_EDEVICE, "ggml_backend_cpu_init() failed");
    } else {
        if (g_threads < 1) {
            long n = sysconf(_SC_NPROCESSORS_ONLN);
            g_threads = n > 0 ? (int)n : 1;
        }
        ggml_backend_cpu_set_n_threads(g_backend, g_threads);
    }
#endif
    return g_backend;
}

/* head_dim is the mode: 0 for Mamba-1, k ≥ 1 for Mamba-2 heads of k; −1
 * for a value that is not a number in 0 … 65536. */
static int head_dim(void) {
    const char *s = getenv("SSMK_GGML_HEAD_DIM");
    if (!s || !*s) return 0;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < 0 || v > 65536) return -1;
    return (int)v;
}

#ifdef SSMK_GGML_CUDA
static const int is_cuda = 1;
#else
static const int is_cuda = 0;
#endif

/* The features of the one supported combination (zoh, float32, real A) in
 * the current mode; 0 when the mode cannot run on this backend. */
static int features(ssmk_feature_set *f) {
    int hd = head_dim();
    memset(f, 0, sizeof *f);
    f->options = SSMK_FEAT_SOFTPLUS_ON | SSMK_FEAT_VARIABLE_BC;
    f->dim_multiple = 1;
    if (hd < 0) return 0;
    if (hd == 0) {
        if (is_cuda) {
            f->dim_multiple = 128;
            f->max_groups = 1;
            f->dstates = 1u << 4;
        }
        return 1;
    }
    f->head_dim = hd;
    if (is_cuda) {
        if (hd % 16 != 0) return 0;
        f->dstates = 1u << 7 | 1u << 8;
    }
    return 1;
}

static int supported(int32_t method, int32_t dtype, int32_t is_complex) {
    ssmk_feature_set f;
    return method == SSMK_ZOH && dtype == SSMK_F32 && is_complex == 0 && features(&f);
}

SSMK_API int32_t ssmk_abi_version(void) { return SSMK_ABI_VERSION; }

SSMK_API const char *ssmk_backend(void) { return is_cuda ? "cuda" : "cpu"; }

SSMK_API int32_t ssmk_device_name(char *buf, int32_t len) {
    if (!buf) return fail(SSMK_EINVAL, "buf is NULL");
    if (len < 1) return fail(SSMK_EINVAL, "len = %d: want >= 1", len);
    pthread_mutex_lock(&g_lock);
    ggml_backend_t be = backend();
    char dev[256] = "?";
    if (be) {
        ggml_backend_dev_t d = ggml_backend_get_device(be);
        snprintf(dev, sizeof dev, "%s", d ? ggml_backend_dev_description(d) : ggml_backend_name(be));
    }
    pthread_mutex_unlock(&g_lock);
    if (!be) return is_cuda ? SSMK_ENODEVICE : SSMK_EDEVICE;
    int hd = head_dim();
    char mode[96];
    if (hd == 0)
        snprintf(mode, sizeof mode, "Mamba-1 path");
    else if (hd > 0)
        snprintf(mode, sizeof mode, "Mamba-2 path, heads of %d", hd);
    else
        snprintf(mode, sizeof mode, "SSMK_GGML_HEAD_DIM invalid: nothing supported");
    snprintf(buf, (size_t)len, "ggml %.12s %s %s (%s)", SSMK_GGML_COMMIT, is_cuda ? "CUDA" : "CPU", dev, mode);
    return SSMK_OK;
}

SSMK_API int32_t ssmk_max_dstate(void) { return MAX_DSTATE; }

SSMK_API uint32_t ssmk_capabilities(int32_t method, int32_t dtype, int32_t is_complex) {
    if (!supported(method, dtype, is_complex)) return 0;
    return SSMK_CAP_SUPPORTED | SSMK_CAP_SCAN_ONLY | SSMK_CAP_INITIAL_STATE | SSMK_CAP_FEATURES;
}

SSMK_API int32_t ssmk_scan_features(int32_t method, int32_t dtype, int32_t is_complex, ssmk_feature_set *f) {
    if (!f) return fail(SSMK_EINVAL, "f is NULL");
    if (!supported(method, dtype, is_complex))
        return fail(SSMK_EUNSUPPORTED,
                    "method = %d, dtype = %d, is_complex = %d: ggml_ssm_scan computes zoh in float32 with real A",
                    method, dtype, is_complex);
    features(f);
    return SSMK_OK;
}

SSMK_API int32_t ssmk_set_num_threads(int32_t n) {
    pthread_mutex_lock(&g_lock);
    if (g_threads < 1) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        g_threads = c > 0 ? (int)c : 1;
    }
    int prev = g_threads;
    if (n > 0) {
        g_threads = n;
#ifndef SSMK_GGML_CUDA
        if (g_backend) ggml_backend_cpu_set_n_threads(g_backend, n);
#endif
    }
    pthread_mutex_unlock(&g_lock);
    return prev;
}

SSMK_API const char *ssmk_last_error(void) { return g_error; }

SSMK_API int32_t ssmk_discretize(int32_t method, int32_t dtype, int32_t is_complex, int64_t n, const void *delta,
                                 const void *A, void *Abar, void *Bcoef) {
    (void)method, (void)dtype, (void)is_complex, (void)n, (void)delta, (void)A, (void)Abar, (void)Bcoef;
    return fail(SSMK_EUNSUPPORTED,
                "ggml_ssm_scan discretizes inside its scan: no ssmk_discretize (SSMK_CAP_SCAN_ONLY)");
}

SSMK_API int32_t ssmk_plan_create_discretize(int32_t method, int32_t dtype, int32_t is_complex, int64_t n,
                                             const void *delta, const void *A, ssmk_plan **plan) {
    (void)method, (void)dtype, (void)is_complex, (void)n, (void)delta, (void)A, (void)plan;
    return fail(SSMK_EUNSUPPORTED,
                "ggml_ssm_scan discretizes inside its scan: no discretize plans (SSMK_CAP_SCAN_ONLY)");
}

static int32_t check_flag(int32_t v, const char *name) {
    if (v == 0 || v == 1) return SSMK_OK;
    return fail(SSMK_EINVAL, "%s = %d: want 0 or 1", name, v);
}

/* validate applies the ABI's argument rules, then what ggml_ssm_scan
 * takes (SSMK_EUNSUPPORTED, naming the op that does it in llama.cpp), then
 * Mamba-2's structure (SSMK_EINVAL: the declaration says what is needed). */
static int32_t validate(const ssmk_scan_args *a) {
    if (!a) return fail(SSMK_EINVAL, "args is NULL");
    const char *names[] = {"batch", "dim", "seqlen", "dstate", "n_groups"};
    const int32_t sizes[] = {a->batch, a->dim, a->seqlen, a->dstate, a->n_groups};
    for (int i = 0; i < 5; i++)
        if (sizes[i] < 1) return fail(SSMK_EINVAL, "%s = %d: want >= 1", names[i], sizes[i]);
    if (a->dstate > MAX_DSTATE) return fail(SSMK_EINVAL, "dstate = %d: want <= %d", a->dstate, MAX_DSTATE);
    if (a->dim % a->n_groups != 0)
        return fail(SSMK_EINVAL, "n_groups = %d does not divide dim = %d", a->n_groups, a->dim);
    if (a->method < SSMK_ZOH || a->method > SSMK_RK4) return fail(SSMK_EINVAL, "method = %d: want 0..5", a->method);
    if (a->dtype != SSMK_F32 && a->dtype != SSMK_F64)
        return fail(SSMK_EINVAL, "dtype = %d: want SSMK_F32 (0) or SSMK_F64 (1)", a->dtype);
    int32_t st;
    if ((st = check_flag(a->is_complex, "is_complex")) || (st = check_flag(a->is_variable_B, "is_variable_B")) ||
        (st = check_flag(a->is_variable_C, "is_variable_C")) || (st = check_flag(a->delta_softplus, "delta_softplus")))
        return st;
    const char *pn[] = {"u", "delta", "A", "B", "C", "out"};
    const void *pp[] = {a->u, a->delta, a->A, a->B, a->C, a->out};
    for (int i = 0; i < 6; i++)
        if (!pp[i]) return fail(SSMK_EINVAL, "%s is NULL", pn[i]);
    if (!supported(a->method, a->dtype, a->is_complex))
        return fail(SSMK_EUNSUPPORTED,
                    "method %d, dtype %d, is_complex %d: ggml_ssm_scan computes zoh in float32 with real A%s",
                    a->method, a->dtype, a->is_complex,
                    head_dim() < 0 ? " (and SSMK_GGML_HEAD_DIM is not a number in 0..65536)" : "");
    if (a->D)
        return fail(SSMK_EUNSUPPORTED,
                    "D: ggml_ssm_scan has no skip term (llama.cpp adds D·u with ggml_mul and ggml_add)");
    if (a->z)
        return fail(SSMK_EUNSUPPORTED, "z: ggml_ssm_scan has no gate (llama.cpp applies y·silu(z) with other ops)");
    if (a->delta_bias)
        return fail(SSMK_EUNSUPPORTED,
                    "delta_bias: ggml_ssm_scan takes dt with its bias already added (llama.cpp: ggml_add)");
    if (!a->delta_softplus)
        return fail(SSMK_EUNSUPPORTED, "delta_softplus = 0: ggml_ssm_scan always applies softplus to dt");
    ssmk_feature_set f;
    features(&f);
    if (!a->is_variable_B || !a->is_variable_C)
        return fail(
            SSMK_EUNSUPPORTED,
            "constant B/C: ggml_ssm_scan takes B and C per group and token (is_variable_B = %d, is_variable_C = %d)",
            a->is_variable_B, a->is_variable_C);
    if (a->dim % f.dim_multiple)
        return fail(SSMK_EUNSUPPORTED, "dim = %d: this backend takes multiples of %d", a->dim, f.dim_multiple);
    if (f.max_groups && a->n_groups > f.max_groups)
        return fail(SSMK_EUNSUPPORTED, "n_groups = %d: this backend takes at most %d", a->n_groups, f.max_groups);
    if (f.dstates && (a->dstate & (a->dstate - 1) || !(f.dstates & (uint32_t)a->dstate)))
        return fail(SSMK_EUNSUPPORTED, "dstate = %d: this backend takes %s", a->dstate,
                    f.dstates == (1u << 4) ? "16" : "128 or 256");
    /* The CUDA backend narrows byte strides to int. */
    if ((int64_t)a->seqlen * a->dim * 4 > INT32_MAX || (int64_t)a->seqlen * a->n_groups * a->dstate * 4 > INT32_MAX ||
        (int64_t)a->dim * a->dstate * 4 > INT32_MAX)
        return fail(SSMK_EUNSUPPORTED, "batch row of %d×%d×%d: ggml narrows its byte strides to int", a->dim, a->seqlen,
                    a->dstate);
    int hd = f.head_dim;
    if (hd > 0) {
        if (a->dim % hd || (a->dim / a->n_groups) % hd)
            return fail(SSMK_EINVAL,
                        "dim = %d, n_groups = %d: heads of %d channels (SSMK_GGML_HEAD_DIM) must tile each group",
                        a->dim, a->n_groups, hd);
        const float *A = a->A, *dt = a->delta;
        for (int d = 0; d < a->dim; d++)
            for (int n = 0; n < a->dstate; n++)
                if (A[(int64_t)d * a->dstate + n] != A[(int64_t)(d / hd * hd) * a->dstate])
                    return fail(SSMK_EINVAL,
                                "A[%d][%d] = %g differs from A[%d][0] = %g: Mamba-2 heads of %d channels have one A", d,
                                n, A[(int64_t)d * a->dstate + n], d / hd * hd, A[(int64_t)(d / hd * hd) * a->dstate],
                                hd);
        for (int b = 0; b < a->batch; b++)
            for (int d = 0; d < a->dim; d++)
                for (int t = 0; t < a->seqlen; t++) {
                    int64_t i = ((int64_t)b * a->dim + d) * a->seqlen + t,
                            h = ((int64_t)b * a->dim + d / hd * hd) * a->seqlen + t;
                    if (dt[i] != dt[h])
                        return fail(SSMK_EINVAL,
                                    "delta[%d][%d][%d] = %g differs from its head's delta[%d][%d][%d] = %g: Mamba-2 "
                                    "heads of %d channels have one Δ",
                                    b, d, t, dt[i], b, d / hd * hd, t, dt[h], hd);
                }
    }
    return SSMK_OK;
}

/* A graph of one ggml_ssm_scan with its tensors in one backend buffer. */
struct ssmk_plan {
    struct ggml_context *ctx;
    ggml_backend_buffer_t buf;
    struct ggml_cgraph *graph;
    struct ggml_tensor *res;
    int32_t batch, dim, seqlen, dstate;
    int launched;
};

SSMK_API void ssmk_plan_destroy(ssmk_plan *p) {
    if (!p) return;
    pthread_mutex_lock(&g_lock);
    if (p->buf) ggml_backend_buffer_free(p->buf);
    if (p->ctx) ggml_free(p->ctx);
    pthread_mutex_unlock(&g_lock);
    free(p);
}

/* build creates the graph for args and uploads its inputs, the initial
 * state h0 (NULL: zero). Called with g_lock held, after validate. */
static int32_t build(const ssmk_scan_args *a, const float *h0, ssmk_plan **out) {
    ggml_backend_t be = backend();
    if (!be) return is_cuda ? SSMK_ENODEVICE : SSMK_EDEVICE;
    ssmk_feature_set f;
    features(&f);
    const int64_t B = a->batch, L = a->seqlen, N = a->dstate, dim = a->dim;
    const int64_t hd = f.head_dim > 0 ? f.head_dim : 1, nh = dim / hd;
    const int64_t ng = a->n_groups;

    struct ggml_init_params ip = {ggml_tensor_overhead() * 16 + ggml_graph_overhead(), NULL, true};
    ssmk_plan *p = calloc(1, sizeof *p);
    if (!p) return fail(SSMK_ENOMEM, "out of host memory for a plan");
    p->ctx = ggml_init(ip);
    if (!p->ctx) {
        free(p);
        return fail(SSMK_ENOMEM, "ggml_init failed");
    }
    struct ggml_context *ctx = p->ctx;
    struct ggml_tensor *s = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, N, hd, nh, B);
    struct ggml_tensor *x = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, hd, nh, L, B);
    struct ggml_tensor *dt = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, nh, L, B);
    struct ggml_tensor *A =
        f.head_dim > 0 ? ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 1, nh) : ggml_new_tensor_2d(ctx, GGML_TYPE_F32, N, nh);
    struct ggml_tensor *Bt = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, N, ng, L, B);
    struct ggml_tensor *Ct = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, N, ng, L, B);
    struct ggml_tensor *ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, B);
#if SSMK_GGML_SCAN_K
    p->res = ggml_ssm_scan(ctx, s, x, dt, A, Bt, Ct, ids, 1);
#else
    p->res = ggml_ssm_scan(ctx, s, x, dt, A, Bt, Ct, ids);
#endif
    p->graph = ggml_new_graph(ctx);
    ggml_build_forward_expand(p->graph, p->res);
    if (!ggml_backend_supports_op(be, p->res)) {
        ggml_free(p->ctx);
        free(p);
        return fail(SSMK_EUNSUPPORTED,
                    "ggml's %s backend does not support this ggml_ssm_scan (supports_op: dstate %lld, head_dim %lld, "
                    "n_head %lld, n_groups %lld)",
                    ggml_backend_name(be), (long long)N, (long long)hd, (long long)nh, (long long)ng);
    }
    p->buf = ggml_backend_alloc_ctx_tensors(ctx, be);
    if (!p->buf) {
        ggml_free(p->ctx);
        free(p);
        return fail(SSMK_ENOMEM, "ggml_backend_alloc_ctx_tensors failed (%s)", ggml_backend_name(be));
    }

    /* Host staging in ggml's layouts. */
    const int64_t nx = B * L * dim, ndt = B * L * nh, nA = f.head_dim > 0 ? nh : dim * N, nbc = B * L * ng * N,
                  ns = B * dim * N;
    float *buf = malloc(sizeof(float) * (size_t)(nx > nbc ? (nx > ns ? nx : ns) : (nbc > ns ? nbc : ns)));
    int32_t *idv = malloc(sizeof(int32_t) * (size_t)B);
    if (!buf || !idv) {
        free(buf), free(idv);
        ggml_backend_buffer_free(p->buf);
        ggml_free(p->ctx);
        free(p);
        return fail(SSMK_ENOMEM, "out of host memory staging %lld floats", (long long)nbc);
    }
    const float *u = a->u, *delta = a->delta, *Aa = a->A, *Ba = a->B, *Ca = a->C;
    for (int64_t b = 0; b < B; b++) /* x[b][t][d] = u[b][d][t] */
        for (int64_t d = 0; d < dim; d++)
            for (int64_t t = 0; t < L; t++) buf[(b * L + t) * dim + d] = u[(b * dim + d) * L + t];
    ggml_backend_tensor_set(x, buf, 0, sizeof(float) * (size_t)nx);
    for (int64_t b = 0; b < B; b++) /* dt[b][t][h] = delta[b][h·hd][t] */
        for (int64_t h = 0; h < nh; h++)
            for (int64_t t = 0; t < L; t++) buf[(b * L + t) * nh + h] = delta[(b * dim + h * hd) * L + t];
    ggml_backend_tensor_set(dt, buf, 0, sizeof(float) * (size_t)ndt);
    if (f.head_dim > 0)
        for (int64_t h = 0; h < nh; h++) buf[h] = Aa[h * hd * N];
    else
        memcpy(buf, Aa, sizeof(float) * (size_t)nA);
    ggml_backend_tensor_set(A, buf, 0, sizeof(float) * (size_t)nA);
    for (int k = 0; k < 2; k++) { /* B/C[b][t][g][n] */
        const float *src = k ? Ca : Ba;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < L; t++)
                for (int64_t g = 0; g < ng; g++)
                    for (int64_t n = 0; n < N; n++)
                        buf[((b * L + t) * ng + g) * N + n] = src[((b * ng + g) * N + n) * L + t];
        ggml_backend_tensor_set(k ? Ct : Bt, buf, 0, sizeof(float) * (size_t)nbc);
    }
    for (int64_t b = 0; b < B; b++) { /* sequence b's state in row B−1−b */
        idv[b] = (int32_t)(B - 1 - b);
        if (h0)
            memcpy(buf + (B - 1 - b) * dim * N, h0 + b * dim * N, sizeof(float) * (size_t)(dim * N));
        else
            memset(buf + (B - 1 - b) * dim * N, 0, sizeof(float) * (size_t)(dim * N));
    }
    ggml_backend_tensor_set(s, buf, 0, sizeof(float) * (size_t)ns);
    ggml_backend_tensor_set(ids, idv, 0, sizeof(int32_t) * (size_t)B);
    free(buf), free(idv);
    p->batch = a->batch, p->dim = a->dim, p->seqlen = a->seqlen, p->dstate = a->dstate;
    *out = p;
    return SSMK_OK;
}

static int32_t compute(ssmk_plan *p) {
    enum ggml_status st = ggml_backend_graph_compute_async(g_backend, p->graph);
    if (st != GGML_STATUS_SUCCESS)
        return fail(SSMK_EDEVICE, "ggml_backend_graph_compute_async: %s", ggml_status_to_string(st));
    p->launched = 1;
    return SSMK_OK;
}

/* fetch copies y {dim, seqlen, batch} token-major into out[b][d][t] and
 * the state after it into last_state[b][d][n]. Called with g_lock held. */
static int32_t fetch(ssmk_plan *p, void *out, void *last_state) {
    ggml_backend_synchronize(g_backend);
    const int64_t B = p->batch, L = p->seqlen, dim = p->dim, N = p->dstate, ny = B * L * dim;
    float *y = malloc(sizeof(float) * (size_t)ny);
    if (!y) return fail(SSMK_ENOMEM, "out of host memory fetching %lld floats", (long long)ny);
    ggml_backend_tensor_get(p->res, y, 0, sizeof(float) * (size_t)ny);
    float *o = out;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < L; t++)
            for (int64_t d = 0; d < dim; d++) o[(b * dim + d) * L + t] = y[(b * L + t) * dim + d];
    free(y);
    if (last_state)
        ggml_backend_tensor_get(p->res, last_state, sizeof(float) * (size_t)ny, sizeof(float) * (size_t)(B * dim * N));
    return SSMK_OK;
}

SSMK_API int32_t ssmk_scan_fwd_state(const ssmk_scan_args *args, const void *initial_state) {
    int32_t st = validate(args);
    if (st) return st;
    pthread_mutex_lock(&g_lock);
    ssmk_plan *p = NULL;
    if (!(st = build(args, initial_state, &p)) && !(st = compute(p))) st = fetch(p, args->out, args->last_state);
    pthread_mutex_unlock(&g_lock);
    ssmk_plan_destroy(p);
    return st;
}

SSMK_API int32_t ssmk_scan_fwd(const ssmk_scan_args *args) { return ssmk_scan_fwd_state(args, NULL); }

SSMK_API int32_t ssmk_plan_create_state(const ssmk_scan_args *args, const void *initial_state, ssmk_plan **plan) {
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    int32_t st = validate(args);
    if (st) return st;
    pthread_mutex_lock(&g_lock);
    st = build(args, initial_state, plan);
    pthread_mutex_unlock(&g_lock);
    return st;
}

SSMK_API int32_t ssmk_plan_create(const ssmk_scan_args *args, ssmk_plan **plan) {
    return ssmk_plan_create_state(args, NULL, plan);
}

SSMK_API int32_t ssmk_plan_launch(ssmk_plan *plan) {
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    pthread_mutex_lock(&g_lock);
    int32_t st = compute(plan);
    pthread_mutex_unlock(&g_lock);
    return st;
}

SSMK_API int32_t ssmk_plan_sync(ssmk_plan *plan) {
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    pthread_mutex_lock(&g_lock);
    ggml_backend_synchronize(g_backend);
    pthread_mutex_unlock(&g_lock);
    return SSMK_OK;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* ggml has no device events in its public API: a monotonic clock around
 * iters computes and a synchronize, which on the CUDA backend includes
 * ggml's per-graph host work, as a llama.cpp user pays it. */
SSMK_API int32_t ssmk_plan_time(ssmk_plan *plan, int32_t iters, double *ms_total) {
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    if (iters < 1) return fail(SSMK_EINVAL, "iters = %d: want >= 1", iters);
    if (!ms_total) return fail(SSMK_EINVAL, "ms_total is NULL");
    pthread_mutex_lock(&g_lock);
    ggml_backend_synchronize(g_backend);
    double t0 = now_ms();
    int32_t st = SSMK_OK;
    for (int i = 0; i < iters && !st; i++) st = compute(plan);
    ggml_backend_synchronize(g_backend);
    *ms_total = now_ms() - t0;
    pthread_mutex_unlock(&g_lock);
    return st;
}

SSMK_API int32_t ssmk_plan_fetch(ssmk_plan *plan, void *out, void *last_state) {
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    if (!out) return fail(SSMK_EINVAL, "out is NULL");
    if (!plan->launched) return fail(SSMK_EINVAL, "plan has not been launched: nothing to fetch");
    pthread_mutex_lock(&g_lock);
    int32_t st = fetch(plan, out, last_state);
    pthread_mutex_unlock(&g_lock);
    return st;
}

/* Two tensors of bytes in the backend's memory, copied iters times with
 * ggml_backend_tensor_copy. */
SSMK_API int32_t ssmk_copy_bandwidth(int64_t bytes, int32_t iters, double *gbytes_per_s) {
    if (bytes < 1) return fail(SSMK_EINVAL, "bytes = %lld: want >= 1", (long long)bytes);
    if (iters < 1) return fail(SSMK_EINVAL, "iters = %d: want >= 1", iters);
    if (!gbytes_per_s) return fail(SSMK_EINVAL, "gbytes_per_s is NULL");
    pthread_mutex_lock(&g_lock);
    int32_t st = SSMK_OK;
    ggml_backend_t be = backend();
    struct ggml_context *ctx = NULL;
    ggml_backend_buffer_t buf = NULL;
    if (!be) {
        st = is_cuda ? SSMK_ENODEVICE : SSMK_EDEVICE;
        goto done;
    }
    struct ggml_init_params ip = {ggml_tensor_overhead() * 2, NULL, true};
    ctx = ggml_init(ip);
    struct ggml_tensor *src = ctx ? ggml_new_tensor_1d(ctx, GGML_TYPE_I8, bytes) : NULL;
    struct ggml_tensor *dst = ctx ? ggml_new_tensor_1d(ctx, GGML_TYPE_I8, bytes) : NULL;
    if (!src || !dst || !(buf = ggml_backend_alloc_ctx_tensors(ctx, be))) {
        st = fail(SSMK_ENOMEM, "cannot allocate 2 × %lld bytes on ggml's %s backend", (long long)bytes,
                  ggml_backend_name(be));
        goto done;
    }
    ggml_backend_tensor_memset(src, 1, 0, (size_t)bytes);
    ggml_backend_tensor_copy(src, dst); /* warm-up */
    ggml_backend_synchronize(be);
    double t0 = now_ms();
    for (int i = 0; i < iters; i++) ggml_backend_tensor_copy(src, dst);
    ggml_backend_synchronize(be);
    double ms = now_ms() - t0;
    *gbytes_per_s = 2.0 * (double)bytes * iters / (ms * 1e-3) / 1e9;
done:
    if (buf) ggml_backend_buffer_free(buf);
    if (ctx) ggml_free(ctx);
    pthread_mutex_unlock(&g_lock);
    return st;
}

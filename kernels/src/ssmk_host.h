/*
 * ssmk_host.h — host-side code shared by the CPU and CUDA backends:
 * argument validation, the thread-local error message, array sizes.
 * Validation happens before any memory is touched, so that no argument
 * value can make a backend crash or write out of bounds.
 */
#ifndef SSMK_HOST_H
#define SSMK_HOST_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ssmk.h"

#define SSMK_MAX_DSTATE 256

namespace ssmk {

/* One message per thread: the ABI promises ssmk_last_error() for the
 * calling thread, so concurrent callers never see each other's errors. */
inline char *error_buffer() {
    static thread_local char buf[512];
    return buf;
}

inline int32_t fail(int32_t code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
inline int32_t fail(int32_t code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_buffer(), 512, fmt, ap);
    va_end(ap);
    return code;
}

inline void clear_error() { error_buffer()[0] = 0; }

inline const char *method_name(int32_t m) {
    static const char *names[] = {"zoh", "foh", "bilinear", "poly", "highorder", "rk4"};
    return (m >= 0 && m <= 5) ? names[m] : "?";
}

/* The 16-bit input types (the mixed-precision dtypes, float32 weights). */
inline bool narrow_dtype(int32_t dtype) { return dtype == SSMK_F16 || dtype == SSMK_BF16; }

inline int32_t check_common(int32_t method, int32_t dtype, int32_t is_complex) {
    if (method < 0 || method > 5)
        return fail(SSMK_EINVAL, "method = %d: want 0..5 (zoh foh bilinear poly highorder rk4)", method);
    if (dtype != SSMK_F32 && dtype != SSMK_F64 && !narrow_dtype(dtype))
        return fail(SSMK_EINVAL, "dtype = %d: want SSMK_F32 (0), SSMK_F64 (1), SSMK_F16 (2) or SSMK_BF16 (3)", dtype);
    if (is_complex != 0 && is_complex != 1) return fail(SSMK_EINVAL, "is_complex = %d: want 0 or 1", is_complex);
    return SSMK_OK;
}

/* Which 16-bit input types a backend's scan takes. */
enum NarrowInputs {
    NARROW_NONE,    /* none */
    NARROW_REAL,    /* with real A */
    NARROW_COMPLEX, /* with real and complex A */
};

inline bool takes_narrow(NarrowInputs narrow, int32_t is_complex) {
    return narrow == NARROW_COMPLEX || (narrow == NARROW_REAL && is_complex == 0);
}

/* The capabilities of a library that runs every method natively in fp32
 * and fp64, real and complex (both of this project's backends), and with
 * fp16 and bfloat16 inputs where narrow says (its scan only). */
inline uint32_t native_capabilities(int32_t method, int32_t dtype, int32_t is_complex, NarrowInputs narrow) {
    if (method < 0 || method > 5 || (is_complex != 0 && is_complex != 1)) return 0;
    const uint32_t scan = SSMK_CAP_SUPPORTED | SSMK_CAP_INITIAL_STATE | SSMK_CAP_FEATURES | SSMK_CAP_NONFINITE;
    if (dtype == SSMK_F32 || dtype == SSMK_F64) return scan;
    if (narrow_dtype(dtype) && takes_narrow(narrow, is_complex))
        return scan | SSMK_CAP_SCAN_ONLY | SSMK_CAP_NARROW_INPUTS;
    return 0;
}

/* ssmk_scan_features of such a library: every option on every shape. */
inline int32_t native_scan_features(int32_t method, int32_t dtype, int32_t is_complex, NarrowInputs narrow,
                                    ssmk_feature_set *f) {
    if (!f) return fail(SSMK_EINVAL, "f is NULL");
    if (!(native_capabilities(method, dtype, is_complex, narrow) & SSMK_CAP_FEATURES))
        return fail(SSMK_EUNSUPPORTED, "method = %d, dtype = %d, is_complex = %d: not a supported combination", method,
                    dtype, is_complex);
    *f = ssmk_feature_set{};
    f->options = SSMK_FEAT_ALL;
    f->dim_multiple = 1;
    return SSMK_OK;
}

inline int32_t validate_name_buffer(const char *buf, int32_t len) {
    if (!buf) return fail(SSMK_EINVAL, "buf is NULL");
    if (len < 1) return fail(SSMK_EINVAL, "len = %d: want >= 1", len);
    return SSMK_OK;
}

inline int32_t validate_fetch(const void *plan, const void *out, bool launched) {
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    if (!out) return fail(SSMK_EINVAL, "out is NULL");
    if (!launched) return fail(SSMK_EINVAL, "plan has not been launched: nothing to fetch");
    return SSMK_OK;
}

inline int32_t validate_copy_bandwidth(int64_t bytes, int32_t iters, const double *gbytes_per_s) {
    if (bytes < 1) return fail(SSMK_EINVAL, "bytes = %lld: want >= 1", (long long)bytes);
    if (iters < 1) return fail(SSMK_EINVAL, "iters = %d: want >= 1", iters);
    if (!gbytes_per_s) return fail(SSMK_EINVAL, "gbytes_per_s is NULL");
    return SSMK_OK;
}

inline int32_t validate_plan_time(const void *plan, int32_t iters, const double *ms_total) {
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    if (iters < 1) return fail(SSMK_EINVAL, "iters = %d: want >= 1", iters);
    if (!ms_total) return fail(SSMK_EINVAL, "ms_total is NULL");
    return SSMK_OK;
}

inline int32_t validate_discretize(int32_t method, int32_t dtype, int32_t is_complex, int64_t n, const void *delta,
                                   const void *A, const void *abar, const void *bcoef) {
    int32_t st = check_common(method, dtype, is_complex);
    if (st) return st;
    if (narrow_dtype(dtype))
        return fail(SSMK_EUNSUPPORTED, "dtype = %d: the 16-bit input types are the scan's only (SSMK_CAP_SCAN_ONLY)",
                    dtype);
    if (n < 1) return fail(SSMK_EINVAL, "n = %lld: want >= 1", (long long)n);
    if (n > (int64_t)1 << 40) return fail(SSMK_EINVAL, "n = %lld: want <= 2^40", (long long)n);
    if (!delta) return fail(SSMK_EINVAL, "delta is NULL");
    if (!A) return fail(SSMK_EINVAL, "A is NULL");
    if (!abar) return fail(SSMK_EINVAL, "Abar is NULL");
    if (!bcoef) return fail(SSMK_EINVAL, "Bcoef is NULL");
    return SSMK_OK;
}

/* Bytes per scalar of a dtype's inputs (u, delta, variable B/C, z, out)
 * and of its weights (A, constant B/C, D, delta_bias, the states). */
inline size_t input_size(int32_t dtype) { return dtype == SSMK_F64 ? 8 : narrow_dtype(dtype) ? 2 : 4; }
inline size_t weight_size(int32_t dtype) { return dtype == SSMK_F64 ? 8 : 4; }

/* Element counts (in scalars, complex counted twice) of every array of a
 * validated scan, and the bytes per scalar of each. */
struct ScanSizes {
    int64_t seq;           /* u, delta, z, out */
    int64_t a;             /* A */
    int64_t b, c;          /* B, C */
    int64_t dim;           /* D, delta_bias */
    int64_t state;         /* last_state, initial_state */
    size_t in, w;          /* bytes per scalar of the inputs and of the weights */
    size_t b_elem, c_elem; /* of B and C: in when variable, else w */
};

inline ScanSizes scan_sizes(const ssmk_scan_args *a) {
    ScanSizes s;
    int64_t cw = a->is_complex ? 2 : 1;
    s.seq = (int64_t)a->batch * a->dim * a->seqlen;
    s.a = (int64_t)a->dim * a->dstate * cw;
    int64_t var = (int64_t)a->batch * a->n_groups * a->dstate * a->seqlen * cw;
    int64_t cst = (int64_t)a->dim * a->dstate * cw;
    s.b = a->is_variable_B ? var : cst;
    s.c = a->is_variable_C ? var : cst;
    s.dim = a->dim;
    s.state = (int64_t)a->batch * a->dim * a->dstate * cw;
    s.in = input_size(a->dtype);
    s.w = weight_size(a->dtype);
    s.b_elem = a->is_variable_B ? s.in : s.w;
    s.c_elem = a->is_variable_C ? s.in : s.w;
    return s;
}

/* narrow: which 16-bit input types the library takes (the others:
 * SSMK_EUNSUPPORTED). */
inline int32_t validate_scan(const ssmk_scan_args *a, int32_t max_dstate, NarrowInputs narrow) {
    if (!a) return fail(SSMK_EINVAL, "args is NULL");
    struct {
        const char *name;
        int32_t v;
    } sizes[] = {
        {"batch", a->batch}, {"dim", a->dim}, {"seqlen", a->seqlen}, {"dstate", a->dstate}, {"n_groups", a->n_groups}};
    for (auto &f : sizes)
        if (f.v < 1) return fail(SSMK_EINVAL, "%s = %d: want >= 1", f.name, f.v);
    if (a->dstate > max_dstate)
        return fail(SSMK_EINVAL, "dstate = %d: want <= %d (ssmk_max_dstate)", a->dstate, max_dstate);
    if (a->dim % a->n_groups != 0)
        return fail(SSMK_EINVAL, "n_groups = %d does not divide dim = %d", a->n_groups, a->dim);
    int32_t st = check_common(a->method, a->dtype, a->is_complex);
    if (st) return st;
    if (narrow_dtype(a->dtype) && !takes_narrow(narrow, a->is_complex))
        return fail(SSMK_EUNSUPPORTED, "dtype = %d, is_complex = %d: this library does not take 16-bit inputs here",
                    a->dtype, a->is_complex);
    struct {
        const char *name;
        int32_t v;
    } flags[] = {{"is_variable_B", a->is_variable_B},
                 {"is_variable_C", a->is_variable_C},
                 {"delta_softplus", a->delta_softplus}};
    for (auto &f : flags)
        if (f.v != 0 && f.v != 1) return fail(SSMK_EINVAL, "%s = %d: want 0 or 1", f.name, f.v);
    /* Keep every flat index inside int64 with room: 2^31 elements per axis
     * product is far beyond any device, so cap the largest array at 2^40. */
    double seq = (double)a->batch * a->dim * a->seqlen;
    double var = (double)a->batch * a->n_groups * a->dstate * a->seqlen * 2;
    double st_ = (double)a->batch * a->dim * a->dstate * 2;
    if (seq > 1099511627776.0 || var > 1099511627776.0 || st_ > 1099511627776.0)
        return fail(SSMK_EINVAL, "batch*dim*seqlen*dstate = %d*%d*%d*%d: too large (an array over 2^40 elements)",
                    a->batch, a->dim, a->seqlen, a->dstate);
    struct {
        const char *name;
        const void *p;
    } req[] = {{"u", a->u}, {"delta", a->delta}, {"A", a->A}, {"B", a->B}, {"C", a->C}, {"out", a->out}};
    for (auto &r : req)
        if (!r.p) return fail(SSMK_EINVAL, "%s is NULL", r.name);
    return SSMK_OK;
}

/* The backward's arguments: the forward's (out and last_state unused)
 * and the gradients' pointers. narrow: which 16-bit input types the
 * library's backward takes (NARROW_NONE: F32 and F64 only). */
inline int32_t validate_bwd(const ssmk_scan_args *a, const ssmk_scan_grads *g, int32_t max_dstate,
                            NarrowInputs narrow) {
    if (!a) return fail(SSMK_EINVAL, "args is NULL");
    if (narrow_dtype(a->dtype) && narrow == NARROW_NONE)
        return fail(SSMK_EUNSUPPORTED, "dtype = %d: the backward pass takes SSMK_F32 (0) or SSMK_F64 (1)", a->dtype);
    ssmk_scan_args c = *a;
    c.out = &c; /* not read by the backward: any non-NULL stand-in */
    if (int32_t st = validate_scan(&c, max_dstate, narrow)) return st;
    if (!g) return fail(SSMK_EINVAL, "grads is NULL");
    struct {
        const char *name;
        const void *p;
        bool required;
    } req[] = {{"grads->dout", g->dout, true},
               {"grads->du", g->du, true},
               {"grads->ddelta", g->ddelta, true},
               {"grads->dA", g->dA, true},
               {"grads->dB", g->dB, true},
               {"grads->dC", g->dC, true},
               {"grads->dD (args->D is given)", g->dD, a->D != nullptr},
               {"grads->dz (args->z is given)", g->dz, a->z != nullptr},
               {"grads->ddelta_bias (args->delta_bias is given)", g->ddelta_bias, a->delta_bias != nullptr}};
    for (auto &r : req)
        if (r.required && !r.p) return fail(SSMK_EINVAL, "%s is NULL", r.name);
    return SSMK_OK;
}

/* One gradient a backward plan copies out: its name, the caller's buffer
 * (or NULL), the plan's (or NULL), its length in scalars and the bytes of
 * one (the input type's for du, ddelta, dz and variable dB/dC, the
 * weights' for the others). */
struct GradCopy {
    const char *name;
    void *dst;
    const void *src;
    int64_t count;
    size_t elem;
    size_t bytes() const { return (size_t)count * elem; }
};
constexpr int kGradCopies = 9;

/* ssmk_plan_fetch_bwd's copies from a plan's gradients `from` into the
 * caller's `to`; SSMK_EINVAL naming one the caller asks for and the plan
 * was created without. */
inline int32_t grad_copies(const ssmk_scan_grads *to, const ssmk_scan_grads &from, const ScanSizes &s,
                           GradCopy (&out)[kGradCopies]) {
    const GradCopy c[kGradCopies] = {{"du", to->du, from.du, s.seq, s.in},
                                     {"ddelta", to->ddelta, from.ddelta, s.seq, s.in},
                                     {"dA", to->dA, from.dA, s.a, s.w},
                                     {"dB", to->dB, from.dB, s.b, s.b_elem},
                                     {"dC", to->dC, from.dC, s.c, s.c_elem},
                                     {"dD", to->dD, from.dD, s.dim, s.w},
                                     {"dz", to->dz, from.dz, s.seq, s.in},
                                     {"ddelta_bias", to->ddelta_bias, from.ddelta_bias, s.dim, s.w},
                                     {"dinitial_state", to->dinitial_state, from.dinitial_state, s.state, s.w}};
    for (int i = 0; i < kGradCopies; i++) {
        if (c[i].dst && !c[i].src)
            return fail(SSMK_EINVAL, "grads->%s: the plan was created without it (NULL or its input absent)",
                        c[i].name);
        out[i] = c[i];
    }
    return SSMK_OK;
}

} /* namespace ssmk */

#endif /* SSMK_HOST_H */

/*
 * plan.cu — the CUDA build's ABI entry points (build/libssmk_cuda.so): plans
 * that own device buffers, a stream and two events; the one-shot calls built
 * on them; device queries. Arguments are validated by ssmk_host.h's rules,
 * shared with the CPU build, before anything touches the device.
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include <new>
#include <vector>

#include "../ssmk_host.h"
#include "cuda_host.h"
#include "ssmk.h"

namespace ssmk {

int32_t cuda_fail(cudaError_t e, const char *what) {
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInitializationError ||
        e == cudaErrorStubLibrary || e == cudaErrorDevicesUnavailable)
        return fail(SSMK_ENODEVICE, "no usable CUDA device: %s (%s) in %s", cudaGetErrorString(e), cudaGetErrorName(e),
                    what);
    if (e == cudaErrorMemoryAllocation)
        return fail(SSMK_ENOMEM, "out of device memory: %s in %s", cudaGetErrorString(e), what);
    return fail(SSMK_EDEVICE, "CUDA error %s: %s in %s", cudaGetErrorName(e), cudaGetErrorString(e), what);
}

int32_t ensure_device() {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) return cuda_fail(e, "cudaGetDeviceCount");
    if (n == 0) return fail(SSMK_ENODEVICE, "no usable CUDA device: cudaGetDeviceCount found none");
    return SSMK_OK;
}

} /* namespace ssmk */

using namespace ssmk;

namespace {

/* The CUDA kernels take the 16-bit input types too (scan only), with real
 * A: the same kernels with u, Δ, z, out and variable B/C of that type
 * (ScanTraits' IN). Complex A with 16-bit inputs is declared unsupported:
 * its four kernels tripled nvcc's time (docs/abi.md). */
constexpr NarrowInputs kNarrowInputs = NARROW_REAL;

int32_t plan_scan(const ssmk_scan_args *args, const void *initial_state, ssmk_plan **out) {
    ssmk_plan *p = new (std::nothrow) ssmk_plan;
    if (!p) return fail(SSMK_ENOMEM, "out of host memory for the plan");
    p->is_scan = true;
    p->dargs = *args;
    p->sz = scan_sizes(args);
    const ScanSizes &s = p->sz;
    int32_t st = p->init();
    const struct {
        const void *src;
        int64_t count;
        size_t elem;
        const void **dst;
    } ins[] = {{args->u, s.seq, s.in, &p->dargs.u},   {args->delta, s.seq, s.in, &p->dargs.delta},
               {args->A, s.a, s.w, &p->dargs.A},      {args->B, s.b, s.b_elem, &p->dargs.B},
               {args->C, s.c, s.c_elem, &p->dargs.C}, {args->D, s.dim, s.w, &p->dargs.D},
               {args->z, s.seq, s.in, &p->dargs.z},   {args->delta_bias, s.dim, s.w, &p->dargs.delta_bias}};
    for (auto &in : ins)
        if (!st) st = p->upload(in.src, in.count, in.elem, in.dst);
    if (!st) st = p->upload(initial_state, s.state, s.w, &p->d_h0);
    if (!st) st = p->alloc(s.seq, s.in, &p->dargs.out);
    if (!st) st = p->alloc(s.state, s.w, &p->dargs.last_state);
    if (!st) {
        cudaError_t e = cudaStreamSynchronize(p->stream); /* host inputs may be freed after return */
        if (e != cudaSuccess) st = cuda_fail(e, "cudaStreamSynchronize(upload)");
    }
    if (st) {
        delete p;
        return st;
    }
    *out = p;
    return SSMK_OK;
}

/* A backward plan, its arguments validated: the forward's inputs, the
 * initial state, dout and dlast_state uploaded; the gradients grads asks
 * for and the scratch allocated; saved: a plan on saved states, whose
 * creation runs phase 1 into the scratch. */
int32_t plan_bwd(const ssmk_scan_args *args, const void *initial_state, const ssmk_scan_grads *grads, bool saved,
                 ssmk_plan **out) {
    if (!out) return fail(SSMK_EINVAL, "plan is NULL");
    if (int32_t st = validate_bwd(args, grads, SSMK_MAX_DSTATE, kNarrowInputs)) return st;
    if (int32_t st = ensure_device()) return st;
    ssmk_plan *p = new (std::nothrow) ssmk_plan;
    if (!p) return fail(SSMK_ENOMEM, "out of host memory for the plan");
    p->is_bwd = true;
    p->dargs = *args;
    p->dargs.out = p->dargs.last_state = nullptr;
    p->sz = scan_sizes(args);
    const ScanSizes &s = p->sz;
    int32_t st = p->init();
    const struct {
        const void *src;
        int64_t count;
        size_t elem;
        const void **dst;
    } ins[] = {{args->u, s.seq, s.in, &p->dargs.u},
               {args->delta, s.seq, s.in, &p->dargs.delta},
               {args->A, s.a, s.w, &p->dargs.A},
               {args->B, s.b, s.b_elem, &p->dargs.B},
               {args->C, s.c, s.c_elem, &p->dargs.C},
               {args->D, s.dim, s.w, &p->dargs.D},
               {args->z, s.seq, s.in, &p->dargs.z},
               {args->delta_bias, s.dim, s.w, &p->dargs.delta_bias},
               {initial_state, s.state, s.w, &p->d_h0},
               {grads->dout, s.seq, s.in, &p->dgrads.dout},
               {grads->dlast_state, s.state, s.w, &p->dgrads.dlast_state}};
    for (auto &in : ins)
        if (!st) st = p->upload(in.src, in.count, in.elem, in.dst);
    const struct {
        const void *wanted;
        int64_t count;
        size_t elem;
        void **dst;
    } outs[] = {{grads->du, s.seq, s.in, &p->dgrads.du},
                {grads->ddelta, s.seq, s.in, &p->dgrads.ddelta},
                {grads->dA, s.a, s.w, &p->dgrads.dA},
                {grads->dB, s.b, s.b_elem, &p->dgrads.dB},
                {grads->dC, s.c, s.c_elem, &p->dgrads.dC},
                {args->D ? grads->dD : nullptr, s.dim, s.w, &p->dgrads.dD},
                {args->z ? grads->dz : nullptr, s.seq, s.in, &p->dgrads.dz},
                {args->delta_bias ? grads->ddelta_bias : nullptr, s.dim, s.w, &p->dgrads.ddelta_bias},
                {grads->dinitial_state, s.state, s.w, &p->dgrads.dinitial_state}};
    for (auto &o : outs)
        if (!st && o.wanted) st = p->alloc(o.count, o.elem, o.dst);
    if (!st) st = p->alloc((int64_t)bwd_scratch_bytes(*args, &p->scratch), 1, &p->scratch.base);
    if (!st) bwd_scratch_bytes(*args, &p->scratch);
    if (!st && saved) {
        /* the states a training step's forward saves, once; each launch
         * then runs the gradients alone, in the design they were made for */
        p->stage.grads = false;
        st = launch_backward(p->dargs, p->d_h0, p->dgrads, p->scratch, p->stream, p->stage);
        p->stage.states = false, p->stage.grads = true;
    }
    if (!st) {
        cudaError_t e = cudaStreamSynchronize(p->stream);
        if (e != cudaSuccess)
            st = cuda_fail(e, saved ? "cudaStreamSynchronize(saved states)" : "cudaStreamSynchronize(upload)");
    }
    if (st) {
        delete p;
        return st;
    }
    *out = p;
    return SSMK_OK;
}

/* Copies a backward plan's gradients into grads' outputs. */
int32_t fetch_bwd(ssmk_plan *p, const ssmk_scan_grads *grads) {
    GradCopy outs[kGradCopies];
    if (int32_t st = grad_copies(grads, p->dgrads, p->sz, outs)) return st;
    CU(cudaStreamSynchronize(p->stream));
    for (auto &o : outs)
        if (o.dst) CU(cudaMemcpy(o.dst, o.src, o.bytes(), cudaMemcpyDeviceToHost));
    return SSMK_OK;
}

int32_t fetch(ssmk_plan *p, void *out, void *last_state) {
    CU(cudaStreamSynchronize(p->stream));
    if (p->is_scan) {
        CU(cudaMemcpy(out, p->dargs.out, (size_t)p->sz.seq * p->sz.in, cudaMemcpyDeviceToHost));
        if (last_state)
            CU(cudaMemcpy(last_state, p->dargs.last_state, (size_t)p->sz.state * p->sz.w, cudaMemcpyDeviceToHost));
        return SSMK_OK;
    }
    size_t bytes = (size_t)p->n * (p->is_complex ? 2 : 1) * (p->dtype == SSMK_F64 ? 8 : 4);
    CU(cudaMemcpy(out, p->d_abar, bytes, cudaMemcpyDeviceToHost));
    if (last_state) CU(cudaMemcpy(last_state, p->d_bcoef, bytes, cudaMemcpyDeviceToHost));
    return SSMK_OK;
}

int32_t launch(ssmk_plan *p) {
    if (p->is_bwd) return launch_backward(p->dargs, p->d_h0, p->dgrads, p->scratch, p->stream, p->stage);
    if (p->is_scan) return launch_scan(p->dargs, p->d_h0, p->stream);
    return launch_discretize(p->method, p->dtype, p->is_complex, p->n, p->d_delta, p->d_A, p->d_abar, p->d_bcoef,
                             p->stream);
}

} /* namespace */

extern "C" {

SSMK_API int32_t ssmk_abi_version(void) { return SSMK_ABI_VERSION; }

SSMK_API const char *ssmk_backend(void) { return "cuda"; }

SSMK_API int32_t ssmk_device_name(char *buf, int32_t len) {
    if (int32_t st = validate_name_buffer(buf, len)) return st;
    int32_t st = ensure_device();
    if (st) return st;
    int dev = 0;
    CU(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, dev));
    snprintf(buf, (size_t)len, "%s (sm_%d%d)", prop.name, prop.major, prop.minor);
    return SSMK_OK;
}

SSMK_API int32_t ssmk_max_dstate(void) { return SSMK_MAX_DSTATE; }

SSMK_API uint32_t ssmk_capabilities(int32_t method, int32_t dtype, int32_t is_complex) {
    const uint32_t c = native_capabilities(method, dtype, is_complex, kNarrowInputs);
    /* The backward pass (backward.cu): variable dB and dC are summed over
     * a group's channels with atomics; the 16-bit types (real A) through
     * float copies of their inputs; plans on saved states keep phase 1's. */
    if (!c) return c;
    return c | SSMK_CAP_BACKWARD | SSMK_CAP_BWD_ATOMIC | SSMK_CAP_BWD_SAVED |
           (narrow_dtype(dtype) ? SSMK_CAP_BWD_NARROW : 0u);
}

SSMK_API int32_t ssmk_scan_features(int32_t method, int32_t dtype, int32_t is_complex, ssmk_feature_set *f) {
    return native_scan_features(method, dtype, is_complex, kNarrowInputs, f);
}

/* The CUDA build uses one host thread: the value is recorded and returned,
 * and has no effect on the kernels (Check3 verifies that). */
static int g_threads = 1;

SSMK_API int32_t ssmk_set_num_threads(int32_t n) {
    int prev = __atomic_load_n(&g_threads, __ATOMIC_RELAXED);
    if (n > 0) __atomic_store_n(&g_threads, n, __ATOMIC_RELAXED);
    return prev;
}

SSMK_API const char *ssmk_last_error(void) { return error_buffer(); }

SSMK_API int32_t ssmk_plan_create(const ssmk_scan_args *args, ssmk_plan **plan) {
    return ssmk_plan_create_state(args, nullptr, plan);
}

SSMK_API int32_t ssmk_plan_create_state(const ssmk_scan_args *args, const void *initial_state, ssmk_plan **plan) {
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    int32_t st = validate_scan(args, SSMK_MAX_DSTATE, kNarrowInputs);
    if (st) return st;
    st = ensure_device();
    if (st) return st;
    return plan_scan(args, initial_state, plan);
}

SSMK_API int32_t ssmk_plan_create_discretize(int32_t method, int32_t dtype, int32_t is_complex, int64_t n,
                                             const void *delta, const void *A, ssmk_plan **plan) {
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    int32_t st = validate_discretize(method, dtype, is_complex, n, delta, A, plan, plan);
    if (st) return st;
    st = ensure_device();
    if (st) return st;
    ssmk_plan *p = new (std::nothrow) ssmk_plan;
    if (!p) return fail(SSMK_ENOMEM, "out of host memory for the plan");
    p->method = method;
    p->dtype = dtype;
    p->is_complex = is_complex;
    p->n = n;
    size_t elem = dtype == SSMK_F64 ? 8 : 4;
    int64_t cw = is_complex ? 2 : 1;
    st = p->init();
    const void *dd = nullptr, *da = nullptr;
    if (!st) st = p->upload(delta, n, elem, &dd);
    if (!st) st = p->upload(A, n * cw, elem, &da);
    if (!st) st = p->alloc(n * cw, elem, &p->d_abar);
    if (!st) st = p->alloc(n * cw, elem, &p->d_bcoef);
    if (!st) {
        cudaError_t e = cudaStreamSynchronize(p->stream);
        if (e != cudaSuccess) st = cuda_fail(e, "cudaStreamSynchronize(upload)");
    }
    if (st) {
        delete p;
        return st;
    }
    p->d_delta = (void *)dd;
    p->d_A = (void *)da;
    *plan = p;
    return SSMK_OK;
}

SSMK_API int32_t ssmk_plan_launch(ssmk_plan *p) {
    if (!p) return fail(SSMK_EINVAL, "plan is NULL");
    int32_t st = launch(p);
    if (!st) p->launched = true;
    return st;
}

SSMK_API int32_t ssmk_plan_sync(ssmk_plan *p) {
    if (!p) return fail(SSMK_EINVAL, "plan is NULL");
    CU(cudaStreamSynchronize(p->stream));
    return SSMK_OK;
}

SSMK_API int32_t ssmk_plan_time(ssmk_plan *p, int32_t iters, double *ms_total) {
    int32_t st = validate_plan_time(p, iters, ms_total);
    if (st) return st;
    CU(cudaEventRecord(p->ev0, p->stream));
    for (int32_t i = 0; i < iters; i++) {
        st = launch(p);
        if (st) return st;
    }
    p->launched = true;
    CU(cudaEventRecord(p->ev1, p->stream));
    CU(cudaEventSynchronize(p->ev1));
    float ms = 0;
    CU(cudaEventElapsedTime(&ms, p->ev0, p->ev1));
    *ms_total = ms;
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
    if (!p->is_bwd) return fail(SSMK_EINVAL, "plan is not a backward plan (ssmk_plan_create_bwd)");
    if (!grads) return fail(SSMK_EINVAL, "grads is NULL");
    if (!p->launched) return fail(SSMK_EINVAL, "plan has not been launched: nothing to fetch");
    return fetch_bwd(p, grads);
}

SSMK_API int32_t ssmk_scan_bwd(const ssmk_scan_args *args, const void *initial_state, const ssmk_scan_grads *grads) {
    ssmk_plan *p = nullptr;
    int32_t st = ssmk_plan_create_bwd(args, initial_state, grads, &p);
    if (!st) st = ssmk_plan_launch(p);
    if (!st) st = fetch_bwd(p, grads);
    ssmk_plan_destroy(p);
    return st;
}

SSMK_API int32_t ssmk_plan_fetch(ssmk_plan *p, void *out, void *last_state) {
    if (p && p->is_bwd) return fail(SSMK_EINVAL, "plan is a backward plan: fetch it with ssmk_plan_fetch_bwd");
    if (int32_t st = validate_fetch(p, out, p && p->launched)) return st;
    return fetch(p, out, last_state);
}

SSMK_API void ssmk_plan_destroy(ssmk_plan *p) { delete p; }

SSMK_API int32_t ssmk_discretize(int32_t method, int32_t dtype, int32_t is_complex, int64_t n, const void *delta,
                                 const void *A, void *Abar, void *Bcoef) {
    int32_t st = validate_discretize(method, dtype, is_complex, n, delta, A, Abar, Bcoef);
    if (st) return st;
    ssmk_plan *p = nullptr;
    st = ssmk_plan_create_discretize(method, dtype, is_complex, n, delta, A, &p);
    if (!st) st = ssmk_plan_launch(p);
    if (!st) st = fetch(p, Abar, Bcoef);
    ssmk_plan_destroy(p);
    return st;
}

SSMK_API int32_t ssmk_scan_fwd(const ssmk_scan_args *args) { return ssmk_scan_fwd_state(args, nullptr); }

SSMK_API int32_t ssmk_scan_fwd_state(const ssmk_scan_args *args, const void *initial_state) {
    int32_t st = validate_scan(args, SSMK_MAX_DSTATE, kNarrowInputs);
    if (st) return st;
    ssmk_plan *p = nullptr;
    st = ssmk_plan_create_state(args, initial_state, &p);
    if (!st) st = ssmk_plan_launch(p);
    if (!st) st = fetch(p, args->out, args->last_state);
    ssmk_plan_destroy(p);
    return st;
}

} /* extern "C" */

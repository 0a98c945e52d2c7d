/*
 * ssmk_mamba.cu — the ssmk ABI (cudalib/include/ssmk.h) over the
 * selective-scan kernels of a Mamba-family tree (csrc/selective_scan):
 * upstream Mamba, a fork of it, or VMamba's cusoflex kernels
 * (SSMK_MAMBA_VMAMBA=1; VMAMBA below says what differs).
 *
 * This file is ours; it includes the user's selective_scan.h and
 * selective_scan_common.h and links the user's selective_scan_fwd_fp32.cu,
 * and where the tree has them selective_scan_fwd_fp16.cu and _bf16.cu
 * (adapters/mamba/build.sh; SSMK_MAMBA_NARROW=1) and the float32 backward,
 * selective_scan_bwd_fp32_real.cu and _complex.cu (SSMK_MAMBA_BWD=1; THE
 * BACKWARD PASS below), with _fp16_real.cu and _bf16_real.cu besides
 * (SSMK_MAMBA_BWD_NARROW=1). It does what Mamba's Python wrapper
 * (selective_scan.cpp) does for one call, without PyTorch tensors:
 *
 *   - SSMParamsBase from ssmk_scan_args: the ABI's dense layouts give the
 *     strides (in elements of the array's own type: complex A and constant
 *     B/C in c10::complex<float>, variable B/C in float with the time axis
 *     2·seqlen long and (re, im) interleaved, as Mamba stores them);
 *   - the chunk buffer x of [batch][dim][n_chunks][dstate] (a, h) pairs,
 *     n_chunks = ceil(seqlen / 2048); the last state is h of the last chunk;
 *   - with z, the kernel writes y to out and the gated y to out_z: the ABI's
 *     out receives out_z.
 *
 * What the tree instantiates and the ABI can say: input float with weight
 * float (real A) or c10::complex<float> (complex A), i.e. SSMK_F32; and
 * input c10::Half or c10::BFloat16 with the same weights, the ABI's
 * mixed-precision SSMK_F16 and SSMK_BF16 (u, delta, z, out and variable B/C
 * of the input type, whose bit patterns are IEEE binary16 and bfloat16's;
 * A, constant B/C, D, delta_bias and the state in float). Upstream
 * computes zoh only; a fork whose SSMParamsBase has discretization_method
 * (SSMK_MAMBA_METHODS=1, detected by build.sh) gets the ABI's method number
 * in it, as its enum uses the ABI's order. The method arithmetic is inside
 * the scan, so ssmk_discretize is not provided: every supported combination
 * is declared SSMK_CAP_SUPPORTED | SSMK_CAP_SCAN_ONLY.
 *
 * Arguments are validated by the ABI's rules before anything reaches the
 * tree's code; C++ exceptions of the tree (C10_CUDA_CHECK) become
 * SSMK_EDEVICE with their message. Everything else — strides the tree
 * narrows to its index_t, grid limits, chunking — is the tree's behaviour,
 * which is what the suite is there to judge.
 */
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

/* What the tree's selective_scan_fwd_kernel.cuh includes before its own
 * headers, which rely on it. */
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#ifndef SSMK_MAMBA_VMAMBA
#define SSMK_MAMBA_VMAMBA 0 /* 1: VMamba's cusoflex kernels (see VMAMBA below) */
#endif

#if SSMK_MAMBA_VMAMBA
#include "selective_scan_oflex.h"
#else
#include "selective_scan.h"
#endif
#include "selective_scan_common.h"
#include "ssmk.h"

#if SSMK_MAMBA_VMAMBA
/* VMAMBA: MzeroMiko/VMamba's kernels/selective_scan/csrc/selective_scan,
 * the cusoflex kernels its models call (SelectiveScanOflex), built from
 * cusoflex/selective_scan_core_fwd.cu and _bwd.cu. Mamba's kernel with an
 * output type of its own (output_t: the ABI's out, and dout, are of the
 * input type), delta shared by groups of channels (one channel per group
 * here) and rows per block (knrows, 1 as its Python wrapper calls it); its
 * SSMParamsBase has no gate z and no constant B/C (B and C are always
 * [batch][n_groups][dstate][seqlen]), and its A is real. So the library
 * declares zoh, float32, fp16 and bf16 with real A, forward and backward,
 * and through ssmk_scan_features the options it takes (D, delta_bias,
 * softplus on or off, variable B/C); a call with z or constant B/C is
 * refused (SSMK_EUNSUPPORTED). */
template <int knrows, typename input_t, typename weight_t, typename output_t>
void selective_scan_fwd_cuda(SSMParamsBase &params, cudaStream_t stream);
template <int knrows, typename input_t, typename weight_t, typename output_t>
void selective_scan_bwd_cuda(SSMParamsBwd &params, cudaStream_t stream);
template <typename input_t, typename weight_t>
void tree_fwd(SSMParamsBase &params, cudaStream_t stream) {
    selective_scan_fwd_cuda<1, input_t, weight_t, input_t>(params, stream);
}
template <typename input_t, typename weight_t>
void tree_bwd(SSMParamsBwd &params, cudaStream_t stream) {
    selective_scan_bwd_cuda<1, input_t, weight_t, input_t>(params, stream);
}
#else
template <typename input_t, typename weight_t>
void selective_scan_fwd_cuda(SSMParamsBase &params, cudaStream_t stream);
template <typename input_t, typename weight_t>
void selective_scan_bwd_cuda(SSMParamsBwd &params, cudaStream_t stream);
template <typename input_t, typename weight_t>
void tree_fwd(SSMParamsBase &params, cudaStream_t stream) {
    selective_scan_fwd_cuda<input_t, weight_t>(params, stream);
}
template <typename input_t, typename weight_t>
void tree_bwd(SSMParamsBwd &params, cudaStream_t stream) {
    selective_scan_bwd_cuda<input_t, weight_t>(params, stream);
}
#endif

#ifndef SSMK_MAMBA_METHODS
#define SSMK_MAMBA_METHODS 0
#endif
#ifndef SSMK_MAMBA_COMMIT
#define SSMK_MAMBA_COMMIT "unknown"
#endif
/* 1: the tree's fp16 and bf16 forward kernels are linked. */
#ifndef SSMK_MAMBA_NARROW
#define SSMK_MAMBA_NARROW 0
#endif
/* 1: the tree's float32 backward kernels (real and complex A) are linked. */
#ifndef SSMK_MAMBA_BWD_NARROW
#define SSMK_MAMBA_BWD_NARROW 0 /* the tree's fp16 and bf16 backward, real A */
#endif
#ifndef SSMK_MAMBA_BWD
#define SSMK_MAMBA_BWD 0
#endif

namespace {

thread_local std::string last_error;

int32_t fail(int32_t status, const std::string &msg) {
    last_error = msg;
    return status;
}

int32_t cuda_fail(cudaError_t e, const char *what) {
    return fail(e == cudaErrorMemoryAllocation ? SSMK_ENOMEM : SSMK_EDEVICE,
                std::string(what) + ": " + cudaGetErrorString(e));
}

#define CUDA_TRY(call, what)                                                                                           \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) return cuda_fail(e_, what);                                                             \
    } while (0)

bool dtype_supported(int32_t dtype) {
    return dtype == SSMK_F32 || (SSMK_MAMBA_NARROW && (dtype == SSMK_F16 || dtype == SSMK_BF16));
}

/* Bytes of an element of u, delta, z, out and variable B/C. */
size_t input_size(int32_t dtype) { return dtype == SSMK_F16 || dtype == SSMK_BF16 ? 2 : sizeof(float); }

bool method_supported(int32_t method) {
    return SSMK_MAMBA_METHODS ? (method >= SSMK_ZOH && method <= SSMK_RK4) : method == SSMK_ZOH;
}

/* The tree's name in messages and the device name. */
const char *tree_name() { return SSMK_MAMBA_VMAMBA ? "VMamba" : SSMK_MAMBA_METHODS ? "Mamba fork" : "Mamba upstream"; }

/* VMamba's kernels take real A alone, and neither z nor constant B/C
 * (declared through ssmk_scan_features). */
constexpr uint32_t kVMambaOptions =
    SSMK_FEAT_D | SSMK_FEAT_DELTA_BIAS | SSMK_FEAT_SOFTPLUS_OFF | SSMK_FEAT_SOFTPLUS_ON | SSMK_FEAT_VARIABLE_BC;

int32_t check_flag(int32_t v, const char *name) {
    if (v == 0 || v == 1) return SSMK_OK;
    return fail(SSMK_EINVAL, std::string(name) + " = " + std::to_string(v) + ", want 0 or 1");
}

/* validate applies the ABI's argument rules, in the order of the struct. */
int32_t validate(const ssmk_scan_args *a) {
    if (!a) return fail(SSMK_EINVAL, "args is NULL");
    const struct {
        const char *name;
        int32_t v;
    } sizes[] = {
        {"batch", a->batch}, {"dim", a->dim}, {"seqlen", a->seqlen}, {"dstate", a->dstate}, {"n_groups", a->n_groups}};
    for (const auto &s : sizes)
        if (s.v < 1) return fail(SSMK_EINVAL, std::string(s.name) + " = " + std::to_string(s.v) + ", want >= 1");
    if (a->dstate > MAX_DSTATE)
        return fail(SSMK_EINVAL, "dstate = " + std::to_string(a->dstate) + ", want <= " + std::to_string(MAX_DSTATE));
    if (a->dim % a->n_groups != 0)
        return fail(SSMK_EINVAL,
                    "n_groups = " + std::to_string(a->n_groups) + " does not divide dim = " + std::to_string(a->dim));
    if (a->method < SSMK_ZOH || a->method > SSMK_RK4)
        return fail(SSMK_EINVAL, "method = " + std::to_string(a->method) + ", want 0..5");
    if (a->dtype < SSMK_F32 || a->dtype > SSMK_BF16)
        return fail(SSMK_EINVAL, "dtype = " + std::to_string(a->dtype) +
                                     ", want SSMK_F32 (0), SSMK_F64 (1), SSMK_F16 (2) or SSMK_BF16 (3)");
    int32_t st;
    if ((st = check_flag(a->is_complex, "is_complex")) || (st = check_flag(a->is_variable_B, "is_variable_B")) ||
        (st = check_flag(a->is_variable_C, "is_variable_C")) || (st = check_flag(a->delta_softplus, "delta_softplus")))
        return st;
    const struct {
        const char *name;
        const void *p;
    } ptrs[] = {{"u", a->u}, {"delta", a->delta}, {"A", a->A}, {"B", a->B}, {"C", a->C}, {"out", a->out}};
    for (const auto &p : ptrs)
        if (!p.p) return fail(SSMK_EINVAL, std::string(p.name) + " is NULL");
    if (!method_supported(a->method) || !dtype_supported(a->dtype))
        return fail(SSMK_EUNSUPPORTED, std::string("this ") + tree_name() + " tree computes " +
                                           (SSMK_MAMBA_METHODS ? "the six methods" : "zoh only") + " with " +
                                           (SSMK_MAMBA_NARROW ? "float32, fp16 or bf16" : "float32") +
                                           " inputs (method " + std::to_string(a->method) + ", dtype " +
                                           std::to_string(a->dtype) + ")");
    if (SSMK_MAMBA_VMAMBA && (a->is_complex || a->z || !a->is_variable_B || !a->is_variable_C))
        return fail(SSMK_EUNSUPPORTED,
                    std::string("VMamba's selective scan takes real A, variable B and C and no z (") + "is_complex = " +
                        std::to_string(a->is_complex) + ", is_variable_B = " + std::to_string(a->is_variable_B) +
                        ", is_variable_C = " + std::to_string(a->is_variable_C) + ", z " + (a->z ? "given" : "NULL") +
                        ")");
    return SSMK_OK;
}

} // namespace

/* A plan: the tree's parameters and the device buffers they point into. */
struct ssmk_plan {
    SSMParamsBase params;
    bool complex_ = false, var_b = false, var_c = false;
    int32_t dtype = SSMK_F32;
    size_t seq_bytes = 0, state_count = 0;
    void *buf[11] = {};
    void *out_host_view = nullptr; /* out, or out_z with z */
    void *x = nullptr;
    cudaStream_t stream = nullptr;
    bool launched = false;
    /* a backward plan: the tree's backward parameters and gradient buffers */
    bool bwd = false;
    SSMParamsBwd bparams;
    void *gbuf[9] = {};
    size_t gbytes[9] = {};
    ~ssmk_plan() {
        for (void *p : gbuf) cudaFree(p);
        for (void *p : buf) cudaFree(p);
        if (stream) cudaStreamDestroy(stream);
    }
};

namespace {

enum { U, DELTA, A_, B_, C_, D_, Z, BIAS, OUT, OUT_Z, X };

int32_t upload(ssmk_plan *p, int slot, const void *host, size_t bytes, const char *name) {
    CUDA_TRY(cudaMalloc(&p->buf[slot], bytes), name);
    if (host) CUDA_TRY(cudaMemcpy(p->buf[slot], host, bytes, cudaMemcpyHostToDevice), name);
    return SSMK_OK;
}

/* The strides of B or C (or of their gradients) in the ABI's layouts, in
 * elements: variable [batch][n_groups][dstate][seqlen·c] (c = 2 for complex,
 * float with (re, im) interleaved, as Mamba stores them), constant
 * [dim][dstate]. */
struct BCStrides {
    SSMParamsBase::index_t batch = 0, group = 0, d = 0, dstate = 0;
};
BCStrides bc_strides(const ssmk_scan_args *a, int variable) {
    using index_t = SSMParamsBase::index_t;
    const size_t L = a->seqlen, N = a->dstate, c = a->is_complex ? 2 : 1;
    BCStrides s;
    if (variable)
        s.batch = index_t(a->n_groups * N * L * c), s.group = index_t(N * L * c), s.dstate = index_t(L * c);
    else
        s.d = index_t(N), s.dstate = 1;
    return s;
}

/* set_strides fills the strides of SSMParamsBase for the ABI's layouts. */
void set_strides(SSMParamsBase &q, const ssmk_scan_args *a) {
    using index_t = SSMParamsBase::index_t;
    const size_t L = a->seqlen, N = a->dstate;
    q.A_d_stride = index_t(N), q.A_dstate_stride = 1;
    const BCStrides b = bc_strides(a, a->is_variable_B), c = bc_strides(a, a->is_variable_C);
    q.B_batch_stride = b.batch, q.B_group_stride = b.group, q.B_d_stride = b.d, q.B_dstate_stride = b.dstate;
    q.C_batch_stride = c.batch, q.C_group_stride = c.group, q.C_d_stride = c.d, q.C_dstate_stride = c.dstate;
    const index_t row = index_t(L), batch = index_t(size_t(a->dim) * L);
    q.u_batch_stride = q.delta_batch_stride = q.out_batch_stride = batch;
    q.u_d_stride = q.delta_d_stride = q.out_d_stride = row;
#if !SSMK_MAMBA_VMAMBA
    q.z_batch_stride = q.out_z_batch_stride = batch;
    q.z_d_stride = q.out_z_d_stride = row;
#endif
}

int32_t plan_build(const ssmk_scan_args *a, ssmk_plan *p) {
    SSMParamsBase &q = p->params;
    memset(&q, 0, sizeof(q));
    const size_t B = a->batch, D = a->dim, L = a->seqlen, N = a->dstate, c = a->is_complex ? 2 : 1;
    const size_t in = input_size(a->dtype); /* u, delta, z, out and variable B/C: input_t */
    const size_t seq = B * D * L * in;
    const size_t bc_var = B * a->n_groups * N * L * c * in, bc_const = D * N * c * sizeof(float);
    q.batch = a->batch, q.dim = a->dim, q.seqlen = a->seqlen, q.dstate = a->dstate, q.n_groups = a->n_groups;
    q.n_chunks = (a->seqlen + 2047) / 2048;
    q.dim_ngroups_ratio = a->dim / a->n_groups;
    q.delta_softplus = a->delta_softplus;
#if SSMK_MAMBA_VMAMBA
    q.dim_deltagroups_ratio = 1; /* delta per channel, as the ABI has it */
#else
    q.is_variable_B = a->is_variable_B, q.is_variable_C = a->is_variable_C;
#endif
#if SSMK_MAMBA_METHODS
    q.discretization_method = static_cast<DiscretizationMethod>(a->method);
#endif
    set_strides(q, a);
    p->complex_ = a->is_complex, p->var_b = a->is_variable_B, p->var_c = a->is_variable_C;
    p->dtype = a->dtype;
    p->seq_bytes = seq;
    p->state_count = B * D * N;
    int32_t st;
    if ((st = upload(p, U, a->u, seq, "u")) || (st = upload(p, DELTA, a->delta, seq, "delta")) ||
        (st = upload(p, A_, a->A, D * N * c * sizeof(float), "A")) ||
        (st = upload(p, B_, a->B, a->is_variable_B ? bc_var : bc_const, "B")) ||
        (st = upload(p, C_, a->C, a->is_variable_C ? bc_var : bc_const, "C")) ||
        (a->D && (st = upload(p, D_, a->D, D * sizeof(float), "D"))) || (a->z && (st = upload(p, Z, a->z, seq, "z"))) ||
        (a->delta_bias && (st = upload(p, BIAS, a->delta_bias, D * sizeof(float), "delta_bias"))) ||
        (st = upload(p, OUT, nullptr, seq, "out")) || (a->z && (st = upload(p, OUT_Z, nullptr, seq, "out_z"))) ||
        (st = upload(p, X, nullptr, B * D * q.n_chunks * N * 2 * c * sizeof(float), "x (chunk states)")))
        return st;
    q.u_ptr = p->buf[U], q.delta_ptr = p->buf[DELTA], q.A_ptr = p->buf[A_], q.B_ptr = p->buf[B_], q.C_ptr = p->buf[C_];
    q.D_ptr = p->buf[D_], q.delta_bias_ptr = p->buf[BIAS];
    q.out_ptr = p->buf[OUT], q.x_ptr = p->buf[X];
#if !SSMK_MAMBA_VMAMBA
    q.z_ptr = p->buf[Z], q.out_z_ptr = p->buf[OUT_Z];
#endif
    p->out_host_view = a->z ? p->buf[OUT_Z] : p->buf[OUT];
    CUDA_TRY(cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking), "cudaStreamCreate");
    return SSMK_OK;
}

/* The tree's instantiation for input type input_t, real or complex A. */
template <typename input_t>
void launch_input(ssmk_plan *p) {
#if !SSMK_MAMBA_VMAMBA
    if (p->complex_) {
        tree_fwd<input_t, complex_t>(p->params, p->stream);
        return;
    }
#endif
    tree_fwd<input_t, float>(p->params, p->stream);
}

/* Runs one of the tree's entry points (fn names it): its C++ exceptions
 * and a failed launch become SSMK_EDEVICE with their message, and the plan
 * counts as launched after it. */
template <typename F>
int32_t tree_call(ssmk_plan *p, const char *fn, F call) {
    try {
        call();
    } catch (const std::exception &e) {
        /* c10::Error's what() goes on with advice and a C++ backtrace:
         * the first line is the error. */
        const std::string what = e.what();
        return fail(SSMK_EDEVICE, std::string("the tree's ") + fn + ": " + what.substr(0, what.find('\n')));
    }
    CUDA_TRY(cudaGetLastError(), fn);
    p->launched = true;
    return SSMK_OK;
}

int32_t launch_bwd(ssmk_plan *p);

int32_t launch(ssmk_plan *p) {
    if (p->bwd) return launch_bwd(p);
    return tree_call(p, "selective_scan_fwd_cuda", [p] {
#if SSMK_MAMBA_NARROW
        if (p->dtype == SSMK_F16)
            launch_input<c10::Half>(p);
        else if (p->dtype == SSMK_BF16)
            launch_input<c10::BFloat16>(p);
        else
#endif
            launch_input<float>(p);
    });
}

/* fetch_state copies h of the last chunk: x[b][d][n_chunks-1][n] = (a, h),
 * real (2 floats) or complex (4 floats: a.re a.im h.re h.im). */
int32_t fetch_state(ssmk_plan *p, float *last_state) {
    const size_t N = p->params.dstate, chunks = p->params.n_chunks, c = p->complex_ ? 2 : 1;
    const size_t pair = 2 * c * sizeof(float), rows = p->state_count / N;
    std::string host(rows * N * pair, '\0');
    const char *src = static_cast<const char *>(p->buf[X]) + (chunks - 1) * N * pair;
    CUDA_TRY(cudaMemcpy2D(&host[0], N * pair, src, chunks * N * pair, N * pair, rows, cudaMemcpyDeviceToHost),
             "last state");
    const float *h = reinterpret_cast<const float *>(host.data());
    for (size_t i = 0; i < rows * N; i++)
        for (size_t k = 0; k < c; k++) last_state[i * c + k] = h[i * 2 * c + c + k];
    return SSMK_OK;
}

/* THE BACKWARD PASS over the tree's selective_scan_bwd_cuda, as Mamba's
 * selective_scan.cpp calls it from autograd: the forward has run (once, at
 * plan creation) and saved its chunk states x and, with z, its ungated
 * output y; a launch zeroes the summed gradients (the kernel adds into them
 * with atomics, as PyTorch's zeros_like does before it) and runs the
 * backward kernel alone. Mamba's backward takes no gradient of the last
 * state and computes none of an initial state: the capabilities say so
 * (SSMK_CAP_BWD_OUTPUTS_ONLY). A fork's autograd does the same for every
 * method (its SelectiveScanFn.backward passes discretization_method to
 * nothing; its backward kernel has none), so in a fork the backward is
 * declared for the six methods: what the suite judges is what a user of the
 * fork trains with, the method's forward saving x and y and the tree's one
 * backward kernel after it. */
enum { G_DOUT, G_DU, G_DDELTA, G_DA, G_DB, G_DC, G_DD, G_DZ, G_DBIAS };

int32_t launch_bwd(ssmk_plan *p) {
#if SSMK_MAMBA_BWD
    const int summed[] = {G_DA, G_DB, G_DC, G_DD, G_DBIAS};
    for (int i : summed)
        if (p->gbuf[i])
            CUDA_TRY(cudaMemsetAsync(p->gbuf[i], 0, p->gbytes[i], p->stream), "zeroing the summed gradients");
    return tree_call(p, "selective_scan_bwd_cuda", [p] {
#if SSMK_MAMBA_BWD_NARROW
        if (p->dtype == SSMK_F16)
            tree_bwd<c10::Half, float>(p->bparams, p->stream);
        else if (p->dtype == SSMK_BF16)
            tree_bwd<c10::BFloat16, float>(p->bparams, p->stream);
        else
#endif
#if !SSMK_MAMBA_VMAMBA
            if (p->complex_)
            tree_bwd<float, complex_t>(p->bparams, p->stream);
        else
#endif
            tree_bwd<float, float>(p->bparams, p->stream);
    });
#else
    (void)p;
    return fail(SSMK_EUNSUPPORTED,
                "the tree's backward kernels are not linked (adapters/mamba/build.sh SSMK_MAMBA_BWD)");
#endif
}

/* zoh upstream, every method of a fork (its autograd's one backward);
 * float32, and fp16 and bf16 with real A where their files are linked */
bool bwd_method(int32_t method) { return SSMK_MAMBA_METHODS ? method_supported(method) : method == SSMK_ZOH; }
bool bwd_dtype(int32_t dtype, int32_t is_complex) {
    return dtype == SSMK_F32 || (SSMK_MAMBA_BWD_NARROW && (dtype == SSMK_F16 || dtype == SSMK_BF16) && !is_complex);
}
bool bwd_supported(const ssmk_scan_args *a) {
    return SSMK_MAMBA_BWD && bwd_dtype(a->dtype, a->is_complex) && bwd_method(a->method);
}

int32_t validate_bwd(const ssmk_scan_args *a, const void *initial_state, const ssmk_scan_grads *g) {
    int32_t st = validate(a);
    if (st) return st;
    if (!g) return fail(SSMK_EINVAL, "grads is NULL");
    const struct {
        const char *name;
        const void *p;
        bool need;
    } ptrs[] = {{"grads->dout", g->dout, true},
                {"grads->du", g->du, true},
                {"grads->ddelta", g->ddelta, true},
                {"grads->dA", g->dA, true},
                {"grads->dB", g->dB, true},
                {"grads->dC", g->dC, true},
                {"grads->dD", g->dD, a->D != nullptr},
                {"grads->dz", g->dz, a->z != nullptr},
                {"grads->ddelta_bias", g->ddelta_bias, a->delta_bias != nullptr}};
    for (const auto &q : ptrs)
        if (q.need && !q.p) return fail(SSMK_EINVAL, std::string(q.name) + " is NULL");
    if (!bwd_supported(a))
        return fail(SSMK_EUNSUPPORTED, std::string("this ") + tree_name() + " tree's backward takes float32 inputs" +
                                           (SSMK_MAMBA_BWD_NARROW ? " (fp16 and bf16 with real A)" : "") +
                                           (SSMK_MAMBA_METHODS ? "" : " and zoh") + " (method " +
                                           std::to_string(a->method) + ", dtype " + std::to_string(a->dtype) + ")");
    if (initial_state) return fail(SSMK_EUNSUPPORTED, "initial_state: Mamba's selective scan starts from h = 0");
    if (g->dlast_state || g->dinitial_state)
        return fail(SSMK_EUNSUPPORTED, "grads->dlast_state and grads->dinitial_state: Mamba's backward takes and "
                                       "computes neither (SSMK_CAP_BWD_OUTPUTS_ONLY)");
    return SSMK_OK;
}

/* The plan's backward parameters: selective_scan.cpp's set_ssm_params_bwd
 * for the ABI's dense layouts (strides in elements; variable dB/dC in
 * float with the time axis 2·seqlen long for complex, as B and C). dout,
 * du, ddelta and dz are of the input type; variable dB and dC are float,
 * as selective_scan.cpp allocates them, and fetch_bwd converts them to the
 * input type as its dB.to(B.dtype()) does. */
int32_t plan_build_bwd(const ssmk_scan_args *a, const ssmk_scan_grads *g, ssmk_plan *p) {
    int32_t st = plan_build(a, p);
    if (st) return st;
    if ((st = launch(p))) return st; /* the forward that autograd saved: x, and y with z */
    using index_t = SSMParamsBase::index_t;
    const size_t B = a->batch, D = a->dim, L = a->seqlen, N = a->dstate, c = a->is_complex ? 2 : 1;
    const size_t seq = B * D * L * input_size(a->dtype);
    const size_t bc_var = B * a->n_groups * N * L * c * sizeof(float), bc_const = D * N * c * sizeof(float);
    const size_t sizes[9] = {seq,
                             seq,
                             seq,
                             D * N * c * sizeof(float),
                             a->is_variable_B ? bc_var : bc_const,
                             a->is_variable_C ? bc_var : bc_const,
                             a->D ? D * sizeof(float) : 0,
                             a->z ? seq : 0,
                             a->delta_bias ? D * sizeof(float) : 0};
    for (int i = 0; i < 9; i++) {
        p->gbytes[i] = sizes[i];
        if (sizes[i]) CUDA_TRY(cudaMalloc(&p->gbuf[i], sizes[i]), "gradient buffers");
    }
    CUDA_TRY(cudaMemcpy(p->gbuf[G_DOUT], g->dout, seq, cudaMemcpyHostToDevice), "dout");
    SSMParamsBwd &q = p->bparams;
    memset(&q, 0, sizeof(q));
    static_cast<SSMParamsBase &>(q) = p->params;
    /* set_ssm_params_bwd: out is y with z (dout without: never read), z
     * stays NULL without z (the kernel's kHasZ), out_z is not recomputed. */
    q.out_ptr = a->z ? p->buf[OUT] : p->gbuf[G_DOUT];
    const index_t row = index_t(L), batch = index_t(D * L);
    q.dout_batch_stride = q.du_batch_stride = q.ddelta_batch_stride = batch;
    q.dout_d_stride = q.du_d_stride = q.ddelta_d_stride = row;
#if !SSMK_MAMBA_VMAMBA
    q.out_z_ptr = nullptr;
    q.dz_batch_stride = batch, q.dz_d_stride = row;
#endif
    q.dA_d_stride = index_t(N), q.dA_dstate_stride = 1;
    const BCStrides b = bc_strides(a, a->is_variable_B), cs = bc_strides(a, a->is_variable_C);
    q.dB_batch_stride = b.batch, q.dB_group_stride = b.group, q.dB_d_stride = b.d, q.dB_dstate_stride = b.dstate;
    q.dC_batch_stride = cs.batch, q.dC_group_stride = cs.group, q.dC_d_stride = cs.d, q.dC_dstate_stride = cs.dstate;
    q.dout_ptr = p->gbuf[G_DOUT], q.du_ptr = p->gbuf[G_DU], q.ddelta_ptr = p->gbuf[G_DDELTA];
    q.dA_ptr = p->gbuf[G_DA], q.dB_ptr = p->gbuf[G_DB], q.dC_ptr = p->gbuf[G_DC], q.dD_ptr = p->gbuf[G_DD];
    q.ddelta_bias_ptr = p->gbuf[G_DBIAS];
#if !SSMK_MAMBA_VMAMBA
    q.dz_ptr = p->gbuf[G_DZ];
#endif
    CUDA_TRY(cudaStreamSynchronize(p->stream), "the saved forward");
    p->bwd = true;
    p->launched = false;
    return SSMK_OK;
}

/* A float gradient of n elements rounded to the 16-bit type T by c10's
 * conversion (round to nearest, ties to even: what Tensor.to does). */
template <typename T>
void to_input_type(const float *from, size_t n, void *to) {
    uint16_t *out = static_cast<uint16_t *>(to);
    for (size_t i = 0; i < n; i++) out[i] = T(from[i]).x;
}

int32_t fetch_bwd(ssmk_plan *p, const ssmk_scan_grads *g) {
    if (!p->launched) return fail(SSMK_EINVAL, "plan: fetch before any launch");
    CUDA_TRY(cudaStreamSynchronize(p->stream), "cudaStreamSynchronize");
    void *dst[9] = {nullptr, g->du, g->ddelta, g->dA, g->dB, g->dC, g->dD, g->dz, g->ddelta_bias};
    const bool narrow = p->dtype == SSMK_F16 || p->dtype == SSMK_BF16;
    const bool var[9] = {false, false, false, false, p->var_b, p->var_c};
    for (int i = 1; i < 9; i++) {
        if (!p->gbuf[i] || !dst[i]) continue;
        if (!(narrow && var[i])) {
            CUDA_TRY(cudaMemcpy(dst[i], p->gbuf[i], p->gbytes[i], cudaMemcpyDeviceToHost), "gradients");
            continue;
        }
        std::vector<float> f(p->gbytes[i] / sizeof(float));
        CUDA_TRY(cudaMemcpy(f.data(), p->gbuf[i], p->gbytes[i], cudaMemcpyDeviceToHost), "gradients");
        if (p->dtype == SSMK_F16)
            to_input_type<c10::Half>(f.data(), f.size(), dst[i]);
        else
            to_input_type<c10::BFloat16>(f.data(), f.size(), dst[i]);
    }
    return SSMK_OK;
}

} // namespace

extern "C" {

SSMK_API int32_t ssmk_abi_version(void) { return SSMK_ABI_VERSION; }

SSMK_API const char *ssmk_backend(void) { return "cuda"; }

SSMK_API int32_t ssmk_device_name(char *buf, int32_t len) {
    if (!buf || len < 1) return fail(SSMK_EINVAL, "buf is NULL or len < 1");
    cudaDeviceProp prop;
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess)
        return fail(SSMK_ENODEVICE, "no usable CUDA device");
    snprintf(buf, size_t(len), "%s (sm_%d%d), %s %s", prop.name, prop.major, prop.minor, tree_name(),
             SSMK_MAMBA_COMMIT);
    return SSMK_OK;
}

SSMK_API int32_t ssmk_max_dstate(void) { return MAX_DSTATE; }

SSMK_API uint32_t ssmk_capabilities(int32_t method, int32_t dtype, int32_t is_complex) {
    if (method < SSMK_ZOH || method > SSMK_RK4 || dtype < SSMK_F32 || dtype > SSMK_BF16 ||
        (is_complex != 0 && is_complex != 1))
        return 0;
    if (!dtype_supported(dtype) || !method_supported(method) || (SSMK_MAMBA_VMAMBA && is_complex)) return 0;
    uint32_t c = SSMK_CAP_SUPPORTED | SSMK_CAP_SCAN_ONLY | (dtype == SSMK_F32 ? 0u : SSMK_CAP_NARROW_INPUTS) |
                 (SSMK_MAMBA_VMAMBA ? SSMK_CAP_FEATURES : 0u);
    /* Mamba's backward (zoh, or a fork's every method): float32, and fp16 and
     * bf16 with real A where linked; dB/dC/dA summed with atomics; no state
     * gradients; every plan of it on the states its forward saved */
    if (SSMK_MAMBA_BWD && bwd_dtype(dtype, is_complex) && bwd_method(method))
        c |= SSMK_CAP_BACKWARD | SSMK_CAP_BWD_ATOMIC | SSMK_CAP_BWD_OUTPUTS_ONLY | SSMK_CAP_BWD_SAVED |
             (dtype == SSMK_F32 ? 0u : SSMK_CAP_BWD_NARROW);
    return c;
}

SSMK_API int32_t ssmk_set_num_threads(int32_t) { return 1; }

SSMK_API int32_t ssmk_scan_features(int32_t method, int32_t dtype, int32_t is_complex, ssmk_feature_set *f) {
    if (!f) return fail(SSMK_EINVAL, "f is NULL");
    const uint32_t c = ssmk_capabilities(method, dtype, is_complex);
    if (!(c & SSMK_CAP_SUPPORTED) || !(c & SSMK_CAP_FEATURES))
        return fail(SSMK_EUNSUPPORTED, "method = " + std::to_string(method) + ", dtype = " + std::to_string(dtype) +
                                           ", is_complex = " + std::to_string(is_complex) +
                                           ": not a combination this library declares features of");
    *f = ssmk_feature_set{};
    f->options = kVMambaOptions;
    f->dim_multiple = 1;
    return SSMK_OK;
}

SSMK_API const char *ssmk_last_error(void) { return last_error.c_str(); }

SSMK_API int32_t ssmk_discretize(int32_t method, int32_t dtype, int32_t is_complex, int64_t n, const void *delta,
                                 const void *A, void *Abar, void *Bcoef) {
    if (n < 1) return fail(SSMK_EINVAL, "n = " + std::to_string(n) + ", want >= 1");
    if (!delta || !A || !Abar || !Bcoef) return fail(SSMK_EINVAL, "delta, A, Abar or Bcoef is NULL");
    (void)method, (void)dtype, (void)is_complex;
    return fail(SSMK_EUNSUPPORTED, "Mamba's kernel discretizes inside the scan (declared SSMK_CAP_SCAN_ONLY)");
}

SSMK_API int32_t ssmk_plan_create(const ssmk_scan_args *args, ssmk_plan **plan) {
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    int32_t st = validate(args);
    if (st) return st;
    ssmk_plan *p = new ssmk_plan;
    if ((st = plan_build(args, p))) {
        delete p;
        return st;
    }
    *plan = p;
    return SSMK_OK;
}

SSMK_API int32_t ssmk_plan_create_discretize(int32_t method, int32_t dtype, int32_t is_complex, int64_t n,
                                             const void *delta, const void *A, ssmk_plan **plan) {
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    if (n < 1) return fail(SSMK_EINVAL, "n = " + std::to_string(n) + ", want >= 1");
    if (!delta || !A) return fail(SSMK_EINVAL, "delta or A is NULL");
    (void)method, (void)dtype, (void)is_complex;
    return fail(SSMK_EUNSUPPORTED, "Mamba's kernel discretizes inside the scan (declared SSMK_CAP_SCAN_ONLY)");
}

SSMK_API int32_t ssmk_plan_launch(ssmk_plan *plan) {
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    return launch(plan);
}

SSMK_API int32_t ssmk_plan_sync(ssmk_plan *plan) {
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    CUDA_TRY(cudaStreamSynchronize(plan->stream), "cudaStreamSynchronize");
    return SSMK_OK;
}

SSMK_API int32_t ssmk_plan_time(ssmk_plan *plan, int32_t iters, double *ms_total) {
    if (!plan || !ms_total || iters < 1) return fail(SSMK_EINVAL, "plan or ms_total is NULL, or iters < 1");
    cudaEvent_t e0, e1;
    CUDA_TRY(cudaEventCreate(&e0), "cudaEventCreate");
    CUDA_TRY(cudaEventCreate(&e1), "cudaEventCreate");
    int32_t st = SSMK_OK;
    cudaEventRecord(e0, plan->stream);
    for (int32_t i = 0; i < iters && !st; i++) st = launch(plan);
    cudaEventRecord(e1, plan->stream);
    cudaError_t e = cudaEventSynchronize(e1);
    float ms = 0;
    if (!st && e == cudaSuccess) e = cudaEventElapsedTime(&ms, e0, e1);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    if (st) return st;
    if (e != cudaSuccess) return cuda_fail(e, "timing events");
    *ms_total = ms;
    return SSMK_OK;
}

SSMK_API int32_t ssmk_plan_fetch(ssmk_plan *plan, void *out, void *last_state) {
    if (!plan || !out) return fail(SSMK_EINVAL, "plan or out is NULL");
    if (plan->bwd) return fail(SSMK_EINVAL, "plan is a backward plan: fetch it with ssmk_plan_fetch_bwd");
    if (!plan->launched) return fail(SSMK_EINVAL, "plan: fetch before any launch");
    CUDA_TRY(cudaStreamSynchronize(plan->stream), "cudaStreamSynchronize");
    CUDA_TRY(cudaMemcpy(out, plan->out_host_view, plan->seq_bytes, cudaMemcpyDeviceToHost), "out");
    return last_state ? fetch_state(plan, static_cast<float *>(last_state)) : SSMK_OK;
}

SSMK_API void ssmk_plan_destroy(ssmk_plan *plan) { delete plan; }

SSMK_API int32_t ssmk_plan_create_bwd(const ssmk_scan_args *args, const void *initial_state,
                                      const ssmk_scan_grads *grads, ssmk_plan **plan) {
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    int32_t st = validate_bwd(args, initial_state, grads);
    if (st) return st;
    ssmk_plan *p = new ssmk_plan;
    if ((st = plan_build_bwd(args, grads, p))) {
        delete p;
        return st;
    }
    *plan = p;
    return SSMK_OK;
}

/* SSMK_CAP_BWD_SAVED: Mamba's backward plans are on saved states already
 * (the forward runs once, at creation, and a launch is the backward kernel
 * alone), so a plan on saved states is the same plan. */
SSMK_API int32_t ssmk_plan_create_bwd_saved(const ssmk_scan_args *args, const void *initial_state,
                                            const ssmk_scan_grads *grads, ssmk_plan **plan) {
    return ssmk_plan_create_bwd(args, initial_state, grads, plan);
}

SSMK_API int32_t ssmk_plan_fetch_bwd(ssmk_plan *plan, const ssmk_scan_grads *grads) {
    if (!plan || !grads) return fail(SSMK_EINVAL, "plan or grads is NULL");
    if (!plan->bwd) return fail(SSMK_EINVAL, "plan is not a backward plan (ssmk_plan_create_bwd)");
    return fetch_bwd(plan, grads);
}

SSMK_API int32_t ssmk_scan_bwd(const ssmk_scan_args *args, const void *initial_state, const ssmk_scan_grads *grads) {
    ssmk_plan *p = nullptr;
    int32_t st = ssmk_plan_create_bwd(args, initial_state, grads, &p);
    if (!st) st = launch(p);
    if (!st) st = fetch_bwd(p, grads);
    ssmk_plan_destroy(p);
    return st;
}

SSMK_API int32_t ssmk_scan_fwd(const ssmk_scan_args *args) {
    ssmk_plan *p = nullptr;
    int32_t st = ssmk_plan_create(args, &p);
    if (!st) st = ssmk_plan_launch(p);
    if (!st) st = ssmk_plan_fetch(p, args->out, args->last_state);
    ssmk_plan_destroy(p);
    return st;
}

SSMK_API int32_t ssmk_copy_bandwidth(int64_t bytes, int32_t iters, double *gbytes_per_s) {
    if (bytes < 1 || iters < 1 || !gbytes_per_s) return fail(SSMK_EINVAL, "bytes < 1, iters < 1 or gbytes_per_s NULL");
    void *a = nullptr, *b = nullptr;
    CUDA_TRY(cudaMalloc(&a, size_t(bytes)), "cudaMalloc");
    if (cudaMalloc(&b, size_t(bytes)) != cudaSuccess) {
        cudaFree(a);
        return fail(SSMK_ENOMEM, "cudaMalloc");
    }
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaMemcpy(b, a, size_t(bytes), cudaMemcpyDeviceToDevice);
    cudaEventRecord(e0);
    for (int32_t i = 0; i < iters; i++) cudaMemcpyAsync(b, a, size_t(bytes), cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaError_t e = cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    cudaFree(a);
    cudaFree(b);
    if (e != cudaSuccess) return cuda_fail(e, "copy");
    *gbytes_per_s = 2.0 * double(bytes) * iters / (ms * 1e6);
    return SSMK_OK;
}

} // extern "C"

/*
 * cuda.cu — the CUDA build of the ssmk ABI (build/libssmk_cuda.so).
 *
 * The scan kernel: each (batch, dim) row is handled by LPR lanes of one warp
 * (LPR = dstate rounded up to a power of two, at most 32), each lane holding
 * NPT states (n = lane + k·LPR) in registers across the whole time loop.
 * Time runs in chunks of 8 steps: all of a chunk's loads (u, Δ, and each
 * state's 8 contiguous B and C values) are issued before its arithmetic;
 * dt (bias, softplus) is computed once per step per row and shared by
 * shuffle; Ā and g come from the shared method arithmetic (ssmk_methods.h);
 * the row's lanes sum C·h with xor shuffles and lane j applies D and the
 * gate to step j and writes it (coalesced). One launch per scan, any seqlen,
 * dstate up to 256. bench/NOTES.md records the variants and their timings.
 *
 * Every CUDA call and launch is checked; failures become SSMK_EDEVICE (or
 * SSMK_ENODEVICE when there is no usable GPU) with the runtime's message.
 * The process is never exited.
 */
#include <cuda_runtime.h>
#include <stdlib.h>

#include <new>
#include <type_traits>
#include <vector>

#include "ssmk.h"
#include "ssmk_host.h"
#include "ssmk_methods.h"

using namespace ssmk;

namespace {

constexpr int kBlock = 128;

/* ---- error handling ---- */

int32_t cuda_fail(cudaError_t e, const char *what) {
    if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver || e == cudaErrorInitializationError ||
        e == cudaErrorStubLibrary || e == cudaErrorDevicesUnavailable)
        return fail(SSMK_ENODEVICE, "no usable CUDA device: %s (%s) in %s", cudaGetErrorString(e), cudaGetErrorName(e),
                    what);
    if (e == cudaErrorMemoryAllocation)
        return fail(SSMK_ENOMEM, "out of device memory: %s in %s", cudaGetErrorString(e), what);
    return fail(SSMK_EDEVICE, "CUDA error %s: %s in %s", cudaGetErrorName(e), cudaGetErrorString(e), what);
}

#define CU(call)                                                       \
    do {                                                               \
        cudaError_t e_ = (call);                                       \
        if (e_ != cudaSuccess) return cuda_fail(e_, #call);            \
    } while (0)

int32_t ensure_device() {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) return cuda_fail(e, "cudaGetDeviceCount");
    if (n == 0) return fail(SSMK_ENODEVICE, "no usable CUDA device: cudaGetDeviceCount found none");
    return SSMK_OK;
}

/* ---- kernels ---- */

struct ScanParams {
    int batch, dim, seqlen, dstate, n_groups;
    int method, is_variable_B, is_variable_C, softplus;
    int lpr_log2; /* lanes per row = 1 << lpr_log2 */
    long long rows;
    const void *u, *delta, *A, *B, *C, *D, *z, *delta_bias;
    void *out, *last_state;
};

/* Time steps per chunk: a chunk's loads are all issued before its
 * arithmetic, so memory latency overlaps instead of stalling every step. */
constexpr int kChunk = 8;

/* M: the method for real A (compile time); complex kernels take p.method. */
template <typename T, bool CPLX, int NPT, int M>
__global__ void __launch_bounds__(kBlock) scan_kernel(const ScanParams p) {
    typedef typename std::conditional<CPLX, cplx<T>, T>::type V;
    const int lpr = 1 << p.lpr_log2;
    const long long gtid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long row = gtid >> p.lpr_log2;
    const int lane = (int)(gtid & (lpr - 1));
    const int row_lane0 = (int)(threadIdx.x & 31) & ~(lpr - 1); /* warp lane of this row's lane 0 */
    const bool valid = row < p.rows;
    if (!valid) row = p.rows - 1; /* keep the whole warp in the shuffles; write nothing */
    const int L = p.seqlen, N = p.dstate;
    const int b = (int)(row / p.dim), d = (int)(row % p.dim);
    const int grp = group_of(d, p.dim, p.n_groups);

    const T *u = (const T *)p.u + row * L;
    const T *delta = (const T *)p.delta + row * L;
    const V *A = (const V *)p.A + (long long)d * N;
    const long long vbase = ((long long)b * p.n_groups + grp) * N * L;
    const V *Bb = p.is_variable_B ? (const V *)p.B + vbase : (const V *)p.B + (long long)d * N;
    const V *Cb = p.is_variable_C ? (const V *)p.C + vbase : (const V *)p.C + (long long)d * N;
    const long long bns = p.is_variable_B ? L : 1, bts = p.is_variable_B ? 1 : 0;
    const long long cns = p.is_variable_C ? L : 1, cts = p.is_variable_C ? 1 : 0;

    V a[NPT], h[NPT];
    bool on[NPT];
#pragma unroll
    for (int k = 0; k < NPT; k++) {
        const int n = lane + k * lpr;
        on[k] = n < N;
        if constexpr (CPLX) {
            a[k] = on[k] ? A[n] : cmake(T(0), T(0));
            h[k] = cmake(T(0), T(0));
        } else {
            a[k] = on[k] ? A[n] : T(0);
            h[k] = T(0);
        }
    }

    for (int t0 = 0; t0 < L; t0 += kChunk) {
        const int steps = L - t0 < kChunk ? L - t0 : kChunk;
        /* dt and u of the chunk. With 8 or more lanes per row, lane i
         * computes dt of step t0+i once (bias, softplus) and the row shares
         * it by shuffle; with fewer, each lane computes all eight. */
        T dt[kChunk], uu[kChunk];
        if (lpr >= kChunk) {
            const int i = lane & (kChunk - 1);
            const T mine = i < steps ? step_dt(delta[t0 + i], (const T *)p.delta_bias, d, p.softplus) : T(0);
#pragma unroll
            for (int j = 0; j < kChunk; j++) dt[j] = __shfl_sync(0xffffffffu, mine, row_lane0 + j);
        } else {
#pragma unroll
            for (int j = 0; j < kChunk; j++)
                dt[j] = j < steps ? step_dt(delta[t0 + j], (const T *)p.delta_bias, d, p.softplus) : T(0);
        }
#pragma unroll
        for (int j = 0; j < kChunk; j++) uu[j] = j < steps ? u[t0 + j] : T(0);

        T acc[kChunk];
#pragma unroll
        for (int j = 0; j < kChunk; j++) acc[j] = T(0);
#pragma unroll
        for (int k = 0; k < NPT; k++) {
            if (!on[k]) continue;
            const int n = lane + k * lpr;
            const V *bp = Bb + n * bns + (long long)t0 * bts, *cp = Cb + n * cns + (long long)t0 * cts;
            V bv[kChunk], cv[kChunk];
#pragma unroll
            for (int j = 0; j < kChunk; j++) {
                const bool in = j < steps;
                if constexpr (CPLX) {
                    bv[j] = in ? bp[j * bts] : cmake(T(0), T(0));
                    cv[j] = in ? cp[j * cts] : cmake(T(0), T(0));
                } else {
                    bv[j] = in ? bp[j * bts] : T(0);
                    cv[j] = in ? cp[j * cts] : T(0);
                }
            }
#pragma unroll
            for (int j = 0; j < kChunk; j++) {
                if (j >= steps) break;
                if constexpr (CPLX) {
                    cplx<T> ab, g;
                    method_complex(p.method, cscale(a[k], dt[j]), ab, g);
                    h[k] = cadd(cmul(ab, h[k]), cscale(cmul(cscale(g, dt[j]), bv[j]), uu[j]));
                    acc[j] += c_times_h(cv[j], h[k]).re;
                } else {
                    T ab, g;
                    method_real_m<M>(dt[j] * a[k], ab, g);
#if defined(SSMK_SLOW_WORK) && SSMK_SLOW_WORK > 0
                    /* A deliberately slowed build (SSMK_NVCC_EXTRA=-DSSMK_SLOW_WORK=n):
                     * n redundant evaluations per state update whose results feed a
                     * select the compiler cannot drop; the answers are unchanged. It
                     * exists to prove that the gate's baseline comparison catches a
                     * slowdown (README, "Gating kernel changes"). */
                    for (int r = 0; r < SSMK_SLOW_WORK; r++) {
                        T ab2, g2;
                        /* a perturbed x, so that the evaluation is not the one above */
                        method_real_m<M>(dt[j] * a[k] * (T(1) + T(r + 1) * T(1e-3)), ab2, g2);
                        ab = (ab2 == ab2 || ab != ab) ? ab : g2;
                    }
#endif
                    h[k] = ab * h[k] + (dt[j] * g) * bv[j] * uu[j];
                    acc[j] += cv[j] * h[k];
                }
            }
        }
        if (lpr >= kChunk) {
            /* Reduce-scatter over the row: recursive halving across lane bits
             * 4, 2, 1 leaves in lane j (mod 8) the 8-lane sum of step t0+j (7
             * shuffles instead of 8 full reductions), then the groups of 8
             * lanes add up. Every lane then finishes one step — no
             * divergence — and lanes 0…7 of the row store 8 consecutive outputs. */
            const int jl = lane & (kChunk - 1);
            T v4[4], v2[2];
            const bool b4 = jl & 4, b2 = jl & 2, b1 = jl & 1;
#pragma unroll
            for (int i = 0; i < 4; i++)
                v4[i] = (b4 ? acc[i + 4] : acc[i]) + __shfl_xor_sync(0xffffffffu, b4 ? acc[i] : acc[i + 4], 4);
#pragma unroll
            for (int i = 0; i < 2; i++)
                v2[i] = (b2 ? v4[i + 2] : v4[i]) + __shfl_xor_sync(0xffffffffu, b2 ? v4[i] : v4[i + 2], 2);
            T sum = (b1 ? v2[1] : v2[0]) + __shfl_xor_sync(0xffffffffu, b1 ? v2[0] : v2[1], 1);
            for (int off = kChunk; off < lpr; off <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
            T uj = uu[0];
#pragma unroll
            for (int j = 1; j < kChunk; j++)
                if (jl == j) uj = uu[j];
            if (valid && lane < kChunk && jl < steps) {
                const T y = CPLX ? complex_output(sum) : sum;
                const long long i = row * L + t0 + jl;
                ((T *)p.out)[i] = finish_output(y, uj, (const T *)p.D, (const T *)p.z, d, i);
            }
        } else {
            /* Fewer than 8 lanes per row: full sums, lane 0 writes the chunk. */
#pragma unroll
            for (int j = 0; j < kChunk; j++)
                for (int off = lpr >> 1; off > 0; off >>= 1) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], off);
            if (valid && lane == 0) {
#pragma unroll
                for (int j = 0; j < kChunk; j++) {
                    if (j < steps) {
                        const T y = CPLX ? complex_output(acc[j]) : acc[j];
                        const long long i = row * L + t0 + j;
                        ((T *)p.out)[i] = finish_output(y, uu[j], (const T *)p.D, (const T *)p.z, d, i);
                    }
                }
            }
        }
    }
    if (valid && p.last_state) {
        V *s = (V *)p.last_state + row * N;
#pragma unroll
        for (int k = 0; k < NPT; k++)
            if (on[k]) s[lane + k * lpr] = h[k];
    }
}

template <typename T, bool CPLX>
__global__ void discretize_kernel(int method, long long n, const T *delta, const void *A, void *abar, void *bcoef) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        const T dl = delta[i];
        if constexpr (CPLX) {
            cplx<T> ab, g;
            method_complex(method, cscale(((const cplx<T> *)A)[i], dl), ab, g);
            ((cplx<T> *)abar)[i] = ab;
            ((cplx<T> *)bcoef)[i] = cscale(g, dl);
        } else {
            T ab, g;
            method_real(method, dl * ((const T *)A)[i], ab, g);
            ((T *)abar)[i] = ab;
            ((T *)bcoef)[i] = dl * g;
        }
    }
}

/* ---- launchers ---- */

template <typename T, bool CPLX, int M>
void launch_scan_m(const ScanParams &p, int npt, dim3 grid, cudaStream_t s) {
    switch (npt) {
    case 1:
        scan_kernel<T, CPLX, 1, M><<<grid, kBlock, 0, s>>>(p);
        break;
    case 2:
        scan_kernel<T, CPLX, 2, M><<<grid, kBlock, 0, s>>>(p);
        break;
    case 4:
        scan_kernel<T, CPLX, 4, M><<<grid, kBlock, 0, s>>>(p);
        break;
    default:
        scan_kernel<T, CPLX, 8, M><<<grid, kBlock, 0, s>>>(p);
        break;
    }
}

template <typename T, bool CPLX>
void launch_scan_t(const ScanParams &p, int npt, dim3 grid, cudaStream_t s) {
    /* The switch sits in the else branch so that complex kernels are not
     * instantiated once per method (code after an if-constexpr return is). */
    if constexpr (CPLX) {
        launch_scan_m<T, CPLX, -1>(p, npt, grid, s);
    } else {
        switch (p.method) {
        case ZOH:
            return launch_scan_m<T, CPLX, ZOH>(p, npt, grid, s);
        case FOH:
            return launch_scan_m<T, CPLX, FOH>(p, npt, grid, s);
        case BILINEAR:
            return launch_scan_m<T, CPLX, BILINEAR>(p, npt, grid, s);
        case POLY:
            return launch_scan_m<T, CPLX, POLY>(p, npt, grid, s);
        case HIGHORDER:
            return launch_scan_m<T, CPLX, HIGHORDER>(p, npt, grid, s);
        default:
            return launch_scan_m<T, CPLX, RK4>(p, npt, grid, s);
        }
    }
}

int32_t launch_scan(const ssmk_scan_args &a, cudaStream_t s) {
    ScanParams p;
    p.batch = a.batch;
    p.dim = a.dim;
    p.seqlen = a.seqlen;
    p.dstate = a.dstate;
    p.n_groups = a.n_groups;
    p.method = a.method;
    p.is_variable_B = a.is_variable_B;
    p.is_variable_C = a.is_variable_C;
    p.softplus = a.delta_softplus;
    /* Lanes per row: dstate rounded up to a power of two, halved while that
     * keeps at least 8 lanes (the reduce-scatter's width), at most 32. Two
     * states per lane halve the per-chunk work (dt, gate, reduction, loads)
     * per state and give each thread two independent recurrences. */
    int lpr_log2 = 0;
    while ((1 << lpr_log2) < a.dstate && lpr_log2 < 6) lpr_log2++;
    if (lpr_log2 > 3) lpr_log2--;
    if (lpr_log2 > 5) lpr_log2 = 5;
    p.lpr_log2 = lpr_log2;
    const int lpr = 1 << lpr_log2;
    int npt = (a.dstate + lpr - 1) / lpr;
    npt = npt <= 1 ? 1 : npt <= 2 ? 2 : npt <= 4 ? 4 : 8;
    p.rows = (long long)a.batch * a.dim;
    p.u = a.u;
    p.delta = a.delta;
    p.A = a.A;
    p.B = a.B;
    p.C = a.C;
    p.D = a.D;
    p.z = a.z;
    p.delta_bias = a.delta_bias;
    p.out = a.out;
    p.last_state = a.last_state;
    const long long threads = p.rows * lpr;
    dim3 grid((unsigned)((threads + kBlock - 1) / kBlock));
    if (a.dtype == SSMK_F64) {
        if (a.is_complex)
            launch_scan_t<double, true>(p, npt, grid, s);
        else
            launch_scan_t<double, false>(p, npt, grid, s);
    } else {
        if (a.is_complex)
            launch_scan_t<float, true>(p, npt, grid, s);
        else
            launch_scan_t<float, false>(p, npt, grid, s);
    }
    CU(cudaGetLastError());
    return SSMK_OK;
}

int32_t launch_discretize(int32_t method, int32_t dtype, int32_t is_complex, int64_t n, const void *delta,
                          const void *A, void *abar, void *bcoef, cudaStream_t s) {
    long long blocks = (n + 255) / 256;
    dim3 grid((unsigned)(blocks < 65535 * 16 ? blocks : 65535 * 16));
    if (dtype == SSMK_F64) {
        if (is_complex)
            discretize_kernel<double, true><<<grid, 256, 0, s>>>(method, n, (const double *)delta, A, abar, bcoef);
        else
            discretize_kernel<double, false><<<grid, 256, 0, s>>>(method, n, (const double *)delta, A, abar, bcoef);
    } else {
        if (is_complex)
            discretize_kernel<float, true><<<grid, 256, 0, s>>>(method, n, (const float *)delta, A, abar, bcoef);
        else
            discretize_kernel<float, false><<<grid, 256, 0, s>>>(method, n, (const float *)delta, A, abar, bcoef);
    }
    CU(cudaGetLastError());
    return SSMK_OK;
}

} /* namespace */

/* A plan owns device buffers, a stream and two events. */
struct ssmk_plan {
    bool is_scan = false, launched = false;
    ssmk_scan_args dargs{}; /* device pointers */
    ScanSizes sz{};
    int32_t method = 0, dtype = 0, is_complex = 0;
    int64_t n = 0;
    void *d_delta = nullptr, *d_A = nullptr, *d_abar = nullptr, *d_bcoef = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t ev0 = nullptr, ev1 = nullptr;
    std::vector<void *> dbufs;

    ~ssmk_plan() {
        if (stream) cudaStreamSynchronize(stream);
        for (void *p : dbufs) cudaFree(p);
        if (ev0) cudaEventDestroy(ev0);
        if (ev1) cudaEventDestroy(ev1);
        if (stream) cudaStreamDestroy(stream);
    }

    int32_t init() {
        CU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        CU(cudaEventCreate(&ev0));
        CU(cudaEventCreate(&ev1));
        return SSMK_OK;
    }

    /* A device copy of host array src (count elements of elem bytes), or
     * nullptr for an absent one. */
    int32_t upload(const void *src, int64_t count, size_t elem, const void **dst) {
        *dst = nullptr;
        if (!src) return SSMK_OK;
        void *p = nullptr;
        CU(cudaMalloc(&p, (size_t)count * elem));
        dbufs.push_back(p);
        CU(cudaMemcpyAsync(p, src, (size_t)count * elem, cudaMemcpyHostToDevice, stream));
        *dst = p;
        return SSMK_OK;
    }

    int32_t alloc(int64_t count, size_t elem, void **dst) {
        CU(cudaMalloc(dst, (size_t)count * elem));
        dbufs.push_back(*dst);
        return SSMK_OK;
    }
};

namespace {

int32_t plan_scan(const ssmk_scan_args *args, ssmk_plan **out) {
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
        const void **dst;
    } ins[] = {{args->u, s.seq, &p->dargs.u},         {args->delta, s.seq, &p->dargs.delta},
               {args->A, s.a, &p->dargs.A},           {args->B, s.b, &p->dargs.B},
               {args->C, s.c, &p->dargs.C},           {args->D, s.dim, &p->dargs.D},
               {args->z, s.seq, &p->dargs.z},         {args->delta_bias, s.dim, &p->dargs.delta_bias}};
    for (auto &in : ins)
        if (!st) st = p->upload(in.src, in.count, s.elem, in.dst);
    if (!st) st = p->alloc(s.seq, s.elem, &p->dargs.out);
    if (!st) st = p->alloc(s.state, s.elem, &p->dargs.last_state);
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

int32_t fetch(ssmk_plan *p, void *out, void *last_state) {
    CU(cudaStreamSynchronize(p->stream));
    if (p->is_scan) {
        CU(cudaMemcpy(out, p->dargs.out, (size_t)p->sz.seq * p->sz.elem, cudaMemcpyDeviceToHost));
        if (last_state)
            CU(cudaMemcpy(last_state, p->dargs.last_state, (size_t)p->sz.state * p->sz.elem, cudaMemcpyDeviceToHost));
        return SSMK_OK;
    }
    size_t bytes = (size_t)p->n * (p->is_complex ? 2 : 1) * (p->dtype == SSMK_F64 ? 8 : 4);
    CU(cudaMemcpy(out, p->d_abar, bytes, cudaMemcpyDeviceToHost));
    if (last_state) CU(cudaMemcpy(last_state, p->d_bcoef, bytes, cudaMemcpyDeviceToHost));
    return SSMK_OK;
}

int32_t launch(ssmk_plan *p) {
    if (p->is_scan) return launch_scan(p->dargs, p->stream);
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
    return native_capabilities(method, dtype, is_complex);
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
    if (!plan) return fail(SSMK_EINVAL, "plan is NULL");
    int32_t st = validate_scan(args, SSMK_MAX_DSTATE);
    if (st) return st;
    st = ensure_device();
    if (st) return st;
    return plan_scan(args, plan);
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

SSMK_API int32_t ssmk_plan_fetch(ssmk_plan *p, void *out, void *last_state) {
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

SSMK_API int32_t ssmk_scan_fwd(const ssmk_scan_args *args) {
    int32_t st = validate_scan(args, SSMK_MAX_DSTATE);
    if (st) return st;
    ssmk_plan *p = nullptr;
    st = ssmk_plan_create(args, &p);
    if (!st) st = ssmk_plan_launch(p);
    if (!st) st = fetch(p, args->out, args->last_state);
    ssmk_plan_destroy(p);
    return st;
}

SSMK_API int32_t ssmk_copy_bandwidth(int64_t bytes, int32_t iters, double *gbytes_per_s) {
    if (int32_t st = validate_copy_bandwidth(bytes, iters, gbytes_per_s)) return st;
    int32_t st = ensure_device();
    if (st) return st;
    ssmk_plan p; /* for its stream, events and buffer bookkeeping */
    st = p.init();
    void *src = nullptr, *dst = nullptr;
    if (!st) st = p.alloc(bytes, 1, &src);
    if (!st) st = p.alloc(bytes, 1, &dst);
    if (st) return st;
    CU(cudaMemsetAsync(src, 1, (size_t)bytes, p.stream));
    CU(cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDeviceToDevice, p.stream)); /* warm-up */
    CU(cudaEventRecord(p.ev0, p.stream));
    for (int32_t i = 0; i < iters; i++)
        CU(cudaMemcpyAsync(dst, src, (size_t)bytes, cudaMemcpyDeviceToDevice, p.stream));
    CU(cudaEventRecord(p.ev1, p.stream));
    CU(cudaEventSynchronize(p.ev1));
    float ms = 0;
    CU(cudaEventElapsedTime(&ms, p.ev0, p.ev1));
    *gbytes_per_s = ms > 0 ? 2.0 * (double)bytes * iters / ((double)ms * 1e6) : 0;
    return SSMK_OK;
}

} /* extern "C" */

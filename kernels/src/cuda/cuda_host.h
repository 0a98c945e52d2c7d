/*
 * cuda_host.h — what the CUDA build's translation units share on the host:
 * CUDA errors as ABI statuses, and the launchers of kernels.cu.
 *
 * Every CUDA call and launch is checked; failures become SSMK_EDEVICE (or
 * SSMK_ENODEVICE when there is no usable GPU, SSMK_ENOMEM when memory runs
 * out) with the runtime's message. The process is never exited.
 */
#ifndef SSMK_CUDA_HOST_H
#define SSMK_CUDA_HOST_H

#include <cuda_runtime.h>

#include <vector>

#include "../ssmk_host.h"

#include "ssmk.h"

namespace ssmk {

/* The ABI status for a failed CUDA call, with the runtime's message. */
int32_t cuda_fail(cudaError_t e, const char *what);

#define CU(call)                                                                                                       \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) return ::ssmk::cuda_fail(e_, #call);                                                    \
    } while (0)

/* The design a launch's environment variable var (SSMK_FORWARD,
 * SSMK_BACKWARD; read at every launch, so that one process judges and
 * times each design) forces: -1 where it is unset, empty or "auto", else
 * the index of its value among the n names. A value not among them sets *st
 * to a refusal naming the variable and the values it takes (kernels.cu). */
int forced_design(const char *var, const char *const *names, int n, int32_t *st);

/* A channel-sequential design (scan_chan.cuh, bwd_chan.cuh) is taken by
 * shape only where its threads make at least kChanMinWarps warps per SM of
 * the current device: fewer, and the row designs were measured faster
 * (docs/performance.md). The channel backward at eight lanes a channel
 * needs fewer, kChanBwd8MinWarps: it beat the row design by 1.55× at 7.8
 * warps per SM, where four lanes (3.9 warps) only tied it. */
constexpr int kChanMinWarps = 8;
constexpr int kChanBwd8MinWarps = 6;
bool fills_sms(long long threads, int warps = kChanMinWarps);

/* Whether q may be read and written in 16-byte vectors. */
inline bool aligned16(const void *q) { return ((uintptr_t)q & 15) == 0; }

/* The grid of an elementwise grid-stride kernel of 256 threads per block
 * over n elements: a block per 256, at most 65535·16 blocks. */
inline dim3 grid_for(long long n) {
    const long long blocks = (n + 255) / 256;
    return dim3((unsigned)(blocks < 65535 * 16 ? blocks : 65535 * 16));
}

/* SSMK_OK when a CUDA device answers, else SSMK_ENODEVICE with the reason. */
int32_t ensure_device();

/* The backward's phase 1 through the scan: the state entering each chunk of
 * `chunk` steps after the first, [rows][chunks − 1][dstate] (ScanParams);
 * lanes: the channel-sequential backward's lanes a channel, which its phase
 * 1 (a tile apart) takes too, 0 for the row design. */
struct ChunkStates {
    void *states = nullptr;
    int chunk = 0, chunks = 0, lanes = 0;
};

/* Launches the scan of a (device pointers) on stream s. */
/* h0: the device copy of the initial state, or NULL (h = 0); cs: the
 * backward's chunk states instead of the outputs. */
int32_t launch_scan(const ssmk_scan_args &a, const void *h0, cudaStream_t s, const ChunkStates &cs = ChunkStates{});

/* The backward's device scratch (backward.cu): the chunks' starting
 * states and the per-row partials of the sums over batch, carved from one
 * allocation at base. */
struct BwdScratch {
    void *base = nullptr;
    void *hS = nullptr;
    void *pA = nullptr, *pB = nullptr, *pC = nullptr, *pD = nullptr, *pBias = nullptr;
    /* 16-bit inputs: float copies of variable B and C and their gradients,
     * and of u and delta for phase 1 (backward.cu) */
    float *wu = nullptr, *wdelta = nullptr, *wB = nullptr, *wC = nullptr, *wdB = nullptr, *wdC = nullptr;
};

/* The bytes of the backward's scratch for a; with a layout whose base is
 * set, the other pointers are laid out in it. */
size_t bwd_scratch_bytes(const ssmk_scan_args &a, BwdScratch *layout);

/* What one launch of the backward runs: phase 1 (the states entering its
 * chunks, into the scratch) and the gradients, or one of them: a plan on
 * saved states (ssmk_plan_create_bwd_saved) runs the states once at its
 * creation and the gradients alone at each launch. design: the design the
 * states were made for, which the gradients must take (set by a launch
 * with states; -1: chosen at each launch). */
struct BwdStage {
    bool states = true, grads = true;
    int design = -1;
};

/* Launches the backward pass of a with the gradients g (device pointers)
 * on stream s, the stages that stage asks for. */
int32_t launch_backward(const ssmk_scan_args &a, const void *h0, const ssmk_scan_grads &g, const BwdScratch &sc,
                        cudaStream_t s, BwdStage &stage);

/* Launches ssmk_discretize's kernel over n elements (device pointers) on stream s. */
int32_t launch_discretize(int32_t method, int32_t dtype, int32_t is_complex, int64_t n, const void *delta,
                          const void *A, void *abar, void *bcoef, cudaStream_t s);

} /* namespace ssmk */

/* A plan (the ABI's opaque ssmk_plan) owns device buffers, a stream and two
 * events; ssmk_copy_bandwidth borrows the same bookkeeping. */
struct ssmk_plan {
    bool is_scan = false, is_bwd = false, launched = false;
    ssmk_scan_args dargs{};     /* device pointers */
    ssmk_scan_grads dgrads{};   /* backward: dout, dlast_state and the gradients on the device */
    ssmk::BwdScratch scratch{}; /* backward */
    ssmk::BwdStage stage{};     /* backward: what a launch runs */
    ssmk::ScanSizes sz{};
    int32_t method = 0, dtype = 0, is_complex = 0;
    int64_t n = 0;
    void *d_delta = nullptr, *d_A = nullptr, *d_abar = nullptr, *d_bcoef = nullptr;
    const void *d_h0 = nullptr; /* the initial state on the device, or NULL */
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

#endif

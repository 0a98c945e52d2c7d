/*
 * kernels.cu — the CUDA build's kernels and their host dispatch: the scan
 * (scan_kernel.cuh) instantiated per element type, real or complex A, method
 * and 16-byte runs, chosen once per launch by scan_launch.cuh's switches (the
 * 16-bit input types' instantiations are kernels_narrow.cu's), or the
 * channel-sequential scan (scan_chan.cuh, scan_chan_cplx.cuh) where the
 * shape favours it (chan_lanes); and ssmk_discretize's elementwise kernel.
 */
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <utility>

#include "../ssmk_host.h"
#include "../ssmk_methods.h"
#include "cuda_host.h"
#include "scan_chan.cuh"
#include "scan_launch.cuh"

namespace ssmk {

namespace {

template <typename T, bool CPLX>
__global__ void discretize_kernel(int method, long long n, const T *delta, const void *A, void *abar, void *bcoef) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
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

/* The forward design a launch takes: 0, the row kernel; P = 2 … 16, the
 * channel-sequential kernel with P lanes per channel. That kernel needs
 * real A in float arithmetic, variable B and C in 16-byte runs (vec), N a
 * multiple of P and at most kChanMaxStates, whole blocks of 128/P channels
 * in each group; chunk states only a tile apart (the channel-sequential
 * backward's phase 1, which this kernel alone serves, at the backward's P,
 * from fp32 or 16-bit inputs). Chosen by shape (auto) where it was
 * measured faster (docs/performance.md): fp32 inputs, a method whose policy
 * says so (kChanForward), and channels enough for kChanMinWarps warps per SM
 * (the Mamba block's 8×2048 channels at P = 4; at 8×512 the row kernel is
 * twice as fast). Complex A (scan_chan_cplx.cuh): fp32 inputs, P = 8 (or
 * 4 where N is not a multiple of 8), no chunk states, and a method whose
 * policy says so (kChanComplex: zoh and the Taylor methods, faster at both
 * benchmark sizes). SSMK_FORWARD=row, chan, chan2, chan4, chan8 or chan16
 * overrides the choice (tests and benchmarks judge and time every design);
 * chan* where the conditions fail (chan2 with complex A, chan8 and chan16
 * with real A) runs the row kernel. *st is set to a refusal of a
 * value it does not know. */
int chan_lanes(const ssmk_scan_args &a, bool vec, const ChunkStates &cs, int32_t *st) {
    static const char *const names[] = {"row", "chan", "chan2", "chan4", "chan8", "chan16"};
    static const int forces[] = {0, 1, 2, 4, 8, 16}; /* row, chan (P by shape), P = 2 … 16 */
    const int f = forced_design("SSMK_FORWARD", names, 6, st);
    if (*st != SSMK_OK) return 0;
    const int force = f < 0 ? -1 : forces[f]; /* -1: auto */
    if (a.dtype == SSMK_F64 || !vec || a.dstate > kChanMaxStates ||
        (long long)kChanMaxStates * a.seqlen >= (1LL << 31)) /* the staging's 32-bit offsets */
        return 0;
    const int per_group = a.dim / a.n_groups;
    auto fits = [&](int P) { return a.dstate % P == 0 && per_group % (kChanThreads / P) == 0; };
    if (a.is_complex) {
        /* scan_chan_cplx.cuh: fp32 inputs (16-bit ones are refused with
         * complex A), the row kernel's chunk states for the backward; P = 8
         * where N allows: at both benchmark sizes it beat P = 4 (twice the
         * warps of a latency-bound kernel) and P = 16 (whose reduction of
         * the outputs over 16 lanes costs more than the warps gain) */
        if (cs.states || force == 0 || force == 2) return 0;
        if (force >= 4) return fits(force) ? force : 0;
        bool takes = force > 0;
        if (!takes) method_switch(a.method, [&](auto m) { takes = MethodPolicy<decltype(m)::value>::kChanComplex; });
        return !takes ? 0 : fits(8) ? 8 : fits(4) ? 4 : 0;
    }
    /* the channel-sequential backward's states, a tile apart (bwd_chan.cuh):
     * only this kernel writes them, at the backward's lanes a channel,
     * whatever SSMK_FORWARD says */
    if (cs.states)
        return cs.chunk == kChanSteps && (a.dtype == SSMK_F32 || narrow_dtype(a.dtype)) && cs.lanes && fits(cs.lanes)
                   ? cs.lanes
                   : 0;
    if (force == 0 || force == 8 || force == 16) return 0; /* P = 8 and 16: complex A's alone */
    if (force == 2 || force == 4) return fits(force) ? force : 0;
    /* P = 4 where N allows: at both benchmark sizes it beat P = 2 (twice
     * the warps; docs/performance.md) */
    const int P = fits(4) ? 4 : fits(2) ? 2 : 0;
    if (P == 0 || force == 1) return P;
    bool method_wins = false;
    method_switch(a.method, [&](auto m) { method_wins = MethodPolicy<decltype(m)::value>::kChanForward; });
    return a.dtype == SSMK_F32 && method_wins && fills_sms((long long)a.batch * a.dim * P) ? P : 0;
}

} /* namespace */

int forced_design(const char *var, const char *const *names, int n, int32_t *st) {
    *st = SSMK_OK;
    const char *env = getenv(var);
    if (!env || !*env || strcmp(env, "auto") == 0) return -1;
    for (int i = 0; i < n; i++)
        if (strcmp(env, names[i]) == 0) return i;
    char want[128] = "";
    for (int i = 0; i < n; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", i ? ", " : "", names[i]);
    *st = fail(SSMK_EINVAL, "%s = \"%s\": want %s or auto", var, env, want);
    return -1;
}

bool fills_sms(long long threads, int warps) {
    int dev = 0, sms = 1;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
        sms = 1;
    return threads >= (long long)warps * sms * 32;
}

int32_t launch_scan(const ssmk_scan_args &a, const void *h0, cudaStream_t s, const ChunkStates &cs) {
    ScanParams p;
    static_cast<ScanInputs &>(p) = scan_inputs(a);
    p.chunk_states = cs.states;
    p.chunk = cs.chunk;
    p.chunks = cs.chunks;
    p.out = a.out;
    p.last_state = a.last_state;
    p.h0 = h0;
    const size_t velem = weight_size(a.dtype) * (a.is_complex ? 2 : 1); /* an element of the state */
    /* 16-byte runs need every run to start on a multiple of K elements
     * (seqlen a multiple of K) and 16-byte aligned arrays (device buffers
     * from cudaMalloc are 256-byte aligned). */
    const int K = steps_per_lane(velem);
    const bool vec = a.is_variable_B && a.is_variable_C && a.seqlen % K == 0 && aligned16(a.u) && aligned16(a.delta) &&
                     aligned16(a.out) && (!a.z || aligned16(a.z)) && aligned16(a.B) && aligned16(a.C);
    int32_t st = SSMK_OK;
    const int P = chan_lanes(a, vec, cs, &st);
    if (cs.states && !P && cs.chunk % (32 * K))
        return fail(SSMK_EUNSUPPORTED, "a chunk of %d steps is not a multiple of the scan's tile of %d", cs.chunk,
                    32 * K);
    if (P) {
        if (cs.states && narrow_dtype(a.dtype))
            launch_chan_states_narrow(p, a.dtype, P, s);
        else if (cs.states)
            launch_chan_states(p, P, s);
        else if (a.is_complex)
            launch_chan_cplx(p, P, s);
        else if (narrow_dtype(a.dtype))
            launch_chan_narrow(p, a.dtype, P, s);
        else
            launch_chan_f32(p, P, s);
    } else if (st != SSMK_OK) {
        return st;
    } else if (narrow_dtype(a.dtype)) {
        /* complex A with 16-bit inputs is refused before a launch (plan.cu) */
        launch_scan_narrow(p, a.dtype, vec, s);
    } else if (a.dtype == SSMK_F64) {
        if (a.is_complex)
            launch_scan_t<double, true>(p, vec, s);
        else
            launch_scan_t<double, false>(p, vec, s);
    } else {
        if (a.is_complex)
            launch_scan_t<float, true>(p, vec, s);
        else
            launch_scan_t<float, false>(p, vec, s);
    }
    CU(cudaGetLastError());
    return SSMK_OK;
}

int32_t launch_discretize(int32_t method, int32_t dtype, int32_t is_complex, int64_t n, const void *delta,
                          const void *A, void *abar, void *bcoef, cudaStream_t s) {
    const dim3 grid = grid_for(n);
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

} /* namespace ssmk */

/*
 * scan_launch.cuh — the scan's host dispatch: the switches of
 * static_switch.cuh from run-time values to template arguments, and one
 * launch of an instantiation. Included by kernels.cu (the fp32 and fp64
 * instantiations) and kernels_narrow.cu (the 16-bit input types), which
 * nvcc compiles in parallel.
 */
#ifndef SSMK_SCAN_LAUNCH_CUH
#define SSMK_SCAN_LAUNCH_CUH

#include <cuda_runtime.h>

#include <type_traits>
#include <utility>

#include "scan_kernel.cuh"
#include "static_switch.cuh"

namespace ssmk {

/* One launch of the scan: one warp per row, kScanWarps rows per block, and
 * each row's carries (one element per state) in dynamic shared memory. */
template <class Tr>
void launch_scan_traits(const ScanParams &p, cudaStream_t s) {
    const dim3 grid((unsigned)((p.rows + kScanWarps - 1) / kScanWarps));
    const size_t smem = (size_t)kScanWarps * p.dstate * sizeof(typename Tr::V);
    if constexpr (Tr::kNarrow)
        scan_kernel_narrow<Tr><<<grid, kScanThreads, smem, s>>>(p);
    else if (p.chunk_states)
        scan_kernel<Tr, true><<<grid, kScanThreads, smem, s>>>(p);
    else
        scan_kernel<Tr><<<grid, kScanThreads, smem, s>>>(p);
}

/* Real A: one kernel per method; complex A: one kernel for every method,
 * which it reads from the method table at run time. IN: the input type. */
template <typename T, bool CPLX, typename IN = T>
void launch_scan_t(const ScanParams &p, bool vec, cudaStream_t s) {
    bool_switch(vec, [&](auto v) {
        constexpr bool VEC = decltype(v)::value;
        if constexpr (CPLX) {
            launch_scan_traits<ScanTraits<T, true, kComplexTable, VEC, IN>>(p, s);
        } else {
            method_switch(p.method,
                          [&](auto m) { launch_scan_traits<ScanTraits<T, false, decltype(m)::value, VEC, IN>>(p, s); });
        }
    });
}

/* The 16-bit input types' launches (kernels_narrow.cu): real A, T float. */
void launch_scan_narrow(const ScanParams &p, int32_t dtype, bool vec, cudaStream_t s);

/* The channel-sequential scan (scan_chan.cuh) with P lanes per channel:
 * fp32 inputs (kernels_chan.cu) and 16-bit ones (kernels_chan_narrow.cu). */
void launch_chan_f32(const ScanParams &p, int P, cudaStream_t s);
void launch_chan_narrow(const ScanParams &p, int32_t dtype, int P, cudaStream_t s);
/* The channel-sequential backward's phase 1 (kernels_chan.cu): fp32, P = 4
 * or 8 (the backward's), the state entering every tile after the first into
 * p.chunk_states. */
void launch_chan_states(const ScanParams &p, int P, cudaStream_t s);
/* Likewise from 16-bit inputs (kernels_chan_narrow.cu): the states as the
 * float kernel forms them from the inputs widened, which is exact. */
void launch_chan_states_narrow(const ScanParams &p, int32_t dtype, int P, cudaStream_t s);
/* The channel-sequential scan for complex A, fp32 inputs, P = 4, 8 or 16
 * lanes a channel (kernels_chan_cplx.cu, scan_chan_cplx.cuh). */
void launch_chan_cplx(const ScanParams &p, int P, cudaStream_t s);

} /* namespace ssmk */

#endif

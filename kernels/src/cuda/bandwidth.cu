/*
 * bandwidth.cu — ssmk_copy_bandwidth: the device's copy bandwidth, the
 * yardstick of the performance checks (a memory-bound kernel is judged as a
 * fraction of it). Bytes read plus bytes written per second of a
 * device-to-device cudaMemcpyAsync, timed with CUDA events after a warm-up.
 */
#include <cuda_runtime.h>

#include "../ssmk_host.h"
#include "cuda_host.h"
#include "ssmk.h"

using namespace ssmk;

extern "C" {

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

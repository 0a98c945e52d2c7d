/*
 * kernels_narrow.cu — the scan's instantiations for the 16-bit input types
 * (SSMK_F16, SSMK_BF16): real A, float weights and state, u, Δ, z, out and
 * variable B/C of the input type (ScanTraits' IN). A translation unit of
 * its own so that nvcc compiles it beside kernels.cu (build-cuda.sh).
 */
#include "../ssmk_narrow.h"
#include "scan_launch.cuh"
#include "ssmk.h"

namespace ssmk {

void launch_scan_narrow(const ScanParams &p, int32_t dtype, bool vec, cudaStream_t s) {
    if (dtype == SSMK_F16)
        launch_scan_t<float, false, half16>(p, vec, s);
    else
        launch_scan_t<float, false, bfloat16>(p, vec, s);
}

} /* namespace ssmk */

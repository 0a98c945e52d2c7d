/*
 * kernels_chan_narrow.cu — the channel-sequential scan (scan_chan.cuh) for
 * the 16-bit input types (SSMK_F16, SSMK_BF16): u, Δ, z, B, C and out staged
 * in 16 bits, the arithmetic in float; and the 16-bit backward's phase 1
 * (the states a tile apart, read from the 16-bit inputs themselves).
 */
#include "../ssmk_narrow.h"
#include "scan_chan.cuh"
#include "scan_launch.cuh"
#include "ssmk.h"

namespace ssmk {

void launch_chan_narrow(const ScanParams &p, int32_t dtype, int P, cudaStream_t s) {
    if (dtype == SSMK_F16)
        launch_chan_t<half16>(p, P, s);
    else
        launch_chan_t<bfloat16>(p, P, s);
}

void launch_chan_states_narrow(const ScanParams &p, int32_t dtype, int P, cudaStream_t s) {
    if (dtype == SSMK_F16)
        launch_chan_states_t<half16>(p, P, s);
    else
        launch_chan_states_t<bfloat16>(p, P, s);
}

} /* namespace ssmk */

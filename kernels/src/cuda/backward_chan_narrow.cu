/*
 * backward_chan_narrow.cu — the channel-sequential backward (bwd_chan.cuh)
 * for the 16-bit input types: u, Δ, z and dout read, du, ddelta and dz
 * written in 16 bits, the arithmetic in float.
 */
#include "../ssmk_narrow.h"
#include "bwd_chan.cuh"
#include "cuda_host.h"
#include "ssmk.h"

namespace ssmk {

void launch_bwd_chan_narrow(const bwd::BwdParams &p, int32_t in16, int P, cudaStream_t s) {
    if (in16 == SSMK_F16)
        bwd::launch_bwd_chan_t<half16>(p, P, s);
    else
        bwd::launch_bwd_chan_t<bfloat16>(p, P, s);
}

} /* namespace ssmk */

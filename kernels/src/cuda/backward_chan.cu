/*
 * backward_chan.cu — the channel-sequential backward (bwd_chan.cuh) for fp32
 * inputs: one kernel per method and lanes a channel. A translation unit of its own so that nvcc
 * compiles it beside the others.
 */
#include "bwd_chan.cuh"
#include "cuda_host.h"

namespace ssmk {

void launch_bwd_chan_f32(const bwd::BwdParams &p, int P, cudaStream_t s) { bwd::launch_bwd_chan_t<float>(p, P, s); }

} /* namespace ssmk */

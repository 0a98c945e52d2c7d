/*
 * backward_chan.cu — the channel-sequential backward (bwd_chan.cuh) for fp32
 * inputs: one kernel per method. A translation unit of its own so that nvcc
 * compiles it beside the others.
 */
#include "bwd_chan.cuh"
#include "cuda_host.h"

namespace ssmk {

void launch_bwd_chan_f32(const bwd::BwdParams &p, cudaStream_t s) { bwd::launch_bwd_chan_t<float>(p, s); }

} /* namespace ssmk */

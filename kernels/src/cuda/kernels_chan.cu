/*
 * kernels_chan.cu — the channel-sequential scan (scan_chan.cuh) for fp32
 * inputs: one kernel per method and lanes per channel, and per method the
 * backward's phase 1 (the states a tile apart, no outputs). A translation unit of
 * its own so that nvcc compiles it beside the row kernel's.
 */
#include "scan_chan.cuh"
#include "scan_launch.cuh"

namespace ssmk {

void launch_chan_f32(const ScanParams &p, int P, cudaStream_t s) { launch_chan_t<float>(p, P, s); }

void launch_chan_states(const ScanParams &p, int P, cudaStream_t s) { launch_chan_states_t<float>(p, P, s); }

} /* namespace ssmk */

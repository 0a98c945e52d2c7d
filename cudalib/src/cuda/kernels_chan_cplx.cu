/*
 * kernels_chan_cplx.cu — the channel-sequential scan for complex A
 * (scan_chan_cplx.cuh): one kernel per method, fp32 inputs. A translation
 * unit of its own so that nvcc compiles it beside the others.
 */
#include "scan_chan_cplx.cuh"
#include "scan_launch.cuh"

namespace ssmk {

void launch_chan_cplx(const ScanParams &p, cudaStream_t s) {
    method_switch(p.method, [&](auto m) { launch_chan_cplx_m<decltype(m)::value>(p, s); });
}

} /* namespace ssmk */

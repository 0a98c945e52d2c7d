/*
 * kernels_chan_cplx.cu — the channel-sequential scan for complex A
 * (scan_chan_cplx.cuh): one kernel per method, fp32 inputs. A translation
 * unit of its own so that nvcc compiles it beside the others.
 */
#include "scan_chan_cplx.cuh"
#include "scan_launch.cuh"

namespace ssmk {

void launch_chan_cplx(const ScanParams &p, int P, cudaStream_t s) {
    method_switch(p.method, [&](auto m) {
        constexpr int M = decltype(m)::value;
        if (P == 16)
            launch_chan_cplx_mp<M, 16>(p, s);
        else if (P == 8)
            launch_chan_cplx_mp<M, 8>(p, s);
        else
            launch_chan_cplx_mp<M, 4>(p, s);
    });
}

} /* namespace ssmk */

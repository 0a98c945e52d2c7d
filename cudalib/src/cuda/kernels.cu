/*
 * kernels.cu — the CUDA build's kernels and their host dispatch: the scan
 * (scan_kernel.cuh) instantiated per element type, real or complex A, method
 * and 16-byte runs, chosen once per launch by scan_launch.cuh's switches (the
 * 16-bit input types' instantiations are kernels_narrow.cu's); and
 * ssmk_discretize's elementwise kernel.
 */
#include <cuda_runtime.h>

#include <type_traits>
#include <utility>

#include "../ssmk_host.h"
#include "../ssmk_methods.h"
#include "cuda_host.h"
#include "scan_launch.cuh"

namespace ssmk {

namespace {

template <typename T, bool CPLX>
__global__ void discretize_kernel(int method, long long n, const T *delta, const void *A, void *abar, void *bcoef) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const T dl = delta[i];
        if constexpr (CPLX) {
            cplx<T> ab, g;
            method_complex(method, cscale(((const cplx<T> *)A)[i], dl), ab, g);
            ((cplx<T> *)abar)[i] = ab;
            ((cplx<T> *)bcoef)[i] = cscale(g, dl);
        } else {
            T ab, g;
            method_real(method, dl * ((const T *)A)[i], ab, g);
            ((T *)abar)[i] = ab;
            ((T *)bcoef)[i] = dl * g;
        }
    }
}

} /* namespace */

int32_t launch_scan(const ssmk_scan_args &a, const void *h0, cudaStream_t s, const ChunkStates &cs) {
    ScanParams p;
    p.chunk_states = cs.states;
    p.chunk = cs.chunk;
    p.chunks = cs.chunks;
    p.batch = a.batch;
    p.dim = a.dim;
    p.seqlen = a.seqlen;
    p.dstate = a.dstate;
    p.n_groups = a.n_groups;
    p.method = a.method;
    p.is_variable_B = a.is_variable_B;
    p.is_variable_C = a.is_variable_C;
    p.softplus = a.delta_softplus;
    p.rows = (long long)a.batch * a.dim;
    p.u = a.u;
    p.delta = a.delta;
    p.A = a.A;
    p.B = a.B;
    p.C = a.C;
    p.D = a.D;
    p.z = a.z;
    p.delta_bias = a.delta_bias;
    p.out = a.out;
    p.last_state = a.last_state;
    p.h0 = h0;
    const size_t velem = weight_size(a.dtype) * (a.is_complex ? 2 : 1); /* an element of the state */
    /* 16-byte runs need every run to start on a multiple of K elements
     * (seqlen a multiple of K) and 16-byte aligned arrays (device buffers
     * from cudaMalloc are 256-byte aligned). */
    const int K = steps_per_lane(velem);
    if (cs.states && cs.chunk % (32 * K))
        return fail(SSMK_EUNSUPPORTED, "a chunk of %d steps is not a multiple of the scan's tile of %d", cs.chunk,
                    32 * K);
    const bool vec = a.is_variable_B && a.is_variable_C && a.seqlen % K == 0 && aligned16(a.u) && aligned16(a.delta) &&
                     aligned16(a.out) && (!a.z || aligned16(a.z)) && aligned16(a.B) && aligned16(a.C);
    if (narrow_dtype(a.dtype)) {
        /* complex A with 16-bit inputs is refused before a launch (plan.cu) */
        launch_scan_narrow(p, a.dtype, vec, s);
    } else if (a.dtype == SSMK_F64) {
        if (a.is_complex)
            launch_scan_t<double, true>(p, vec, s);
        else
            launch_scan_t<double, false>(p, vec, s);
    } else {
        if (a.is_complex)
            launch_scan_t<float, true>(p, vec, s);
        else
            launch_scan_t<float, false>(p, vec, s);
    }
    CU(cudaGetLastError());
    return SSMK_OK;
}

int32_t launch_discretize(int32_t method, int32_t dtype, int32_t is_complex, int64_t n, const void *delta,
                          const void *A, void *abar, void *bcoef, cudaStream_t s) {
    const dim3 grid = grid_for(n);
    if (dtype == SSMK_F64) {
        if (is_complex)
            discretize_kernel<double, true><<<grid, 256, 0, s>>>(method, n, (const double *)delta, A, abar, bcoef);
        else
            discretize_kernel<double, false><<<grid, 256, 0, s>>>(method, n, (const double *)delta, A, abar, bcoef);
    } else {
        if (is_complex)
            discretize_kernel<float, true><<<grid, 256, 0, s>>>(method, n, (const float *)delta, A, abar, bcoef);
        else
            discretize_kernel<float, false><<<grid, 256, 0, s>>>(method, n, (const float *)delta, A, abar, bcoef);
    }
    CU(cudaGetLastError());
    return SSMK_OK;
}

} /* namespace ssmk */

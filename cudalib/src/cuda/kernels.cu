/*
 * kernels.cu — the CUDA build's kernels and their host dispatch: the scan
 * (scan_kernel.cuh) instantiated per element type, real or complex A, method
 * and 16-byte runs, chosen once per launch by the switches below in the
 * manner of Mamba's static_switch.h; and ssmk_discretize's elementwise kernel.
 */
#include <cuda_runtime.h>

#include <type_traits>
#include <utility>

#include "../ssmk_host.h"
#include "../ssmk_methods.h"
#include "cuda_host.h"
#include "scan_kernel.cuh"

namespace ssmk {

namespace {

/* f(std::integral_constant<int, M>{}) for the method m (rk4 for any other
 * value: the ABI's arguments are validated before a launch). */
template <class F>
void method_switch(int m, F &&f) {
    switch (m) {
    case ZOH:
        return f(std::integral_constant<int, ZOH>{});
    case FOH:
        return f(std::integral_constant<int, FOH>{});
    case BILINEAR:
        return f(std::integral_constant<int, BILINEAR>{});
    case POLY:
        return f(std::integral_constant<int, POLY>{});
    case HIGHORDER:
        return f(std::integral_constant<int, HIGHORDER>{});
    default:
        return f(std::integral_constant<int, RK4>{});
    }
}

/* f(std::true_type{}) or f(std::false_type{}) */
template <class F>
void bool_switch(bool b, F &&f) {
    if (b)
        f(std::true_type{});
    else
        f(std::false_type{});
}

/* One launch of the scan: one warp per row, kScanWarps rows per block, and
 * each row's carries (one element per state) in dynamic shared memory. */
template <class Tr>
void launch_scan_traits(const ScanParams &p, cudaStream_t s) {
    const dim3 grid((unsigned)((p.rows + kScanWarps - 1) / kScanWarps));
    const size_t smem = (size_t)kScanWarps * p.dstate * sizeof(typename Tr::V);
    scan_kernel<Tr><<<grid, kScanThreads, smem, s>>>(p);
}

/* Real A: one kernel per method; complex A: one kernel for every method,
 * which it reads from the method table at run time. */
template <typename T, bool CPLX>
void launch_scan_t(const ScanParams &p, bool vec, cudaStream_t s) {
    bool_switch(vec, [&](auto v) {
        constexpr bool VEC = decltype(v)::value;
        if constexpr (CPLX) {
            launch_scan_traits<ScanTraits<T, true, kComplexTable, VEC>>(p, s);
        } else {
            method_switch(p.method,
                          [&](auto m) { launch_scan_traits<ScanTraits<T, false, decltype(m)::value, VEC>>(p, s); });
        }
    });
}

bool aligned16(const void *q) { return ((uintptr_t)q & 15) == 0; }

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

int32_t launch_scan(const ssmk_scan_args &a, const void *h0, cudaStream_t s) {
    ScanParams p;
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
    const size_t elem = a.dtype == SSMK_F64 ? 8 : 4, velem = elem * (a.is_complex ? 2 : 1);
    /* 16-byte runs need every run to start on a multiple of K elements
     * (seqlen a multiple of K) and 16-byte aligned arrays (device buffers
     * from cudaMalloc are 256-byte aligned). */
    const int K = steps_per_lane(velem);
    const bool vec = a.is_variable_B && a.is_variable_C && a.seqlen % K == 0 && aligned16(a.u) && aligned16(a.delta) &&
                     aligned16(a.out) && (!a.z || aligned16(a.z)) && aligned16(a.B) && aligned16(a.C);
    if (a.dtype == SSMK_F64) {
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
    long long blocks = (n + 255) / 256;
    dim3 grid((unsigned)(blocks < 65535 * 16 ? blocks : 65535 * 16));
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

/*
 * cub_compat.cuh — two CUB utilities that older Mamba-family trees call and
 * CCCL 3 (CUDA 13) removed: cub::LaneId() and cub::CTA_SYNC(). Mamba 1.1.1's
 * reverse_scan.cuh, which forks such as f1ibrahim-tmu/VisionMamba carry,
 * uses both; upstream Mamba since replaced them with threadIdx.x & 31 and
 * __syncthreads(). adapters/mamba/build.sh force-includes this header only
 * for a tree that calls them, and it defines them only where CUB lacks them,
 * with the meaning they had: the lane's index in its warp, and a barrier of
 * the thread block.
 */
#ifndef SSMK_CUB_COMPAT_CUH
#define SSMK_CUB_COMPAT_CUH

#include <cub/version.cuh>

#if CUB_VERSION >= 300000
namespace cub {
__device__ __forceinline__ unsigned int LaneId() {
    unsigned int lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    return lane;
}
__device__ __forceinline__ void CTA_SYNC() { __syncthreads(); }
} /* namespace cub */
#endif

#endif /* SSMK_CUB_COMPAT_CUH */

/*
 * bwd_block.cuh — the backward kernel's thread block (backward.cu): its
 * parameters, its shared memory carved from one dynamic allocation, a
 * thread's place (row, run, warp), and the moves between global and shared
 * memory: a run's B or C, a run's row values (Δ after bias and softplus, u,
 * and the gradient reaching y), and the per-row tiles of variable dB and dC
 * summed over the block's rows and added to global memory.
 *
 * A block holds R rows of one batch and group, TPR threads per row; a
 * thread owns a run of K consecutive steps of a chunk of TPR·K. A run's row
 * values live in shared memory at a stride of K + kPad, so that the 16-byte
 * loads of eight consecutive threads meet distinct banks; a row's dB/dC tile
 * at a stride of K + 1, so that a warp's stores of one step do.
 */
#ifndef SSMK_BWD_BLOCK_CUH
#define SSMK_BWD_BLOCK_CUH

#include <cuda_runtime.h>

#include <type_traits>

#include "../ssmk_methods.h"
#include "../ssmk_narrow.h"
#include "bwd_ops.cuh"
#include "scan_args.cuh"

namespace ssmk {
namespace bwd {

/* A thread's run of K row values in shared memory is K + kPad long, so
 * that the 16-byte loads of eight consecutive threads meet distinct banks. */
constexpr int kPad = 4;

struct BwdParams : ScanInputs {
    /* 16-byte accesses: B and C loads, dB and dC atomics (fp32, seqlen a
     * multiple of 4, the arrays 16-byte aligned) */
    int vec_b, vec_c, vec_red;
    int tpr, R, chunk, chunks; /* threads per row, rows per block, TPR·K, chunks per row */
    /* u, delta, z, dout, du, ddelta and dz of a 16-bit type (SSMK_F16 or
     * SSMK_BF16; 0: T): read and written once per chunk, so one kernel
     * serves them by a uniform branch rather than an instantiation of its own */
    int in16;
    const void *h0, *dout, *dlast;
    void *du, *ddelta, *dB, *dC, *dz, *dinit;
    void *hS;                        /* [rows][chunks − 1][dstate]: the state entering chunk c ≥ 1 at c − 1 */
    void *pA, *pB, *pC, *pD, *pBias; /* per-row partials of the sums over batch */
};

/* The block's shared memory, carved from one dynamic allocation. */
template <typename T, typename V>
struct Smem {
    Aff<V> *fw;            /* [W] forward warp compositions */
    Aff<V> *bw;            /* [W] backward warp compositions */
    V *mu;                 /* [2][R][N] the adjoint entering a chunk, by chunk parity */
    V *tB, *tC;            /* [R][TPR·(K+1)] each row's variable dB and dC of one state */
    V *accA, *accB, *accC; /* [N][W] per-warp sums of dA and constant dB, dC */
    T *red;                /* [2][W] per-warp sums of dD and ddelta_bias */
    T *rows;               /* [3][threads][K + kPad]: each thread's Δ, u and dy of its run */
};

/* Carves n bytes at offset *off of base (16-byte aligned); NULL without a base. */
__host__ __device__ inline void *take(unsigned char *base, size_t *off, size_t n) {
    void *p = base ? base + *off : nullptr;
    *off += (n + 15) / 16 * 16;
    return p;
}

template <typename T, typename V>
__host__ __device__ size_t smem_layout(int W, int R, int N, int tile, int seg, unsigned char *base, Smem<T, V> *s) {
    size_t off = 0;
    Smem<T, V> l;
    l.fw = (Aff<V> *)take(base, &off, sizeof(Aff<V>) * W);
    l.bw = (Aff<V> *)take(base, &off, sizeof(Aff<V>) * W);
    l.mu = (V *)take(base, &off, sizeof(V) * 2 * R * N);
    l.tB = (V *)take(base, &off, sizeof(V) * tile);
    l.tC = (V *)take(base, &off, sizeof(V) * tile);
    l.accA = (V *)take(base, &off, sizeof(V) * N * W);
    l.accB = (V *)take(base, &off, sizeof(V) * N * W);
    l.accC = (V *)take(base, &off, sizeof(V) * N * W);
    l.red = (T *)take(base, &off, sizeof(T) * 2 * W);
    l.rows = (T *)take(base, &off, sizeof(T) * 3 * W * 32 * seg);
    if (s) *s = l;
    return off;
}

/* A thread's place: block row lr (global row r = (b, d) of group grp), run
 * j of its row, lane, warp in block wb and in row wr. */
struct Place {
    long long r;
    int lr, j, lane, wb, wr, b, d, grp;
};

__device__ __forceinline__ Place place_of(const BwdParams &p) {
    Place q;
    q.lr = threadIdx.x / p.tpr;
    q.j = threadIdx.x % p.tpr;
    q.lane = threadIdx.x & 31;
    q.wb = threadIdx.x / 32;
    q.wr = q.j / 32;
    q.r = (long long)blockIdx.x * p.R + q.lr;
    q.d = (int)(q.r % p.dim);
    q.b = (int)(q.r / p.dim);
    q.grp = q.d / (p.dim / p.n_groups);
    return q;
}

/* Element i of a row array (u, delta, z, dout) of the input type, widened. */
template <typename T>
__device__ __forceinline__ T ld_in(const BwdParams &p, const void *a, long long i) {
    if (p.in16 == SSMK_BF16) return T(widen(((const bfloat16 *)a)[i]));
    if (p.in16 == SSMK_F16) return T(widen(((const half16 *)a)[i]));
    return ((const T *)a)[i];
}

/* Stores v as element i of a gradient of the input type (du, ddelta, dz),
 * rounded once to nearest for a 16-bit type. */
template <typename T>
__device__ __forceinline__ void st_in(const BwdParams &p, void *a, long long i, T v) {
    if (p.in16 == SSMK_BF16)
        ((bfloat16 *)a)[i] = narrow<bfloat16>(float(v));
    else if (p.in16 == SSMK_F16)
        ((half16 *)a)[i] = narrow<half16>(float(v));
    else
        ((T *)a)[i] = v;
}

/* A thread's K values of B or C of state n from step t0 (0 past seqlen;
 * a constant array's one value in every slot). */
template <typename V, int K>
__device__ __forceinline__ void load_bc(const BwdParams &p, const Place &q, const V *X, int var, int vec, int n, int t0,
                                        V (&out)[K]) {
    if (var) {
        const V *x = X + (((long long)q.b * p.n_groups + q.grp) * p.dstate + n) * p.seqlen;
        if constexpr (std::is_same<V, float>::value && K % 4 == 0) {
            /* a whole run of a row whose length is a multiple of 4: 16-byte loads */
            if (vec && t0 + K <= p.seqlen) {
#pragma unroll
                for (int i = 0; i < K / 4; i++) {
                    const float4 v = reinterpret_cast<const float4 *>(x + t0)[i];
                    out[4 * i] = v.x, out[4 * i + 1] = v.y, out[4 * i + 2] = v.z, out[4 * i + 3] = v.w;
                }
                return;
            }
        }
#pragma unroll
        for (int k = 0; k < K; k++) out[k] = t0 + k < p.seqlen ? x[t0 + k] : V{};
    } else {
        const V v = X[(long long)q.d * p.dstate + n];
#pragma unroll
        for (int k = 0; k < K; k++) out[k] = v;
    }
}

/* The thread's run of row values into shared memory: Δ after bias and
 * softplus, u, and dy, the gradient reaching y (dout·z·σ(z) with a gate);
 * 0 past seqlen. Returns the run's range of Δ (the votes of run_coefs and run_branch). */
template <typename T, int K>
__device__ __forceinline__ DtRange<T> load_row(const BwdParams &p, const Place &q, int t0, T *dt, T *uu, T *dy) {
    const long long base = q.r * p.seqlen;
    DtRange<T> range{T(0), T(0), T(INFINITY)};
#pragma unroll
    for (int k = 0; k < K; k++) {
        dt[k] = uu[k] = dy[k] = T(0);
        if (t0 + k >= p.seqlen) {
            range.mabs = T(0);
            continue;
        }
        const long long i = base + t0 + k;
        dt[k] = step_dt(ld_in<T>(p, p.delta, i), (const T *)p.delta_bias, q.d, p.softplus);
        range.lo = fmin(range.lo, dt[k]), range.hi = fmax(range.hi, dt[k]), range.mabs = fmin(range.mabs, fabs(dt[k]));
        uu[k] = ld_in<T>(p, p.u, i);
        T g = ld_in<T>(p, p.dout, i);
        if (p.z) {
            const T z = ld_in<T>(p, p.z, i);
            g *= z * ssigmoid(z);
        }
        dy[k] = g;
    }
    return range;
}

/* The thread's runs of Δ, u and dy in the block's shared memory. */
template <typename T, typename V, int K>
struct Runs {
    T *dt, *uu, *dy;
    __device__ Runs(const Smem<T, V> &s) {
        const int seg = K + kPad, n = blockDim.x * seg;
        dt = s.rows + threadIdx.x * seg;
        uu = dt + n;
        dy = uu + n;
    }
};

/* Adds the block's R rows' variable dB and dC of state n (chunk c), summed
 * over the rows in order, to global memory; consecutive threads take
 * consecutive steps, four at a time with one 16-byte atomic where the
 * arrays allow it (vec_red). Every entry is written again by the next state. */
template <typename T, typename V, int K, int R>
__device__ __forceinline__ void flush_rows(const BwdParams &p, const Place &q, const Smem<T, V> &s, int c, int n) {
    const long long at = (((long long)q.b * p.n_groups + q.grp) * p.dstate + n) * p.seqlen + (long long)c * p.chunk;
    V *dB = (V *)p.dB + at, *dC = (V *)p.dC + at;
    const unsigned row = p.tpr * (K + 1), end = min(p.chunk, p.seqlen - c * p.chunk);
    if constexpr (std::is_same<V, float>::value && K % 4 == 0) {
        if (p.vec_red) {
            /* four steps of one run: ti … ti + 3 are consecutive in the tile */
            for (unsigned i = 4 * threadIdx.x; i < end; i += 4 * R * p.tpr) {
                const unsigned ti = i / K * (K + 1) + i % K;
                float b[4], cc[4];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    b[e] = s.tB[ti + e], cc[e] = s.tC[ti + e];
#pragma unroll
                    for (int r = 1; r < R; r++) b[e] += s.tB[r * row + ti + e], cc[e] += s.tC[r * row + ti + e];
                }
                if (p.is_variable_B) red_add4(&dB[i], b);
                if (p.is_variable_C) red_add4(&dC[i], cc);
            }
            return;
        }
    }
    for (unsigned i = threadIdx.x; i < end; i += R * p.tpr) {
        const unsigned ti = i / K * (K + 1) + i % K;
        V b = s.tB[ti], cc = s.tC[ti];
#pragma unroll
        for (int r = 1; r < R; r++) b = vadd(b, s.tB[r * row + ti]), cc = vadd(cc, s.tC[r * row + ti]);
        if (p.is_variable_B) atomic_addv<T>(&dB[i], b);
        if (p.is_variable_C) atomic_addv<T>(&dC[i], cc);
    }
}

template <typename T, typename V, int K>
__device__ __forceinline__ void flush_tiles(const BwdParams &p, const Place &q, const Smem<T, V> &s, int c, int n) {
    switch (p.R) {
    case 1:
        return flush_rows<T, V, K, 1>(p, q, s, c, n);
    case 2:
        return flush_rows<T, V, K, 2>(p, q, s, c, n);
    case 4:
        return flush_rows<T, V, K, 4>(p, q, s, c, n);
    default:
        return flush_rows<T, V, K, 8>(p, q, s, c, n);
    }
}

} /* namespace bwd */

/* The channel-sequential backward (bwd_chan.cuh): fp32 inputs
 * (backward_chan.cu) and 16-bit ones (backward_chan_narrow.cu, in16 their
 * type). p.hS holds the state entering every tile after the first,
 * [rows][chunks − 1][dstate], p.chunks the tiles of the sequence. */
void launch_bwd_chan_f32(const bwd::BwdParams &p, int P, cudaStream_t s);
void launch_bwd_chan_narrow(const bwd::BwdParams &p, int32_t in16, int P, cudaStream_t s);

} /* namespace ssmk */

#endif /* SSMK_BWD_BLOCK_CUH */

/*
 * backward.cu — the CUDA build's backward pass (SSMK_CAP_BACKWARD).
 *
 * A row (batch b, channel d) is a group of P lanes of one warp, P the
 * power of two at least dstate (at most 32); lane q of the row owns the
 * states n = q, q + P, … (S of them: 1 up to dstate 32, up to 8 beyond).
 * Each lane runs its states' recurrences sequentially in time, as the CPU
 * build does, in three sweeps:
 *
 *   1. forward from the initial state, saving the states at the start of
 *      every chunk of kChunk steps (a scratch buffer of the plan);
 *   2. per chunk, from the last back: the chunk's states recomputed from
 *      its saved start into a local array,
 *   3. then the adjoint back through the chunk (cpu_backward.cpp has its
 *      equations): the per-step sums over states (du, dΔ, and y for dz) by
 *      shuffles across the row's lanes, written by lane 0.
 *
 * The per-step values of a row (Δ after softplus, its derivative, u, dout,
 * the gate) are computed once per (row, step), by one lane each for a
 * window of P steps, and shuffled to the others.
 *
 * dA, dD, ddelta_bias and constant dB/dC go to per-row partials, summed
 * over batch in a fixed order by reduce_batch; variable dB and dC are
 * summed over the group's channels with atomicAdd (first within a block,
 * in shared memory, where its rows share a group), whose order varies: the
 * capabilities declare SSMK_CAP_BWD_ATOMIC.
 */
#include <cuda_runtime.h>

#include <type_traits>

#include "../ssmk_derivs.h"
#include "../ssmk_host.h"
#include "../ssmk_methods.h"
#include "cuda_host.h"

namespace ssmk {

namespace {

/* Steps per chunk of the reverse sweep (the local array of states). */
constexpr int kChunk = 32;

struct BwdParams {
    int batch, dim, seqlen, dstate, groups, method, softplus, var_b, var_c;
    int P, shift; /* lanes per row, log2 P */
    long long rows;
    const void *u, *delta, *A, *B, *C, *D, *z, *bias, *h0, *dout, *dlast;
    void *du, *ddelta, *dB, *dC, *dz, *dinit;
    void *ckpt;                      /* [rows][chunks][dstate] states at chunk starts */
    void *pA, *pB, *pC, *pD, *pBias; /* per-row partials */
};

/* The batch and group of a block's first row (TILE: all its rows'). */
__device__ __forceinline__ int row0_b(const BwdParams &p, unsigned blk, unsigned threads) {
    return (int)(((long long)blk * threads >> p.shift) / p.dim);
}
__device__ __forceinline__ int row0_g(const BwdParams &p, unsigned blk, unsigned threads) {
    const int d = (int)(((long long)blk * threads >> p.shift) % p.dim);
    return d / (p.dim / p.groups);
}

template <typename T>
__device__ __forceinline__ T row_sum(T v, int P) {
    for (int o = P / 2; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* atomicAdd on global or shared memory, real or complex. */
template <typename T>
__device__ __forceinline__ void atomic_addv(T *p, T v) {
    atomicAdd(p, v);
}
template <typename T>
__device__ __forceinline__ void atomic_addv(cplx<T> *p, cplx<T> v) {
    atomicAdd(&p->re, v.re);
    atomicAdd(&p->im, v.im);
}

/* One step's per-row values, held by lane t mod P of the row's lanes for a
 * window of P steps (each lane loads or computes one step) and read by
 * every lane with a shuffle: softplus, its derivative and the gate are
 * computed once per (row, step) instead of once per state. */
template <typename T>
struct StepVals {
    T dt, u, dsp, dout, silu, dsilu; /* dsp = softplus'(v) (1 without softplus), silu = z·σ(z) */
};

template <typename T>
__device__ __forceinline__ StepVals<T> step_vals(const BwdParams &p, long long r, int d, int t, bool reverse) {
    StepVals<T> s{T(0), T(0), T(1), T(0), T(1), T(0)};
    if (t >= p.seqlen) return s;
    const long long i = r * p.seqlen + t;
    const T v = ((const T *)p.delta)[i] + (p.bias ? ((const T *)p.bias)[d] : T(0));
    s.u = ((const T *)p.u)[i];
    s.dt = v;
    if (p.softplus && v <= T(20)) {
        s.dt = slog1p(sexp(v));
        s.dsp = T(1) / (T(1) + sexp(-v));
    }
    if (reverse) {
        s.dout = ((const T *)p.dout)[i];
        if (p.z) {
            const T z = ((const T *)p.z)[i], sig = T(1) / (T(1) + sexp(-z));
            s.silu = z * sig;
            s.dsilu = sig * (T(1) + z * (T(1) - sig));
        }
    }
    return s;
}

template <typename T>
__device__ __forceinline__ T bcast(T v, int src, int P) {
    return __shfl_sync(0xffffffffu, v, src, P);
}
template <typename T>
__device__ __forceinline__ StepVals<T> bcast(const StepVals<T> &s, int src, int P, bool reverse) {
    StepVals<T> o;
    o.dt = bcast(s.dt, src, P);
    o.u = bcast(s.u, src, P);
    if (reverse) {
        o.dsp = bcast(s.dsp, src, P);
        o.dout = bcast(s.dout, src, P);
        o.silu = bcast(s.silu, src, P);
        o.dsilu = bcast(s.dsilu, src, P);
    }
    return o;
}

/* The backward of one row per P lanes; S states per lane at most. TILE:
 * the block's rows are channels of one (batch, group), whose variable dB
 * and dC contributions are summed in shared memory per chunk and added to
 * global memory once per block. */
template <typename T, typename V, int S, bool TILE>
__global__ void __launch_bounds__(256) bwd_kernel(BwdParams p) {
    constexpr bool kComplex = !std::is_same<T, V>::value;
    extern __shared__ unsigned char smem[];
    V *tileB = (V *)smem, *tileC = tileB + kChunk * p.dstate;
    const long long gl = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long row = gl >> p.shift;
    const int q = (int)(gl & (p.P - 1)), P = p.P;
    /* Rows past the end still take part in the shuffles and barriers, with
     * no state and no store. */
    const bool live = row < p.rows;
    const long long r = live ? row : 0;
    const int N = p.dstate, L = p.seqlen, d = (int)(r % p.dim), b = (int)(r / p.dim);
    const int grp = d / (p.dim / p.groups), chunks = (L + kChunk - 1) / kChunk;
    const T k = kComplex ? T(2) : T(1);
    const V *Bp = (const V *)p.B, *Cp = (const V *)p.C;
    const long long bc_row = ((long long)b * p.groups + grp) * N;
    auto bval = [&](const V *X, int var, int n, int t) -> V {
        return var ? X[(bc_row + n) * L + t] : X[(long long)d * N + n];
    };
    V a[S], h[S], lam[S], next[S], dA[S], dBc[S], dCc[S];
    bool has[S];
    for (int j = 0; j < S; j++) {
        const int n = q + j * P;
        has[j] = live && n < N;
        a[j] = has[j] ? ((const V *)p.A)[(long long)d * N + n] : V{};
        h[j] = has[j] && p.h0 ? ((const V *)p.h0)[r * N + n] : V{};
        lam[j] = has[j] && p.dlast ? ((const V *)p.dlast)[r * N + n] : V{};
        next[j] = vone(V{});
        dA[j] = dBc[j] = dCc[j] = V{};
    }
    if constexpr (TILE) {
        for (int i = threadIdx.x; i < 2 * kChunk * N; i += blockDim.x) tileB[i] = V{};
        __syncthreads();
    }
    V *ckpt = (V *)p.ckpt + r * chunks * N;
    StepVals<T> win{};
    /* 1. the forward, saving each chunk's first state */
    for (int t = 0; t < L; t++) {
        if (t % P == 0) win = step_vals<T>(p, r, d, t + q, false);
        const StepVals<T> sv = bcast(win, t % P, P, false);
        for (int j = 0; j < S; j++) {
            if (!has[j]) continue;
            const int n = q + j * P;
            if (t % kChunk == 0) ckpt[(t / kChunk) * N + n] = h[j];
            V ab, g;
            if constexpr (kComplex)
                method_complex(p.method, cscale(a[j], sv.dt), ab, g);
            else
                method_real(p.method, a[j] * sv.dt, ab, g);
            h[j] = vadd(vmul(ab, h[j]), vscale(vmul(g, bval(Bp, p.var_b, n, t)), sv.dt * sv.u));
        }
    }
    T dD = T(0), dBias = T(0);
    const T Dd = p.D ? ((const T *)p.D)[d] : T(0);
    V hs[kChunk + 1][S];
    for (int c = chunks - 1; c >= 0; c--) {
        const int t0 = c * kChunk, t1 = min(L, t0 + kChunk);
        /* 2. the chunk's states */
        for (int j = 0; j < S; j++) hs[0][j] = has[j] ? ckpt[c * N + q + j * P] : V{};
        for (int t = t0; t < t1; t++) {
            if (t % P == 0) win = step_vals<T>(p, r, d, t + q, false);
            const StepVals<T> sv = bcast(win, t % P, P, false);
#pragma unroll
            for (int j = 0; j < S; j++) {
                V ab, g, hn{};
                if (has[j]) {
                    if constexpr (kComplex)
                        method_complex(p.method, cscale(a[j], sv.dt), ab, g);
                    else
                        method_real(p.method, a[j] * sv.dt, ab, g);
                    hn = vadd(vmul(ab, hs[t - t0][j]), vscale(vmul(g, bval(Bp, p.var_b, q + j * P, t)), sv.dt * sv.u));
                }
                hs[t - t0 + 1][j] = hn;
            }
        }
        /* 3. the adjoint back through the chunk */
        for (int t = t1 - 1; t >= t0; t--) {
            if (t == t1 - 1 || t % P == P - 1) win = step_vals<T>(p, r, d, t - t % P + q, true);
            const StepVals<T> sv = bcast(win, t % P, P, true);
            const T dt = sv.dt, uu = sv.u;
            T dy = sv.dout;
            if (p.z) {
                T ys = T(0);
                for (int j = 0; j < S; j++)
                    if (has[j]) ys += vre(vmul(bval(Cp, p.var_c, q + j * P, t), hs[t - t0 + 1][j]));
                const T y = k * row_sum(ys, P) + Dd * uu;
                if (live && q == 0) ((T *)p.dz)[r * L + t] = dy * y * sv.dsilu;
                dy *= sv.silu;
            }
            T du = T(0), ddt = T(0);
            for (int j = 0; j < S; j++) {
                if (!has[j]) continue;
                const int n = q + j * P;
                const V bv = bval(Bp, p.var_b, n, t), cv = bval(Cp, p.var_c, n, t);
                V ab, g, dab, dg;
                coef_deriv(p.method, vscale(a[j], dt), ab, g, dab, dg);
                lam[j] = vadd(vmul(vconj(next[j]), lam[j]), vscale(vconj(cv), k * dy));
                const V l = lam[j];
                const V dC = vscale(vconj(hs[t - t0 + 1][j]), k * dy), dB = vscale(vmul(vconj(g), l), dt * uu);
                if (p.var_c) {
                    if constexpr (TILE)
                        atomic_addv(&tileC[(t - t0) * N + n], dC);
                    else
                        atomic_addv(&((V *)p.dC)[(bc_row + n) * L + t], dC);
                } else {
                    dCc[j] = vadd(dCc[j], dC);
                }
                if (p.var_b) {
                    if constexpr (TILE)
                        atomic_addv(&tileB[(t - t0) * N + n], dB);
                    else
                        atomic_addv(&((V *)p.dB)[(bc_row + n) * L + t], dB);
                } else {
                    dBc[j] = vadd(dBc[j], dB);
                }
                const V lgb = vmul(l, vconj(vmul(g, bv)));
                du += vre(lgb) * dt;
                const V gx = vadd(vmul(vconj(dab), vmul(vconj(hs[t - t0][j]), l)),
                                  vscale(vmul(vconj(dg), vmul(vconj(bv), l)), dt * uu));
                ddt += vre(lgb) * uu + vre(vmul(gx, vconj(a[j])));
                dA[j] = vadd(dA[j], vscale(gx, dt));
                next[j] = ab;
            }
            du = row_sum(du, P) + dy * Dd;
            ddt = row_sum(ddt, P) * sv.dsp;
            if (live && q == 0) {
                ((T *)p.du)[r * L + t] = du;
                ((T *)p.ddelta)[r * L + t] = ddt;
            }
            dD += dy * uu;
            dBias += ddt;
        }
        if constexpr (TILE) {
            /* the block's sums of this chunk, once to global memory */
            __syncthreads();
            const long long base =
                ((long long)row0_b(p, blockIdx.x, blockDim.x) * p.groups + row0_g(p, blockIdx.x, blockDim.x)) * N;
            for (int i = threadIdx.x; i < (t1 - t0) * N; i += blockDim.x) {
                const int n = i % N, tt = t0 + i / N, at = (tt - t0) * N + n;
                if (p.var_b) atomic_addv(&((V *)p.dB)[(base + n) * L + tt], tileB[at]);
                if (p.var_c) atomic_addv(&((V *)p.dC)[(base + n) * L + tt], tileC[at]);
                tileB[at] = tileC[at] = V{};
            }
            __syncthreads();
        }
    }
    for (int j = 0; j < S; j++) {
        if (!has[j]) continue;
        const int n = q + j * P;
        ((V *)p.pA)[r * N + n] = dA[j];
        if (!p.var_b) ((V *)p.pB)[r * N + n] = dBc[j];
        if (!p.var_c) ((V *)p.pC)[r * N + n] = dCc[j];
        if (p.dinit) ((V *)p.dinit)[r * N + n] = vmul(vconj(next[j]), lam[j]);
    }
    if (live && q == 0) {
        if (p.pD) ((T *)p.pD)[r] = dD;
        if (p.pBias) ((T *)p.pBias)[r] = dBias;
    }
}

/* out[j] = Σ_b part[b·per + j] for j < per, in batch order. */
template <typename V>
__global__ void reduce_batch(const V *part, V *out, long long per, int batch) {
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < per;
         j += (long long)gridDim.x * blockDim.x) {
        V acc = part[j];
        for (int b = 1; b < batch; b++) acc = vadd(acc, part[b * per + j]);
        out[j] = acc;
    }
}

template <typename V>
void reduce(const void *part, void *out, long long per, int batch, cudaStream_t s) {
    const long long blocks = (per + 255) / 256;
    reduce_batch<V><<<(unsigned)(blocks < 4096 ? blocks : 4096), 256, 0, s>>>((const V *)part, (V *)out, per, batch);
}

template <typename T, typename V>
void launch_t(const BwdParams &p, const BwdScratch &sc, const ssmk_scan_grads &g, cudaStream_t s) {
    constexpr int kThreads = 256;
    const long long threads = p.rows * p.P;
    const unsigned blocks = (unsigned)((threads + kThreads - 1) / kThreads);
    /* The tile when every block's rows are channels of one (batch, group):
     * the channels per group a multiple of the rows per block. */
    const int rows_per_block = kThreads / p.P, cpg = p.dim / p.groups;
    const size_t tile = 2 * kChunk * (size_t)p.dstate * sizeof(V);
    const bool use_tile = (p.var_b || p.var_c) && cpg % rows_per_block == 0 && tile <= 48 * 1024;
    if (p.dstate <= 32) {
        if (use_tile)
            bwd_kernel<T, V, 1, true><<<blocks, kThreads, tile, s>>>(p);
        else
            bwd_kernel<T, V, 1, false><<<blocks, kThreads, 0, s>>>(p);
    } else {
        if (use_tile)
            bwd_kernel<T, V, 8, true><<<blocks, kThreads, tile, s>>>(p);
        else
            bwd_kernel<T, V, 8, false><<<blocks, kThreads, 0, s>>>(p);
    }
    const long long dn = (long long)p.dim * p.dstate;
    reduce<V>(sc.pA, g.dA, dn, p.batch, s);
    if (!p.var_b) reduce<V>(sc.pB, g.dB, dn, p.batch, s);
    if (!p.var_c) reduce<V>(sc.pC, g.dC, dn, p.batch, s);
    if (p.pD) reduce<T>(sc.pD, g.dD, p.dim, p.batch, s);
    if (p.pBias) reduce<T>(sc.pBias, g.ddelta_bias, p.dim, p.batch, s);
}

} /* namespace */

size_t bwd_scratch_bytes(const ssmk_scan_args &a, BwdScratch *layout) {
    const size_t v = weight_size(a.dtype) * (a.is_complex ? 2 : 1), w = weight_size(a.dtype);
    const long long rows = (long long)a.batch * a.dim, chunks = (a.seqlen + kChunk - 1) / kChunk;
    const size_t sizes[] = {(size_t)(rows * chunks * a.dstate) * v,
                            (size_t)(rows * a.dstate) * v,
                            (size_t)(rows * a.dstate) * v,
                            (size_t)(rows * a.dstate) * v,
                            (size_t)rows * w,
                            (size_t)rows * w};
    size_t off[6], total = 0;
    for (int i = 0; i < 6; i++) {
        off[i] = total;
        total += (sizes[i] + 255) / 256 * 256;
    }
    if (layout) {
        char *base = (char *)layout->base;
        layout->ckpt = base + off[0];
        layout->pA = base + off[1];
        layout->pB = base + off[2];
        layout->pC = base + off[3];
        layout->pD = base + off[4];
        layout->pBias = base + off[5];
    }
    return total;
}

int32_t launch_backward(const ssmk_scan_args &a, const void *h0, const ssmk_scan_grads &g, const BwdScratch &sc,
                        cudaStream_t s) {
    BwdParams p;
    p.batch = a.batch;
    p.dim = a.dim;
    p.seqlen = a.seqlen;
    p.dstate = a.dstate;
    p.groups = a.n_groups;
    p.method = a.method;
    p.softplus = a.delta_softplus;
    p.var_b = a.is_variable_B;
    p.var_c = a.is_variable_C;
    p.P = 1;
    p.shift = 0;
    while (p.P < a.dstate && p.P < 32) p.P *= 2, p.shift++;
    p.rows = (long long)a.batch * a.dim;
    p.u = a.u;
    p.delta = a.delta;
    p.A = a.A;
    p.B = a.B;
    p.C = a.C;
    p.D = a.D;
    p.z = a.z;
    p.bias = a.delta_bias;
    p.h0 = h0;
    p.dout = g.dout;
    p.dlast = g.dlast_state;
    p.du = g.du;
    p.ddelta = g.ddelta;
    p.dB = g.dB;
    p.dC = g.dC;
    p.dz = g.dz;
    p.dinit = g.dinitial_state;
    p.ckpt = sc.ckpt;
    p.pA = sc.pA;
    p.pB = sc.pB;
    p.pC = sc.pC;
    p.pD = a.D ? sc.pD : nullptr;
    p.pBias = a.delta_bias ? sc.pBias : nullptr;
    const ScanSizes z = scan_sizes(&a);
    if (a.is_variable_B) CU(cudaMemsetAsync(g.dB, 0, (size_t)z.b * z.w, s));
    if (a.is_variable_C) CU(cudaMemsetAsync(g.dC, 0, (size_t)z.c * z.w, s));
    if (a.dtype == SSMK_F64) {
        if (a.is_complex)
            launch_t<double, cplx<double>>(p, sc, g, s);
        else
            launch_t<double, double>(p, sc, g, s);
    } else {
        if (a.is_complex)
            launch_t<float, cplx<float>>(p, sc, g, s);
        else
            launch_t<float, float>(p, sc, g, s);
    }
    CU(cudaGetLastError());
    return SSMK_OK;
}

} /* namespace ssmk */

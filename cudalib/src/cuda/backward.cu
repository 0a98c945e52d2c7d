/*
 * backward.cu — the CUDA build's backward pass (SSMK_CAP_BACKWARD).
 *
 * Time is cut into chunks of kChunk steps, and every (row, chunk, state)
 * is one lane, so that a sequence's chunks run in parallel (a lane per
 * state and row alone, sequential over the whole sequence, left the GPU
 * waiting on latency: docs/performance.md). Both recurrences are affine,
 *
 *   h_t = Ā_t·h_{t−1} + β_t                  (β = Δ·g·B·u)
 *   λ_t = conj(Ā_{t+1})·λ_{t+1} + c_t        (c = k·dy·conj(C), λ = ∂L/∂h)
 *
 * so a chunk is summarised by two affine maps, and three kernels do it:
 *
 *   chunk_maps     per (row, chunk, state): the forward map h_end = F·h_start + G
 *                  and the reverse map μ_out = P·μ_in + Q, μ the adjoint entering a
 *                  chunk from the one after it (conj(Ā_{t1})·λ_{t1}; dlast_state
 *                  for the last chunk);
 *   chunk_carries  per (row, state), sequentially over chunks: every chunk's
 *                  starting state and entering adjoint, and dinitial_state, the
 *                  adjoint leaving the first chunk;
 *   chunk_grads    per (row, chunk, state): the chunk's states recomputed from
 *                  its start, then the adjoint run back through it with every
 *                  gradient term (cpu_backward.cpp has the equations); sums over
 *                  states (du, dΔ, y for dz) by shuffles across the P lanes of a
 *                  (row, chunk), P the power of two at least dstate, at most 32
 *                  (a lane owns states q, q + P, …: S of them, up to 8).
 *
 * A (row, chunk)'s per-step values (Δ after softplus, its derivative, u,
 * dout, the gate) are computed once, by one lane each for a window of P
 * steps, and shuffled to the others.
 *
 * dA, dD, ddelta_bias and constant dB/dC go to per-(row, chunk) partials
 * summed in a fixed order (reduce_rows); variable dB and dC are summed over
 * a group's channels with atomicAdd (first within a thread block, in shared
 * memory, where its rows share a group), whose order varies: the
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

/* Steps per chunk (each lane keeps its chunk's states in a local array). */
constexpr int kChunk = 32;
constexpr int kThreads = 256;

struct BwdParams {
    int batch, dim, seqlen, dstate, groups, method, softplus, var_b, var_c;
    int P, shift, chunks; /* lanes per (row, chunk), log2 P, chunks per row */
    long long rows;
    const void *u, *delta, *A, *B, *C, *D, *z, *bias, *h0, *dout, *dlast;
    void *du, *ddelta, *dB, *dC, *dz, *dinit;
    void *fF, *fG, *rP, *rQ, *hS, *muS; /* [rows][chunks][dstate]: the chunk maps and the carries */
    void *pA, *pB, *pC, *pD, *pBias;    /* per-(row, chunk) partials */
};

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

/* The shuffle mask of a lane's group of P (a warp holds groups of other
 * chunks, whose loops may run fewer steps: a full mask would wait on them). */
__device__ __forceinline__ unsigned group_mask(int P) {
    return P == 32 ? 0xffffffffu : ((1u << P) - 1) << ((threadIdx.x & 31) & ~(P - 1));
}

template <typename T>
__device__ __forceinline__ T row_sum(T v, int P) {
    const unsigned m = group_mask(P);
    for (int o = P / 2; o > 0; o /= 2) v += __shfl_xor_sync(m, v, o);
    return v;
}

/* One step's values of a row, held by lane t mod P of the (row, chunk)'s
 * lanes for a window of P steps and read by every lane with a shuffle. */
template <typename T>
struct StepVals {
    T dt, u, dsp, dy, dzf; /* dsp = softplus'(v) (1 without); dy = dout·z·σ(z) (dout without z); dzf = dout·(z·σ(z))' */
};

template <typename T>
__device__ __forceinline__ StepVals<T> step_vals(const BwdParams &p, long long r, int d, int t) {
    StepVals<T> s{T(0), T(0), T(1), T(0), T(0)};
    if (t >= p.seqlen) return s;
    const long long i = r * p.seqlen + t;
    const T v = ((const T *)p.delta)[i] + (p.bias ? ((const T *)p.bias)[d] : T(0));
    s.u = ((const T *)p.u)[i];
    s.dt = v;
    if (p.softplus && v <= T(20)) {
        s.dt = slog1p(sexp(v));
        s.dsp = T(1) / (T(1) + sexp(-v));
    }
    const T dout = ((const T *)p.dout)[i];
    s.dy = dout;
    if (p.z) {
        const T z = ((const T *)p.z)[i], sig = T(1) / (T(1) + sexp(-z));
        s.dy = dout * z * sig;
        s.dzf = dout * sig * (T(1) + z * (T(1) - sig));
    }
    return s;
}

template <typename T>
__device__ __forceinline__ T bcast(T v, int src, int P) {
    return __shfl_sync(group_mask(P), v, src, P);
}

/* A lane's place: (row, chunk) and its lane q among P; live when the row
 * exists (lanes past the end take part in shuffles and barriers only). */
struct Lane {
    long long r;
    int c, q, b, d, grp;
    bool live;
};

__device__ __forceinline__ Lane lane_of(const BwdParams &p) {
    const long long gl = (long long)blockIdx.x * blockDim.x + threadIdx.x, rc = gl >> p.shift;
    Lane l;
    l.q = (int)(gl & (p.P - 1));
    l.live = rc < p.rows * p.chunks;
    const long long k = l.live ? rc : 0;
    l.r = k % p.rows;
    l.c = (int)(k / p.rows);
    l.d = (int)(l.r % p.dim);
    l.b = (int)(l.r / p.dim);
    l.grp = l.d / (p.dim / p.groups);
    return l;
}

/* Where a lane reads B or C of state n: element t at X[off + t·step]
 * (step 0 for a constant array). */
struct BCCol {
    long long off;
    int step;
};

__device__ __forceinline__ BCCol bc_col(const BwdParams &p, const Lane &l, int var, int n) {
    if (var) return BCCol{(((long long)l.b * p.groups + l.grp) * p.dstate + n) * p.seqlen, 1};
    return BCCol{(long long)l.d * p.dstate + n, 0};
}

template <typename T, typename V>
__device__ __forceinline__ void coef(int m, V a, T dt, V &ab, V &g) {
    if constexpr (std::is_same<T, V>::value)
        method_real(m, a * dt, ab, g);
    else
        method_complex(m, cscale(a, dt), ab, g);
}

/* The chunk's forward map (F, G) and reverse map (P, Q). */
template <typename T, typename V, int S>
__global__ void __launch_bounds__(kThreads) chunk_maps(BwdParams p) {
    constexpr bool kComplex = !std::is_same<T, V>::value;
    const Lane l = lane_of(p);
    const int N = p.dstate, P = p.P, t0 = l.c * kChunk, t1 = min(p.seqlen, t0 + kChunk);
    const T k = kComplex ? T(2) : T(1);
    const V *Bp = (const V *)p.B, *Cp = (const V *)p.C;
    V a[S], F[S], G[S], abars[kChunk][S];
    BCCol bcB[S], bcC[S];
    bool has[S];
    for (int j = 0; j < S; j++) {
        const int n = l.q + j * P;
        has[j] = l.live && n < N;
        bcB[j] = bc_col(p, l, p.var_b, n);
        bcC[j] = bc_col(p, l, p.var_c, n);
        a[j] = has[j] ? ((const V *)p.A)[(long long)l.d * N + n] : V{};
        F[j] = vone(V{});
        G[j] = V{};
    }
    StepVals<T> win{};
    for (int t = t0; t < t1; t++) {
        if ((t & (P - 1)) == 0) win = step_vals<T>(p, l.r, l.d, t + l.q);
        const T dt = bcast(win.dt, t & (P - 1), P), du_ = dt * bcast(win.u, t & (P - 1), P);
#pragma unroll
        for (int j = 0; j < S; j++) {
            V ab{}, g{};
            if (has[j]) {
                coef<T>(p.method, a[j], dt, ab, g);
                F[j] = vmul(ab, F[j]);
                G[j] = vadd(vmul(ab, G[j]), vscale(vmul(g, Bp[bcB[j].off + t * bcB[j].step]), du_));
            }
            abars[t - t0][j] = ab;
        }
    }
    V Pm[S], Q[S];
    for (int j = 0; j < S; j++) Pm[j] = vone(V{}), Q[j] = V{};
    for (int t = t1 - 1; t >= t0; t--) {
        if (t == t1 - 1 || (t & (P - 1)) == P - 1) win = step_vals<T>(p, l.r, l.d, (t & ~(P - 1)) + l.q);
        const T dy = bcast(win.dy, t & (P - 1), P);
#pragma unroll
        for (int j = 0; j < S; j++) {
            if (!has[j]) continue;
            const V cv = Cp[bcC[j].off + t * bcC[j].step];
            Q[j] = vadd(Q[j], vscale(vconj(cv), k * dy));
            Q[j] = vmul(vconj(abars[t - t0][j]), Q[j]);
            Pm[j] = vmul(vconj(abars[t - t0][j]), Pm[j]);
        }
    }
    for (int j = 0; j < S; j++) {
        if (!has[j]) continue;
        const long long i = (l.r * p.chunks + l.c) * N + l.q + j * P;
        ((V *)p.fF)[i] = F[j];
        ((V *)p.fG)[i] = G[j];
        ((V *)p.rP)[i] = Pm[j];
        ((V *)p.rQ)[i] = Q[j];
    }
}

/* Per (row, state): each chunk's starting state (into hS) and entering
 * adjoint (into muS), sequentially over the chunks; dinitial_state. The
 * maps are read, the carries written to other arrays, so that the loads
 * of later chunks are issued ahead of the chain that needs them. */
template <typename V>
__global__ void chunk_carries(BwdParams p) {
    const long long gl = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (gl >= p.rows * p.dstate) return;
    const long long r = gl / p.dstate;
    const int n = (int)(gl % p.dstate), N = p.dstate;
    const V *__restrict__ F = (const V *)p.fF, *__restrict__ G = (const V *)p.fG;
    const V *__restrict__ RP = (const V *)p.rP, *__restrict__ RQ = (const V *)p.rQ;
    V *__restrict__ hS = (V *)p.hS, *__restrict__ muS = (V *)p.muS;
    V h = p.h0 ? ((const V *)p.h0)[r * N + n] : V{};
#pragma unroll 8
    for (int c = 0; c < p.chunks; c++) {
        const long long i = (r * p.chunks + c) * N + n;
        hS[i] = h;
        h = vadd(vmul(F[i], h), G[i]);
    }
    V mu = p.dlast ? ((const V *)p.dlast)[r * N + n] : V{};
#pragma unroll 8
    for (int c = p.chunks - 1; c >= 0; c--) {
        const long long i = (r * p.chunks + c) * N + n;
        muS[i] = mu;
        mu = vadd(vmul(RP[i], mu), RQ[i]);
    }
    if (p.dinit) ((V *)p.dinit)[r * N + n] = mu;
}

/* TILE: the block's sums of variable dB and dC over one chunk, added to
 * global memory once (every row of the block is a channel of the group of
 * its first row). */
template <typename V>
__device__ void flush_tile(const BwdParams &p, const V *tileB, const V *tileC, int t0, int t1) {
    __syncthreads();
    const int N = p.dstate, L = p.seqlen;
    const long long first = ((long long)blockIdx.x * blockDim.x >> p.shift) % p.rows;
    const int b0 = (int)(first / p.dim), g0 = (int)(first % p.dim) / (p.dim / p.groups);
    const long long base = ((long long)b0 * p.groups + g0) * N;
    for (int i = threadIdx.x; i < (t1 - t0) * N; i += blockDim.x) {
        const int n = i % N, tt = t0 + i / N;
        if (p.var_b) atomic_addv(&((V *)p.dB)[(base + n) * L + tt], tileB[i]);
        if (p.var_c) atomic_addv(&((V *)p.dC)[(base + n) * L + tt], tileC[i]);
    }
}

/* The gradients of one chunk. TILE: the block's rows are channels of one
 * (batch, group) in one chunk, whose variable dB and dC are summed in
 * shared memory and added to global memory once per block. */
template <typename T, typename V, int S, bool TILE>
__global__ void __launch_bounds__(kThreads) chunk_grads(BwdParams p) {
    constexpr bool kComplex = !std::is_same<T, V>::value;
    extern __shared__ unsigned char smem[];
    V *tileB = (V *)smem, *tileC = tileB + kChunk * p.dstate;
    const Lane l = lane_of(p);
    const int N = p.dstate, L = p.seqlen, P = p.P, t0 = l.c * kChunk, t1 = min(L, t0 + kChunk);
    const T k = kComplex ? T(2) : T(1);
    const long long r = l.r;
    const V *Bp = (const V *)p.B, *Cp = (const V *)p.C;
    V a[S], lam[S], next[S], dA[S], dBc[S], dCc[S], hs[kChunk + 1][S];
    BCCol bcB[S], bcC[S];
    bool has[S];
    for (int j = 0; j < S; j++) {
        const int n = l.q + j * P;
        has[j] = l.live && n < N;
        bcB[j] = bc_col(p, l, p.var_b, n);
        bcC[j] = bc_col(p, l, p.var_c, n);
        const long long i = (r * p.chunks + l.c) * N + n;
        a[j] = has[j] ? ((const V *)p.A)[(long long)l.d * N + n] : V{};
        hs[0][j] = has[j] ? ((const V *)p.hS)[i] : V{};
        lam[j] = has[j] ? ((const V *)p.muS)[i] : V{};
        next[j] = vone(V{});
        dA[j] = dBc[j] = dCc[j] = V{};
    }
    if constexpr (TILE) {
        for (int i = threadIdx.x; i < 2 * kChunk * N; i += blockDim.x) tileB[i] = V{};
        __syncthreads();
    }
    StepVals<T> win{};
    for (int t = t0; t < t1; t++) {
        if ((t & (P - 1)) == 0) win = step_vals<T>(p, r, l.d, t + l.q);
        const T dt = bcast(win.dt, t & (P - 1), P), du_ = dt * bcast(win.u, t & (P - 1), P);
#pragma unroll
        for (int j = 0; j < S; j++) {
            V ab, g, hn{};
            if (has[j]) {
                coef<T>(p.method, a[j], dt, ab, g);
                hn = vadd(vmul(ab, hs[t - t0][j]), vscale(vmul(g, Bp[bcB[j].off + t * bcB[j].step]), du_));
            }
            hs[t - t0 + 1][j] = hn;
        }
    }
    const T Dd = p.D ? ((const T *)p.D)[l.d] : T(0);
    T dD = T(0), dBias = T(0);
    for (int t = t1 - 1; t >= t0; t--) {
        if (t == t1 - 1 || (t & (P - 1)) == P - 1) win = step_vals<T>(p, r, l.d, (t & ~(P - 1)) + l.q);
        const int src = t & (P - 1);
        const T dt = bcast(win.dt, src, P), uu = bcast(win.u, src, P), dy = bcast(win.dy, src, P);
        const T dsp = bcast(win.dsp, src, P);
        if (p.z) {
            T ys = T(0);
            for (int j = 0; j < S; j++)
                if (has[j]) ys += vre(vmul(Cp[bcC[j].off + t * bcC[j].step], hs[t - t0 + 1][j]));
            const T y = k * row_sum(ys, P) + Dd * uu, dzf = bcast(win.dzf, src, P);
            if (l.live && l.q == 0) ((T *)p.dz)[r * L + t] = y * dzf;
        }
        T du = T(0), ddt = T(0);
        for (int j = 0; j < S; j++) {
            if (!has[j]) continue;
            const int n = l.q + j * P;
            const V bv = Bp[bcB[j].off + t * bcB[j].step], cv = Cp[bcC[j].off + t * bcC[j].step];
            V ab, g, dab, dg;
            coef_deriv(p.method, vscale(a[j], dt), ab, g, dab, dg);
            lam[j] = vadd(vmul(vconj(next[j]), lam[j]), vscale(vconj(cv), k * dy));
            const V lv = lam[j];
            const V dC = vscale(vconj(hs[t - t0 + 1][j]), k * dy), dB = vscale(vmul(vconj(g), lv), dt * uu);
            const long long vi = (((long long)l.b * p.groups + l.grp) * N + n) * L + t;
            if (p.var_c) {
                if constexpr (TILE)
                    atomic_addv(&tileC[(t - t0) * N + n], dC);
                else
                    atomic_addv(&((V *)p.dC)[vi], dC);
            } else {
                dCc[j] = vadd(dCc[j], dC);
            }
            if (p.var_b) {
                if constexpr (TILE)
                    atomic_addv(&tileB[(t - t0) * N + n], dB);
                else
                    atomic_addv(&((V *)p.dB)[vi], dB);
            } else {
                dBc[j] = vadd(dBc[j], dB);
            }
            const V lgb = vmul(lv, vconj(vmul(g, bv)));
            du += vre(lgb) * dt;
            const V gx = vadd(vmul(vconj(dab), vmul(vconj(hs[t - t0][j]), lv)),
                              vscale(vmul(vconj(dg), vmul(vconj(bv), lv)), dt * uu));
            ddt += vre(lgb) * uu + vre(vmul(gx, vconj(a[j])));
            dA[j] = vadd(dA[j], vscale(gx, dt));
            next[j] = ab;
        }
        du = row_sum(du, P) + dy * Dd;
        ddt = row_sum(ddt, P) * dsp;
        if (l.live && l.q == 0) {
            ((T *)p.du)[r * L + t] = du;
            ((T *)p.ddelta)[r * L + t] = ddt;
        }
        dD += dy * uu;
        dBias += ddt;
    }
    if constexpr (TILE) flush_tile(p, tileB, tileC, t0, t1);
    const long long pc = r * p.chunks + l.c;
    for (int j = 0; j < S; j++) {
        if (!has[j]) continue;
        const int n = l.q + j * P;
        ((V *)p.pA)[pc * N + n] = dA[j];
        if (!p.var_b) ((V *)p.pB)[pc * N + n] = dBc[j];
        if (!p.var_c) ((V *)p.pC)[pc * N + n] = dCc[j];
    }
    if (l.live && l.q == 0) {
        if (p.pD) ((T *)p.pD)[pc] = dD;
        if (p.pBias) ((T *)p.pBias)[pc] = dBias;
    }
}

/* out[d·per + j] = Σ_b Σ_c part[((b·dim + d)·chunks + c)·per + j], in
 * order: the sums over batch and chunks of per-(row, chunk) partials. */
template <typename V>
__global__ void reduce_rows(const V *part, V *out, int dim, int per, int batch, int chunks) {
    const long long total = (long long)dim * per;
    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < total;
         o += (long long)gridDim.x * blockDim.x) {
        const int d = (int)(o / per), j = (int)(o % per);
        V acc{};
        for (int b = 0; b < batch; b++)
            for (int c = 0; c < chunks; c++) acc = vadd(acc, part[(((long long)b * dim + d) * chunks + c) * per + j]);
        out[o] = acc;
    }
}

template <typename V>
void reduce(const void *part, void *out, const BwdParams &p, int per, cudaStream_t s) {
    const long long blocks = ((long long)p.dim * per + 255) / 256;
    reduce_rows<V><<<(unsigned)(blocks < 4096 ? blocks : 4096), 256, 0, s>>>((const V *)part, (V *)out, p.dim, per,
                                                                             p.batch, p.chunks);
}

template <typename T, typename V, int S>
void launch_s(const BwdParams &p, cudaStream_t s) {
    const long long lanes = p.rows * p.chunks * p.P;
    const unsigned blocks = (unsigned)((lanes + kThreads - 1) / kThreads);
    chunk_maps<T, V, S><<<blocks, kThreads, 0, s>>>(p);
    const long long rs = p.rows * p.dstate;
    chunk_carries<V><<<(unsigned)((rs + 255) / 256), 256, 0, s>>>(p);
    /* The tile when every block's rows are channels of one (batch, group):
     * the channels per group a multiple of the rows per block. */
    const int rows_per_block = kThreads / p.P, cpg = p.dim / p.groups;
    const size_t tile = 2 * kChunk * (size_t)p.dstate * sizeof(V);
    if ((p.var_b || p.var_c) && cpg % rows_per_block == 0 && tile <= 48 * 1024)
        chunk_grads<T, V, S, true><<<blocks, kThreads, tile, s>>>(p);
    else
        chunk_grads<T, V, S, false><<<blocks, kThreads, 0, s>>>(p);
}

template <typename T, typename V>
void launch_t(const BwdParams &p, const ssmk_scan_grads &g, cudaStream_t s) {
    if (p.dstate <= 32)
        launch_s<T, V, 1>(p, s);
    else
        launch_s<T, V, 8>(p, s);
    reduce<V>(p.pA, g.dA, p, p.dstate, s);
    if (!p.var_b) reduce<V>(p.pB, g.dB, p, p.dstate, s);
    if (!p.var_c) reduce<V>(p.pC, g.dC, p, p.dstate, s);
    if (p.pD) reduce<T>(p.pD, g.dD, p, 1, s);
    if (p.pBias) reduce<T>(p.pBias, g.ddelta_bias, p, 1, s);
}

} /* namespace */

size_t bwd_scratch_bytes(const ssmk_scan_args &a, BwdScratch *layout) {
    const size_t v = weight_size(a.dtype) * (a.is_complex ? 2 : 1), w = weight_size(a.dtype);
    const long long rc = (long long)a.batch * a.dim * ((a.seqlen + kChunk - 1) / kChunk);
    const size_t maps = (size_t)(rc * a.dstate) * v;
    const size_t sizes[] = {maps, maps, maps, maps, maps, maps, maps, maps, maps, (size_t)rc * w, (size_t)rc * w};
    void **dst[] = {&layout->fF, &layout->fG, &layout->rP, &layout->rQ, &layout->hS,   &layout->muS,
                    &layout->pA, &layout->pB, &layout->pC, &layout->pD, &layout->pBias};
    static_assert(sizeof(sizes) / sizeof(sizes[0]) == sizeof(dst) / sizeof(dst[0]), "one size per array");
    size_t total = 0;
    for (size_t i = 0; i < sizeof(dst) / sizeof(dst[0]); i++) {
        if (layout && layout->base) *dst[i] = (char *)layout->base + total;
        total += (sizes[i] + 255) / 256 * 256;
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
    p.chunks = (a.seqlen + kChunk - 1) / kChunk;
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
    p.fF = sc.fF;
    p.fG = sc.fG;
    p.rP = sc.rP;
    p.rQ = sc.rQ;
    p.hS = sc.hS;
    p.muS = sc.muS;
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
            launch_t<double, cplx<double>>(p, g, s);
        else
            launch_t<double, double>(p, g, s);
    } else {
        if (a.is_complex)
            launch_t<float, cplx<float>>(p, g, s);
        else
            launch_t<float, float>(p, g, s);
    }
    CU(cudaGetLastError());
    return SSMK_OK;
}

} /* namespace ssmk */

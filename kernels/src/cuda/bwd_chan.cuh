/*
 * bwd_chan.cuh — the backward, sequential in time within a thread: lanes
 * are channels (design B1, docs/performance.md), the forward's
 * channel-sequential kernel (scan_chan.cuh) run in reverse.
 *
 * For the recurrence h_t = Ā_t·h_{t−1} + β_t (β = Δ·g·B·u) the adjoint
 * λ_t = ∂L/∂h_t runs the other way, λ_t = Ā_{t+1}·λ_{t+1} + C_t·dy_t, and
 * every gradient is a sum of products of λ_t, h_t and h_{t−1} with each
 * step's inputs and the method's coefficients and their derivatives at
 * x = a·Δ (ssmk_derivs.h):
 *   dC_t,n = h·dy (over a group's channels),  dB_t,n = g·λ·Δ·u (likewise),
 *   du_t = Δ·Σ_n λ·g·B + D·dy,  dΔ_t = (u·Σ_n λ·g·B + Σ_n a·gx)·softplus',
 *   dA_n = Σ_t Δ·gx,  gx = Ā'·h_{t−1}·λ + g'·B·λ·Δ·u,  dz_t = (Σ_n C·h + D·u)·gate'.
 *
 * A channel's N states are split over P adjacent lanes (4 or 8, a template
 * argument: 8 doubles the warps where the channels are few), each with
 * S = N/P states; a block of 128 threads holds CB = 128/P channels of one
 * batch and group, and walks the sequence backwards in tiles of T = 16
 * steps. The state entering each tile comes from phase 1, the
 * channel-sequential forward (at the same P, from the input type) in its
 * checkpoint instantiation (chan_kernel<…, CK>: every tile's entering state,
 * [rows][tiles − 1][N]), so a tile's states are recomputed from it and the
 * state is carried, never recovered by the subtraction x − Δ·u·B (which
 * fails the error model where Ā is small). Per tile:
 *   1. the staged rows (u, Δ, z, dout, in the input type) become float rows
 *      once per step (bc_prepass): Δ after bias and softplus, Δ·u, u, dy
 *      (dout through the gate), softplus' and the gate's derivative, by the
 *      lane whose outputs they are (lane s: the Q = T/P steps from Q·s);
 *   2. for each of the lane's states (rolled; λ and the partial dA live in
 *      shared memory between tiles) the T steps forward from the tile's
 *      entering state, h kept in registers (Ā formed again on the way
 *      back: kept, its registers spilled the accumulators), then the T steps back:
 *      λ, the sums over states of a step (Σ λ·g·B, Σ a·gx, Σ C·h) in
 *      registers, dA in a register; dB and dC of each step, sums over the
 *      block's channels, are summed over a warp's 32/P channels through a
 *      shared buffer every 8 steps (bc_round_put, bc_round_sum) and over the block's
 *      4 warps at the end of the tile, then added to global memory with
 *      16-byte atomics (their order varies: SSMK_CAP_BWD_ATOMIC);
 *   3. the P lanes' per-step sums are reduced and scattered
 *      (chan_reduce_scatter) and each lane writes du, dΔ and dz of its Q steps.
 * The next tile's rows are copied (cp.async) while a tile's states run.
 *
 * Conditions (chan_shape and chan_backward_lanes, backward.cu): real A in
 * float arithmetic (the 16-bit inputs' rows are read and written in their
 * type, B and C widened),
 * variable B and C, seqlen a multiple of 8 (a partial last tile has 8
 * steps: whole reduction rounds), N a multiple of P and at most
 * kChanMaxStates, whole blocks of 128/P channels in a group, 16-byte aligned
 * arrays. The method's arithmetic is its policy's: Ā and g by coef_e, their
 * derivatives by coef_d (bwd_ops.cuh), e^x by one MUFU.EX2 where a warp
 * vote puts every exponent of the tile in the normal range.
 */
#ifndef SSMK_BWD_CHAN_CUH
#define SSMK_BWD_CHAN_CUH

#include <cuda_pipeline.h>

#include <type_traits>

#include "bwd_block.cuh"
#include "bwd_ops.cuh"
#include "scan_chan.cuh"

namespace ssmk {
namespace bwd {

constexpr int kBcThreads = kChanThreads;  /* 128 */
constexpr int kBcWarps = kBcThreads / 32; /* 4 */
constexpr int kBcT = kChanSteps;          /* T: 16 steps per tile */
constexpr int kBcRound = 8;               /* steps per dB/dC reduction round */
constexpr int kBcFS = kChanFStride;       /* a float row: 20 floats */
constexpr int kBcRowArrays = 6;           /* Δ, Δ·u, u, dy, softplus', gate' */

/* What P lanes a channel makes of a block and a warp. The dB/dC round's
 * buffer holds [dB|dC][s][channel][step] of a warp, a block per (array, s)
 * of W channels' 8 steps padded by 8 floats so that a quarter-warp's 16-byte
 * reads of distinct (array, s, 4 steps) meet distinct banks; its sum gives
 * each (array, s, 4 steps) — 4P of them — 8/P lanes, each four channels. */
template <int P>
struct BcGeom {
    static_assert(P == 4 || P == 8, "four or eight lanes a channel");
    static constexpr int CB = kBcThreads / P;       /* channels a block */
    static constexpr int W = 32 / P;                /* channels a warp */
    static constexpr int Q = kBcT / P;              /* steps a lane finishes */
    static constexpr int LP = P == 4 ? 2 : 3;       /* log2 P */
    static constexpr int XBlock = W * kBcRound + 8; /* one (dB or dC, lane s) block of a warp's buffer */
    static constexpr int XWarp = 2 * P * XBlock;    /* a warp's reduction buffer, floats */
    static constexpr int H = 8 / P;                 /* lanes summing one (array, s, 4 steps) */
};

/* Where each array of the block's shared memory lies, for input type In and
 * N states: the staged rows of the input type (u, Δ, z, dout; one buffer,
 * refilled once its float rows are formed), two stage buffers of B, C and
 * the entering states (float), the float rows, λ and dA of each lane's
 * states, the warps' reduction buffers and their per-tile dB/dC partials. */
template <typename In, int P>
struct BcLayout {
    using G = BcGeom<P>;
    static constexpr int CB = G::CB;
    static constexpr int RS = chan_row_stride<In>();
    __host__ __device__ static size_t rows_in_bytes() { return (size_t)4 * CB * RS * sizeof(In); }
    __host__ __device__ static size_t stage_b_floats(int N) { return (size_t)2 * N * kBcFS + (size_t)CB * N; }
    __host__ __device__ static size_t floats(int N) {
        return 2 * stage_b_floats(N) + (size_t)kBcRowArrays * CB * kBcFS + 2 * (size_t)(N / P) * kBcThreads +
               (size_t)kBcWarps * G::XWarp + (size_t)kBcWarps * N * 2 * kBcT;
    }
    __host__ __device__ static size_t bytes(int N) { return rows_in_bytes() + floats(N) * sizeof(float); }
};

/* One stage of B, C (rows of kBcFS floats) and the channels' entering states ([CB][N]). */
struct BcStageB {
    float *B, *C, *h;
};

/* The float rows of the block's channels, each [CB][kBcFS]. */
struct BcRows {
    float *dt, *du, *u, *dy, *dsp, *dzf;
};

/* A thread's share of each tile's copies, the same chunks every tile: its
 * index arithmetic done once (a division by a run-time count in every
 * tile's copies cost the kernel about four instructions an update).
 *   rows: at most one 16-byte chunk of each input row array (CB rows of
 *     T/E chunks: at most 128 for float, 64 for 16-bit types), at channel rc, step rq;
 *   B and C: chunks i = threadIdx.x + 128·m of N rows of T/4 chunks;
 *   entering states: channel hc = thread's index mod CB, chunks hj0 + (128/CB)·m. */
template <typename In, int P>
struct BcCopies {
    static constexpr int CB = BcGeom<P>::CB;
    static constexpr int E = 16 / (int)sizeof(In), CPR = kBcT / E;
    bool rows;
    int ro, rq, bn0, bq, hc, hj0;
    long long roff, hrow, h0row;
    __device__ BcCopies(long long r0, int L, int N, int tiles) {
        const int tid = (int)threadIdx.x, rc = tid / CPR;
        rq = (tid % CPR) * E;
        rows = tid < CB * CPR;
        roff = (long long)rc * L + rq;
        ro = rc * BcLayout<In, P>::RS + rq;
        bn0 = tid / (kBcT / 4), bq = (tid % (kBcT / 4)) * 4;
        hc = tid % CB, hj0 = tid / CB;
        hrow = (r0 + hc) * (long long)(tiles - 1) * N;
        h0row = (r0 + hc) * (long long)N;
    }
};

/* The tile t0 … t0 + T − 1 of u, Δ, z and dout into the input-type rows. */
template <typename In, int P>
__device__ __forceinline__ void bc_stage_rows(const BcCopies<In, P> &cp, In *rows, const In *u0, const In *d0,
                                              const In *z0, const In *o0, int t0, int L) {
    constexpr int RS = BcLayout<In, P>::RS, CB = BcGeom<P>::CB;
    if (!cp.rows) return;
    const bool in = t0 + cp.rq < L;
    const long long g = in ? cp.roff + t0 : 0;
    chan_copy16(rows + cp.ro, u0 + g, in);
    chan_copy16(rows + CB * RS + cp.ro, d0 + g, in);
    if (z0) chan_copy16(rows + 2 * CB * RS + cp.ro, z0 + g, in);
    chan_copy16(rows + 3 * CB * RS + cp.ro, o0 + g, in);
}

/* B and C of the tile from the group's rows (n·L + t), and each channel's
 * state entering tile k: phase 1's for k ≥ 1, the initial state (or 0) for k = 0. */
template <typename In, int P>
__device__ __forceinline__ void bc_stage_b(const BcCopies<In, P> &cp, const BcStageB &st, const float *B0,
                                           const float *C0, const float *hS, const float *h0, int k, int t0, int L,
                                           int N) {
    constexpr int CB = BcGeom<P>::CB, NB = kBcThreads / (kBcT / 4); /* rows a pass of the block covers */
    const bool in = t0 + cp.bq < L;
    for (int n = cp.bn0; n < N; n += NB) {
        const long long g = in ? (long long)n * L + t0 + cp.bq : 0;
        chan_copy16(st.B + n * kBcFS + cp.bq, B0 + g, in);
        chan_copy16(st.C + n * kBcFS + cp.bq, C0 + g, in);
    }
    const float *src = k > 0 ? hS + cp.hrow + (long long)(k - 1) * N : h0 ? h0 + cp.h0row : B0;
    const bool on = k > 0 || h0;
    for (int j = cp.hj0; j < N / 4; j += kBcThreads / CB)
        chan_copy16(st.h + cp.hc * N + 4 * j, on ? src + 4 * j : src, on);
}

/* Four consecutive floats of a row (16-byte aligned). */
__device__ __forceinline__ float4 bc_ld4(const float *row, int t) {
    return reinterpret_cast<const float4 *>(row)[t / 4];
}
/* Q = 4 or 2 consecutive floats at p (aligned to their size), one load. */
template <int Q>
__device__ __forceinline__ void bc_ldq(const float *p, float (&v)[Q]) {
    if constexpr (Q == 4) {
        const float4 x = *reinterpret_cast<const float4 *>(p);
        v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
    } else {
        static_assert(Q == 2, "two or four steps a lane");
        const float2 x = *reinterpret_cast<const float2 *>(p);
        v[0] = x.x, v[1] = x.y;
    }
}
__device__ __forceinline__ float bc_at(const float4 &v, int j) {
    return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

/* The range of the warp's Δ over a tile (with 0, as the row backward's
 * DtRange: a NaN Δ, which fminf passes over, makes NaN exponents on either path). */
struct BcRange {
    float lo, hi;
};

/* Each step's own work, by the lane whose outputs they are (steps Q·s …
 * Q·s + Q − 1 of channel cl, Q = T/P): Δ after bias and softplus (the
 * forward's step_dt), Δ·u, u, dy = dout·z·σ(z) (dout without a gate),
 * softplus' = σ(Δ + bias) below the threshold (1 above it or without
 * softplus), the gate's derivative dout·σ(z)·(1 + z·(1 − σ(z))); 0 past the
 * sequence's end. Adds Σ dy·u to dD; returns the lane's range of Δ. */
template <typename In, int P>
__device__ __forceinline__ BcRange bc_prepass(const BwdParams &p, const In *rows, const BcRows &fr, int avail, int s,
                                              int cl, int d, float &dD) {
    constexpr int RS = BcLayout<In, P>::RS, CB = BcGeom<P>::CB, Q = BcGeom<P>::Q;
    BcRange w{0.0f, 0.0f};
    const float bias = p.delta_bias ? ((const float *)p.delta_bias)[d] : 0.0f;
#pragma unroll
    for (int j = 0; j < Q; j++) {
        const int t = Q * s + j, o = cl * RS + t, f = cl * kBcFS + t;
        float dt = 0.0f, du = 0.0f, u = 0.0f, dy = 0.0f, dsp = 0.0f, dzf = 0.0f;
        if (t < avail) {
            const float raw = widen(rows[CB * RS + o]);
            dt = step_dt<true>(raw, (const float *)p.delta_bias, d, p.softplus);
            w.lo = fminf(w.lo, dt), w.hi = fmaxf(w.hi, dt);
            const float v = raw + bias;
            dsp = step_dt_deriv(v, p.softplus);
            u = widen(rows[o]);
            du = dt * u;
            const float dout = widen(rows[3 * CB * RS + o]);
            dy = dout;
            if (p.z) {
                /* the gate z·σ(z) as the forward forms it (sgate) */
                const float z = widen(rows[2 * CB * RS + o]), sig = ssigmoid(z);
                dy = dout * (z * sig);
                dzf = dout * sgate_deriv(z, sig);
            }
            dD += dy * u;
        }
        fr.dt[f] = dt, fr.du[f] = du, fr.u[f] = u, fr.dy[f] = dy, fr.dsp[f] = dsp, fr.dzf[f] = dzf;
    }
    return w;
}

/* A round of 8 steps' dB and dC of state n of every lane, summed over the
 * warp's W = 32/P channels: each lane puts its values, 4 steps at a time
 * (bc_round_put: xb, xc of steps 4q … 4q + 3 of the round), into the warp's
 * buffer (BcGeom); then (bc_round_sum) each lane sums four channels of one
 * (array, s, 4 steps), at P = 4 the other half-warp's four by a shuffle,
 * and the sums go to the warp's tile partials wp[n][array][step]. */
constexpr int kBcR4 = kBcRound / 4; /* a channel's round, in 16-byte words */

template <int P>
__device__ __forceinline__ void bc_round_put(float *xw, const float (&xb)[4], const float (&xc)[4], int lane, int q) {
    using G = BcGeom<P>;
    constexpr int XB4 = G::XBlock / 4;
    const int cw = lane >> G::LP, s = lane & (P - 1);
    float4 *w4 = reinterpret_cast<float4 *>(xw);
    w4[(0 * P + s) * XB4 + cw * kBcR4 + q] = make_float4(xb[0], xb[1], xb[2], xb[3]);
    w4[(1 * P + s) * XB4 + cw * kBcR4 + q] = make_float4(xc[0], xc[1], xc[2], xc[3]);
}

template <int P>
__device__ __forceinline__ void bc_round_sum(float *xw, float *wp, int lane, int i, int rd) {
    using G = BcGeom<P>;
    constexpr int XB4 = G::XBlock / 4;
    __syncwarp();
    const int kg = lane & 1, s2 = (lane >> 1) & (P - 1), arr = (lane >> (1 + G::LP)) & 1, half = lane >> (2 + G::LP);
    const float4 *blk = reinterpret_cast<const float4 *>(xw) + (arr * P + s2) * XB4 + kg;
    float4 v = blk[(4 * half) * kBcR4];
#pragma unroll
    for (int c = 1; c < 4; c++) {
        const float4 x = blk[(4 * half + c) * kBcR4];
        v.x += x.x, v.y += x.y, v.z += x.z, v.w += x.w;
    }
    if constexpr (G::H == 2) {
        v.x += __shfl_xor_sync(0xffffffffu, v.x, 16);
        v.y += __shfl_xor_sync(0xffffffffu, v.y, 16);
        v.z += __shfl_xor_sync(0xffffffffu, v.z, 16);
        v.w += __shfl_xor_sync(0xffffffffu, v.w, 16);
    }
    if (half == 0) {
        const int n = s2 + P * i;
        reinterpret_cast<float4 *>(wp)[(n * 2 + arr) * (kBcT / 4) + rd * kBcR4 + kg] = v;
    }
    __syncwarp(); /* the buffer is read before the next round writes it */
}

/* One state over the tile: its K steps forward from the entering state h0
 * (Ā and h kept), then back, carrying λ in mu; the per-step sums over
 * states in sl (Σ λ·g·B), ga (Σ a·gx), ys (Σ C·h); Σ Δ·gx into dA; dB and
 * dC to the warp's partials. K = 16, or 8 on a partial last tile. Ā is
 * formed in both passes (the same instructions on the same values). FAST: e^x
 * by ex2_normal (every exponent of the warp's tile ≥ −126). */
template <int M, int P, int K, bool FAST>
__device__ __forceinline__ void bc_state(const BcRows &fr, const BcStageB &st, int cl, int n, float a, float h0,
                                         float &mu, float &dA, float (&sl)[kBcT], float (&ga)[kBcT], float (&ys)[kBcT],
                                         float *xw, float *wp, int lane, int i) {
    constexpr bool kUnitG = MethodPolicy<M>::kUnitG;
    const float a2 = a * SSMK_LOG2E_F;
    const float *dtr = fr.dt + cl * kBcFS, *dur = fr.du + cl * kBcFS, *dyr = fr.dy + cl * kBcFS;
    const float *Br = st.B + n * kBcFS, *Cr = st.C + n * kBcFS;
    float hk[K];
    float h = h0;
    /* Ā of step k, formed again in the reverse pass: kept, the 16 registers
     * spilled the kernel's accumulators */
    auto abar = [&](float dt) {
        const float x = a * dt, e = !uses_exp<M>() ? 0.0f : FAST ? ex2_normal(dt * a2) : sexp(x);
        float ab, g;
        coef_e<M, FOH_EXACT>(x, e, ab, g);
        return ab;
    };
#pragma unroll
    for (int q = 0; q < K / 4; q++) {
        const float4 dt4 = bc_ld4(dtr, 4 * q), du4 = bc_ld4(dur, 4 * q), b4 = bc_ld4(Br, 4 * q);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int k = 4 * q + j;
            const float dt = bc_at(dt4, j), x = a * dt;
            const float e = !uses_exp<M>() ? 0.0f : FAST ? ex2_normal(dt * a2) : sexp(x);
            float ab, g;
            coef_e<M, FOH_EXACT>(x, e, ab, g);
            const float bb = kUnitG ? bc_at(b4, j) * bc_at(du4, j) : (g * bc_at(b4, j)) * bc_at(du4, j);
            h = fmaf(ab, h, bb);
            hk[k] = h;
        }
    }
    float dAn = 0.0f;
#pragma unroll
    for (int rd = K / kBcRound - 1; rd >= 0; rd--) {
#pragma unroll
        for (int q = kBcRound / 4 - 1; q >= 0; q--) {
            float xb[4], xc[4];
            const int t4 = rd * kBcRound + 4 * q;
            const float4 dt4 = bc_ld4(dtr, t4), du4 = bc_ld4(dur, t4), dy4 = bc_ld4(dyr, t4);
            const float4 b4 = bc_ld4(Br, t4), c4 = bc_ld4(Cr, t4);
#pragma unroll
            for (int j = 3; j >= 0; j--) {
                const int k = t4 + j;
                const float dt = bc_at(dt4, j), du = bc_at(du4, j), dy = bc_at(dy4, j);
                const float bv = bc_at(b4, j), cv = bc_at(c4, j);
                const float lam = fmaf(cv, dy, mu);
                const float ab = abar(dt);
                float g, dab, dg;
                coef_d<M, FOH_EXACT>(a, dt, ab, g, dab, dg);
                const float hp = k > 0 ? hk[k - 1] : h0;
                xc[j] = hk[k] * dy;
                xb[j] = (g * lam) * du;
                sl[k] = fmaf(lam, g * bv, sl[k]);
                const float next = ab * lam; /* λ carried to the step before */
                /* Ā' = Ā where Ā is e^x (every method but bilinear): Ā'·h·λ
                 * is then h times the carried λ, a product fewer */
                float gx = uses_exp<M>() ? hp * next : dab * (hp * lam);
                if constexpr (!kUnitG) gx = fmaf(dg * (bv * lam), du, gx);
                ga[k] = fmaf(gx, a, ga[k]);
                dAn = fmaf(gx, dt, dAn);
                ys[k] = fmaf(cv, hk[k], ys[k]);
                mu = next;
            }
            bc_round_put<P>(xw, xb, xc, lane, q);
        }
        bc_round_sum<P>(xw, wp, lane, i, rd);
    }
    dA += dAn;
}

/* The lane's states over one tile (K steps), each by the fast or exact
 * exponential as the warp's vote says. */
template <int M, int P, int K>
__device__ __forceinline__ void bc_states(const BcRows &fr, const BcStageB &st, const float *A, float *mus, float *dAs,
                                          int N, int s, int cl, BcRange w, float (&sl)[kBcT], float (&ga)[kBcT],
                                          float (&ys)[kBcT], float *xw, float *wp, int lane) {
#pragma unroll 1
    for (int i = 0; i < N / P; i++) {
        const int n = s + P * i;
        const float a = A[n];
        float mu = mus[i * kBcThreads], dA = dAs[i * kBcThreads];
        const float h0 = st.h[cl * N + n];
        bool fast = false;
        if constexpr (uses_exp<M>()) {
            const float a2 = a * SSMK_LOG2E_F;
            fast = __all_sync(0xffffffffu, fabsf(a2) <= FLT_MAX && fminf(w.lo * a2, w.hi * a2) >= -126.0f);
        }
        if (fast)
            bc_state<M, P, K, true>(fr, st, cl, n, a, h0, mu, dA, sl, ga, ys, xw, wp, lane, i);
        else
            bc_state<M, P, K, false>(fr, st, cl, n, a, h0, mu, dA, sl, ga, ys, xw, wp, lane, i);
        mus[i * kBcThreads] = mu, dAs[i * kBcThreads] = dA;
    }
}

/* Q = 4 or 2 consecutive gradients of the input type at element i of p
 * (aligned to their size), each rounded once, one store. */
template <typename In, int Q>
__device__ __forceinline__ void bc_storeq(void *p, long long i, const float (&v)[Q]) {
    if constexpr (std::is_same<In, float>::value && Q == 4) {
        reinterpret_cast<float4 *>((float *)p + i)[0] = make_float4(v[0], v[1], v[2], v[3]);
    } else if constexpr (std::is_same<In, float>::value) {
        reinterpret_cast<float2 *>((float *)p + i)[0] = make_float2(v[0], v[1]);
    } else {
        using Word = typename std::conditional<Q == 4, uint2, uint32_t>::type;
        union {
            Word q;
            In e[Q];
        } w;
#pragma unroll
        for (int j = 0; j < Q; j++) w.e[j] = narrow<In>(v[j]);
        reinterpret_cast<Word *>((In *)p + i)[0] = w.q;
    }
}

/* Lane s's steps Q·s … Q·s + Q − 1 of the tile (f: the first one's index
 * in the float rows, o: in the rows of the gradients), their per-step sums
 * over states in sl, ga, ys[0 … Q − 1]: du, dΔ and dz written; Σ dΔ added
 * to dBias. */
template <typename In, int P>
__device__ __forceinline__ void bc_finish(const BwdParams &p, const BcRows &fr, int f, long long o, float Dd,
                                          const float (&sl)[kBcT], const float (&ga)[kBcT], const float (&ys)[kBcT],
                                          float &dBias) {
    constexpr int Q = BcGeom<P>::Q;
    float dt[Q], u[Q], dy[Q], sp[Q], zf[Q];
    bc_ldq<Q>(fr.dt + f, dt), bc_ldq<Q>(fr.u + f, u), bc_ldq<Q>(fr.dy + f, dy);
    bc_ldq<Q>(fr.dsp + f, sp), bc_ldq<Q>(fr.dzf + f, zf);
    float du[Q], ddt[Q], dz[Q];
#pragma unroll
    for (int j = 0; j < Q; j++) {
        du[j] = sl[j] * dt[j] + dy[j] * Dd;
        ddt[j] = (sl[j] * u[j] + ga[j]) * sp[j];
        dz[j] = (ys[j] + Dd * u[j]) * zf[j];
        dBias += ddt[j];
    }
    bc_storeq<In, Q>(p.du, o, du);
    bc_storeq<In, Q>(p.ddelta, o, ddt);
    if (p.z) bc_storeq<In, Q>(p.dz, o, dz);
}

/* The kernel: block = 128/P channels of one batch and group, lane = (channel, s). */
template <int M, typename In, int P>
__global__ void __launch_bounds__(kBcThreads, 4) bwd_chan_kernel(const BwdParams p) {
    using Lay = BcLayout<In, P>;
    using G = BcGeom<P>;
    constexpr int CB = G::CB, T = kBcT, Q = G::Q;
    extern __shared__ __align__(16) unsigned char smem[];
    const int N = p.dstate, L = p.seqlen, S = N / P, tiles = p.chunks;
    const int s = (int)threadIdx.x % P, cl = (int)threadIdx.x / P, lane = (int)threadIdx.x & 31,
              wb = (int)threadIdx.x / 32;
    const int perBatch = p.dim / CB;
    const int b = (int)blockIdx.x / perBatch, c0 = ((int)blockIdx.x % perBatch) * CB, d = c0 + cl;
    const long long r0 = (long long)b * p.dim + c0, r = r0 + cl;
    const int grp = c0 / (p.dim / p.n_groups);

    In *const rin = reinterpret_cast<In *>(smem);
    float *const fbase = reinterpret_cast<float *>(smem + Lay::rows_in_bytes());
    auto stage_b = [&](int k) {
        float *q = fbase + (k & 1) * Lay::stage_b_floats(N);
        return BcStageB{q, q + N * kBcFS, q + 2 * N * kBcFS};
    };
    float *q = fbase + 2 * Lay::stage_b_floats(N);
    BcRows fr;
    fr.dt = q, fr.du = q + CB * kBcFS, fr.u = q + 2 * CB * kBcFS, fr.dy = q + 3 * CB * kBcFS;
    fr.dsp = q + 4 * CB * kBcFS, fr.dzf = q + 5 * CB * kBcFS;
    q += kBcRowArrays * CB * kBcFS;
    float *const mus = q + threadIdx.x; /* λ of the lane's state i at mus[i·kBcThreads] */
    float *const dAs = q + S * kBcThreads + threadIdx.x;
    q += 2 * S * kBcThreads;
    float *const xw = q + wb * G::XWarp;
    q += kBcWarps * G::XWarp;
    float *const wpart = q; /* [warp][N][dB|dC][T] */
    float *const wp = wpart + wb * N * 2 * T;

    const float *A = (const float *)p.A + (long long)d * N;
    for (int i = 0; i < S; i++) {
        const int n = s + P * i;
        mus[i * kBcThreads] = p.dlast ? ((const float *)p.dlast)[r * N + n] : 0.0f;
        dAs[i * kBcThreads] = 0.0f;
    }
    const long long rb = r0 * L;
    const In *u0 = (const In *)p.u + rb, *d0 = (const In *)p.delta + rb, *o0 = (const In *)p.dout + rb;
    const In *z0 = p.z ? (const In *)p.z + rb : nullptr;
    const long long vb = ((long long)b * p.n_groups + grp) * N * L;
    const float *B0 = (const float *)p.B + vb, *C0 = (const float *)p.C + vb;
    float *dB0 = (float *)p.dB + vb, *dC0 = (float *)p.dC + vb;
    const float *hS = (const float *)p.hS, *h0 = (const float *)p.h0;
    const float Dd = p.D ? ((const float *)p.D)[d] : 0.0f;
    float dD = 0.0f, dBias = 0.0f;

    const BcCopies<In, P> cp(r0, L, N, tiles);
    bc_stage_rows<In, P>(cp, rin, u0, d0, z0, o0, (tiles - 1) * T, L);
    bc_stage_b<In, P>(cp, stage_b(tiles - 1), B0, C0, hS, h0, tiles - 1, (tiles - 1) * T, L, N);
    __pipeline_commit();
    for (int k = tiles - 1; k >= 0; k--) {
        const int t0 = k * T, avail = L - t0 < T ? L - t0 : T;
        __pipeline_wait_prior(0);
        __syncthreads(); /* tile k has landed; the last tile's partials are flushed */
        const BcRange lr = bc_prepass<In, P>(p, rin, fr, avail, s, cl, d, dD);
        BcRange w = lr;
        warp_min_max(w.lo, w.hi);
        __syncthreads(); /* the float rows are complete and the input rows free */
        if (k > 0) {
            bc_stage_rows<In, P>(cp, rin, u0, d0, z0, o0, t0 - T, L);
            bc_stage_b<In, P>(cp, stage_b(k - 1), B0, C0, hS, h0, k - 1, t0 - T, L, N);
        }
        __pipeline_commit();
        float sl[T], ga[T], ys[T];
#pragma unroll
        for (int t = 0; t < T; t++) sl[t] = ga[t] = ys[t] = 0.0f;
        const BcStageB st = stage_b(k);
        if (avail == T)
            bc_states<M, P, T>(fr, st, A, mus, dAs, N, s, cl, w, sl, ga, ys, xw, wp, lane);
        else
            bc_states<M, P, kBcRound>(fr, st, A, mus, dAs, N, s, cl, w, sl, ga, ys, xw, wp, lane);
        chan_reduce_scatter<P>(s, sl);
        chan_reduce_scatter<P>(s, ga);
        chan_reduce_scatter<P>(s, ys);
        if (Q * s < avail)
            bc_finish<In, P>(p, fr, cl * kBcFS + Q * s, rb + (long long)cl * L + t0 + Q * s, Dd, sl, ga, ys, dBias);
        __syncthreads(); /* every warp's dB/dC partials of the tile are in wpart */
        for (int i = threadIdx.x; i < N * 2 * (T / 4); i += kBcThreads) {
            const int n = i / (2 * (T / 4)), arr = (i / (T / 4)) % 2, g4 = i % (T / 4);
            if (4 * g4 >= avail) continue;
            float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int w2 = 0; w2 < kBcWarps; w2++) {
                const float4 x = reinterpret_cast<const float4 *>(wpart + w2 * N * 2 * T)[i];
                v[0] += x.x, v[1] += x.y, v[2] += x.z, v[3] += x.w;
            }
            red_add4((arr ? dC0 : dB0) + (long long)n * L + t0 + 4 * g4, v);
        }
    }
    for (int i = 0; i < S; i++) {
        const int n = s + P * i;
        if (p.dinit) ((float *)p.dinit)[r * N + n] = mus[i * kBcThreads];
        ((float *)p.pA)[r * N + n] = dAs[i * kBcThreads];
    }
#pragma unroll
    for (int o = 1; o < P; o *= 2) {
        dD += __shfl_xor_sync(0xffffffffu, dD, o);
        dBias += __shfl_xor_sync(0xffffffffu, dBias, o);
    }
    if (s == 0) {
        if (p.pD) ((float *)p.pD)[r] = dD;
        if (p.pBias) ((float *)p.pBias)[r] = dBias;
    }
}

/* One launch of method M with input type In and P lanes a channel: a block
 * per 128/P channels of a batch, with the shared memory its layout needs
 * for N states. */
template <int M, typename In, int P>
void launch_bwd_chan_m(const BwdParams &p, cudaStream_t s) {
    const size_t smem = BcLayout<In, P>::bytes(p.dstate);
    cudaFuncSetAttribute(bwd_chan_kernel<M, In, P>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    const dim3 grid((unsigned)(p.rows / BcGeom<P>::CB));
    bwd_chan_kernel<M, In, P><<<grid, kBcThreads, smem, s>>>(p);
}

template <typename In>
void launch_bwd_chan_t(const BwdParams &p, int P, cudaStream_t s) {
    method_switch(p.method, [&](auto m) {
        if (P == 8)
            launch_bwd_chan_m<decltype(m)::value, In, 8>(p, s);
        else
            launch_bwd_chan_m<decltype(m)::value, In, 4>(p, s);
    });
}

} /* namespace bwd */
} /* namespace ssmk */

#endif /* SSMK_BWD_CHAN_CUH */

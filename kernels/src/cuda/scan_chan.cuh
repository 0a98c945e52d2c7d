/*
 * scan_chan.cuh — the selective scan, sequential in time within a thread:
 * lanes are channels (design F1, docs/performance.md).
 *
 * The row kernel (scan_kernel.cuh) gives each row a warp and pays, for every
 * state, a scan of affine maps across the warp's lanes. Here a channel's
 * states are split over P adjacent lanes (P = 2 or 4), each lane holding
 * S = N/P of them, and time runs sequentially in each lane: no scan, no
 * product of Ā is ever formed that the sequential recurrence does not form,
 * and B and C, which every channel of a batch and group shares, are read by a
 * warp's lanes from the same shared-memory words (broadcasts).
 *
 * A block holds CB = 128/P consecutive channels of one batch and group. Time
 * runs in tiles of kChanSteps steps, staged by asynchronous 16-byte copies
 * (cp.async, double-buffered: tile k + 1 is in flight while tile k is
 * computed): u, Δ and z of the block's channels and the tile's rows of B and
 * C, in their input type (16-bit inputs stay 16-bit until the arithmetic).
 * Per tile:
 *   1. each step's own work once (chan_prepass): lane s of a channel forms
 *      Δ after bias and softplus, and Δ·u, for the steps t ≡ s (mod P) into
 *      float rows the channel's lanes read, with the ranges the votes need
 *      (16-bit B and C are widened once per block into float rows too);
 *   2. one warp vote per tile picks the fast path — the row kernel's votes
 *      (run_stable_above, run_du_exact) over every pair of a step and a state
 *      of the warp — and foh's near and far branches one vote per state; each
 *      lane loads its channel's T steps of Δ and of Δ·u (or u) into registers;
 *   3. for each of its states (rolled: the state lives in shared memory
 *      between tiles, one load and one store per state and tile) the T
 *      updates of update_terms — the same arithmetic as the row kernel's,
 *      each method's policy and fast forms unchanged — with y[t] += C·h;
 *   4. the P lanes' partial sums over states are reduced and scattered
 *      (lane s finishes steps s·T/P … (s+1)·T/P − 1: D·u and the gate), the
 *      outputs written over the tile's u and stored by 16-byte words.
 *
 * Conditions (chan_lanes, kernels.cu, which also chooses between the designs): real A in float arithmetic
 * (fp32, fp16 or bf16 inputs; complex A has scan_chan_cplx.cuh), variable B and C in 16-byte runs (the row
 * kernel's VEC), N a multiple of P and at most kChanMaxStates, a group's
 * channels a multiple of CB, and no chunk states (the backward's phase 1
 * keeps the row kernel). Steps past the end of a partial last tile are
 * skipped, not made identities by Δ = 0 (x = 0·a is NaN for an infinite a).
 */
#ifndef SSMK_SCAN_CHAN_CUH
#define SSMK_SCAN_CHAN_CUH

#include <cuda_pipeline.h>

#include <type_traits>

#include "scan_kernel.cuh"

namespace ssmk {

constexpr int kChanThreads = 128;            /* threads per block: CB channels × P lanes */
constexpr int kChanSteps = 16;               /* T: steps per tile */
constexpr int kChanMaxStates = 64;           /* N: the states of a channel, in shared memory between tiles */
constexpr int kChanFStride = kChanSteps + 4; /* a float row: 80 bytes, 16-byte aligned, no bank conflict */

/* An input-type row of a staged tile: T elements and 16 bytes of padding
 * (rows 16-byte aligned; a quarter-warp's 16-byte reads of 8 rows meet no
 * bank twice). */
template <typename In>
constexpr int chan_row_stride() {
    return kChanSteps + 16 / (int)sizeof(In);
}

/* Where each array of the kernel's shared memory lies, for N states. One
 * stage buffer holds u, Δ, z (CB rows) and B, C (N rows) in the input type;
 * two stage buffers, then the float rows of Δ, of Δ·u (kDeltaU), of B and C
 * (16-bit inputs), and the states h[N][kChanThreads]. */
template <class Tr, int P>
struct ChanLayout {
    using In = typename Tr::In;
    static constexpr int CB = kChanThreads / P;
    static constexpr int RS = chan_row_stride<In>();
    static constexpr bool kWiden = !std::is_same<In, float>::value;
    __host__ __device__ static size_t stage_elems(int N) { return (size_t)(3 * CB + 2 * N) * RS; }
    __host__ __device__ static size_t stage_bytes(int N) { return stage_elems(N) * sizeof(In); }
    /* Δ rows, Δ·u rows (the methods whose fast input term is B·(Δ·u)), 16-bit B and C widened */
    static constexpr int kDuRows = Tr::kDeltaU ? CB : 0;
    __host__ __device__ static size_t float_rows(int N) { return (size_t)CB + kDuRows + (kWiden ? 2 * N : 0); }
    __host__ __device__ static size_t bytes(int N) {
        return 2 * stage_bytes(N) + float_rows(N) * kChanFStride * sizeof(float) +
               (size_t)N * kChanThreads * sizeof(float);
    }
};

/* One stage buffer's arrays. */
template <class Tr>
struct ChanStage {
    using In = typename Tr::In;
    In *u, *dl, *z, *B, *C; /* rows of RS elements */
};

/* The block's view of one channel tile: the float rows each lane reads. */
struct ChanRows {
    const float *dt;    /* this channel's Δ row */
    const float *du;    /* its Δ·u row (Tr::kDeltaU) */
    const float *B, *C; /* row n at n·bs (bs: the row stride in floats) */
    int bs;
};

/* One 16-byte asynchronous copy, or 16 zero bytes where the chunk lies past
 * the sequence's end (nothing is read then). */
__device__ __forceinline__ void chan_copy16(void *dst, const void *src, bool in) {
    __pipeline_memcpy_async(dst, src, 16, in ? 0 : 16);
}

/* The u, Δ and z rows of a block's CB channels for steps t0 … t0 + T − 1
 * into a stage's rows of stride RS, by 16-byte asynchronous copies (zeros
 * past L); channel c's row starts at c·L elements, an offset of type Off. */
template <typename In, typename Off, int CB, int RS>
__device__ __forceinline__ void chan_stage_rows(In *u, In *dl, In *z, const In *u0, const In *d0, const In *z0, int t0,
                                                int L) {
    constexpr int E = 16 / (int)sizeof(In); /* elements per chunk */
    constexpr int CPR = kChanSteps / E;     /* chunks per row */
    for (int i = threadIdx.x; i < CB * CPR; i += kChanThreads) {
        const int c = i / CPR, q = (i % CPR) * E, t = t0 + q;
        const bool in = t < L;
        const Off g = (Off)c * L + (in ? t : 0);
        const int o = c * RS + q;
        chan_copy16(u + o, u0 + g, in);
        chan_copy16(dl + o, d0 + g, in);
        if (z0) chan_copy16(z + o, z0 + g, in);
    }
}

/* Tile t0 … t0 + T − 1 of the block's channels into stage st: u, Δ, z from
 * their rows (u0, d0, z0: the block's first channel, rows of L steps), B
 * and C from the group's rows (n·L + t). L is a multiple of a 16-byte
 * chunk's elements (the VEC condition), so a chunk is whole or past the end. */
template <class Tr, int P>
__device__ __forceinline__ void chan_stage(const ChanStage<Tr> &st, const typename Tr::In *u0,
                                           const typename Tr::In *d0, const typename Tr::In *z0,
                                           const typename Tr::In *B0, const typename Tr::In *C0, int t0, int L, int N) {
    using In = typename Tr::In;
    using Lay = ChanLayout<Tr, P>;
    constexpr int E = 16 / (int)sizeof(In); /* elements per chunk */
    constexpr int CPR = kChanSteps / E;     /* chunks per row */
    /* offsets from the block's first row within 2^31 elements (chan_lanes, kernels.cu) */
    chan_stage_rows<In, int, Lay::CB, Lay::RS>(st.u, st.dl, st.z, u0, d0, z0, t0, L);
    for (int i = threadIdx.x; i < N * CPR; i += kChanThreads) {
        const int n = i / CPR, q = (i % CPR) * E, t = t0 + q;
        const bool in = t < L;
        const int g = n * L + (in ? t : 0), o = n * Lay::RS + q;
        chan_copy16(st.B + o, B0 + g, in);
        chan_copy16(st.C + o, C0 + g, in);
    }
    __pipeline_commit();
}

/* T elements of a staged row (16-byte aligned) widened to float. */
template <typename In>
__device__ __forceinline__ void chan_load_row(const In *row, float (&v)[kChanSteps]) {
    const uint4 *q = reinterpret_cast<const uint4 *>(row);
    constexpr int W = kChanSteps * (int)sizeof(In) / 16;
#pragma unroll
    for (int i = 0; i < W; i++) {
        RunWords<In, 16 / sizeof(In)> w;
        w.q[0] = q[i];
#pragma unroll
        for (int j = 0; j < 16 / (int)sizeof(In); j++) v[i * (16 / sizeof(In)) + j] = widen(w.e[j]);
    }
}

/* The T updates of one state on branch BR: h ← Ā·h + Δ·g·B·u and
 * y[t] += C·h (the row kernel's pass 1 and pass 2 in one). uv holds what the
 * update's input term reads: Δ·u on a fast tile of a method whose fast form
 * is B·(Δ·u) (ScanTraits::kDeltaU), u everywhere else. */
template <class Tr, bool FAST, bool FULL, int BR>
__device__ __forceinline__ void chan_state_steps(int avail, float a, float a2, float ia, const DCoefs &dc,
                                                 const float (&dt)[kChanSteps], const float (&uv)[kChanSteps],
                                                 const float *Brow, const float *Crow, float &h,
                                                 float (&y)[kChanSteps]) {
    constexpr int M = Tr::kMethod;
#pragma unroll
    for (int t = 0; t < kChanSteps; t++) {
        if (FULL || t < avail) {
            /* B and C as 16-byte broadcasts, four steps at a time */
            const float4 b4 = reinterpret_cast<const float4 *>(Brow)[t / 4];
            const float4 c4 = reinterpret_cast<const float4 *>(Crow)[t / 4];
            const float bv = t % 4 == 0 ? b4.x : t % 4 == 1 ? b4.y : t % 4 == 2 ? b4.z : b4.w;
            const float cv = t % 4 == 0 ? c4.x : t % 4 == 1 ? c4.y : t % 4 == 2 ? c4.z : c4.w;
            float ab, bb;
            update_terms<float, M, FAST, Tr::kDeltaU && FAST, BR, Tr::kPolyDeltaG && FAST>(a, a2, ia, dt[t], uv[t],
                                                                                           uv[t], bv, ab, bb, dc);
            h = fmaf(ab, h, bb);
            y[t] += out_part(cv, h);
        }
    }
}

/* One state's tile: its branch (foh: one warp vote per state), then its steps. */
template <class Tr, bool FAST, bool FULL>
__device__ __forceinline__ void chan_state(int avail, float a, float dmin, float dabs, const float (&dt)[kChanSteps],
                                           const float (&uv)[kChanSteps], const float *Brow, const float *Crow,
                                           float &h, float (&y)[kChanSteps]) {
    constexpr int M = Tr::kMethod;
    const float a2 = a_coef<M>(a);
    DCoefs dc{};
    if constexpr (Tr::kPolyDeltaG && FAST) dc = dpoly_coefs<M>(a);
    constexpr bool FAR = Tr::kFohFar && FAST;
    if constexpr (Tr::kFohNear && (FAST || !Tr::kFastTiles)) {
        if (__all_sync(0xffffffffu, run_xmax(dabs, a) < near_max<float>()))
            chan_state_steps<Tr, FAST, FULL, FOH_NEAR>(avail, a, a2, 0.0f, dc, dt, uv, Brow, Crow, h, y);
        else if (FAR && __all_sync(0xffffffffu, run_far(dmin, a)))
            chan_state_steps<Tr, FAST, FULL, FAR ? FOH_FAR : FOH_EXACT>(avail, a, a2, far_inv(a), dc, dt, uv, Brow,
                                                                        Crow, h, y);
        else
            chan_state_steps<Tr, FAST, FULL, FOH_EXACT>(avail, a, a2, 0.0f, dc, dt, uv, Brow, Crow, h, y);
    } else {
        (void)dmin, (void)dabs;
        chan_state_steps<Tr, FAST, FULL, FOH_EXACT>(avail, a, a2, 0.0f, dc, dt, uv, Brow, Crow, h, y);
    }
}

/* Every state of this lane (s, s + P, …) over the tile. */
template <class Tr, int P, bool FAST, bool FULL>
__device__ __forceinline__ void chan_states(int avail, int N, int s, const float *A, float *hs, const ChanRows &rows,
                                            float dmin, float dabs, const float (&dt)[kChanSteps],
                                            const float (&uv)[kChanSteps], float (&y)[kChanSteps]) {
#pragma unroll 1
    for (int n = s; n < N; n += P) {
        float h = hs[n * kChanThreads];
        chan_state<Tr, FAST, FULL>(avail, A[n], dmin, dabs, dt, uv, rows.B + n * rows.bs, rows.C + n * rows.bs, h, y);
        hs[n * kChanThreads] = h;
    }
}

/* The sum over the P lanes of a channel of their partial outputs, scattered:
 * lane s is left with steps s·T/P + i, i < T/P, in y[i]. Each level halves
 * the steps a lane holds: the lanes whose bit o is set keep the upper half
 * and send the lower (the halves' bounds are constants, so y stays in
 * registers). */
template <int P, int LEN = kChanSteps>
__device__ __forceinline__ void chan_reduce_scatter(int s, float (&y)[kChanSteps]) {
    if constexpr (P > 1) {
        constexpr int o = P / 2, H = LEN / 2;
        const bool up = (s & o) != 0;
#pragma unroll
        for (int i = 0; i < H; i++) {
            const float keep = up ? y[i + H] : y[i], send = up ? y[i] : y[i + H];
            y[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
        }
        chan_reduce_scatter<P / 2, H>(s, y);
    }
}

/* The ranges of a warp's Δ over a tile, for the votes: the least and the
 * largest (a NaN Δ, which fminf passes over, makes only NaN exponents, on
 * either path), and whether every Δ·u of the lane's steps is exact
 * (run_du_exact's condition). */
struct ChanRange {
    float dmin, dmax;
    bool du_ok;
};

/* One tile of a lane's channel: the fast vote (every pair of a step and a
 * state of the warp: its Δ range against its states' a·log2e range), the
 * states, and the lane's share of the outputs, written over the staged u. */
template <class Tr, int P, bool FULL, bool CK>
__device__ __forceinline__ void chan_tile(const ScanParams &p, const ChanStage<Tr> &st, const ChanRows &rows, int avail,
                                          int N, int s, int cl, int d, const ChanRange &w, float a2min, float a2max,
                                          const float *A, float *hs) {
    using In = typename Tr::In;
    using Lay = ChanLayout<Tr, P>;
    constexpr int T = kChanSteps;
    float dt[T], uv[T], y[T];
#pragma unroll
    for (int t = 0; t < T; t++) y[t] = 0.0f;
    chan_load_row<float>(rows.dt, dt);
    const float dabs = fabsf(w.dmin) > fabsf(w.dmax) ? fabsf(w.dmin) : fabsf(w.dmax);
    bool fast = false;
    if constexpr (Tr::kFastTiles && FULL)
        fast = __all_sync(0xffffffffu, w.du_ok && run_stable_above(w.dmin, w.dmax, a2min, a2max,
                                                                   Tr::kFastBilinear ? -0x1p20f : -126.0f));
    if (fast) {
        /* the fast input term reads Δ·u (kDeltaU), every other form u */
        if constexpr (Tr::kDeltaU)
            chan_load_row<float>(rows.du, uv);
        else
            chan_load_row<In>(st.u + cl * Lay::RS, uv);
        chan_states<Tr, P, true, FULL>(avail, N, s, A, hs, rows, w.dmin, dabs, dt, uv, y);
    } else {
        chan_load_row<In>(st.u + cl * Lay::RS, uv);
        chan_states<Tr, P, false, FULL>(avail, N, s, A, hs, rows, w.dmin, dabs, dt, uv, y);
    }
    if constexpr (CK) return; /* states only: y is dead, and its arithmetic with it */
    chan_reduce_scatter<P>(s, y);
    /* every lane of the channel has read the staged u before any writes an
     * output over it (a shuffle orders no memory access) */
    __syncwarp();
    constexpr int Q = T / P;
    In *orow = st.u + cl * Lay::RS;
    const In *zrow = st.z + cl * Lay::RS;
#pragma unroll
    for (int i = 0; i < Q; i++) {
        const int t = s * Q + i;
        if (FULL || t < avail) {
            const float zz = p.z ? widen(zrow[t]) : 0.0f;
            const float o = finish_output(y[i], widen(orow[t]), (const float *)p.D, d, p.z != nullptr, zz);
            orow[t] = narrow<In>(o);
        }
    }
}

/* A lane's states entering the sequence (h0, or 0) into hs, and the range
 * of a·log2e over the warp's states for the fast vote (vote_a2). */
template <class Tr, int P>
__device__ __forceinline__ void chan_states_init(const float *A, const float *h0, int N, int s, float *hs, float &a2min,
                                                 float &a2max) {
    a2min = 0.0f, a2max = 0.0f;
    if constexpr (Tr::kFastTiles) a2min = INFINITY, a2max = -INFINITY;
    for (int n = s; n < N; n += P) {
        hs[n * kChanThreads] = h0 ? h0[n] : 0.0f;
        if constexpr (Tr::kFastTiles) {
            const float a2 = vote_a2<Tr>(A[n]);
            a2min = fminf(a2min, a2), a2max = fmaxf(a2max, a2);
        }
    }
    if constexpr (Tr::kFastTiles) warp_min_max(a2min, a2max); /* the warp's range: its votes are the warp's */
}

/* 16-bit B and C of the staged tile widened once per block into float rows
 * (B [N][FS], then C [N][FS]). */
template <class Tr, int P>
__device__ __forceinline__ void chan_widen_bc(const ChanStage<Tr> &cur, float *bcf, int N) {
    constexpr int T = kChanSteps, RS = ChanLayout<Tr, P>::RS;
    for (int i = threadIdx.x; i < N * T; i += kChanThreads) {
        const int n = i / T, t = i % T;
        bcf[n * kChanFStride + t] = widen(cur.B[n * RS + t]);
        bcf[(N + n) * kChanFStride + t] = widen(cur.C[n * RS + t]);
    }
}

/* Δ after bias and softplus, and Δ·u (kDeltaU), each step of the tile once
 * (lane s of a channel the steps t ≡ s mod P) into the channel's float rows,
 * and their ranges over the warp; 0 past the sequence's end. DU: the vote on
 * Δ·u (run_du_exact) whether or not its row is written (the complex kernel
 * forms Δ·u in registers). */
template <class Tr, int P, bool DU = Tr::kDeltaU>
__device__ __forceinline__ ChanRange chan_prepass(const ScanParams &p, const ChanStage<Tr> &cur, float *dtrows,
                                                  float *durows, int avail, int s, int cl, int d) {
    constexpr int RS = ChanLayout<Tr, P>::RS;
    ChanRange w{INFINITY, -INFINITY, true};
    const float lo = Tr::kFastBilinear ? 0x1p-100f : FLT_MIN; /* run_du_exact's bound */
    for (int t = s; t < kChanSteps; t += P) {
        float v = 0.0f, du = 0.0f;
        if (t < avail) {
            v = step_dt<true>(widen(cur.dl[cl * RS + t]), (const float *)p.delta_bias, d, p.softplus);
            w.dmin = fminf(w.dmin, v), w.dmax = fmaxf(w.dmax, v);
            if constexpr (DU) {
                const float uv = widen(cur.u[cl * RS + t]);
                du = v * uv;
                const float dv[1] = {v}, uu[1] = {uv}, dd[1] = {du}; /* run_du_exact's test of one step */
                w.du_ok = w.du_ok && run_du_exact(dv, uu, dd, lo);
            }
        }
        dtrows[cl * kChanFStride + t] = v;
        if constexpr (Tr::kDeltaU) durows[cl * kChanFStride + t] = du;
    }
    warp_min_max(w.dmin, w.dmax);
    return w;
}

/* A thread's place in a block of CB = 128/P channels of one batch and
 * group: lane s of channel cl of the block, the batch b, the block's first
 * channel c0, the channel d, its row r = b·dim + d, the group. */
struct ChanPlace {
    int s, cl, b, c0, d, grp;
    long long r;
};
template <int P>
__device__ __forceinline__ ChanPlace chan_place(const ScanParams &p) {
    constexpr int CB = kChanThreads / P;
    ChanPlace w;
    w.s = (int)threadIdx.x % P, w.cl = (int)threadIdx.x / P;
    const int perBatch = p.dim / CB;
    w.b = (int)blockIdx.x / perBatch, w.c0 = ((int)blockIdx.x % perBatch) * CB, w.d = w.c0 + w.cl;
    w.r = (long long)w.b * p.dim + w.d;
    w.grp = group_of(w.c0, p.dim, p.n_groups);
    return w;
}

/* The kernel: block = CB channels of one batch and group, lane = (channel, s). */
template <class Tr, int P, bool CK>
__global__ void __launch_bounds__(kChanThreads) chan_kernel(const ScanParams p) {
    using In = typename Tr::In;
    using Lay = ChanLayout<Tr, P>;
    constexpr int CB = Lay::CB, RS = Lay::RS, T = kChanSteps;
    static_assert(!Tr::kComplex && std::is_same<typename Tr::Real, float>::value, "real A in float arithmetic");
    extern __shared__ __align__(16) unsigned char smem[];
    const int N = p.dstate, L = p.seqlen;
    const ChanPlace at = chan_place<P>(p);
    const int s = at.s, cl = at.cl, b = at.b, c0 = at.c0, d = at.d, grp = at.grp;
    const long long r = at.r;

    In *const base = reinterpret_cast<In *>(smem);
    /* stage k & 1 (computed, not an array of two: a run-time index would put it in local memory) */
    auto stage_at = [&](int k) {
        In *q = base + (k & 1) * Lay::stage_elems(N);
        return ChanStage<Tr>{q, q + CB * RS, q + 2 * CB * RS, q + 3 * CB * RS, q + 3 * CB * RS + N * RS};
    };
    float *frows = reinterpret_cast<float *>(smem + 2 * Lay::stage_bytes(N));
    float *dtrows = frows;                                               /* [CB][FS] */
    float *durows = frows + CB * kChanFStride;                           /* kDeltaU: [CB][FS] */
    float *bcf = durows + Lay::kDuRows * kChanFStride;                   /* 16-bit inputs: B [N][FS] then C [N][FS] */
    float *hs = frows + Lay::float_rows(N) * kChanFStride + threadIdx.x; /* h[n] at hs[n·kChanThreads] */

    const float *A = (const float *)p.A + (long long)d * N;
    const float *h0 = p.h0 ? (const float *)p.h0 + r * N : nullptr;
    float a2min, a2max;
    chan_states_init<Tr, P>(A, h0, N, s, hs, a2min, a2max);

    const long long rb = ((long long)b * p.dim + c0) * L;
    const In *u0 = (const In *)p.u + rb, *d0 = (const In *)p.delta + rb;
    const In *z0 = p.z && !CK ? (const In *)p.z + rb : nullptr;
    In *out0 = CK ? nullptr : (In *)p.out + rb;
    const long long vb = ((long long)b * p.n_groups + grp) * N * L;
    const In *B0 = (const In *)p.B + vb, *C0 = (const In *)p.C + vb;

    /* CK: the last tile's states enter no tile */
    const int tiles = (L + T - 1) / T - (CK ? 1 : 0);
    if (CK && tiles <= 0) return;
    chan_stage<Tr, P>(stage_at(0), u0, d0, z0, B0, C0, 0, L, N);
    for (int k = 0; k < tiles; k++) {
        const int t0 = k * T, avail = L - t0 < T ? L - t0 : T;
        if (k + 1 < tiles) {
            chan_stage<Tr, P>(stage_at(k + 1), u0, d0, z0, B0, C0, t0 + T, L, N);
            __pipeline_wait_prior(1);
        } else {
            __pipeline_wait_prior(0);
        }
        __syncthreads(); /* tile k has landed for every thread's copies */
        const ChanStage<Tr> cur = stage_at(k);
        ChanRows rows;
        rows.dt = dtrows + cl * kChanFStride;
        if constexpr (Lay::kWiden) {
            chan_widen_bc<Tr, P>(cur, bcf, N);
            rows.B = bcf, rows.C = bcf + N * kChanFStride, rows.bs = kChanFStride;
        } else {
            rows.B = reinterpret_cast<const float *>(cur.B), rows.C = reinterpret_cast<const float *>(cur.C);
            rows.bs = RS;
        }
        const ChanRange w = chan_prepass<Tr, P>(p, cur, dtrows, durows, avail, s, cl, d);
        rows.du = durows + cl * kChanFStride;
        __syncthreads(); /* the float rows are complete */
        if (avail == T)
            chan_tile<Tr, P, true, CK>(p, cur, rows, avail, N, s, cl, d, w, a2min, a2max, A, hs);
        else
            chan_tile<Tr, P, false, CK>(p, cur, rows, avail, N, s, cl, d, w, a2min, a2max, A, hs);
        if constexpr (CK) {
            /* the state entering tile k + 1, for the backward (bwd_chan.cuh):
             * the lane's own column of hs, which it has just written */
            float *cs = (float *)p.chunk_states + (r * (p.chunks - 1) + k) * N;
            for (int n = s; n < N; n += P) cs[n] = hs[n * kChanThreads];
            __syncthreads(); /* the stage is free for tile k + 2 */
            continue;
        }
        __syncthreads(); /* every output of the tile is in the staged u */
        constexpr int E = 16 / (int)sizeof(In), CPR = T / E;
        for (int i = threadIdx.x; i < CB * CPR; i += kChanThreads) {
            const int c = i / CPR, t = t0 + (i % CPR) * E;
            if (t < L)
                __stcs(reinterpret_cast<uint4 *>(out0 + (long long)c * L + t),
                       *reinterpret_cast<const uint4 *>(cur.u + c * RS + (i % CPR) * E));
        }
        __syncthreads(); /* the stage is free for tile k + 2 */
    }
    if (p.last_state && !CK) {
        float *ls = (float *)p.last_state + r * N;
        for (int n = s; n < N; n += P) ls[n] = hs[n * kChanThreads];
    }
}

/* One launch: a block per CB channels of a batch, with the shared memory its
 * layout needs for N states (above 48 KB by the function's opt-in; a
 * failure there surfaces as the launch's error). */
template <class Tr, int P, bool CK = false>
void launch_chan_traits(const ScanParams &p, cudaStream_t s) {
    const size_t smem = ChanLayout<Tr, P>::bytes(p.dstate);
    cudaFuncSetAttribute(chan_kernel<Tr, P, CK>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    const dim3 grid((unsigned)((long long)p.batch * p.dim / ChanLayout<Tr, P>::CB));
    chan_kernel<Tr, P, CK><<<grid, kChanThreads, smem, s>>>(p);
}

/* Real A in float with input type IN: one kernel per method and P. */
template <typename IN>
void launch_chan_t(const ScanParams &p, int P, cudaStream_t s) {
    method_switch(p.method, [&](auto m) {
        using Tr = ScanTraits<float, false, decltype(m)::value, true, IN>;
        if (P == 2)
            launch_chan_traits<Tr, 2>(p, s);
        else
            launch_chan_traits<Tr, 4>(p, s);
    });
}

/* The channel-sequential backward's phase 1 from inputs of type IN: the
 * states a tile apart, no outputs, at the backward's P (4 or 8). */
template <typename IN>
void launch_chan_states_t(const ScanParams &p, int P, cudaStream_t s) {
    method_switch(p.method, [&](auto m) {
        using Tr = ScanTraits<float, false, decltype(m)::value, true, IN>;
        if (P == 8)
            launch_chan_traits<Tr, 8, true>(p, s);
        else
            launch_chan_traits<Tr, 4, true>(p, s);
    });
}

} /* namespace ssmk */

#endif

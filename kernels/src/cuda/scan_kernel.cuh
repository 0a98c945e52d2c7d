/*
 * scan_kernel.cuh — the selective scan, time-parallel within a row.
 *
 * Each warp runs one row (b, d); the row's time runs in tiles of 32·K steps,
 * lane l holding steps t0 + l·K … t0 + l·K + K − 1 of a tile (K: 32 bytes of
 * the element type). For each state n in turn a lane forms its K updates
 * h ← Ā_t·h + b_t (b_t = Δ_t·g_t·B_t·u_t) and composes them into one affine
 * map (Π Ā, h from 0) (pass1, compose_run); an inclusive Kogge–Stone scan of
 * those maps over the lanes (scan_maps: 5 shuffle levels, the state entering
 * the tile composed into lane 0 first) gives each lane the state entering
 * its run, and a second pass over the K stored (Ā, b) adds C_t·h_t to the
 * lane's K outputs (pass2). Outputs are sums over states kept in registers —
 * no reduction across lanes — and the only cross-lane work is the scan. The
 * carry between tiles (zero before the first) is one value per state and row
 * in shared memory, written by the last lane and read by all.
 *
 * Per tile, one warp vote picks the fast path of the real float kernels
 * (ScanTraits::kFastTiles; the forms of scan_terms.cuh), and per state foh's
 * near and far branches; the answers are those of the exact path up to
 * rounding. Full tiles run without bounds checks; only the sequence's last,
 * partial tile checks. u, Δ, z and out, each element of which is touched
 * once, move with the evict-first hint, and each step's softplus is selected
 * rather than branched on (step_dt<true>).
 *
 * The rescan. The scan multiplies Ā over a lane's run and over windows of
 * runs, products that the sequential recurrence never forms, and for an
 * unstable input they can overflow where the state stays finite: Ā = e^388,
 * e^388, then 0 in double, whose product is ∞·0 = NaN while the sequential
 * state is cleared by the 0. ∞ and NaN survive further products, so every
 * product the scan forms that is not finite leaves its lane's last window
 * product (Ap) not finite: one vote per state finds them, and then the
 * states entering the runs are passed from lane to lane instead
 * (entering_state): the sequential recurrence. Where a tile passed its fast
 * vote, every |Ā| ≤ 1 and the vote is left out.
 */
#ifndef SSMK_SCAN_KERNEL_CUH
#define SSMK_SCAN_KERNEL_CUH

#include <float.h>

#include <type_traits>

#include "../ssmk_methods.h"
#include "scan_args.cuh"
#include "scan_ops.cuh"
#include "scan_policy.cuh"
#include "scan_terms.cuh"

namespace ssmk {

/* The launch's arguments, as the kernel reads them (device pointers): the
 * inputs (scan_args.cuh), then the forward's own. */
struct ScanParams : ScanInputs {
    void *out, *last_state;
    const void *h0; /* [rows][dstate] initial state, or NULL: h = 0 */
    /* the backward's phase 1 (NULL in the forward): [rows][chunks − 1][dstate],
     * the state entering chunk c ≥ 1 of `chunk` steps (a multiple of the tile) */
    void *chunk_states;
    int chunk, chunks;
};

/* Whether the state being updated loads the next one (state_update's NX):
 * NEXT_TEST, whether one exists is tested (the last state loads itself
 * again rather than nothing: a load under a condition would keep the old
 * values by copies); NEXT_YES, it exists; NEXT_NO, this is the last state. */
enum { NEXT_TEST, NEXT_YES, NEXT_NO };

/* One row (b, d) of the scan: its arrays, and the range of a·log2e over its
 * states for the tiles' fast vote. */
template <class Tr>
struct ScanRow {
    using In = typename Tr::In;
    using V = typename Tr::V;
    using VIn = typename Tr::VIn;
    const In *u, *delta, *z;
    In *out;
    const V *A;         /* the channel's a, one per state */
    const VIn *Bv, *Cv; /* variable B, C: element (n, t) at n·L + t (nullptr: fixed) */
    const V *Bf, *Cf;   /* fixed B, C: element n */
    V *carry;           /* the state entering the next tile, one per state */
    int L, N, d;
    float a2min, a2max;
};

/* A lane's run of one tile: its steps' Δ (after bias and softplus), u, Δ·u
 * (kDeltaU) and outputs, and the ranges of its Δ. */
template <class Tr>
struct LaneRun {
    using T = typename Tr::Real;
    T dt[Tr::K], uu[Tr::K], du[Tr::K], y[Tr::K];
    T dmin, dmax; /* kFastTiles: the least and largest Δ */
    T dabs;       /* kFohNear: the largest |Δ| (a NaN Δ, which this passes over, gives NaN on both branches) */
    int tl;       /* the run's first step */
    int avail;    /* steps of the run inside the sequence (≤ 0: none) */
};

/* The next state to load: its a, B and C, and its carry. B and C are
 * addressed in Tr::BCCursor units: elements, or bytes where a variable
 * array's input type and a fixed one's weight type differ (16-bit inputs). */
template <class Tr>
struct StateCursor {
    using V = typename Tr::V;
    using P = typename Tr::BCCursor;
    const V *ap;
    const P *bs, *cs;
    V *cy;
    long long bstep, cstep; /* from state n's B (C) to state n + 1's, in P */
};

/* One state's a and runs of B and C (double-buffered in the state loop). */
template <class Tr>
struct StateBuf {
    using V = typename Tr::V;
    V a, b[Tr::K], c[Tr::K];
};

/* A state's run of B or C: K elements of a variable array (of VIn), or its
 * one element of a fixed array (of V) (variable: the array is per step). */
template <class Tr>
__device__ __forceinline__ void load_state_run(bool variable, const LaneRun<Tr> &run, const typename Tr::BCCursor *q,
                                               typename Tr::V (&v)[Tr::K]) {
    if (Tr::kVec || variable) {
        load_run_as<typename Tr::VIn, typename Tr::V, Tr::K, Tr::kVec>(reinterpret_cast<const typename Tr::VIn *>(q),
                                                                       run.avail, v);
    } else {
        const typename Tr::V f = *reinterpret_cast<const typename Tr::V *>(q);
#pragma unroll
        for (int i = 0; i < Tr::K; i++) v[i] = f;
    }
}

/* A state's a and its run of B. */
template <class Tr>
__device__ __forceinline__ void load_b(const ScanRow<Tr> &row, const LaneRun<Tr> &run, const typename Tr::V *ap,
                                       const typename Tr::BCCursor *bs, StateBuf<Tr> &buf) {
    buf.a = *ap;
    load_state_run(row.Bv != nullptr, run, bs, buf.b);
}

/* A state's run of C. */
template <class Tr>
__device__ __forceinline__ void load_c(const ScanRow<Tr> &row, const LaneRun<Tr> &run, const typename Tr::BCCursor *cs,
                                       typename Tr::V (&cv)[Tr::K]) {
    load_state_run(row.Cv != nullptr, run, cs, cv);
}

/* A state's a·log2e as the fast vote counts it (kFastTiles): an a that a
 * fast path cannot take sends its tiles to the exact path (a2 = ∞ fails
 * run_stable_above): bilinear halves a (a_coef), and a subnormal a's half
 * may round; the polynomial Δ·g needs dpoly_row_ok. */
template <class Tr>
__device__ __forceinline__ float vote_a2(float a) {
    float a2 = a_log2e(a);
    if (Tr::kFastBilinear && a != 0.0f && fabsf(a) < 0x1p-125f) a2 = INFINITY;
    if (Tr::kPolyDeltaG && !dpoly_row_ok(a)) a2 = INFINITY;
    return a2;
}

/* lo and hi made the least and the largest over the warp. */
__device__ __forceinline__ void warp_min_max(float &lo, float &hi) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        lo = fminf(lo, __shfl_xor_sync(0xffffffffu, lo, off));
        hi = fmaxf(hi, __shfl_xor_sync(0xffffffffu, hi, off));
    }
}

/* The row's range of a·log2e (kFastTiles), as vote_a2 counts it. */
template <class Tr>
__device__ __forceinline__ void row_a2_range(ScanRow<Tr> &row, int lane) {
    static_assert(Tr::kLanes == 32, "a row's lanes are the warp");
    row.a2min = 0.0f, row.a2max = 0.0f;
    if constexpr (Tr::kFastTiles) {
        row.a2min = INFINITY, row.a2max = -INFINITY;
        for (int n = lane; n < row.N; n += Tr::kLanes) {
            const float a2 = vote_a2<Tr>(row.A[n]);
            row.a2min = fminf(row.a2min, a2);
            row.a2max = fmaxf(row.a2max, a2);
        }
        warp_min_max(row.a2min, row.a2max);
    }
}

/* The lane's run of the tile starting at t0: u, and Δ after bias and
 * softplus (0 past the end, where Ā = 1 and b = 0). */
template <class Tr, bool FULL>
__device__ __forceinline__ void load_tile(const ScanParams &p, const ScanRow<Tr> &row, int t0, int lane,
                                          LaneRun<Tr> &run) {
    using T = typename Tr::Real;
    constexpr int K = Tr::K;
    run.tl = t0 + lane * K;
    run.avail = FULL ? K : row.L - run.tl;
    __syncwarp(); /* the carries written by the last lane (zeros before the first tile) are visible */
    run.dmin = T(0), run.dmax = T(0), run.dabs = T(0);
    load_run_as<typename Tr::In, T, K, Tr::kVec, true>(row.u + run.tl, run.avail, run.uu);
    T dl[K];
    load_run_as<typename Tr::In, T, K, Tr::kVec, true>(row.delta + run.tl, run.avail, dl);
#pragma unroll
    for (int i = 0; i < K; i++) {
        run.dt[i] = FULL || i < run.avail ? step_dt<true>(dl[i], (const T *)p.delta_bias, row.d, p.softplus) : T(0);
        run.y[i] = T(0);
        if constexpr (Tr::kFastTiles) {
            run.dmin = i == 0 ? run.dt[0] : fminf(run.dmin, run.dt[i]);
            run.dmax = i == 0 ? run.dt[0] : fmaxf(run.dmax, run.dt[i]);
        }
    }
    if constexpr (Tr::kFohNear && Tr::kFastTiles) {
        run.dabs = sabs(run.dmin) > sabs(run.dmax) ? sabs(run.dmin) : sabs(run.dmax);
    } else if constexpr (Tr::kFohNear) {
#pragma unroll
        for (int i = 0; i < K; i++) run.dabs = sabs(run.dt[i]) > run.dabs ? sabs(run.dt[i]) : run.dabs;
    }
#pragma unroll
    for (int i = 0; i < K; i++) run.du[i] = Tr::kDeltaU ? run.dt[i] * run.uu[i] : T(0);
}

/* Whether a full tile takes the fast path: every lane's run passed its
 * method's vote. */
template <class Tr>
__device__ __forceinline__ bool tile_is_fast(const ScanRow<Tr> &row, const LaneRun<Tr> &run) {
    using T = typename Tr::Real;
    bool fast = run_stable_above(run.dmin, run.dmax, row.a2min, row.a2max, Tr::kFastBilinear ? -0x1p20f : -126.0f);
    if constexpr (Tr::kDeltaU)
        fast = fast && run_du_exact(run.dt, run.uu, run.du, T(Tr::kFastBilinear ? 0x1p-100f : FLT_MIN));
    /* the ΣΔ of up to 32 runs must stay finite in float: a = 0 would give
     * 0·∞ = NaN where the products are 1 */
    if constexpr (Tr::kExpSum) fast = fast && fabsf(run.dmin) < 1e36f && fabsf(run.dmax) < 1e36f;
    return __all_sync(0xffffffffu, fast);
}

/* Pass 1 on one branch: the run's K updates (Ā, b) of a state. The steps
 * past the end are made identities here, not by Δ = 0 alone, which gives
 * x = 0·a = NaN for an infinite a. */
template <class Tr, bool FAST, bool FULL, int BRANCH>
__device__ __forceinline__ void run_terms(const ScanParams &p, const LaneRun<Tr> &run, typename Tr::V a,
                                          typename Tr::V a2, typename Tr::V ia, const typename Tr::V (&bv)[Tr::K],
                                          const DCoefs &dc, typename Tr::V (&ab)[Tr::K], typename Tr::V (&bb)[Tr::K]) {
    using V = typename Tr::V;
#pragma unroll
    for (int i = 0; i < Tr::K; i++) {
        step_terms<Tr::kMethod, FAST, Tr::kDeltaU && FAST, BRANCH, Tr::kPolyDeltaG && FAST>(
            p.method, a, a2, ia, run.dt[i], run.uu[i], run.du[i], bv[i], ab[i], bb[i], dc);
        if (!FULL && i >= run.avail) {
            ab[i] = vone<V>();
            bb[i] = V{};
        }
    }
}

/* Pass 1 of a state: foh where every |Δ·a| of the tile is below near_max (in
 * a float tile that passed FAST every x is ≤ 0 too) takes phi1_near alone and
 * Ā = 1 + x·φ1, no exp; a float state whose every x is at most −1/2
 * (run_far) takes the far branch, Δ·φ1 = (e^x − 1)/a; every other state and
 * method the exact branch. */
template <class Tr, bool FAST, bool FULL>
__device__ __forceinline__ void pass1(const ScanParams &p, const LaneRun<Tr> &run, typename Tr::V a, typename Tr::V a2,
                                      const typename Tr::V (&bv)[Tr::K], const DCoefs &dc, typename Tr::V (&ab)[Tr::K],
                                      typename Tr::V (&bb)[Tr::K]) {
    using V = typename Tr::V;
    using T = typename Tr::Real;
    constexpr bool FAR = Tr::kFohFar && FAST; /* a float tile that passed FAST: every Δ ≥ 0, a ≤ 0 */
    if constexpr (Tr::kFohNear && (FAST || !Tr::kFastTiles)) {
        if (__all_sync(0xffffffffu, run_xmax(run.dabs, a) < near_max<T>()))
            run_terms<Tr, FAST, FULL, FOH_NEAR>(p, run, a, a2, V{}, bv, dc, ab, bb);
        else if (FAR && __all_sync(0xffffffffu, run_far(run.dmin, a)))
            run_terms<Tr, FAST, FULL, FAR ? FOH_FAR : FOH_EXACT>(p, run, a, a2, far_inv(a), bv, dc, ab, bb);
        else
            run_terms<Tr, FAST, FULL, FOH_EXACT>(p, run, a, a2, V{}, bv, dc, ab, bb);
    } else {
        run_terms<Tr, FAST, FULL, FOH_EXACT>(p, run, a, a2, V{}, bv, dc, ab, bb);
    }
}

/* The ΣΔ of the windows of 1, 2, 4, 8 and 16 runs ending with this lane's
 * (kExpSum on a fast tile; lanes below 2^k − 1 leave wsum[k] unused). The ΣΔ
 * are state-independent: summed once per tile, in double and rounded once,
 * so that an exponent carries one rounding, as a single step's does. */
template <class Tr, bool EXPSUM>
__device__ __forceinline__ void window_sums(const LaneRun<Tr> &run, float (&wsum)[Tr::kLevels]) {
    if constexpr (EXPSUM) {
        double w = 0.0;
#pragma unroll
        for (int i = 0; i < Tr::K; i++) w += (double)run.dt[i];
        wsum[0] = (float)w;
#pragma unroll
        for (int k = 1; k < Tr::kLevels; k++) {
            w += __shfl_up_sync(0xffffffffu, w, 1 << (k - 1));
            wsum[k] = (float)w;
        }
    }
}

/* An affine map h ↦ A·h + h0 of the state: a run's composed updates. */
template <class Tr>
struct StateMap {
    typename Tr::V A, h;
};

/* The composition of the run's updates: the map h ↦ Ap·h + hp, with Ap by
 * products or (EXPSUM) as e^{a·ΣΔ}, and Aw[k] Ā's product over the window of
 * scan level k. */
template <class Tr, bool EXPSUM>
__device__ __forceinline__ StateMap<Tr>
compose_run(const typename Tr::V (&ab)[Tr::K], const typename Tr::V (&bb)[Tr::K], typename Tr::V a2,
            const float (&wsum)[Tr::kLevels], typename Tr::V (&Aw)[Tr::kLevels]) {
    StateMap<Tr> m{ab[0], bb[0]};
    if constexpr (EXPSUM) {
#pragma unroll
        for (int k = 0; k < Tr::kLevels; k++) Aw[k] = window_decay(a2, wsum[k]);
        m.A = Aw[0];
    } else {
        (void)a2, (void)wsum, (void)Aw;
    }
#pragma unroll
    for (int i = 1; i < Tr::K; i++) {
        if constexpr (!EXPSUM) m.A = vmul(ab[i], m.A);
        m.h = vfma(ab[i], m.h, bb[i]);
    }
    return m;
}

/* The inclusive scan of the lanes' maps: m.h becomes the state after this
 * lane's last step. */
template <class Tr, bool EXPSUM>
__device__ __forceinline__ StateMap<Tr> scan_maps(int lane, const typename Tr::V (&Aw)[Tr::kLevels], StateMap<Tr> m) {
    using V = typename Tr::V;
    V Ap = m.A, hp = m.h;
#pragma unroll
    for (int k = 0; k < Tr::kLevels; k++) {
        const int off = 1 << k;
        if constexpr (EXPSUM) {
            const V hq = shfl_up(hp, off);
            if (lane >= off) hp = vfma(Aw[k], hq, hp);
        } else {
            const V Aq = off < Tr::kLanes / 2 ? shfl_up(Ap, off) : Ap;
            const V hq = shfl_up(hp, off);
            if (lane >= off) {
                hp = vfma(Ap, hq, hp);
                if (off < Tr::kLanes / 2) Ap = vmul(Ap, Aq);
            }
        }
    }
    return StateMap<Tr>{Ap, hp};
}

/* The state entering the lane's run: from the scan, or where the scan formed
 * a product of Ā that is not finite, from the previous lane's run, lane by
 * lane (the rescan). hp becomes the state leaving the tile's last lane. */
template <class Tr, bool FAST>
__device__ __forceinline__ typename Tr::V entering_state(int lane, const typename Tr::V (&ab)[Tr::K],
                                                         const typename Tr::V (&bb)[Tr::K], typename Tr::V Ap,
                                                         typename Tr::V &hp, typename Tr::V hin) {
    using V = typename Tr::V;
    V h;
    if (FAST || !__any_sync(0xffffffffu, !vfinite(Ap))) {
        h = shfl_up(hp, 1);
        if (lane == 0) h = hin;
    } else {
        hp = hin;
        h = hin;
#pragma unroll 1
        for (int j = 0; j < Tr::kLanes; j++) {
            if (lane == j) h = hp;
            V t = h;
#pragma unroll
            for (int i = 0; i < Tr::K; i++) t = vfma(ab[i], t, bb[i]);
            hp = shfl_from(t, j);
        }
    }
    return h;
}

/* One state of a tile: pass 1, the scan of the lanes' maps, pass 2 into the
 * outputs, with the next state's loads issued before this state's
 * arithmetic so that their latency (an L2 round trip: B and C are shared by
 * the batch's rows) overlaps it. */
template <class Tr, bool FAST, bool FULL, int NX>
__device__ __forceinline__ void state_update(const ScanParams &p, const ScanRow<Tr> &row, LaneRun<Tr> &run, int lane,
                                             int n, const float (&wsum)[Tr::kLevels], StateCursor<Tr> &at,
                                             const StateBuf<Tr> &cur, StateBuf<Tr> &next) {
    using V = typename Tr::V;
    constexpr int K = Tr::K;
    constexpr bool EXPSUM = Tr::kExpSum && FAST;
    const V a = cur.a;
    V bv[K], cv[K];
#pragma unroll
    for (int i = 0; i < K; i++) bv[i] = cur.b[i];
    if constexpr (Tr::kCAhead) {
#pragma unroll
        for (int i = 0; i < K; i++) cv[i] = cur.c[i];
    } else {
        load_c(row, run, at.cs, cv);
    }
    if constexpr (NX == NEXT_YES) {
        at.ap += 1, at.bs += at.bstep, at.cs += at.cstep;
    } else if constexpr (NX == NEXT_TEST) {
        if (n + 1 < row.N) {
            /* A branch, not selects: if-converted, the compiler keeps the
             * strides' byte offsets live through the loop, and with the
             * registers that takes ptxas issues the next state's C after the
             * scan instead of during it (docs/performance.md). The empty
             * volatile asm is what keeps the branch. */
            asm volatile("");
            at.ap += 1, at.bs += at.bstep, at.cs += at.cstep;
        }
    }
    if (NX != NEXT_NO) {
        load_b(row, run, at.ap, at.bs, next);
        if constexpr (Tr::kCWithB) load_c(row, run, at.cs, next.c);
    }
    if constexpr (Tr::kPinLoads) __syncwarp();
    const V a2 = a_coef<Tr::kMethod>(a);
    DCoefs dc{};
    if constexpr (Tr::kPolyDeltaG && FAST) dc = dpoly_coefs<Tr::kMethod>(a);
    const V hin = *at.cy; /* the state entering the tile */
    V ab[K], bb[K];
    pass1<Tr, FAST, FULL>(p, run, a, a2, bv, dc, ab, bb);
    if constexpr (Tr::kCAfterPass1) {
        if (NX != NEXT_NO) load_c(row, run, at.cs, next.c);
        if constexpr (Tr::kPinLoads) __syncwarp();
    }
    V Aw[Tr::kLevels];
    StateMap<Tr> m = compose_run<Tr, EXPSUM>(ab, bb, a2, wsum, Aw);
    /* Lane 0 composes the state entering the tile into its map — also h = 0
     * before the sequence, so that a non-finite Ā of the first step gives
     * NaN·0 = NaN as the sequential recurrence does. */
    if (lane == 0) m.h = vfma(m.A, hin, m.h);
    m = scan_maps<Tr, EXPSUM>(lane, Aw, m);
    V hp = m.h;
    V h = entering_state<Tr, FAST>(lane, ab, bb, m.A, hp, hin);
    /* Pass 2: the states of the run from the state entering it. */
    __syncwarp(); /* every lane has read carry[n] before the last lane replaces it */
    if (lane == Tr::kLanes - 1) *at.cy = hp;
    at.cy++;
#pragma unroll
    for (int i = 0; i < K; i++) {
        h = vfma(ab[i], h, bb[i]);
        run.y[i] += out_part(cv[i], h);
    }
}

/* Every state of a tile. The real float kernels run the loop unrolled by two,
 * written out, so that the buffers of the next state's loads trade places by
 * the call rather than by copies; with kPeel, the pairs that have a state
 * after them, then the last one or two states, with no test per state. */
template <class Tr, bool FAST, bool FULL>
__device__ __forceinline__ void state_loop(const ScanParams &p, const ScanRow<Tr> &row, LaneRun<Tr> &run, int lane,
                                           StateCursor<Tr> at) {
    float wsum[Tr::kLevels] = {};
    window_sums<Tr, Tr::kExpSum && FAST>(run, wsum);
    const int N = row.N;
    StateBuf<Tr> s0;
    load_b(row, run, at.ap, at.bs, s0);
    if constexpr (Tr::kCAhead) load_c(row, run, at.cs, s0.c);
    if constexpr (Tr::kUnroll2) {
        StateBuf<Tr> s1;
        constexpr int mid = Tr::kPeel ? NEXT_YES : NEXT_TEST, last = Tr::kPeel ? NEXT_NO : NEXT_TEST;
        int n = 0;
#pragma unroll 1
        for (; n + (Tr::kPeel ? 3 : 2) <= N; n += 2) {
            state_update<Tr, FAST, FULL, mid>(p, row, run, lane, n, wsum, at, s0, s1);
            state_update<Tr, FAST, FULL, mid>(p, row, run, lane, n + 1, wsum, at, s1, s0);
        }
        if (Tr::kPeel && n + 2 <= N) {
            state_update<Tr, FAST, FULL, mid>(p, row, run, lane, n, wsum, at, s0, s1);
            state_update<Tr, FAST, FULL, last>(p, row, run, lane, n + 1, wsum, at, s1, s0);
        } else if (Tr::kPeel || n < N) { /* kPeel: N − n is 1 here */
            state_update<Tr, FAST, FULL, last>(p, row, run, lane, n, wsum, at, s0, s1);
        }
    } else {
#pragma unroll 1
        for (int n = 0; n < N; n++) state_update<Tr, FAST, FULL, NEXT_TEST>(p, row, run, lane, n, wsum, at, s0, s0);
    }
}

/* The outputs of the lane's run: the sum over states, then D·u and the gate. */
template <class Tr, bool FULL>
__device__ __forceinline__ void store_tile(const ScanParams &p, const ScanRow<Tr> &row, const LaneRun<Tr> &run) {
    using T = typename Tr::Real;
    constexpr int K = Tr::K;
    if (!(FULL || run.avail > 0)) return;
    T zz[K] = {}, o[K];
    if (row.z) load_run_as<typename Tr::In, T, K, Tr::kVec, true>(row.z + run.tl, run.avail, zz);
#pragma unroll
    for (int i = 0; i < K; i++) {
        const T yy = Tr::kComplex ? complex_output(run.y[i]) : run.y[i];
        o[i] = finish_output(yy, run.uu[i], (const T *)p.D, row.d, row.z != nullptr, zz[i]);
    }
    store_run_as<typename Tr::In, T, K, Tr::kVec, true>(row.out + run.tl, run.avail, o);
}

/* One tile of the row: its states' updates, then (OUT) its outputs. */
template <class Tr, bool FULL, bool OUT = true>
__device__ __forceinline__ void scan_tile(const ScanParams &p, const ScanRow<Tr> &row, int t0, int lane) {
    LaneRun<Tr> run;
    load_tile<Tr, FULL>(p, row, t0, lane, run);
    /* state 0's a and its runs of B and C (or fixed B and C), one state per
     * update. A VEC kernel's B and C are variable: the peeled forwards take
     * the stride as row.L, known so, which shortens their state loops and
     * keeps the 16-bit ones from spilling (docs/performance.md). */
    StateCursor<Tr> at;
    using V = typename Tr::V;
    using P = typename Tr::BCCursor; /* elements, or bytes */
    constexpr long long wv = std::is_same<P, V>::value ? 1 : sizeof(typename Tr::VIn),
                        wf = std::is_same<P, V>::value ? 1 : sizeof(V);
    at.ap = row.A, at.cy = row.carry;
    if constexpr (Tr::kVec && Tr::kPeel && OUT) {
        at.bs = reinterpret_cast<const P *>(row.Bv + run.tl), at.cs = reinterpret_cast<const P *>(row.Cv + run.tl);
        at.bstep = at.cstep = row.L * wv;
    } else {
        at.bs = row.Bv ? reinterpret_cast<const P *>(row.Bv + run.tl) : reinterpret_cast<const P *>(row.Bf);
        at.cs = row.Cv ? reinterpret_cast<const P *>(row.Cv + run.tl) : reinterpret_cast<const P *>(row.Cf);
        at.bstep = row.Bv ? row.L * wv : wf, at.cstep = row.Cv ? row.L * wv : wf;
    }
    if constexpr (Tr::kFastTiles && FULL) {
        if (tile_is_fast(row, run))
            state_loop<Tr, true, FULL>(p, row, run, lane, at);
        else
            state_loop<Tr, false, FULL>(p, row, run, lane, at);
    } else {
        state_loop<Tr, false, FULL>(p, row, run, lane, at);
    }
    if constexpr (OUT) store_tile<Tr, FULL>(p, row, run);
}

/* The row's carry (the state after its tiles so far) to dst[0 … N). */
template <class Tr>
__device__ __forceinline__ void store_carry(const ScanRow<Tr> &row, int lane, typename Tr::V *dst) {
    __syncwarp();
    for (int n = lane; n < row.N; n += Tr::kLanes) dst[n] = row.carry[n];
}

/* The kernel's body: one row per warp. CS: the backward's phase 1 (chunk
 * states, no outputs), an instantiation of its own: the forward's is unchanged. */
template <class Tr, bool CS>
__device__ __forceinline__ void scan_rows(const ScanParams &p) {
    using In = typename Tr::In;
    using V = typename Tr::V;
    using VIn = typename Tr::VIn;
    extern __shared__ __align__(16) unsigned char smem[];
    const int lane = (int)(threadIdx.x & 31), warp = (int)(threadIdx.x >> 5);
    const long long r = (long long)blockIdx.x * kScanWarps + warp;
    if (r >= p.rows) return; /* a whole warp: no shuffle is left waiting */
    ScanRow<Tr> row;
    row.L = p.seqlen, row.N = p.dstate;
    const int b = (int)(r / p.dim);
    row.d = (int)(r % p.dim);
    const int grp = group_of(row.d, p.dim, p.n_groups);
    const long long base = r * row.L;
    row.u = (const In *)p.u + base, row.delta = (const In *)p.delta + base;
    row.z = p.z ? (const In *)p.z + base : nullptr, row.out = (In *)p.out + base;
    row.A = (const V *)p.A + (long long)row.d * row.N;
    const long long vbase = ((long long)b * p.n_groups + grp) * row.N * row.L;
    row.Bv = Tr::kVec || p.is_variable_B ? (const VIn *)p.B + vbase : nullptr;
    row.Cv = Tr::kVec || p.is_variable_C ? (const VIn *)p.C + vbase : nullptr;
    row.Bf = (const V *)p.B + (long long)row.d * row.N, row.Cf = (const V *)p.C + (long long)row.d * row.N;
    row.carry = reinterpret_cast<V *>(smem) + warp * row.N;
    row_a2_range(row, lane);
    /* The carry into the first tile is the initial state. */
    const V *h0 = p.h0 ? (const V *)p.h0 + r * row.N : nullptr;
    for (int n = lane; n < row.N; n += Tr::kLanes) row.carry[n] = h0 ? h0[n] : V{};

    int t0 = 0;
    if constexpr (CS) { /* the carry after every chunk but the last, where the scan stops */
        for (; t0 + Tr::kTile <= (p.chunks - 1) * p.chunk; t0 += Tr::kTile) {
            scan_tile<Tr, true, false>(p, row, t0, lane);
            const int c = (t0 + Tr::kTile) / p.chunk;
            if (c * p.chunk == t0 + Tr::kTile)
                store_carry(row, lane, (V *)p.chunk_states + (r * (p.chunks - 1) + c - 1) * row.N);
        }
    } else {
        for (; t0 + Tr::kTile <= row.L; t0 += Tr::kTile) scan_tile<Tr, true>(p, row, t0, lane);
        if (t0 < row.L) scan_tile<Tr, false>(p, row, t0, lane);
        /* the last lane's state after the last tile is the state after step
         * L − 1 (the steps past the end are identities) */
        if (p.last_state) store_carry(row, lane, (V *)p.last_state + r * row.N);
    }
}

/* The full-precision kernels, and those of the 16-bit input types, for 4
 * blocks of 128 threads per SM (at most 128 registers): their conversions
 * and byte cursors took ptxas to 131–147 otherwise. A minimum of 1 took the
 * fp32 foh and fp64 kernels past 128 (make cuda-check). */
template <class Tr, bool CS = false>
__global__ void __launch_bounds__(kScanThreads) scan_kernel(const ScanParams p) {
    scan_rows<Tr, CS>(p);
}

template <class Tr>
__global__ void __launch_bounds__(kScanThreads, 4) scan_kernel_narrow(const ScanParams p) {
    scan_rows<Tr, false>(p);
}

} /* namespace ssmk */

#endif

/*
 * scan_chan_cplx.cuh — the channel-sequential scan for complex A (fp32
 * inputs): scan_chan.cuh's design with complex states.
 *
 * The row kernel runs complex A as it runs real A: for each state a lane
 * composes its steps' affine maps (two complex products a step), the maps
 * are scanned across the warp (four words a shuffle), and every update takes
 * the method through the run-time table, e^x by exp, sin and cos with their
 * large-argument paths: 6.6 times real A's time. Here, as in scan_chan.cuh,
 * lanes are channels, a channel's N states over P adjacent lanes, time
 * sequential in each lane, so an update is one complex e^x, the input term,
 * h ← Ā·h + Δ·g·B·u (four FFMA) and y += Re(C·h) (two), with B and C read as
 * 16-byte shared-memory broadcasts of two steps.
 *
 * P (4, 8 or 16) is a template argument: the kernel is bound by latency
 * where a scheduler has one warp or two, so more lanes a channel (more warps
 * for the same work, a longer reduction of the outputs over the lanes) pay
 * until the warps suffice; chan_lanes takes P = 8 (docs/performance.md).
 *
 * The method is a compile-time argument (MethodPolicy::kChanComplex says
 * which methods take this kernel). On a fast tile — every x = Δ·a of the
 * warp's steps and states with Re x·log2e in [−126, 0] and |Im x| at most
 * kSincosMax, one vote per tile — Ā = e^x is ex2_normal(Δ·Re a·log2e) times
 * (cos, sin)(Δ·Im a) by sincos_reduced, and the input term is zoh's
 * B·(Δ·u) (g = 1; Δ·u formed once per step, the tile also voting
 * run_du_exact, as the real kernels do) or, for the Taylor methods, the
 * CPU build's ((Δ·g)·B)·u with g = method_complex_g. Other tiles (and foh
 * and bilinear, whose g needs e^x − 1 or a quotient, every tile) take the
 * CPU build's method_complex_m through a call (cplx_terms_exact), so that
 * the unrolled loop is not sixteen copies of sin's and cos's large-argument
 * paths.
 *
 * Staging and the shared-memory layout are scan_chan.cuh's with complex rows
 * of B and C (2T floats and 16 bytes of padding: a quarter-warp's 16-byte
 * reads of four states' rows meet no bank twice), the float row of Δ
 * (softplus'd once per step), and the states h[N][kChanThreads] as float2.
 * Conditions (kernels.cu's chan_lanes): complex A with fp32 inputs,
 * variable B and C in 16-byte runs, N a multiple of P up to kChanMaxStates,
 * a group's channels a multiple of 128/P, no chunk states (the complex
 * backward's phase 1 keeps the row kernel).
 */
#ifndef SSMK_SCAN_CHAN_CPLX_CUH
#define SSMK_SCAN_CHAN_CPLX_CUH

#include "scan_chan.cuh"

namespace ssmk {

/* The largest |Δ·Im a| of a fast tile: sincos_reduced's range. */
constexpr float kSincosMax = 65536.0f;

/* sin θ and cos θ for |θ| ≤ kSincosMax, each within 1.75 u (u = 2^-24) of
 * the true values in the norm of (cos, sin) − e^{iθ} (measured against long
 * double on 2·10^8 arguments and every float within 4 ulp of a multiple of
 * π/2 in range: docs/performance.md), as close as sinf's and cosf's fast
 * paths, without their large-argument path. θ = j·π/2 + r with
 * j = rint(θ·2/π) and π/2 in three parts (Cody and Waite): the first FMA is
 * exact (θ − j·HI is a multiple of 2^-24 below 1 in magnitude), and the
 * others err by well under an ulp of r for |j| ≤ 2^16. sin r and cos r by
 * Cephes's minimax polynomials on [−π/4, π/4] (r past π/4 by |θ|·u at most,
 * where they hold), then the quadrant j mod 4. */
__device__ __forceinline__ void sincos_reduced(float th, float &sn, float &cs) {
    /* j = rint(θ·2/π) by adding 1.5·2^23 (exact in [−2^22, 2^22]), whose low
     * bits are then j as an integer: no conversion instruction, which
     * would share the MUFU unit's issue with the exponential */
    const float jb = fmaf(th, 0x1.45f306p-1f, 0x1.8p23f);
    const float j = jb - 0x1.8p23f;
    float r = fmaf(-j, 0x1.921fb6p+0f, th);
    r = fmaf(-j, -0x1.777a5cp-25f, r);
    r = fmaf(-j, -0x1.ee59dap-50f, r);
    const float z = r * r;
    const float ps = fmaf(fmaf(-1.9515295891e-4f, z, 8.3321608736e-3f), z, -1.6666654611e-1f);
    const float s = fmaf(ps * z, r, r);
    const float pc = fmaf(fmaf(2.443315711809948e-5f, z, -1.388731625493765e-3f), z, 4.166664568298827e-2f);
    const float c = fmaf(pc * z, z, fmaf(-0.5f, z, 1.0f));
    const int q = __float_as_int(jb); /* θ in quadrant q mod 4: the low bits of jb are j's */
    const float sv = (q & 1) ? c : s, cv = (q & 1) ? s : c;
    sn = (q & 2) ? -sv : sv;
    cs = ((q + 1) & 2) ? -cv : cv;
}

/* (Ā, g) of method M at x by the CPU build's arithmetic: a call, not
 * inlined, on the tiles the fast vote refuses. */
struct CplxTerms {
    cplx<float> ab, g;
};
template <int M>
__device__ __noinline__ CplxTerms cplx_terms_exact(cplx<float> x) {
    CplxTerms t;
    method_complex_m<M>(x, t.ab, t.g);
    return t;
}

/* Whether method M's fast tiles exist: Ā = e^x and g a polynomial in x
 * (zoh, poly, highorder, rk4); foh's φ1 and bilinear's quotients take the
 * exact path on every tile. */
template <int M>
constexpr bool cplx_fast_method() {
    return uses_exp<M>() && !MethodPolicy<M>::kFohBranches;
}

/* Whether method M's fast tiles form the input term as B·(Δ·u): g = 1
 * (zoh), Δ·u formed once per step where run_du_exact's vote holds, two
 * products an update instead of the CPU build's ((Δ·g)·B)·u, whose complex
 * g costs four more. */
template <int M>
constexpr bool cplx_delta_u() {
    return MethodPolicy<M>::kUnitG && cplx_fast_method<M>();
}

/* One update's (Ā, Δ·g·B·u). FAST: e^x from ex2_normal and sincos_reduced
 * (ar2 = Re a·log2e), g by method_complex_g, and where cplx_delta_u the
 * input term B·u with u = Δ·u; else cplx_terms_exact. */
template <int M, bool FAST>
__device__ __forceinline__ void cplx_update_terms(cplx<float> a, float ar2, float dt, float u, cplx<float> bv,
                                                  cplx<float> &ab, cplx<float> &bb) {
    const cplx<float> x = cscale(a, dt);
    cplx<float> g;
    if constexpr (FAST) {
        const float e = ex2_normal(dt * ar2);
        float sn, cs;
        sincos_reduced(x.im, sn, cs);
        ab = cmake(e * cs, e * sn);
        if constexpr (cplx_delta_u<M>()) {
            bb = cscale(bv, u);
            return;
        }
        g = method_complex_g<M>(x);
    } else {
        (void)ar2;
        const CplxTerms t = cplx_terms_exact<M>(x);
        ab = t.ab, g = t.g;
    }
    bb = cscale(cmul(cscale(g, dt), bv), u);
}

/* The shared-memory layout for N states: two stage buffers (u, Δ, z: CB
 * rows of RS floats; B, C: N complex rows of RSC floats), the float rows of
 * Δ, the states. */
template <int P>
struct ChanCplxLayout {
    static constexpr int CB = kChanThreads / P;
    static constexpr int RS = chan_row_stride<float>();
    static constexpr int RSC = 2 * kChanSteps + 4;
    __host__ __device__ static size_t stage_floats(int N) { return (size_t)3 * CB * RS + (size_t)2 * N * RSC; }
    __host__ __device__ static size_t bytes(int N) {
        return (2 * stage_floats(N) + (size_t)CB * kChanFStride) * sizeof(float) +
               (size_t)N * kChanThreads * sizeof(float2);
    }
};

/* One stage: u, Δ, z rows, then B and C's complex rows. */
struct ChanCplxStage {
    float *u, *dl, *z, *B, *C;
};

/* Tile t0 … t0 + T − 1 into stage st (scan_chan.cuh's chan_stage with
 * complex rows of B and C: row n of the group starts at complex element
 * n·L; 64-bit offsets, their floats reaching 2·N·L). */
template <int P>
__device__ __forceinline__ void chan_cplx_stage(const ChanCplxStage &st, const float *u0, const float *d0,
                                                const float *z0, const float *B0, const float *C0, int t0, int L,
                                                int N) {
    using Lay = ChanCplxLayout<P>;
    constexpr int CPC = 2 * kChanSteps / 4; /* chunks of a complex row */
    chan_stage_rows<float, long long, Lay::CB, Lay::RS>(st.u, st.dl, st.z, u0, d0, z0, t0, L);
    for (int i = threadIdx.x; i < N * CPC; i += kChanThreads) {
        const int n = i / CPC, q = (i % CPC) * 4, t = t0 + q / 2; /* a chunk: two complex steps */
        const bool in = t < L;
        const long long g = 2 * ((long long)n * L + (in ? t : 0));
        const int o = n * Lay::RSC + q;
        chan_copy16(st.B + o, B0 + g, in);
        chan_copy16(st.C + o, C0 + g, in);
    }
    __pipeline_commit();
}

/* The T updates of one state: h ← Ā·h + Δ·g·B·u, y[t] += Re(C·h). */
template <int M, bool FAST, bool FULL>
__device__ __forceinline__ void chan_cplx_steps(int avail, cplx<float> a, const float (&dt)[kChanSteps],
                                                const float (&uv)[kChanSteps], const float *Brow, const float *Crow,
                                                cplx<float> &h, float (&y)[kChanSteps]) {
    const float ar2 = a_log2e(a.re);
#pragma unroll
    for (int t = 0; t < kChanSteps; t++) {
        if (FULL || t < avail) {
            const float4 b4 = reinterpret_cast<const float4 *>(Brow)[t / 2];
            const float4 c4 = reinterpret_cast<const float4 *>(Crow)[t / 2];
            const cplx<float> bv = t % 2 == 0 ? cmake(b4.x, b4.y) : cmake(b4.z, b4.w);
            const cplx<float> cv = t % 2 == 0 ? cmake(c4.x, c4.y) : cmake(c4.z, c4.w);
            cplx<float> ab, bb;
            cplx_update_terms<M, FAST>(a, ar2, dt[t], uv[t], bv, ab, bb);
            /* Ā·h + b and y + Re(C·h) as chains of FFMA: each part rounded
             * twice, as the CPU build's products and sums round it */
            h = cmake(fmaf(ab.re, h.re, fmaf(-ab.im, h.im, bb.re)), fmaf(ab.re, h.im, fmaf(ab.im, h.re, bb.im)));
            y[t] = fmaf(cv.re, h.re, fmaf(-cv.im, h.im, y[t]));
        }
    }
}

/* Every state of lane s over the tile (the state in shared memory between
 * tiles, one load and one store per state and tile). */
template <int M, int P, bool FAST, bool FULL>
__device__ __forceinline__ void chan_cplx_states(int avail, int N, int s, const cplx<float> *A, float2 *hs,
                                                 const float *B, const float *C, const float (&dt)[kChanSteps],
                                                 const float (&uv)[kChanSteps], float (&y)[kChanSteps]) {
    constexpr int RSC = ChanCplxLayout<P>::RSC;
#pragma unroll 1
    for (int n = s; n < N; n += P) {
        const float2 hv = hs[n * kChanThreads];
        cplx<float> h = cmake(hv.x, hv.y);
        chan_cplx_steps<M, FAST, FULL>(avail, A[n], dt, uv, B + n * RSC, C + n * RSC, h, y);
        hs[n * kChanThreads] = make_float2(h.re, h.im);
    }
}

/* The kernel: block = 128/P channels of one batch and group, lane = (channel, s).
 * Three blocks an SM, so up to 168 registers a thread: held to 128 (four
 * blocks), ptxas spilled the staging's addresses, and the kernel took 44%
 * longer at 8×512 channels and 3% less at 8×2048 (docs/performance.md). */
template <int M, int P>
__global__ void __launch_bounds__(kChanThreads, 3) chan_cplx_kernel(const ScanParams p) {
    using Lay = ChanCplxLayout<P>;
    using Tr = ScanTraits<float, true, kComplexTable, true, float>; /* chan_prepass's view of the rows */
    constexpr int CB = Lay::CB, RS = Lay::RS, T = kChanSteps;
    extern __shared__ __align__(16) unsigned char smem[];
    const int N = p.dstate, L = p.seqlen;
    const ChanPlace at = chan_place<P>(p);
    const int s = at.s, cl = at.cl, b = at.b, c0 = at.c0, d = at.d, grp = at.grp;
    const long long r = at.r;

    float *const base = reinterpret_cast<float *>(smem);
    auto stage_at = [&](int k) {
        float *q = base + (k & 1) * Lay::stage_floats(N);
        return ChanCplxStage{q, q + CB * RS, q + 2 * CB * RS, q + 3 * CB * RS, q + 3 * CB * RS + N * Lay::RSC};
    };
    float *dtrows = base + 2 * Lay::stage_floats(N);                                   /* [CB][FS] */
    float2 *hs = reinterpret_cast<float2 *>(dtrows + CB * kChanFStride) + threadIdx.x; /* h[n] at hs[n·128] */

    const cplx<float> *A = (const cplx<float> *)p.A + (long long)d * N;
    const cplx<float> *h0 = p.h0 ? (const cplx<float> *)p.h0 + r * N : nullptr;
    /* the warp's ranges of Re a·log2e and |Im a| for the fast vote */
    float a2min = INFINITY, a2max = -INFINITY, aimax = 0.0f;
    for (int n = s; n < N; n += P) {
        hs[n * kChanThreads] = h0 ? make_float2(h0[n].re, h0[n].im) : make_float2(0.0f, 0.0f);
        const float a2 = a_log2e(A[n].re);
        a2min = fminf(a2min, a2), a2max = fmaxf(a2max, a2), aimax = fmaxf(aimax, fabsf(A[n].im));
    }
    warp_min_max(a2min, a2max);
    float ailo = -aimax;
    warp_min_max(ailo, aimax);

    const long long rb = ((long long)b * p.dim + c0) * L;
    const float *u0 = (const float *)p.u + rb, *d0 = (const float *)p.delta + rb;
    const float *z0 = p.z ? (const float *)p.z + rb : nullptr;
    float *out0 = (float *)p.out + rb;
    const long long vb = 2 * ((long long)b * p.n_groups + grp) * N * L; /* floats */
    const float *B0 = (const float *)p.B + vb, *C0 = (const float *)p.C + vb;

    const int tiles = (L + T - 1) / T;
    chan_cplx_stage<P>(stage_at(0), u0, d0, z0, B0, C0, 0, L, N);
    for (int k = 0; k < tiles; k++) {
        const int t0 = k * T, avail = L - t0 < T ? L - t0 : T;
        if (k + 1 < tiles) {
            chan_cplx_stage<P>(stage_at(k + 1), u0, d0, z0, B0, C0, t0 + T, L, N);
            __pipeline_wait_prior(1);
        } else {
            __pipeline_wait_prior(0);
        }
        __syncthreads(); /* tile k has landed for every thread's copies */
        const ChanCplxStage cur = stage_at(k);
        const ChanStage<Tr> view{cur.u, cur.dl, cur.z, cur.B, cur.C};
        const ChanRange w = chan_prepass<Tr, P, cplx_delta_u<M>()>(p, view, dtrows, nullptr, avail, s, cl, d);
        __syncthreads(); /* the Δ rows are complete */
        float dt[T], uv[T], y[T];
#pragma unroll
        for (int t = 0; t < T; t++) y[t] = 0.0f;
        chan_load_row<float>(dtrows + cl * kChanFStride, dt);
        chan_load_row<float>(cur.u + cl * RS, uv);
        bool fast = false;
        if constexpr (cplx_fast_method<M>())
            fast = avail == T && __all_sync(0xffffffffu, (!cplx_delta_u<M>() || w.du_ok) &&
                                                             run_stable_above(w.dmin, w.dmax, a2min, a2max, -126.0f) &&
                                                             w.dmax * aimax <= kSincosMax);
        if (fast) {
            if constexpr (cplx_delta_u<M>()) {
#pragma unroll
                for (int t = 0; t < T; t++) uv[t] = dt[t] * uv[t]; /* Δ·u, the product the prepass voted on */
            }
            chan_cplx_states<M, P, cplx_fast_method<M>(), true>(avail, N, s, A, hs, cur.B, cur.C, dt, uv, y);
        } else if (avail == T)
            chan_cplx_states<M, P, false, true>(avail, N, s, A, hs, cur.B, cur.C, dt, uv, y);
        else
            chan_cplx_states<M, P, false, false>(avail, N, s, A, hs, cur.B, cur.C, dt, uv, y);
        chan_reduce_scatter<P>(s, y);
        __syncwarp(); /* every lane of the channel has read the staged u before any writes over it */
        constexpr int Q = T / P;
        float *orow = cur.u + cl * RS;
        const float *zrow = cur.z + cl * RS;
#pragma unroll
        for (int i = 0; i < Q; i++) {
            const int t = s * Q + i;
            if (t < avail) {
                const float zz = p.z ? zrow[t] : 0.0f;
                orow[t] = finish_output(complex_output(y[i]), orow[t], (const float *)p.D, d, p.z != nullptr, zz);
            }
        }
        __syncthreads(); /* every output of the tile is in the staged u */
        constexpr int CPR = T / 4;
        for (int i = threadIdx.x; i < CB * CPR; i += kChanThreads) {
            const int c = i / CPR, t = t0 + (i % CPR) * 4;
            if (t < L)
                __stcs(reinterpret_cast<float4 *>(out0 + (long long)c * L + t),
                       *reinterpret_cast<const float4 *>(cur.u + c * RS + (i % CPR) * 4));
        }
        __syncthreads(); /* the stage is free for tile k + 2 */
    }
    if (p.last_state) {
        cplx<float> *ls = (cplx<float> *)p.last_state + r * N;
        for (int n = s; n < N; n += P) {
            const float2 hv = hs[n * kChanThreads];
            ls[n] = cmake(hv.x, hv.y);
        }
    }
}

/* One launch of method M's kernel with P lanes a channel. */
template <int M, int P>
void launch_chan_cplx_mp(const ScanParams &p, cudaStream_t s) {
    const size_t smem = ChanCplxLayout<P>::bytes(p.dstate);
    cudaFuncSetAttribute(chan_cplx_kernel<M, P>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    const dim3 grid((unsigned)((long long)p.batch * p.dim / ChanCplxLayout<P>::CB));
    chan_cplx_kernel<M, P><<<grid, kChanThreads, smem, s>>>(p);
}

} /* namespace ssmk */

#endif

/*
 * backward.cu — the CUDA build's backward pass (SSMK_CAP_BACKWARD).
 *
 * Both recurrences of the backward are affine,
 *
 *   h_t = Ā_t·h_{t−1} + β_t                  (β = Δ·g·B·u)
 *   λ_t = conj(Ā_{t+1})·λ_{t+1} + c_t        (c = k·dy·conj(C), λ = ∂L/∂h)
 *
 * so they are scans of affine maps, as in the forward kernel. A thread
 * block holds R rows (channels of one batch and group); a row's threads
 * each own a run of K consecutive steps of a chunk of TPR·K steps, and a
 * thread loops over the states. For one state the thread forms its run's
 * Ā and β once, composes them into one map, and the row's maps are scanned
 * across its threads (shuffles within a warp, shared memory across warps)
 * to give each run its starting state; the states of the run are then
 * recomputed in registers. The adjoint runs the other way alike, and its
 * sequential pass over the run forms every gradient term of the step with
 * the derivatives of the method's coefficients (ssmk_derivs.h). The run's
 * row values (Δ, u, dy) wait in shared memory, so that registers hold the
 * states; the sums over states of a step (du, dΔ, and y for dz) stay in the
 * thread's registers; dA and constant dB/dC are summed per warp and kept per warp
 * in shared memory until the end of the row (then summed over batch in a
 * fixed order by reduce_rows); variable dB and dC, sums over a group's
 * channels, are written by each row to a shared tile, summed over the
 * block's rows and added to global memory with coalesced atomics, whose
 * order varies: the capabilities declare SSMK_CAP_BWD_ATOMIC.
 *
 * A row longer than a chunk is run in two phases: forward over the chunks,
 * by the forward's scan kernel in the instantiation that writes the state
 * entering every chunk into the scratch hS instead of outputs (launched
 * first, launch_backward), then this kernel backward over the chunks with
 * the adjoint carried from one to the next. Steps past seqlen in the last chunk have Δ = u = dout = 0, which
 * makes them identity maps with no gradient, and are never written. A plan
 * on saved states (ssmk_plan_create_bwd_saved) runs phase 1 once, when it
 * is created, as a training step's forward would save those states, and
 * the second phase alone at each launch (BwdStage).
 *
 * The 16-bit input types (SSMK_CAP_BWD_NARROW, real A) run the float
 * kernels: they read u, Δ, z and dout and write du, ddelta and dz in the
 * input type themselves (BwdParams.in16, in the loads and stores made once
 * per chunk), while variable B and C, small beside the rows, are widened
 * into the scratch and their gradients, summed there in float, rounded
 * once after the kernel (launch_backward_narrow).
 *
 * The block's parameters, shared memory and data movement are in
 * bwd_block.cuh; the maps, scans and coefficients in bwd_ops.cuh.
 *
 * That is the row design. Where the shape allows and favours it
 * (chan_backward_lanes), the channel-sequential design (bwd_chan.cuh) runs
 * instead: its phase 1 is the channel forward writing the state entering
 * every tile of 16 steps, into the same scratch (bwd_scratch_bytes sizes it
 * for both).
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "../ssmk_derivs.h"
#include "../ssmk_host.h"
#include "../ssmk_methods.h"
#include "../ssmk_narrow.h"
#include "bwd_block.cuh"
#include "bwd_ops.cuh"
#include "cuda_host.h"
#include "scan_chan.cuh"
#include "static_switch.cuh"

namespace ssmk {

namespace {

using namespace bwd;

constexpr int kThreads = 256; /* threads per block */
constexpr int kMaxTPR = 128;  /* threads per row (chunk = TPR·K steps) */
/* Phase 2, one chunk: the states of every run recomputed, the adjoint run
 * back, and the gradient terms; the sums over states in s_, gxs, ys. */
template <typename T, typename V, int M, int K>
__device__ void chunk_grads(const BwdParams &p, const Place &q, const Smem<T, V> &s, int c, const Runs<T, V, K> &run,
                            DtRange<T> range, T (&sl)[K], T (&gxs)[K], T (&ys)[K]) {
    constexpr bool kComplex = !std::is_same<T, V>::value;
    const T kk = kComplex ? T(2) : T(1);
    const int N = p.dstate, W = blockDim.x / 32, WR = p.tpr / 32, t0 = c * p.chunk + q.j * K;
    const V *Bp = (const V *)p.B, *Cp = (const V *)p.C;
    V *mu_in = s.mu + (c & 1) * p.R * N, *mu_out = s.mu + ((c + 1) & 1) * p.R * N;
    for (int n = 0; n < N; n++) {
        const V a = ((const V *)p.A)[(long long)q.d * N + n];
        /* foh's side of 1/2 for the thread's run: per thread, so only the
         * loops over the run (no barrier in them) are chosen by it */
        const FohBranch br = run_branch<M>(a, range);
        V ab[K], h[K], gk[keeps_g<M, V>() ? K : 1];
        Aff<V> f = aff_id<V>();
        {
            T dt[K], uu[K];
            V bv[K];
            sload<T, K>(run.dt, dt);
            sload<T, K>(run.uu, uu);
            load_bc<V, K>(p, q, Bp, p.is_variable_B, p.vec_b, n, t0, bv);
            V g[K];
            run_coefs_on<M, T, K>(br, a, range, dt, ab, g);
#pragma unroll
            for (int k = 0; k < K; k++) {
                h[k] = vscale(vmul(g[k], bv[k]), dt[k] * uu[k]); /* β until the states are known */
                f = then(f, Aff<V>{ab[k], h[k]});
                if constexpr (keeps_g<M, V>()) gk[k] = g[k];
            }
        }
        f = scan_fwd(f, q.lane);
        const Aff<V> fx = excl_fwd(f, q.lane);
        if (q.lane == 31) s.fw[q.wb] = f;
        __syncthreads();
        if (n > 0 && (p.is_variable_B || p.is_variable_C)) flush_tiles<T, V, K>(p, q, s, c, n - 1);
        V h0 = c > 0  ? ((const V *)p.hS)[(q.r * (p.chunks - 1) + c - 1) * N + n]
               : p.h0 ? ((const V *)p.h0)[q.r * N + n]
                      : V{};
        for (int w = 0; w < q.wr; w++) h0 = apply(s.fw[q.lr * WR + w], h0);
        h0 = apply(fx, h0);
        V hp = h0;
#pragma unroll
        for (int k = 0; k < K; k++) hp = h[k] = vadd(vmul(ab[k], hp), h[k]);
        Aff<V> rb = aff_id<V>();
        {
            T dy[K];
            V cv[K];
            sload<T, K>(run.dy, dy);
            load_bc<V, K>(p, q, Cp, p.is_variable_C, p.vec_c, n, t0, cv);
#pragma unroll
            for (int k = K - 1; k >= 0; k--)
                rb = then(rb, Aff<V>{vconj(ab[k]), vmul(vconj(ab[k]), vscale(vconj(cv[k]), kk * dy[k]))});
        }
        rb = scan_bwd(rb, q.lane);
        const Aff<V> rx = excl_bwd(rb, q.lane);
        if (q.lane == 0) s.bw[q.wb] = rb;
        __syncthreads();
        V mu = mu_in[q.lr * N + n];
        for (int w = WR - 1; w > q.wr; w--) mu = apply(s.bw[q.lr * WR + w], mu);
        mu = apply(rx, mu);
        V dA{}, dBc{}, dCc{};
        T dt[K], uu[K], dy[K];
        V bv[K], cv[K];
        sload<T, K>(run.dt, dt);
        sload<T, K>(run.uu, uu);
        sload<T, K>(run.dy, dy);
        load_bc<V, K>(p, q, Bp, p.is_variable_B, p.vec_b, n, t0, bv);
        load_bc<V, K>(p, q, Cp, p.is_variable_C, p.vec_c, n, t0, cv);
        foh_branch_switch(br, [&](auto branch) {
            constexpr int Br = decltype(branch)::value;
#pragma unroll
            for (int k = K - 1; k >= 0; k--) {
                const V lam = vadd(mu, vscale(vconj(cv[k]), kk * dy[k]));
                V g, dab, dg;
                if constexpr (keeps_g<M, V>()) g = gk[k];
                coef_d<M, Br>(a, dt[k], ab[k], g, dab, dg);
                const T dtu = dt[k] * uu[k];
                const V hprev = k > 0 ? h[k - 1] : h0;
                const V dC = vscale(vconj(h[k]), kk * dy[k]), dB = vscale(vmul(vconj(g), lam), dtu);
                const V lgb = vmul(lam, vconj(vmul(g, bv[k])));
                V gx = vmul(vconj(dab), vmul(vconj(hprev), lam));
                /* a constant g (zoh's): no term, rather than one multiplied by 0 */
                if constexpr (!MethodPolicy<M>::kUnitG)
                    gx = vadd(gx, vscale(vmul(vconj(dg), vmul(vconj(bv[k]), lam)), dtu));
                sl[k] += vre(lgb);
                gxs[k] += vre(vmul(gx, vconj(a)));
                ys[k] += vre(vmul(cv[k], h[k]));
                dA = vadd(dA, vscale(gx, dt[k]));
                const int ti = (q.lr * p.tpr + q.j) * (K + 1) + k;
                if (p.is_variable_C)
                    s.tC[ti] = dC;
                else
                    dCc = vadd(dCc, dC);
                if (p.is_variable_B)
                    s.tB[ti] = dB;
                else
                    dBc = vadd(dBc, dB);
                mu = vmul(vconj(ab[k]), lam);
            }
        });
        if (q.j == 0) {
            if (c > 0)
                mu_out[q.lr * N + n] = mu;
            else if (p.dinit)
                ((V *)p.dinit)[q.r * N + n] = mu;
        }
        dA = warp_sum(dA);
        if (!p.is_variable_B) dBc = warp_sum(dBc);
        if (!p.is_variable_C) dCc = warp_sum(dCc);
        if (q.lane == 0) {
            s.accA[n * W + q.wb] = vadd(s.accA[n * W + q.wb], dA);
            if (!p.is_variable_B) s.accB[n * W + q.wb] = vadd(s.accB[n * W + q.wb], dBc);
            if (!p.is_variable_C) s.accC[n * W + q.wb] = vadd(s.accC[n * W + q.wb], dCc);
        }
    }
    if (p.is_variable_B || p.is_variable_C) {
        __syncthreads();
        flush_tiles<T, V, K>(p, q, s, c, N - 1);
    }
}

template <typename T, typename V, int M, int K>
/* Two blocks of 256 threads per SM for the float kernels (at most 128
 * registers: the real one's eight steps per thread then spill about 90 bytes,
 * which costs less than the one block per SM that 230 registers left; complex
 * foh's four fit without a spill where it took 139 unbounded). The double
 * kernels (178–238 registers) would spill 160–460 bytes: one block. */
__global__ void __launch_bounds__(kThreads, std::is_same<T, float>::value ? 2 : 1) scan_bwd(BwdParams p) {
    constexpr bool kComplex = !std::is_same<T, V>::value;
    const T kk = kComplex ? T(2) : T(1);
    extern __shared__ __align__(16) unsigned char smem[];
    const int N = p.dstate, L = p.seqlen, W = blockDim.x / 32, WR = p.tpr / 32;
    Smem<T, V> s;
    smem_layout<T, V>(W, p.R, N, p.R * p.tpr * (K + 1), K + kPad, smem, &s);
    const Place q = place_of(p);
    const Runs<T, V, K> run(s);
    for (int i = threadIdx.x; i < p.R * p.tpr * (K + 1); i += blockDim.x) s.tB[i] = s.tC[i] = V{};
    for (int i = threadIdx.x; i < N * W; i += blockDim.x) s.accA[i] = s.accB[i] = s.accC[i] = V{};
    V *mu_last = s.mu + ((p.chunks - 1) & 1) * p.R * N;
    for (int n = q.j; n < N; n += p.tpr) mu_last[q.lr * N + n] = p.dlast ? ((const V *)p.dlast)[q.r * N + n] : V{};
    __syncthreads();
    const T Dd = p.D ? ((const T *)p.D)[q.d] : T(0);
    T dD = T(0), dBias = T(0);
    for (int c = p.chunks - 1; c >= 0; c--) {
        const int t0 = c * p.chunk + q.j * K;
        T sl[K], gxs[K], ys[K];
        const DtRange<T> range = load_row<T, K>(p, q, t0, run.dt, run.uu, run.dy);
#pragma unroll
        for (int k = 0; k < K; k++) sl[k] = gxs[k] = ys[k] = T(0);
        chunk_grads<T, V, M, K>(p, q, s, c, run, range, sl, gxs, ys);
        T dt[K], uu[K], dy[K];
        sload<T, K>(run.dt, dt);
        sload<T, K>(run.uu, uu);
        sload<T, K>(run.dy, dy);
        const long long base = q.r * L;
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int t = t0 + k;
            if (t >= L) continue;
            const T v = ld_in<T>(p, p.delta, base + t) + (p.delta_bias ? ((const T *)p.delta_bias)[q.d] : T(0));
            const T dsp = step_dt_deriv(v, p.softplus);
            const T ddt = (sl[k] * uu[k] + gxs[k]) * dsp;
            st_in<T>(p, p.du, base + t, sl[k] * dt[k] + dy[k] * Dd);
            st_in<T>(p, p.ddelta, base + t, ddt);
            if (p.z) {
                const T z = ld_in<T>(p, p.z, base + t), sig = ssigmoid(z);
                const T dzf = ld_in<T>(p, p.dout, base + t) * sgate_deriv(z, sig);
                st_in<T>(p, p.dz, base + t, (kk * ys[k] + Dd * uu[k]) * dzf);
            }
            dD += dy[k] * uu[k];
            dBias += ddt;
        }
    }
    dD = warp_sum(dD);
    dBias = warp_sum(dBias);
    if (q.lane == 0) s.red[q.wb] = dD, s.red[W + q.wb] = dBias;
    __syncthreads();
    for (int i = threadIdx.x; i < p.R * N; i += blockDim.x) {
        const int lr = i / N, n = i % N;
        const long long r = (long long)blockIdx.x * p.R + lr;
        V a{}, b{}, c{};
        for (int w = 0; w < WR; w++) {
            a = vadd(a, s.accA[n * W + lr * WR + w]);
            b = vadd(b, s.accB[n * W + lr * WR + w]);
            c = vadd(c, s.accC[n * W + lr * WR + w]);
        }
        ((V *)p.pA)[r * N + n] = a;
        if (!p.is_variable_B) ((V *)p.pB)[r * N + n] = b;
        if (!p.is_variable_C) ((V *)p.pC)[r * N + n] = c;
    }
    if (threadIdx.x < p.R) {
        const long long r = (long long)blockIdx.x * p.R + threadIdx.x;
        T sd = T(0), sb = T(0);
        for (int w = 0; w < WR; w++) sd += s.red[threadIdx.x * WR + w], sb += s.red[W + threadIdx.x * WR + w];
        if (p.pD) ((T *)p.pD)[r] = sd;
        if (p.pBias) ((T *)p.pBias)[r] = sb;
    }
}

template <typename V>
void reduce(const void *part, void *out, const BwdParams &p, int per, cudaStream_t s) {
    const long long blocks = ((long long)p.dim * per + 255) / 256;
    reduce_rows<V>
        <<<(unsigned)(blocks < 4096 ? blocks : 4096), 256, 0, s>>>((const V *)part, (V *)out, p.dim, per, p.batch);
}

/* Steps per thread: the fp32 real kernel holds about eight arrays of K
 * values in registers (the row values live in shared memory). */
constexpr int items_for(bool f32, bool is_complex) { return f32 && !is_complex ? 8 : 4; }
template <typename T, typename V>
constexpr int items() {
    return items_for(std::is_same<T, float>::value, !std::is_same<T, V>::value);
}

template <typename T, typename V, int M>
int32_t launch_m(const BwdParams &p, cudaStream_t s) {
    constexpr int K = items<T, V>();
    const int threads = p.tpr * p.R;
    const size_t bytes =
        smem_layout<T, V>(threads / 32, p.R, p.dstate, p.R * p.tpr * (K + 1), K + kPad, nullptr, nullptr);
    auto kern = scan_bwd<T, V, M, K>;
    if (bytes > 48 * 1024) CU(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
    kern<<<(unsigned)(p.rows / p.R), threads, bytes, s>>>(p);
    return SSMK_OK;
}

/* The sums over batch of the per-row partials. */
template <typename T, typename V>
void reduce_partials(const BwdParams &p, const ssmk_scan_grads &g, cudaStream_t s) {
    reduce<V>(p.pA, g.dA, p, p.dstate, s);
    if (!p.is_variable_B) reduce<V>(p.pB, g.dB, p, p.dstate, s);
    if (!p.is_variable_C) reduce<V>(p.pC, g.dC, p, p.dstate, s);
    if (p.pD) reduce<T>(p.pD, g.dD, p, 1, s);
    if (p.pBias) reduce<T>(p.pBias, g.ddelta_bias, p, 1, s);
}

template <typename T, typename V>
int32_t launch_t(const BwdParams &p, int method, const ssmk_scan_grads &g, cudaStream_t s) {
    int32_t st;
    method_switch(method, [&](auto m) { st = launch_m<T, V, decltype(m)::value>(p, s); });
    if (st) return st;
    reduce_partials<T, V>(p, g, s);
    return SSMK_OK;
}

/* The run length, threads per row and rows per block of a's shape. */
void shape(const ssmk_scan_args &a, BwdParams *p) {
    const int K = items_for(a.dtype == SSMK_F32, a.is_complex);
    int tpr = 32;
    while (tpr < kMaxTPR && (long long)tpr * K < a.seqlen) tpr *= 2;
    int R = kThreads / tpr;
    const int cpg = a.dim / a.n_groups;
    while (cpg % R) R /= 2;
    p->tpr = tpr;
    p->R = R;
    p->chunk = tpr * K;
    p->chunks = (a.seqlen + p->chunk - 1) / p->chunk;
}

/* Whether a's shape suits the channel-sequential backward (bwd_chan.cuh)
 * at P lanes a channel (4 or 8), a being the float32 form of the call: real
 * A in float, variable B and C, seqlen a multiple of 8 (the forward's
 * 16-byte runs; a partial last tile of 8 steps), N a multiple of P and at
 * most kChanMaxStates (and the forward's staging offsets within 32 bits:
 * its phase 1), whole blocks of 128/P channels in a group. The scratch
 * holds its states wherever the shape suits either P, so that any design
 * may run on it. */
bool chan_shape(const ssmk_scan_args &a, int P) {
    return !a.is_complex && a.dtype == SSMK_F32 && a.is_variable_B && a.is_variable_C && a.seqlen % 8 == 0 &&
           a.dstate % P == 0 && a.dstate <= kChanMaxStates && (long long)kChanMaxStates * a.seqlen < (1LL << 31) &&
           (a.dim / a.n_groups) % (kChanThreads / P) == 0;
}
bool chan_shape(const ssmk_scan_args &a) { return chan_shape(a, 4) || chan_shape(a, 8); }

/* The tiles of the channel-sequential backward. */
int chan_tiles(const ssmk_scan_args &a) { return (a.seqlen + kChanSteps - 1) / kChanSteps; }

/* The backward design this launch takes: 0, the row design; P = 4 or 8,
 * the channel-sequential one with P lanes a channel, where its shape
 * (chan_shape) and 16-byte aligned arrays allow it (a16: a 16-bit call's
 * own arguments, whose B and C its phase 1 reads, or NULL; a may hold
 * their float copies). Chosen by shape where it was measured faster
 * (docs/performance.md): a method whose policy says so (kChanBackward), and
 * P = 4 where its channels make kChanMinWarps warps per SM (the Mamba
 * block's 8×2048 channels: 4% faster than P = 8 there), else P = 8 where
 * they make kChanBwd8MinWarps (its 8×512 channels: 1.55× faster than the
 * row design, which P = 4 only tied). SSMK_BACKWARD=row,
 * chan (the channel design at the P the shape would choose), chan4 or chan8
 * overrides the choice (chan* where the conditions fail runs the row
 * design); *st is set to a refusal of a value it does not know. */
int chan_backward_lanes(const ssmk_scan_args &a, const ssmk_scan_grads &g, const void *h0, const ssmk_scan_args *a16,
                        int32_t *st) {
    static const char *const names[] = {"row", "chan", "chan4", "chan8"};
    static const int forces[] = {0, 1, 4, 8};
    const int f = forced_design("SSMK_BACKWARD", names, 4, st);
    if (*st != SSMK_OK) return 0;
    const int force = f < 0 ? -1 : forces[f]; /* -1: auto */
    const void *b16 = a16 ? a16->B : nullptr, *c16 = a16 ? a16->C : nullptr;
    const void *vec[] = {a.u, a.delta, a.z, a.B, a.C, g.dout, g.du, g.ddelta, g.dz, g.dB, g.dC, h0, b16, c16};
    bool aligned = true;
    for (const void *q : vec) aligned = aligned && aligned16(q);
    if (force == 0 || !aligned) return 0;
    if (force >= 4) return chan_shape(a, force) ? force : 0;
    const long long channels = (long long)a.batch * a.dim;
    const bool p4 = chan_shape(a, 4), p8 = chan_shape(a, 8), full4 = p4 && fills_sms(channels * 4);
    if (force == 1) return full4 ? 4 : p8 ? 8 : p4 ? 4 : 0;
    bool wins = false;
    method_switch(a.method, [&](auto m) { wins = MethodPolicy<decltype(m)::value>::kChanBackward; });
    if (!wins) return 0;
    return full4 ? 4 : p8 && fills_sms(channels * 8, kChanBwd8MinWarps) ? 8 : 0;
}

} /* namespace */

namespace {

/* The float32 form of a 16-bit call: a's dtype F32 (the shape and the
 * scratch of its float32 backward). */
ssmk_scan_args widened(const ssmk_scan_args &a) {
    ssmk_scan_args f = a;
    if (narrow_dtype(a.dtype)) f.dtype = SSMK_F32;
    return f;
}

template <typename I>
__global__ void widen_kernel(const I *in, float *out, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = widen(in[i]);
}

template <typename I>
__global__ void narrow_kernel(const float *in, I *out, long long n) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        out[i] = narrow<I>(in[i]);
}

/* Whether a 16-bit call (f its float32 form) may need float copies of u and
 * delta for a phase 1: where a row spans several chunks of the row design,
 * whose phase 1 is the forward's float kernel (the channel design's reads
 * the 16-bit inputs themselves). */
bool phase1_wide(const ssmk_scan_args &f) {
    BwdParams p;
    shape(f, &p);
    return p.chunks > 1;
}

/* n values of type I at src widened into float at dst on stream s. */
template <typename I>
void widen_into(const void *src, float *dst, long long n, cudaStream_t s) {
    widen_kernel<I><<<grid_for(n), 256, 0, s>>>((const I *)src, dst, n);
}

/* Likewise for the 16-bit type dtype (SSMK_F16 or SSMK_BF16). */
void widen16(int32_t dtype, const void *src, float *dst, long long n, cudaStream_t s) {
    if (dtype == SSMK_F16)
        widen_into<half16>(src, dst, n, s);
    else
        widen_into<bfloat16>(src, dst, n, s);
}

} /* namespace */

size_t bwd_scratch_bytes(const ssmk_scan_args &a, BwdScratch *layout) {
    const ssmk_scan_args f = widened(a);
    BwdParams p;
    shape(f, &p);
    const size_t v = weight_size(f.dtype) * (f.is_complex ? 2 : 1), w = weight_size(f.dtype);
    const long long rows = (long long)f.batch * f.dim;
    const size_t per = (size_t)rows * f.dstate * v;
    /* a 16-bit call's float copies: variable B, C and their gradients, and
     * u and delta for phase 1 where a row spans several chunks */
    const ScanSizes z = scan_sizes(&f);
    const bool nw = narrow_dtype(a.dtype);
    const size_t vb = nw && a.is_variable_B ? (size_t)z.b * 4 : 0, vc = nw && a.is_variable_C ? (size_t)z.c * 4 : 0;
    /* the states a chunk apart (row design) or a tile apart (channel design) */
    size_t hs = per * (p.chunks - 1);
    if (chan_shape(f)) hs = std::max(hs, per * (chan_tiles(f) - 1));
    const size_t seq = nw && phase1_wide(f) ? (size_t)z.seq * 4 : 0;
    const size_t sizes[] = {hs, per, per, per, (size_t)rows * w, (size_t)rows * w, seq, seq, vb, vc, vb, vc};
    void **dst[] = {&layout->hS,          &layout->pA,          &layout->pB,           &layout->pC,
                    &layout->pD,          &layout->pBias,       (void **)&layout->wu,  (void **)&layout->wdelta,
                    (void **)&layout->wB, (void **)&layout->wC, (void **)&layout->wdB, (void **)&layout->wdC};
    static_assert(sizeof(sizes) / sizeof(sizes[0]) == sizeof(dst) / sizeof(dst[0]), "one size per array");
    size_t total = 0;
    for (size_t i = 0; i < sizeof(dst) / sizeof(dst[0]); i++) {
        if (layout && layout->base) *dst[i] = (char *)layout->base + total;
        total += (sizes[i] + 255) / 256 * 256;
    }
    return total;
}

namespace {

/* The backward in a's float32 or float64 arithmetic. a16: a 16-bit call's
 * own arguments (NULL for a float call), whose dtype is that of u, delta, z,
 * dout, du, ddelta and dz, which the kernels read and write themselves; a
 * is then the call's float32 form (B and C float copies, u and delta its
 * own 16-bit arrays). */
int32_t launch_wide(const ssmk_scan_args &a, const void *h0, const ssmk_scan_grads &g, const BwdScratch &sc,
                    cudaStream_t s, const ssmk_scan_args *a16, BwdStage &stage) {
    BwdParams p;
    shape(a, &p);
    static_cast<ScanInputs &>(p) = scan_inputs(a);
    const int32_t in16 = a16 ? a16->dtype : 0;
    p.in16 = in16;
    const bool f32 = a.dtype == SSMK_F32 && !a.is_complex, even = a.seqlen % 4 == 0;
    p.vec_b = f32 && even && aligned16(a.B);
    p.vec_c = f32 && even && aligned16(a.C);
    p.vec_red = f32 && even && (!a.is_variable_B || aligned16(g.dB)) && (!a.is_variable_C || aligned16(g.dC));
    p.h0 = h0;
    p.dout = g.dout;
    p.dlast = g.dlast_state;
    p.du = g.du;
    p.ddelta = g.ddelta;
    p.dB = g.dB;
    p.dC = g.dC;
    p.dz = g.dz;
    p.dinit = g.dinitial_state;
    p.hS = sc.hS;
    p.pA = sc.pA;
    p.pB = sc.pB;
    p.pC = sc.pC;
    p.pD = a.D ? sc.pD : nullptr;
    p.pBias = a.delta_bias ? sc.pBias : nullptr;
    int32_t st = SSMK_OK;
    const int lanes = stage.design >= 0 ? stage.design : chan_backward_lanes(a, g, h0, a16, &st);
    const bool chan = lanes != 0;
    if (st) return st;
    if (!stage.grads) stage.design = lanes; /* the states alone: the gradients later take their design */
    if (chan) p.chunks = chan_tiles(a);     /* its chunks are tiles */
    if (stage.states && p.chunks > 1) {
        /* Phase 1: the state entering every chunk after the first, by the
         * scan kernel (no outputs; it stops before the last chunk); a tile
         * apart, by the channel-sequential forward, for the channel design,
         * which reads a 16-bit call's own u, delta, B and C (widening is
         * exact: the states are formed from the float copies' values); the row
         * design's, the float kernel, reads float copies of u and delta. */
        ssmk_scan_args fa = a;
        fa.out = nullptr;
        fa.last_state = nullptr;
        fa.z = nullptr; /* z does not enter the states */
        if (in16 && chan) {
            fa.dtype = in16, fa.B = a16->B, fa.C = a16->C;
        } else if (in16) {
            const long long n = scan_sizes(&a).seq;
            widen16(in16, a.u, sc.wu, n, s), widen16(in16, a.delta, sc.wdelta, n, s);
            fa.u = sc.wu, fa.delta = sc.wdelta;
        }
        ChunkStates cs;
        cs.states = sc.hS, cs.chunk = chan ? kChanSteps : p.chunk, cs.chunks = p.chunks, cs.lanes = lanes;
        if ((st = launch_scan(fa, h0, s, cs))) return st;
    }
    if (!stage.grads) return SSMK_OK;
    const ScanSizes z = scan_sizes(&a);
    if (a.is_variable_B) CU(cudaMemsetAsync(g.dB, 0, (size_t)z.b * z.w, s));
    if (a.is_variable_C) CU(cudaMemsetAsync(g.dC, 0, (size_t)z.c * z.w, s));
    if (chan) {
        if (in16)
            launch_bwd_chan_narrow(p, in16, lanes, s);
        else
            launch_bwd_chan_f32(p, lanes, s);
        CU(cudaGetLastError());
        reduce_partials<float, float>(p, g, s);
    } else if (a.dtype == SSMK_F64)
        st = a.is_complex ? launch_t<double, cplx<double>>(p, a.method, g, s)
                          : launch_t<double, double>(p, a.method, g, s);
    else
        st = a.is_complex ? launch_t<float, cplx<float>>(p, a.method, g, s) : launch_t<float, float>(p, a.method, g, s);
    if (st) return st;
    CU(cudaGetLastError());
    return SSMK_OK;
}

/* The backward of a 16-bit input type I (real A): the float32 kernels,
 * which read u, delta, z and dout in I and write du, ddelta and dz rounded
 * once to it (in16); variable B and C widened into the scratch first and
 * their gradients, summed there in float with atomics, rounded after. */
template <typename I>
int32_t launch_backward_narrow(const ssmk_scan_args &a, const void *h0, const ssmk_scan_grads &g, const BwdScratch &sc,
                               cudaStream_t s, BwdStage &stage) {
    const ScanSizes z = scan_sizes(&a);
    ssmk_scan_args f = widened(a);
    ssmk_scan_grads fg = g;
    if (a.is_variable_B) widen_into<I>(a.B, sc.wB, z.b, s), f.B = sc.wB, fg.dB = sc.wdB;
    if (a.is_variable_C) widen_into<I>(a.C, sc.wC, z.c, s), f.C = sc.wC, fg.dC = sc.wdC;
    if (const int32_t st = launch_wide(f, h0, fg, sc, s, &a, stage)) return st;
    if (!stage.grads) return SSMK_OK;
    if (a.is_variable_B) narrow_kernel<I><<<grid_for(z.b), 256, 0, s>>>(sc.wdB, (I *)g.dB, z.b);
    if (a.is_variable_C) narrow_kernel<I><<<grid_for(z.c), 256, 0, s>>>(sc.wdC, (I *)g.dC, z.c);
    CU(cudaGetLastError());
    return SSMK_OK;
}

} /* namespace */

int32_t launch_backward(const ssmk_scan_args &a, const void *h0, const ssmk_scan_grads &g, const BwdScratch &sc,
                        cudaStream_t s, BwdStage &stage) {
    if (a.dtype == SSMK_F16) return launch_backward_narrow<half16>(a, h0, g, sc, s, stage);
    if (a.dtype == SSMK_BF16) return launch_backward_narrow<bfloat16>(a, h0, g, sc, s, stage);
    return launch_wide(a, h0, g, sc, s, nullptr, stage);
}

} /* namespace ssmk */

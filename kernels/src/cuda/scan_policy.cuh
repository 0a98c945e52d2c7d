/*
 * scan_policy.cuh — what each method's kernels do differently, as types.
 *
 * Every choice the kernels make per method — the forward's two designs, the
 * update's fast forms (scan_terms.cuh) and the backward's (bwd_ops.cuh) — is a
 * member of one policy struct per method (MethodPolicy<M>), and every choice
 * per instantiation of the forward (element type, real or complex A, 16-byte
 * runs) is derived once in ScanTraits, in the manner of Mamba's
 * Selective_Scan_fwd_kernel_traits and CUTLASS's dispatch policies: the
 * kernels read Traits::kX or Policy::kX and never test a method by name, and
 * the host dispatches on (dtype, complex, method, vec) once per launch
 * (kernels.cu, backward.cu).
 *
 * The forward's members concern the real float kernels' fast tiles (those
 * whose every e^x is in [2^-126, 1]): double and complex kernels take the
 * exact path of ssmk_methods.h for every method. Why each member has the
 * value it has is measured, not argued; docs/performance.md records the
 * measurements.
 */
#ifndef SSMK_SCAN_POLICY_CUH
#define SSMK_SCAN_POLICY_CUH

#include <type_traits>

#include "../ssmk_methods.h"

namespace ssmk {

/* Where the next state's C is loaded in a real float kernel's state loop. */
enum class NextC {
    WithB,      /* with the next state's a and B, at the start of the state: in flight through all of it */
    AfterPass1, /* after the state's first pass, into the registers its B has left */
};

/* The method chosen at run time from the complex method table (complex A). */
constexpr int kComplexTable = -1;

/* The defaults: a method that has none of the optional fast-path forms, and
 * the state loop every method has unless it says otherwise. */
struct BasePolicy {
    /* The input term as B·(Δ·u) (zoh) or B·(Δ·u·g) (bilinear), Δ·u formed
     * once per step: a product fewer per update where Δ·u is exact. */
    static constexpr bool kDeltaU = false;
    /* The products of Ā the scan needs, over a lane's run and each level's
     * window of runs, as e^{a·ΣΔ}: an exp2 per window instead of products and
     * shuffles on the scan's chain. Pays where the update leaves the MUFU
     * pipe room. */
    static constexpr bool kExpSum = false;
    /* Δ·g of a Taylor method as a polynomial in Δ with per-state
     * coefficients (dpoly_coefs): one product fewer per update. */
    static constexpr bool kPolyDeltaG = false;
    /* foh's near and far branches: φ1 by phi1_near where every x of a
     * state's tile is small, Δ·φ1 = (e^x − 1)/a where every x ≤ −1/2 (the
     * backward's runs too: bwd_ops.cuh). */
    static constexpr bool kFohBranches = false;
    /* g = 1 (zoh): the fast input term is B·(Δ·u), no g formed. */
    static constexpr bool kUnitG = false;
    /* g = 1/(1 − x/2) (bilinear): on a fast tile one reciprocal of an FFMA
     * of Δ, the state's factor a_coef being −a/2, and Ā = 2g − 1. */
    static constexpr bool kReciprocalG = false;
    /* The backward's gradient pass takes g from its forward pass, kept in
     * registers, rather than forming it again, in double and complex
     * arithmetic (bwd_ops.cuh's keeps_g: foh's series or division). */
    static constexpr bool kBwdKeepsG = false;
    static constexpr NextC kNextC = NextC::WithB;
    /* The unrolled state loop runs the pairs that have a state after them,
     * then the last one or two states, so that the next state's pointers
     * advance without a test. */
    static constexpr bool kPeel = true;
    /* The next state's loads are pinned at the start of the state by a
     * __syncwarp (ptxas moves no load past a warp barrier); where the loop
     * is peeled, ptxas otherwise sinks them to its end. */
    static constexpr bool kPinLoads = true;
    /* The channel-sequential forward (scan_chan.cuh) is taken by shape
     * (kernels.cu's chan_lanes) for this method's fp32 launches: measured
     * faster than the row kernel there (docs/performance.md). */
    static constexpr bool kChanForward = true;
    /* The channel-sequential backward (bwd_chan.cuh) likewise (backward.cu's
     * chan_backward_lanes). */
    static constexpr bool kChanBackward = true;
    /* The channel-sequential forward for complex A (scan_chan_cplx.cuh),
     * likewise (chan_lanes). */
    static constexpr bool kChanComplex = true;
};

template <int M>
struct MethodPolicy; /* one per method, below */

template <>
struct MethodPolicy<ZOH> : BasePolicy {
    static constexpr bool kDeltaU = true;
    static constexpr bool kUnitG = true;
};

template <>
struct MethodPolicy<FOH> : BasePolicy {
    static constexpr bool kFohBranches = true;
    /* foh's longer update covers C's latency without holding it through pass 1 */
    static constexpr NextC kNextC = NextC::AfterPass1;
    /* and its loads issued where ptxas puts them: pinned, foh was slower */
    static constexpr bool kPinLoads = false;
    /* foh's per-state votes and reciprocal, paid per state every 16 steps
     * in the channel kernel (every 256 in the row kernel), made it slower */
    static constexpr bool kChanForward = false;
    static constexpr bool kBwdKeepsG = true;
    /* complex A: φ1 by the exact path on every tile of the channel kernel,
     * which has no fast form of it, was as slow as the row kernel at the
     * large size and 2.6 times slower at the small one */
    static constexpr bool kChanComplex = false;
};

template <>
struct MethodPolicy<BILINEAR> : BasePolicy {
    static constexpr bool kDeltaU = true;
    static constexpr bool kReciprocalG = true;
    /* complex A: its quotients by the exact path on every tile of the
     * channel kernel were faster than the row kernel at the large size
     * (0.65×) and slower at the small one (1.7×) */
    static constexpr bool kChanComplex = false;
};

template <>
struct MethodPolicy<POLY> : BasePolicy {
    static constexpr bool kExpSum = true;
    static constexpr bool kPolyDeltaG = true;
};

template <>
struct MethodPolicy<HIGHORDER> : BasePolicy {
    static constexpr bool kExpSum = true;
};

template <>
struct MethodPolicy<RK4> : BasePolicy {
    static constexpr bool kExpSum = true;
    static constexpr bool kPolyDeltaG = true;
};

/* Complex A: the method is a run-time argument, every tile takes the exact path. */
template <>
struct MethodPolicy<kComplexTable> : BasePolicy {};

/* Warps per block of the scan, one row each. */
constexpr int kScanWarps = 4;
constexpr int kScanThreads = 32 * kScanWarps;
/* Bytes of each array a lane holds per tile: a lane's run of B or C is two
 * 16-byte loads. */
constexpr int kRunBytes = 32;
/* Time steps per lane: 32 bytes of the element type (8 float, 4 double or
 * complex float, 2 complex double). */
constexpr int steps_per_lane(size_t elem) { return elem >= kRunBytes ? 1 : (int)(kRunBytes / elem); }

/*
 * ScanTraits: everything the scan kernel decides at compile time for one
 * instantiation. T is float or double; CPLX, complex A (and B, C); M, the
 * method (kComplexTable for complex A); VEC, every row of u, Δ, z, out, B and
 * C a run of 16-byte words (Mamba's case: variable B and C, seqlen a multiple
 * of K, aligned arrays); IN, the input type of u, Δ, z, out and variable B
 * and C (T, or half16 or bfloat16 with T float: the mixed-precision dtypes),
 * widened to T as it is loaded and rounded to it once as out is stored.
 */
template <typename T, bool CPLX, int M, bool VEC, typename IN = T>
struct ScanTraits {
    static_assert(CPLX == (M == kComplexTable), "complex A dispatches through the method table");
    static_assert(std::is_same<IN, T>::value || std::is_same<T, float>::value, "16-bit inputs compute in float");
    using Policy = MethodPolicy<M>;
    using Real = T;
    using V = typename std::conditional<CPLX, cplx<T>, T>::type;     /* an element of A, B, C and the state */
    using In = IN;                                                   /* an element of u, Δ, z and out */
    using VIn = typename std::conditional<CPLX, cplx<IN>, IN>::type; /* an element of variable B and C */
    /* What the state loop's B and C cursors point to: V where variable and
     * fixed B and C are of one type, else bytes (16-bit variable, float
     * fixed), so that the full-precision kernels keep their typed cursors. */
    using BCCursor = typename std::conditional<std::is_same<VIn, V>::value, V, unsigned char>::type;
    /* 16-bit inputs: the kernel compiled for 4 blocks per SM (scan_kernel_narrow). */
    static constexpr bool kNarrow = !std::is_same<IN, T>::value;
    static constexpr int kMethod = M;
    static constexpr bool kComplex = CPLX;
    static constexpr bool kVec = VEC;

    static constexpr int kLanes = 32; /* a row's lanes: the warp */
    static constexpr int kLevels = 5; /* the shuffle scan's levels: log2(kLanes) */
    static constexpr int K = steps_per_lane(sizeof(V));
    static constexpr int kTile = kLanes * K;

    /* The real float kernels: per-tile fast paths, the state loop unrolled by two. */
    static constexpr bool kRealFloat = !CPLX && std::is_same<T, float>::value;
    /* e^x by one MUFU.EX2 on fast tiles */
    static constexpr bool kFastExp = kRealFloat && uses_exp<M>();
    /* bilinear's g = 1/(1 − x/2) by one reciprocal on fast tiles */
    static constexpr bool kFastBilinear = kRealFloat && Policy::kReciprocalG;
    /* a per-tile fast path, decided from the ranges of Δ and a·log2e */
    static constexpr bool kFastTiles = kFastExp || kFastBilinear;
    static constexpr bool kDeltaU = kRealFloat && Policy::kDeltaU;
    static constexpr bool kExpSum = kFastExp && Policy::kExpSum;
    static constexpr bool kPolyDeltaG = kFastExp && Policy::kPolyDeltaG && taylor_degree<M>() > 0;
    /* foh's near branch: real float tiles that passed the fast vote, and
     * every real double tile, whose exact path evaluates exp() and an IEEE
     * division per update where the near branch needs neither */
    static constexpr bool kFohNear = !CPLX && Policy::kFohBranches;
    static constexpr bool kFohFar = kFastExp && Policy::kFohBranches;

    /* Double and complex kernels, whose elements take two or four registers,
     * load C at the start of its own state and run the loop rolled. */
    static constexpr bool kCWithB = kRealFloat && Policy::kNextC == NextC::WithB;
    static constexpr bool kCAfterPass1 = kRealFloat && Policy::kNextC == NextC::AfterPass1;
    static constexpr bool kCAhead = kCWithB || kCAfterPass1; /* C from the buffers, loaded a state ahead */
    static constexpr bool kUnroll2 = kRealFloat;
    static constexpr bool kPeel = kRealFloat && Policy::kPeel;
    static constexpr bool kPinLoads = kRealFloat && Policy::kPinLoads;
};

} /* namespace ssmk */

#endif

/*
 * ssmk.h — the selective-scan discretization kernel ABI, version 1.
 *
 * This header is the whole contract between a kernel library and the
 * ssmverify suite. A library that exports these symbols (C linkage, prefix
 * ssmk_) can be loaded by the suite with SSMK_LIB=/path/to/lib.so and tested:
 * every discretization method against float64 references, the seven
 * performance checks, the fuzzers. The project's own CUDA library
 * (build/libssmk_cuda.so) and its CPU build (build/libssmk_cpu.so) implement
 * it from one source of method arithmetic (ssmk_methods.h).
 *
 * CONVENTIONS
 *   - Integers are int32_t unless noted; sizes of flat arrays are int64_t.
 *   - Arrays are dense, row-major (C order), unpadded; shapes list the
 *     outermost dimension first.
 *   - dtype selects the element type of EVERY floating-point array of a call:
 *     SSMK_F32 (float) or SSMK_F64 (double). The library computes in it.
 *     EXTENSION (SSMK_CAP_NARROW_INPUTS): the mixed-precision dtypes
 *     SSMK_F16 and SSMK_BF16 (see MIXED PRECISION below).
 *   - Complex arrays are interleaved (re, im) pairs: shape [..., n] is stored
 *     as [..., n, 2].
 *   - Every function returns a status; after a non-zero status,
 *     ssmk_last_error() gives a NUL-terminated message for the calling thread
 *     naming the offending argument or the device runtime's error.
 *   - No function crashes, aborts, or writes outside the buffers it is given,
 *     whatever the arguments: NULL where an array is required, zero or
 *     negative sizes, n_groups not dividing dim, dstate over ssmk_max_dstate(),
 *     an unknown method or dtype all return SSMK_EINVAL (or SSMK_EUNSUPPORTED)
 *     with a message. Inputs are never modified.
 *
 * METHODS
 *   Each method maps x = Δ·a (a one diagonal entry of A, real or complex; Δ
 *   real) to (Ā, g), and the discrete input coefficient is B̄ = Δ·g·B:
 *
 *     SSMK_ZOH        Ā = e^x                   g = 1
 *     SSMK_FOH        Ā = e^x                   g = φ1(x) = (e^x − 1)/x, φ1(0) = 1
 *     SSMK_BILINEAR   Ā = (1 + x/2)/(1 − x/2)   g = 1/(1 − x/2)
 *     SSMK_POLY       Ā = e^x                   g = 1 + x/2 + x²/6
 *     SSMK_HIGHORDER  Ā = e^x                   g = 1 + x/2
 *     SSMK_RK4        Ā = e^x                   g = 1 + x/2 + x²/6 + x³/24
 *
 *   For diagonal A these are exactly the matrix forms (bilinear:
 *   Ā = (I − ΔA/2)⁻¹(I + ΔA/2), B̄ = (I − ΔA/2)⁻¹ΔB; foh: B̄ = A⁻¹(e^{ΔA} − I)B).
 *   Floating-point exceptions follow IEEE 754 (a zero denominator gives ±Inf
 *   or NaN); the only special value is the limit φ1(0) = 1. Textual names:
 *   zoh foh bilinear poly highorder rk4 (case-insensitive).
 *
 * THE FORWARD SCAN (ssmk_scan_fwd, ssmk_plan_create)
 *   For every batch row b and channel d, with h[n] = 0, for t = 0 … seqlen−1:
 *
 *     dt = delta[b][d][t] + (delta_bias ? delta_bias[d] : 0)
 *     if delta_softplus: dt = (dt <= 20) ? log1p(exp(dt)) : dt
 *     for each n: (Ā, g) = method(dt · A[d][n])
 *                 Bv = is_variable_B ? B[b][grp][n][t] : B[d][n]
 *                 h[n] = Ā · h[n] + dt · g · Bv · u[b][d][t]
 *     y = Σ_n Cv[n] · h[n]            (complex A: y = 2 · Re(Σ_n Cv[n] · h[n]))
 *     if D: y += D[d] · u[b][d][t]
 *     if z: y = y · z · sigmoid(z)    (SiLU gate, z = z[b][d][t])
 *     out[b][d][t] = y
 *
 *   and last_state[b][d][n] = h[n] after the last step; grp = d / (dim /
 *   n_groups). The summation order over n and the use of fused multiply-add
 *   are the library's choice.
 *
 * MIXED PRECISION (extension, SSMK_CAP_NARROW_INPUTS)
 *   Mamba's kernels take 16-bit activations with float32 weights and state.
 *   With dtype SSMK_F16 (IEEE binary16) or SSMK_BF16 (bfloat16) the
 *   INPUT arrays — u, delta, variable B and C, z, and out — hold 16-bit bit
 *   patterns (uint16_t, the format's own encoding), and the WEIGHT arrays —
 *   A, constant B and C, D, delta_bias, initial_state and last_state — are
 *   float (complex: interleaved float pairs): Mamba's combinations, input
 *   half or bfloat16 with weights float or complex float. Every step
 *   computes as in SSMK_F32 from the exactly widened inputs; each out
 *   element is rounded once to the input type, to nearest, ties to even
 *   (fp16 overflows to ±Inf from 65520 on; its subnormals are kept). The
 *   precision of the state between steps is the library's business, but it
 *   is judged: the suite's error model allows float32 arithmetic plus the
 *   output's one rounding, so a state kept in 16 bits, or Δ or Δ·A rounded
 *   to 16 bits, fails. These dtypes are the scan's only (capabilities carry
 *   SSMK_CAP_SCAN_ONLY: ssmk_discretize returns SSMK_EUNSUPPORTED), and
 *   plans fetch out in the input type and last_state in float.
 *
 * THE BACKWARD PASS (extension, SSMK_CAP_BACKWARD: ssmk_scan_bwd,
 * ssmk_plan_create_bwd, ssmk_plan_fetch_bwd)
 *   Given the forward's arguments (and initial state), the gradient dout of
 *   a real loss L with respect to out and, optionally, dlast_state with
 *   respect to last_state, the library returns the gradient of L with
 *   respect to every input, in the input's shape, as PyTorch's autograd of
 *   the forward above would (Mamba's selective_scan_bwd conventions):
 *
 *     du, ddelta, dz  [batch][dim][seqlen]; ddelta with respect to delta as
 *                     given, through delta_bias and the softplus
 *     dA              [dim][dstate], summed over batch and time
 *     dB, dC          constant: [dim][dstate], summed over batch and time;
 *                     variable: [batch][n_groups][dstate][seqlen], summed
 *                     over the channels of the group
 *     dD, ddelta_bias [dim], summed over batch and time
 *     dinitial_state  [batch][dim][dstate]
 *
 *   For complex A (and B, C, states) the gradient of a complex input
 *   w = p + i·q is ∂L/∂p + i·∂L/∂q, interleaved like w: PyTorch's w.grad for
 *   a real loss (twice the conjugate Wirtinger derivative ∂L/∂w̄), and a
 *   complex dlast_state is given in the same convention. softplus' = sigmoid
 *   below the threshold 20, 1 above; the gate's derivative is
 *   d(z·σ(z))/dz = σ(z)·(1 + z·(1 − σ(z))). The forward is recomputed from
 *   the inputs (nothing is saved between calls); how (chunks of time
 *   steps, saved states) is the library's business. Every gradient is
 *   written in full (not accumulated into).
 *   Two calls with the same arguments give bitwise equal gradients unless
 *   the capabilities carry SSMK_CAP_BWD_ATOMIC (sums by atomics, whose order
 *   varies): the suite then bounds the spread instead.
 *
 *   Saved states (extension, SSMK_CAP_BWD_SAVED with SSMK_CAP_BACKWARD):
 *   training runs the backward after a forward that saved what the backward
 *   reads (Mamba's forward saves the state entering each chunk of time
 *   steps). ssmk_plan_create_bwd_saved builds such a plan: its creation also
 *   runs that part of the forward, into the plan's device memory, and each
 *   launch runs the backward alone on it, so that ssmk_plan_time times the
 *   backward as autograd's backward is timed. What is saved is the
 *   library's business; the gradients are those of ssmk_plan_create_bwd's
 *   plan of the same arguments, bit for bit unless SSMK_CAP_BWD_ATOMIC.
 *
 *   16-bit inputs (extension, SSMK_CAP_BWD_NARROW with SSMK_CAP_BACKWARD and
 *   SSMK_CAP_NARROW_INPUTS): with dtype SSMK_F16 or SSMK_BF16, dout and the
 *   gradients of the input arrays — du, ddelta, dz and variable dB, dC —
 *   are of the input type, and those of the weights — dA, constant dB, dC,
 *   dD, ddelta_bias, dinitial_state — and dlast_state are float (as in
 *   MIXED PRECISION; Mamba's selective_scan_bwd returns the same types,
 *   its variable dB and dC summed in float and then converted). Every
 *   gradient is computed as in SSMK_F32 from the exactly widened inputs,
 *   and each input-typed element is rounded once to the input type, to
 *   nearest, ties to even: a sum over channels kept in 16 bits, or a y
 *   read back from a 16-bit out for dz, is a second rounding, which the
 *   suite's error model does not allow.
 */
#ifndef SSMK_H
#define SSMK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define SSMK_API __declspec(dllexport)
#else
#define SSMK_API __attribute__((visibility("default")))
#endif

#define SSMK_ABI_VERSION 1

/* Status codes. */
enum {
    SSMK_OK = 0,
    SSMK_EINVAL = 1,       /* a bad argument; the message names it */
    SSMK_EUNSUPPORTED = 2, /* this library does not do that method/dtype/complex combination */
    SSMK_ENODEVICE = 3,    /* no usable GPU */
    SSMK_EDEVICE = 4,      /* a device runtime error; the message carries the runtime's */
    SSMK_ENOMEM = 5
};

/* Element types. SSMK_F16 and SSMK_BF16 (extension): 16-bit inputs with
 * float weights and state (MIXED PRECISION above). */
enum { SSMK_F32 = 0, SSMK_F64 = 1, SSMK_F16 = 2, SSMK_BF16 = 3 };

/* Methods. */
enum { SSMK_ZOH = 0, SSMK_FOH = 1, SSMK_BILINEAR = 2, SSMK_POLY = 3, SSMK_HIGHORDER = 4, SSMK_RK4 = 5 };

/* Capability bits returned by ssmk_capabilities. */
#define SSMK_CAP_SUPPORTED 1u
#define SSMK_CAP_COMPLEX_ZOH_FALLBACK 2u /* with complex A this method computes zoh instead */
#define SSMK_CAP_SCAN_ONLY 4u            /* the scan (and its plans) do this; ssmk_discretize does not */
#define SSMK_CAP_INITIAL_STATE 8u        /* ssmk_scan_fwd_state and ssmk_plan_create_state take an initial state */
#define SSMK_CAP_FEATURES 16u            /* ssmk_scan_features declares the options, shapes and structure it takes */
#define SSMK_CAP_NARROW_INPUTS 32u     /* dtype SSMK_F16 or SSMK_BF16: the scan takes 16-bit inputs (mixed precision) */
#define SSMK_CAP_BACKWARD 64u          /* ssmk_scan_bwd and its plans compute the gradients of this combination */
#define SSMK_CAP_BWD_ATOMIC 128u       /* with bit 6: the backward's sums may differ between calls in the last bits */
#define SSMK_CAP_BWD_OUTPUTS_ONLY 256u /* with bit 6: no dlast_state, no dinitial_state, no initial_state */
#define SSMK_CAP_BWD_NARROW 512u       /* with bits 5, 6 and a 16-bit dtype: the backward takes this input type */
#define SSMK_CAP_NONFINITE 1024u       /* with bit 0: the library follows the suite's non-finite policy */
#define SSMK_CAP_BWD_SAVED 2048u       /* with bit 6: ssmk_plan_create_bwd_saved's plans launch the backward alone */

/* 1 for this header. The suite refuses a library that returns another value. */
SSMK_API int32_t ssmk_abi_version(void);

/* "cuda" or "cpu" (a user library may return its own word). Static storage. */
SSMK_API const char *ssmk_backend(void);

/* Device description, e.g. "NVIDIA H200 (sm_90)" or the CPU model, written
 * NUL-terminated into buf and truncated to len bytes. SSMK_EINVAL for a NULL
 * buf or len < 1; SSMK_ENODEVICE when a GPU library finds no GPU. */
SSMK_API int32_t ssmk_device_name(char *buf, int32_t len);

/* The largest dstate ssmk_scan_fwd accepts (this project's libraries: 256). */
SSMK_API int32_t ssmk_max_dstate(void);

/* Bit 0 SSMK_CAP_SUPPORTED: ssmk_scan_fwd, its plans and ssmk_discretize
 * compute this combination. Bit 1 SSMK_CAP_COMPLEX_ZOH_FALLBACK (a declared
 * fallback: with complex A the method computes the zoh result). Bit 2
 * SSMK_CAP_SCAN_ONLY (extension, set together with bit 0): only the scan and
 * its plans do; ssmk_discretize and ssmk_plan_create_discretize return
 * SSMK_EUNSUPPORTED for it (a kernel that discretizes inside its scan, as
 * Mamba's does). A library that never sets bit 2 is judged as in ABI v1.
 * Bit 3 SSMK_CAP_INITIAL_STATE (extension, with bit 0): the library exports
 * ssmk_scan_fwd_state and ssmk_plan_create_state, and they scan this
 * combination from a given state. A library without it (ABI v1) is judged
 * on scans from h = 0 alone.
 * Bit 4 SSMK_CAP_FEATURES (extension, with bit 0): the library exports
 * ssmk_scan_features, and what it declares for this combination limits
 * what the suite asks of the scan, and of the backward pass of the same
 * combination (bit 6): the backward takes what the scan takes. A library
 * without it takes every option of the scan on every shape (ABI v1).
 * Bit 5 SSMK_CAP_NARROW_INPUTS (extension; only for dtype SSMK_F16 or
 * SSMK_BF16, with bits 0 and 2): the scan and its plans take this 16-bit
 * input type with float weights (MIXED PRECISION). A combination of a
 * 16-bit dtype is supported only when bit 5 is set with bit 0, so that a
 * library of ABI v1, which knows no such dtype, is never judged on one.
 * Bit 6 SSMK_CAP_BACKWARD (extension, with bit 0; a 16-bit dtype with bit 9):
 * the library exports ssmk_scan_bwd, ssmk_plan_create_bwd and
 * ssmk_plan_fetch_bwd, and they compute this combination's gradients (THE
 * BACKWARD PASS). Bit 7 SSMK_CAP_BWD_ATOMIC (with bit 6): its summed
 * gradients may differ between two identical calls in their last bits.
 * Bit 8 SSMK_CAP_BWD_OUTPUTS_ONLY (with bit 6): the backward computes the
 * gradients of a loss on out alone, from h = 0, as Mamba's selective_scan_bwd
 * does: grads->dlast_state, grads->dinitial_state and initial_state must be
 * NULL (a call with one of them may return SSMK_EUNSUPPORTED). A library
 * without bit 6 is judged on the forward alone.
 * Bit 9 SSMK_CAP_BWD_NARROW (extension; only for dtype SSMK_F16 or
 * SSMK_BF16, with bits 0, 5 and 6): the backward takes this 16-bit input
 * type (THE BACKWARD PASS, 16-bit inputs). For a 16-bit dtype, bits 6 to 8
 * count only with bit 9, so that a library written when the backward was
 * F32 and F64 alone is judged as before.
 * Bit 10 SSMK_CAP_NONFINITE (extension, with bit 0): where an intermediate
 * overflows the dtype or an input is NaN or ±Inf, the library returns what
 * the suite's non-finite policy asks (docs/abi.md; go doc ./fuzz): an
 * infinity of the reference's sign where the reference is infinite, NaN
 * where it is NaN, either answer where the dtype's own evaluation
 * overflows. The fuzz targets and their corpus then hold it to the policy;
 * without bit 10 they judge, as the accuracy suite does, only the elements
 * whose reference and dtype evaluation are finite and in range.
 * Bit 11 SSMK_CAP_BWD_SAVED (extension, with bit 6): the library exports
 * ssmk_plan_create_bwd_saved, a backward plan whose launch runs the backward
 * alone on what a forward saved (THE BACKWARD PASS, saved states).
 * 0 for an unknown method, dtype, or is_complex other than 0 or 1.
 *
 * What a library declares unsupported is reported as such, never as a
 * failure; a library that declares support and then refuses fails. */
SSMK_API uint32_t ssmk_capabilities(int32_t method, int32_t dtype, int32_t is_complex);

/* Host threads the library may use (the CPU build's OpenMP team). Returns the
 * previous value; n <= 0 leaves it unchanged (so ssmk_set_num_threads(0)
 * reads it). */
SSMK_API int32_t ssmk_set_num_threads(int32_t n);

/* The message of the calling thread's last failed call ("" if none).
 * Valid until that thread's next call into the library. */
SSMK_API const char *ssmk_last_error(void);

/* Elementwise discretization of n pairs (Δ, a):
 *   delta [n] real; A [n] real or complex;
 *   Abar  [n] real or complex: Ā;  Bcoef [n] real or complex: Δ·g, so that B̄ = Bcoef·B.
 * Synchronous, host pointers. n must be >= 1. */
SSMK_API int32_t ssmk_discretize(int32_t method, int32_t dtype, int32_t is_complex, int64_t n, const void *delta,
                                 const void *A, void *Abar, void *Bcoef);

typedef struct ssmk_scan_args {
    int32_t batch, dim, seqlen, dstate;                   /* all >= 1; dstate <= ssmk_max_dstate() */
    int32_t n_groups;                                     /* >= 1; dim % n_groups == 0 */
    int32_t method, dtype, is_complex;                    /* is_complex 0 or 1 */
    int32_t is_variable_B, is_variable_C, delta_softplus; /* 0 or 1 */
    const void *u;                                        /* [batch][dim][seqlen] real */
    const void *delta;                                    /* [batch][dim][seqlen] real */
    const void *A;                                        /* [dim][dstate] real or complex */
    const void *B; /* constant: [dim][dstate]; variable: [batch][n_groups][dstate][seqlen]; complex when is_complex */
    const void *C; /* as B */
    const void *D; /* [dim] real, or NULL */
    const void *z; /* [batch][dim][seqlen] real, or NULL */
    const void *delta_bias; /* [dim] real, or NULL */
    void *out;              /* [batch][dim][seqlen] real */
    void *last_state;       /* [batch][dim][dstate] real or complex, or NULL */
} ssmk_scan_args;

/* Layout guard: 11 int32 fields, 4 bytes of padding, then 10 pointers. */
#if defined(__cplusplus)
static_assert(offsetof(ssmk_scan_args, u) == 48, "ssmk_scan_args layout");
static_assert(sizeof(ssmk_scan_args) == 128, "ssmk_scan_args layout");
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(offsetof(ssmk_scan_args, u) == 48, "ssmk_scan_args layout");
_Static_assert(sizeof(ssmk_scan_args) == 128, "ssmk_scan_args layout");
#endif

/* The forward scan on host pointers; synchronous. */
SSMK_API int32_t ssmk_scan_fwd(const ssmk_scan_args *args);

/* EXTENSION (SSMK_CAP_INITIAL_STATE): the forward scan from a given state.
 * initial_state [batch][dim][dstate], real or complex as last_state, is h
 * before step 0 (the scan above starts from h = 0; NULL here means that
 * too); it is read, never written, and may be the last_state of an earlier
 * call: scanning a sequence in pieces, each from the last state of the one
 * before, is scanning it in one call, up to rounding. SSMK_EUNSUPPORTED for
 * a combination whose capabilities lack bit 3. */
SSMK_API int32_t ssmk_scan_fwd_state(const ssmk_scan_args *args, const void *initial_state);

/* EXTENSION (SSMK_CAP_FEATURES): what the scan of a combination takes, for
 * a kernel that computes part of the forward above, as an engine's fused op
 * does (llama.cpp's ggml_ssm_scan leaves D, z and delta_bias to other ops,
 * always applies softplus, and on some backends takes only some shapes).
 * The suite asks only for what is declared here and reports the rest as not
 * supported; a call outside it may return SSMK_EUNSUPPORTED, and a refusal
 * of a call inside it fails. */

/* Options of the scan (bits of ssmk_feature_set.options). */
#define SSMK_FEAT_D 1u            /* D != NULL: the D·u skip term */
#define SSMK_FEAT_Z 2u            /* z != NULL: the SiLU gate */
#define SSMK_FEAT_DELTA_BIAS 4u   /* delta_bias != NULL */
#define SSMK_FEAT_SOFTPLUS_OFF 8u /* delta_softplus = 0: Δ used as given */
#define SSMK_FEAT_SOFTPLUS_ON 16u /* delta_softplus = 1 */
#define SSMK_FEAT_CONSTANT_BC 32u /* is_variable_B = 0 or is_variable_C = 0 */
#define SSMK_FEAT_VARIABLE_BC 64u /* is_variable_B = 1 or is_variable_C = 1 */
#define SSMK_FEAT_ALL 127u

typedef struct ssmk_feature_set {
    uint32_t options;     /* SSMK_FEAT_* bits: the options the scan takes */
    int32_t head_dim;     /* 0: no structure; k >= 1: Mamba-2 heads of k channels: for every head
                           * (channels h·k … h·k+k−1) A[d][n] is one value for all its channels d and all n,
                           * delta[b][d][t] (and delta_bias[d]) one value per (b, t) for all its channels;
                           * dim is a multiple of k and no head straddles two groups ((dim/n_groups) % k == 0) */
    int32_t dim_multiple; /* dim must be a multiple of this (>= 1) */
    int32_t max_groups;   /* n_groups <= this; 0: any */
    uint32_t dstates;     /* 0: any dstate up to ssmk_max_dstate(); else bit k set: dstate = 2^k is taken */
    int32_t reserved[3];  /* written as 0 */
} ssmk_feature_set;

/* Layout guard: eight 4-byte fields. */
#if defined(__cplusplus)
static_assert(sizeof(ssmk_feature_set) == 32, "ssmk_feature_set layout");
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(ssmk_feature_set) == 32, "ssmk_feature_set layout");
#endif

/* Fills *f for the combination; SSMK_EINVAL for a NULL f, SSMK_EUNSUPPORTED
 * for a combination without bits 0 and 4. */
SSMK_API int32_t ssmk_scan_features(int32_t method, int32_t dtype, int32_t is_complex, ssmk_feature_set *f);

/* EXTENSION (SSMK_CAP_BACKWARD): the gradients of THE BACKWARD PASS. */
typedef struct ssmk_scan_grads {
    const void *dout;        /* [batch][dim][seqlen] real: dL/dout; required */
    const void *dlast_state; /* [batch][dim][dstate] real or complex: dL/dlast_state, or NULL (0) */
    void *du;                /* [batch][dim][seqlen] real; required */
    void *ddelta;            /* [batch][dim][seqlen] real; required */
    void *dA;                /* as A; required */
    void *dB;                /* as B; required */
    void *dC;                /* as C; required */
    void *dD;                /* [dim] real: required when args->D != NULL, else ignored */
    void *dz;                /* [batch][dim][seqlen] real: required when args->z != NULL, else ignored */
    void *ddelta_bias;       /* [dim] real: required when args->delta_bias != NULL, else ignored */
    void *dinitial_state;    /* [batch][dim][dstate] real or complex, or NULL: not computed */
} ssmk_scan_grads;

/* Layout guard: eleven pointers. */
#if defined(__cplusplus)
static_assert(sizeof(ssmk_scan_grads) == 11 * sizeof(void *), "ssmk_scan_grads layout");
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
_Static_assert(sizeof(ssmk_scan_grads) == 11 * sizeof(void *), "ssmk_scan_grads layout");
#endif

/* The backward pass on host pointers; synchronous. args is the forward's
 * (args->out and args->last_state are not used and may be NULL);
 * initial_state as for ssmk_scan_fwd_state (NULL: h = 0). Every array of
 * grads is of args->dtype (SSMK_F32 or SSMK_F64). SSMK_EUNSUPPORTED for a
 * combination whose capabilities lack bit 6. */
SSMK_API int32_t ssmk_scan_bwd(const ssmk_scan_args *args, const void *initial_state, const ssmk_scan_grads *grads);

/* Device-resident plans, for timing without host transfers. */
typedef struct ssmk_plan ssmk_plan;

/* Validates, allocates device buffers and uploads the inputs; keeps no host
 * pointer after returning. *plan is set only on success. */
SSMK_API int32_t ssmk_plan_create(const ssmk_scan_args *args, ssmk_plan **plan);

/* EXTENSION (SSMK_CAP_INITIAL_STATE): a plan whose every launch scans from
 * initial_state (uploaded with the inputs; NULL: from h = 0). */
SSMK_API int32_t ssmk_plan_create_state(const ssmk_scan_args *args, const void *initial_state, ssmk_plan **plan);

/* EXTENSION (SSMK_CAP_BACKWARD): a plan of the backward pass. Uploads the
 * inputs, initial_state, grads->dout and grads->dlast_state; of grads'
 * outputs it keeps only which are non-NULL (dinitial_state is computed
 * only if it is). Each launch computes every gradient on the device;
 * ssmk_plan_fetch_bwd copies them to a grads of the same presence. */
SSMK_API int32_t ssmk_plan_create_bwd(const ssmk_scan_args *args, const void *initial_state,
                                      const ssmk_scan_grads *grads, ssmk_plan **plan);

/* EXTENSION (SSMK_CAP_BWD_SAVED): a backward plan on saved states (THE
 * BACKWARD PASS, saved states): as ssmk_plan_create_bwd, and its creation
 * also runs, to completion, the part of the forward whose results the
 * backward reads, keeping them in the plan; each launch runs the backward
 * alone on them. Fetched with ssmk_plan_fetch_bwd. */
SSMK_API int32_t ssmk_plan_create_bwd_saved(const ssmk_scan_args *args, const void *initial_state,
                                            const ssmk_scan_grads *grads, ssmk_plan **plan);

/* Sync, then copy a backward plan's last gradients into grads' outputs
 * (dout and dlast_state ignored). SSMK_EINVAL before any launch, for a
 * plan of another kind, or for an output the plan was not created with. */
SSMK_API int32_t ssmk_plan_fetch_bwd(ssmk_plan *plan, const ssmk_scan_grads *grads);

/* A plan of n elementwise discretizations (ssmk_discretize's arguments). */
SSMK_API int32_t ssmk_plan_create_discretize(int32_t method, int32_t dtype, int32_t is_complex, int64_t n,
                                             const void *delta, const void *A, ssmk_plan **plan);

/* Enqueue one run. On a GPU it returns before the work is done. */
SSMK_API int32_t ssmk_plan_launch(ssmk_plan *plan);

/* Wait for all enqueued work of the plan. */
SSMK_API int32_t ssmk_plan_sync(ssmk_plan *plan);

/* Device-timed: an event before, iters launches, an event after, sync; total
 * milliseconds in *ms_total. The CPU build uses a monotonic clock. */
SSMK_API int32_t ssmk_plan_time(ssmk_plan *plan, int32_t iters, double *ms_total);

/* Sync, then copy the last run's results to the host: scan plans fill out
 * (and last_state unless NULL); discretize plans fill out = Abar and
 * last_state = Bcoef. SSMK_EINVAL before any launch. */
SSMK_API int32_t ssmk_plan_fetch(ssmk_plan *plan, void *out, void *last_state);

/* Free the plan's buffers; NULL is allowed. */
SSMK_API void ssmk_plan_destroy(ssmk_plan *plan);

/* Device-to-device copy of `bytes`, iters times; *gbytes_per_s counts bytes
 * read plus bytes written (2·bytes per copy): the memory ceiling for
 * roofline figures. */
SSMK_API int32_t ssmk_copy_bandwidth(int64_t bytes, int32_t iters, double *gbytes_per_s);

#ifdef __cplusplus
}
#endif

#endif /* SSMK_H */

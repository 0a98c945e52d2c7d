// Package mamba1 is Mamba-1's family: the selective scan of the ssmk ABI.
// Its problem is the ABI's, ssm.Problem, which the binding (package cudalib)
// shares and so keeps in the floor package; this package holds the rest of
// the family, as packages mamba2 and mamba3 hold theirs:
//
//   - the float64 references every kernel result is compared against: the
//     six discretization methods in scalar form (real and complex A) and
//     matrix form (general real A, with gonum), the selective-scan forward
//     pass (Scan), a float32 evaluation mode, and the backward's adjoint
//     (ScanGrad);
//   - the error model (ErrorScale, GradErrorScale) that turns a difference
//     into a dimensionless test ratio;
//   - the known slips (Slips: a kernel's usual mistakes, each an alternative
//     formula package diagnose compares a failing kernel with);
//   - the generators (Generate, Spec, and rapid's Specs and Problems).
//
// # Discretization
//
// A continuous state-space model h'(s) = A·h(s) + B·u(s), held over a step
// Δ, becomes h[t] = Ā·h[t−1] + B̄·u[t]. For a diagonal A each state is
// independent, and each method maps x = Δ·a (a a diagonal entry, real or
// complex; Δ real) to a pair (Ā, g) with B̄ = Δ·g·B:
//
//	method      Ā                  g                            order of B̄
//	zoh         e^x                1                            1
//	foh         e^x                φ1(x) = (e^x − 1)/x          exact
//	bilinear    (1 + x/2)/(1 − x/2) 1/(1 − x/2)                 2 (Ā too)
//	poly        e^x                1 + x/2 + x²/6               3
//	highorder   e^x                1 + x/2                      2
//	rk4         e^x                1 + x/2 + x²/6 + x³/24       4
//
// The exact input integral of a held input is ∫₀^Δ e^{sa} ds = Δ·φ1(x), so
// foh is exact, and each polynomial method is φ1's Taylor polynomial: its
// local error Δ·|g(x) − φ1(x)| shrinks as Δ^(p+1), p the order above.
// Bilinear (Tustin) is the (1,1) Padé approximant of e^x: Ā − e^x = O(x³)
// and its B̄ = Δ/(1 − x/2) differs from Δ·φ1(x) by Δ·x²/12 + O(Δx³). The sign
// matters: (1 − x/2)/(1 + x/2), as it circulates in some notes, is e^{−x}'s
// approximant and has its pole at x = −2, inside the stable region.
//
// φ1 is evaluated as expm1(x)/x (φ1(0) = 1), which stays accurate as x → 0;
// for complex x, Expm1Complex writes Re(e^z − 1) = expm1(a)·cos b − 2 sin²(b/2)
// so that no term cancels. Complex quotients are Smith's algorithm (Go's
// division) with an operand whose part exceeds 2¹⁰²⁰ scaled by 1/4 first
// (and the quotient scaled back where that changes it): unscaled, its
// intermediates overflow for |x| near the float64 range, where φ1(x) ≈ −1/x
// is a representable subnormal and Δ·φ1 ≈ −1/a is of order one.
// Real and Complex give a method's (Ā, g) (the methods themselves are
// package ssm's vocabulary);
// Discretize gives the matrix forms for a general real A:
// Ā = e^{ΔA}; foh's B̄ = A⁻¹(e^{ΔA} − I)B from the augmented exponential
// exp([[ΔA, ΔB], [0, 0]]), which needs no inverse and works for singular A;
// bilinear Ā = (I − ΔA/2)⁻¹(I + ΔA/2), B̄ = (I − ΔA/2)⁻¹ΔB by an LU solve; the
// polynomial methods as matrix polynomials in ΔA. For diagonal A the matrix
// forms equal the scalar forms entry by entry: that is what "bilinear is
// exact for diagonal A" is measured against.
//
// # The selective scan
//
// Scan evaluates the ABI's forward pass. For every batch row b and channel d,
// with h = 0, for t = 0 … seqlen−1:
//
//	dt   = delta[b,d,t] + delta_bias[d]              (bias optional)
//	dt   = log1p(exp(dt)) if softplus and dt ≤ 20    (else dt unchanged)
//	h[n] = Ā(dt·A[d,n])·h[n] + dt·g(dt·A[d,n])·B[·,n,t]·u[b,d,t]
//	y    = Σₙ C[·,n,t]·h[n]                           (complex A: y = 2·Re Σₙ C·h)
//	y   += D[d]·u[b,d,t]                             (D optional)
//	y    = y·z·sigmoid(z), z = z[b,d,t]              (gate optional)
//
// B and C are constant ([dim][dstate]) or variable per time step
// ([batch][groups][dstate][seqlen], channel d using group d/(dim/groups)).
// For complex A, B and C are complex too, and the output convention
// y = 2·Re(Σ C·h) is that of a real signal written with one state of each
// conjugate pair (Mamba's complex mode): the conjugate states contribute the
// complex conjugate of the sum. LastState is h after the last step.
//
// Scan(p, Float32) evaluates the same recurrence rounding every input,
// intermediate and library result to float32: its distance from the Float64
// result is the problem's natural float32 error, against which a float32
// kernel's error is judged. Scan(p, Float64Natural) is its float64
// counterpart for the fuzzers: the plain formulas, whose intermediates
// (e^x near the top of the range, (e^x − 1)/x, e^a·cos b) overflow where a
// float64 kernel's do, while the Float64 reference evaluates them through
// e^{x/2} and stays finite wherever the true value is.
//
// ScanRowUnbounded evaluates one row as Scan(p, Float64) does but with the
// input terms, states and output sums of unbounded exponent range: where a
// state leaves float64's range on finite inputs and a later Ā of 0 brings
// it back, the float64 recurrence meets ∞·0 = NaN although the value is
// finite (the fuzzers judge such rows against it). ErrorScale's bounds
// follow the same rule: an Ā that is exactly 0 annihilates a bound that
// overflowed float64.
//
// # The error scale
//
// A difference between a kernel and the reference means nothing without a
// yardstick: an error of 1e-6 is rounding for one input and a bug for
// another. ErrorScale gives, for every output and state element, a scale S
// such that a correct implementation with unit roundoff u (2⁻²⁴ for float32,
// 2⁻⁵³ for float64) is within about u·S of the exact result. Tests report the
// ratio
//
//	ratio = |kernel − reference| / (u · S)
//
// in the spirit of LAPACK's test ratios: a correct kernel keeps it O(1)
// whatever the conditioning of the input, and a logic error shows up as a
// ratio of 10⁶ (float32) to 10¹⁴ (float64).
//
// S is a first-order running error analysis (Higham, Accuracy and Stability
// of Numerical Algorithms, §3.3) in units of u, carried along the scan as
// absolute error bounds (ErrorScaleIn, for a given precision, replaces the
// first order by the exact bound where it matters: bilinear within reach of
// its pole, where the rounding of x may land on it):
//
//   - dt: the bias addition errs by u·|v| (v = delta + bias, absent without a
//     bias); softplus multiplies an error in v by σ(v) = e^v/(1+e^v) and adds
//     a few ulp of its own plus 1.25·σ(v)·|v|·u: a kernel may compute e^v as
//     exp2(v·log2e), and rounding that argument costs |v|·u relative, and
//     log2e's own rounding to float 0.224·|v|·u more (exp2Route).
//   - x = dt·a: |a|·S_dt + |x| (one more for complex).
//   - Ā and g: an error in x propagates through the derivative,
//     |Ā'(x)|·S_x and |g'(x)|·S_x; evaluating them from an exact x adds a few
//     ulp of |Ā| for exp plus 1.25·|x|·|Ā| for the exp2(x·log2e) route, for φ1
//     a few ulp (expm1 and a division) or Horner's bound for a polynomial
//     near 0 (Taylor's, or a minimax one within u/20 of φ1) and, for |x| ≥ 1/2 where a kernel may form
//     (e^x − 1)/x, ((2 + 1.25·|x|)·|e^x| + 2|e^x − 1|)/|x|,
//     2k·u·Σ|cᵢ||x|ⁱ for a degree-k Horner polynomial, and
//     for bilinear u·(1+|x|/2)(1+|Ā|)/|1−x/2| (num and den each rounded, then
//     divided): near the pole x = 2 this grows like the true conditioning.
//   - β = dt·g·B·u: S_β = |g B u|·S_dt + |dt B u|·S_g + 3|β|.
//   - the state: with the magnitude recurrence H' = |Ā|·H + |β| (which bounds
//     |h| whatever cancels), S_h' = |Ā|·S_h + S_Ā·H + S_β + 2(|Ā|H + |β|).
//   - the output: S_y = Σ|C|·S_h + N·Σ|C|·H (any summation order of N terms);
//     D adds u·(|y| + (N + 2)·|D·u|), D·u being one more summand in any place
//     (Mamba's kernel starts the sum with it); the gate multiplies by |z·σ(z)| and adds
//     (5 + 1.25·(1 − σ(z))·|z|)·u of |y| (the last term: e^{−z} by exp2).
//
// Complex arithmetic doubles the evaluation constants (a complex product is
// within √5·u). The scale is a bound, so a correct kernel's ratio is
// usually well below 1; thresholds in the verification suite are measured
// maxima of correct kernels with a margin.
//
// Underflow is bounded apart from S, in units of the precision's smallest
// normal number η (Scale's TinyOut and TinyState; Ratio adds η·T to u·S):
// each rounding of an update may flush a result below η (flush-to-zero
// kernels included), as may Ā and Δ, and a partial product of Δ·g·B·u that
// underflows loses up to η times the factors multiplied after it
// (flushLoss: Δ·B = 1e-42 times u = 1e38 in float32).
//
// # The backward pass
//
// ScanGrad is the adjoint of the scan: the gradients of the real loss
// L = Σ dout·out + Σ dlast·last_state with respect to every input. With
// λ_t = ∂L/∂h_t, k = 1 for real A (y = Σ C·h) and 2 for complex A
// (y = 2·Re Σ C·h), and dy the gradient reaching y (dout, times z·σ(z)
// under the gate), it runs back in time
//
//	λ_t    = conj(Ā_{t+1})·λ_{t+1} + k·dy_t·conj(C_t)          (λ after the last step: dlast)
//	dC_t  += k·dy_t·conj(h_t)          dB_t += conj(Δ·g·u)·λ_t    du_t = Re(λ_t·conj(Δ·g·B)) + dy_t·D
//	∂L/∂x  = conj(Ā'(x))·conj(h_{t−1})·λ_t + conj(g'(x))·conj(Δ·u·B)·λ_t
//	dΔ_t   = σ(v)·Σₙ [Re(λ_t·conj(g·B·u)) + Re(∂L/∂x·conj(a))]   dA += Δ·∂L/∂x
//	dz_t   = dout·y·σ(z)(1 + z(1 − σ(z)))                          dinitial_state = conj(Ā_0)·λ_0
//
// with σ(v) softplus' derivative below its threshold (1 above it). For a
// complex input w = p + iq the gradient is ∂L/∂p + i·∂L/∂q (PyTorch's
// w.grad): for w' = c·w it is conj(c) times the gradient of w', and through
// a holomorphic f it is conj(f'(x)) times. CoefDeriv gives each method's
// dĀ/dx and dg/dx (φ1' by its series near 0). Both are tested against
// Richardson-extrapolated differences of the forward, which share no code
// with them.
//
// The matrix forms have their derivatives too: DiscretizeDeriv gives the
// directional derivative of Discretize's (Ā, B̄) in (Δ, A, B), through
// ExpFrechet, the Fréchet derivative of the matrix exponential by scaling
// and squaring on its Taylor series, tested against Van Loan's
// block-triangular exponential exp([[X, E], [0, X]]) (gonum), against
// differences of Discretize, and, for diagonal A, against CoefDeriv.
//
// GradErrorScale is the backward's error model, built like the forward's:
// from the forward's bounds H and S at every step it carries a magnitude
// bound Λ and a scale S_λ of the adjoint back in time,
//
//	S_λ,t = |Ā_{t+1}|·S_λ,t+1 + S_Ā,t+1·Λ_{t+1} + k·|C|·S_dy + 2(|Ā_{t+1}|·Λ_{t+1} + k·|C·dy|),
//
// bounds each term of a gradient by its factors' errors plus its own
// roundings (the derivatives' evaluation errors include φ1' near 0, the
// bilinear pole's conditioning and the gate's cancellation near z ≈ −1.28),
// and adds K·Σ|terms| to a sum of K terms, any order of summation. The
// ratio and the threshold are the forward's.
//
// # Problems for tests
//
// A Spec (shape, flags and input distribution) plus a seed gives the same
// Problem on every machine (Generate), and Specs draws Specs with rapid so
// that a failing case shrinks to the smallest shape, the fewest features
// and seed 0. Two input distributions:
//
//   - Realistic is Mamba's: S4D-real A[d][n] = −(n+1) or S4D-lin complex
//     A[d][n] = −1/2 + iπn; the step from softplus(delta + delta_bias) with
//     delta_bias the inverse softplus of a log-uniform dt in [1e-3, 1e-1]
//     and a small delta (or, without softplus, that dt directly); u, B, C, z
//     standard normal, D near 1.
//   - Stress widens everything the kernels must survive: A near 0 (foh's
//     0/0), large negative A·Δ (exp underflow to 0), positive A (unstable,
//     bounded by the method's own growth (bilinear's pole at Δ·a = 2)
//     so that the state stays finite in float32 over the sequence),
//     log-uniform magnitudes over six decades with random signs, and Δ up to
//     10 with large biases that cross softplus's threshold at 20.
//
// # Speed
//
// The reference sits in every test's hot path. BenchmarkScanReference reports
// nanoseconds per state update; the README compares it with the same loop in
// C.
package mamba1

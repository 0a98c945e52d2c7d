package mamba1

import (
	"math"
	"math/bits"
	"math/cmplx"

	"ssmverify/ssm"
)

// Scale holds, for every output and last-state element, the error scale S
// of the running error analysis described in the package documentation: a
// correct implementation working with unit roundoff u has
// |kernel − exact| ≲ u·S (first order in u). S is dimensionless in the
// sense that it does not depend on the precision; the test ratio is
// |kernel − reference| / (u·S).
//
// Out has one entry per output element ([Batch][Dim][Seqlen]); LastState
// has one entry per state element ([Batch][Dim][Dstate]), complex elements
// included: compare it with the modulus of the complex error.
//
// TinyOut and TinyState bound the absolute error that underflow can add, in
// units of the precision's smallest normal number η (Precision.Tiny): each
// operation may flush a result below η to zero (flush-to-zero kernels
// included), e^x underflows for very negative x, and sigmoid(z) underflows
// for very negative z. Use Ratio to combine both parts.
type Scale struct {
	Out, LastState     []float64
	TinyOut, TinyState []float64
	// MagOut and MagState bound the magnitude of every intermediate of the
	// element's evaluation, by the magnitude recurrence H' = |Ā|·H + |β|:
	// Σ|C|·H + |D·u| for an output (times |z| with the gate, whose y·z
	// precedes the sigmoid), H for a state. Where one exceeds a dtype's
	// largest number, some order of evaluation overflows in that dtype
	// even if the result does not (the fuzzers' policy uses this).
	MagOut, MagState []float64
	// DecayOut and DecayState bound the product of |Ā| over any run of
	// consecutive steps up to the element, P_t = |Ā_t|·max(1, P_{t−1}) (the
	// largest over the states for an output). A time-parallel scan forms
	// such products (the decay of a run of steps, composed across lanes),
	// which overflow a dtype in an unstable recurrence (|Ā| > 1) although
	// neither the states nor the sequential evaluation need to: multiplied
	// by a zero state they give ∞·0 = NaN (the fuzzers' policy uses this).
	DecayOut, DecayState []float64
	// PeakOut, PeakState, ReachOut and ReachState bound what a time-parallel
	// scan may lose to underflow beyond the sequential evaluation. It forms
	// the products P(s,t) of Ā over runs of steps and composes
	// h_t = P(s,t)·h_s + …; a product below η flushes and loses
	// P(s,t)·|h_s|, which is at most η·H_s and at most
	// R_t = max_{s<t} P(s,t)·H_s (R_t = |Ā_t|·max(R_{t−1}, H_{t−1})), once
	// per composition on the way to h_t (at most ⌈log2 L⌉ + 1). Peak is
	// (⌈log2 L⌉ + 1)·max_{s<t} H_s in units of η, Reach (⌈log2 L⌉ + 1)·R_t
	// absolute; for an output, Σ|C|·each times the gate. The fuzzers' policy
	// allows min(η·Peak, Reach) more absolute error (FuzzScan on the H200: a
	// float32 state of 5.5e26 decayed by 10⁻⁵⁵ over ten steps to −4.7e-29;
	// the CUDA build's product of those ten Ā flushed to 0 and left
	// 1.3e-43). The verification suite, whose inputs stay far from η, does
	// not.
	PeakOut, PeakState, ReachOut, ReachState []float64
	// PathMagOut, PathMagState, PathScaleOut and PathScaleState bound the
	// states on the way to the element: the largest magnitude bound H and
	// error scale S (in units of u) that a state reaches at any step up to
	// the element's (any state of the row, for an output, whose sum reads
	// them all). MagOut and MagState bound the element's own terms, not a
	// state that peaked earlier and has decayed since. A kernel's state
	// may reach PathMag + u·PathScale on the way, so where that passes a
	// dtype's largest number an evaluation in that dtype may overflow
	// although the reference's does not (FuzzScan on the H200, bilinear
	// float32: Δ·g·B·u = FLT_MAX·(1 − 2.3·10⁻²⁵) at one step, rounded to
	// FLT_MAX by the CPU build and to ∞ by the GPU's reciprocal, both
	// within the error model; the state five steps later is 0.52·FLT_MAX).
	PathMagOut, PathMagState, PathScaleOut, PathScaleState []float64
}

// Ratio is the test ratio |diff| / (u·scale + η·tiny) for a precision with
// unit roundoff u and smallest normal η: ≲ 1 for a correct implementation.
// A zero difference has ratio 0 whatever the scale.
func Ratio(diff, scale, tiny float64, prec ssm.Precision) float64 {
	diff = math.Abs(diff)
	if diff == 0 {
		return 0
	}
	return diff / (prec.UnitRoundoff()*scale + prec.Tiny()*tiny)
}

// coefBound is what the error analysis needs of a method at x: the
// magnitudes of Ā and g, of their derivatives in x (how an error in x
// propagates), and the error of evaluating each from an exact x, in units
// of u (absolute, not relative).
type coefBound struct {
	abar, dabar, evalA float64
	g, dg, evalG       float64
}

func boundCoef(m ssm.Method, x complex128, isComplex bool) coefBound {
	// Complex arithmetic rounds more: a complex product is within √5·u, a
	// quotient within a few u. cf doubles every evaluation constant.
	cf := 1.0
	if isComplex {
		cf = 2
	}
	r := absC(x)
	var c coefBound
	if m == ssm.Bilinear {
		dn := absC(1 - x/2)
		c.abar = absC(quo(1+x/2, 1-x/2))
		c.dabar = 1 / (dn * dn)
		// num and den each carry u·(1 + |x|/2); the quotient adds u·|Ā|.
		c.evalA = cf * ((1+r/2)*(1+c.abar)/dn + 2*c.abar)
		c.g = 1 / dn
		c.dg = 0.5 / (dn * dn)
		c.evalG = cf * ((1+r/2)/(dn*dn) + 2/dn)
		return c
	}
	e := math.Exp(real(x))
	c.abar, c.dabar = e, e
	// exp is within an ulp or two; computed as exp2(x·log2e), the argument
	// adds exp2Route·|x|·u relative (exp's condition number is |x|).
	c.evalA = cf * (2 + exp2Route*r) * e
	// Horner's rule for a degree-k polynomial errs by at most 2k·u·Σ|cᵢ||x|ⁱ.
	horner := func(k int, coef ...float64) float64 {
		s, p := 0.0, 1.0
		for _, ci := range coef {
			s += math.Abs(ci) * p
			p *= r
		}
		return 2 * float64(k) * cf * s
	}
	switch m {
	case ssm.ZOH:
		c.g, c.dg, c.evalG = 1, 0, 0
	case ssm.FOH:
		phi := Phi1Complex(x)
		c.g = absC(phi)
		c.dg = absC(dphi1(x, phi))
		c.evalG = 4 * cf * c.g // expm1 and a division
		if r < 0.5 {
			// A kernel may use a polynomial for φ1 near 0 (Taylor's, or a
			// minimax one within u/20 of φ1, whose coefficients are within a
			// few percent of Taylor's), by Horner's rule. Step k's two
			// roundings are at most u·(|x·q_{k+1}| + |q_k|) ≤ 2u·Σ_{j≥k}
			// |c_j||x|^{j−k}, weighted by |x|^k in the result: in all
			// 2u·Σ_j (j+1)|c_j||x|^j = 2u·e^|x| for c_j = 1/(j+1)!; the
			// coefficients' own rounding adds u·Σ|c_j||x|^j = u·φ1(|x|),
			// the minimax error u/20. Not the generic 2k·u·Σ|c_j||x|^j
			// (28u for degree 14): that admitted (e^x − 1)/x from |x| =
			// 0.05 on, 20u of cancellation (mutant 14 survived it).
			c.evalG = math.Max(c.evalG, cf*(2*math.Exp(r)+Phi1(r)+0.05))
		}
		if r >= 0.5 {
			// A kernel may take (e^x − 1)/x from the e^x it already has
			// (exact enough away from 0): e's (2 + |x|)·u, the subtraction and
			// the division.
			c.evalG = math.Max(c.evalG, cf*((2+exp2Route*r)*e+2*absC(cmplx.Exp(x)-1))/r)
		}
	case ssm.HighOrder:
		c.g = absC(1 + x/2)
		c.dg = 0.5
		c.evalG = horner(1, 1, 0.5)
	case ssm.Poly:
		c.g = absC(1 + x*(0.5+x/6))
		c.dg = absC(0.5 + x/3)
		c.evalG = horner(2, 1, 0.5, 1.0/6)
	case ssm.RK4:
		c.g = absC(1 + x*(0.5+x*(1.0/6+x/24)))
		c.dg = absC(0.5 + x*(1.0/3+x/8))
		c.evalG = horner(3, 1, 0.5, 1.0/6, 1.0/24)
	}
	return c
}

// dphi1 is φ1'(x) = (e^x − φ1(x))/x, by its Taylor series near 0 where that
// quotient cancels. Only its magnitude is used, so the series' truncation
// (below 0.5⁴/144 relative to 1/2) does not matter.
func dphi1(x, phi complex128) complex128 {
	if absC(x) < 0.5 {
		return 0.5 + x*(1.0/3+x*(1.0/8+x/30))
	}
	return quo(cmplx.Exp(x)-phi, x)
}

// ErrorScale returns the error scale of every output and last-state element
// of p, by the running error analysis of the package documentation. It
// validates p first.
func ErrorScale(p *ssm.Problem) (*Scale, error) { return errorScale(p, 0, nil) }

// ErrorScaleIn is ErrorScale for a kernel of precision prec: the same
// analysis, except where the first-order bound on bilinear's Ā and g is not
// a bound. Within u·S_x of x, the rounding of x in that precision, the
// pole's distance |1 − x/2| may shrink by u·S_x/2: Ā(x̂) − Ā(x) =
// (x̂ − x)/((1 − x/2)(1 − x̂/2)) exceeds the first-order |Ā'(x)|·|x̂ − x| by
// up to F = |1 − x/2|/(|1 − x/2| − u·S_x/2), and where u·S_x/2 reaches
// |1 − x/2| the rounded x may lie on the pole or past it: Ā and g are then
// unbounded and the step's scale is +Inf (a correct kernel's state is
// arbitrary from there on, until an Ā of exactly 0). FuzzScan on the H200
// (FuzzScan/1e247606c600d547): x = 2 + 1.2e-7 rounds to exactly 2 in
// float32, and the float32 state was 4.4e16 where the exact one is 7e-14.
func ErrorScaleIn(p *ssm.Problem, prec ssm.Precision) (*Scale, error) {
	return errorScale(p, prec.UnitRoundoff(), nil)
}

// errorScale is ErrorScale with bilinear's bound exact in x's rounding for
// unit roundoff u (ErrorScaleIn), or first order for u = 0. A non-nil
// onState sees every state's magnitude bound H and error scale S after
// each step (row = b·Dim + d), and its underflow bound T: the backward's
// error analysis starts from them.
func errorScale(p *ssm.Problem, u0 float64, onState func(row, t, n int, H, S, T float64)) (*Scale, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	N, L := p.Dstate, p.Seqlen
	states := p.Batch * p.Dim * N
	s := &Scale{Out: make([]float64, p.OutLen()), LastState: make([]float64, states),
		TinyOut: make([]float64, p.OutLen()), TinyState: make([]float64, states),
		MagOut: make([]float64, p.OutLen()), MagState: make([]float64, states),
		DecayOut: make([]float64, p.OutLen()), DecayState: make([]float64, states),
		PeakOut: make([]float64, p.OutLen()), PeakState: make([]float64, states),
		ReachOut: make([]float64, p.OutLen()), ReachState: make([]float64, states),
		PathMagOut: make([]float64, p.OutLen()), PathMagState: make([]float64, states),
		PathScaleOut: make([]float64, p.OutLen()), PathScaleState: make([]float64, states)}
	// Per-operation constants in units of u.
	cBeta, cH, cSum := 3.0, 2.0, float64(N)
	if p.Complex {
		cBeta, cH, cSum = 5, 4, float64(N+2)
	}
	H := make([]float64, N)  // magnitude recurrence H' = |Ā|H + |β|
	Sh := make([]float64, N) // error scale of h
	Th := make([]float64, N) // underflow scale of h
	P := make([]float64, N)  // largest product of consecutive |Ā| ending here
	Pk := make([]float64, N) // largest magnitude H at an earlier step
	R := make([]float64, N)  // largest decayed magnitude P(s,t)·H_s of an earlier step
	PS := make([]float64, N) // largest Sh up to this step (the largest H is max(Pk, H))
	// compositions of a time-parallel scan on the way to one step
	depth := math.Ceil(math.Log2(float64(L))) + 1
	a := make([]complex128, N)
	for b := 0; b < p.Batch; b++ {
		for d := 0; d < p.Dim; d++ {
			rp := rowParamsOf(p, b, d)
			for n := 0; n < N; n++ {
				H[n], Sh[n], Th[n], P[n], Pk[n], R[n], PS[n] = 0, 0, 0, 0, 0, 0, 0
				// An initial state is an exact input (the kernel gets it in
				// its dtype, as the reference does): its magnitude, no error.
				if p.InitialState != nil {
					k := ((b*p.Dim+d)*N + n) * p.ElemWords()
					H[n] = math.Abs(p.InitialState[k])
					if p.Complex {
						H[n] = math.Hypot(p.InitialState[k], p.InitialState[k+1])
					}
				}
				if p.Complex {
					a[n] = complex(p.A[2*(d*N+n)], p.A[2*(d*N+n)+1])
				} else {
					a[n] = complex(p.A[d*N+n], 0)
				}
			}
			rowPH, rowPS := 0.0, 0.0 // the largest H and Sh of the row's states so far
			for t := 0; t < L; t++ {
				i := rp.row + t
				u := math.Abs(p.U[i])
				dt, sdt := deltaScale(p, p.Delta[i], d)
				bi, ci := rp.bBase+t*rp.bStep, rp.cBase+t*rp.cStep
				var sumCH, sumCS, sumCT, sumCP, sumCR, maxP float64
				for n := 0; n < N; n++ {
					x := complex(dt, 0) * a[n]
					cb := boundCoef(p.Method, x, p.Complex)
					sx := absC(a[n])*sdt + absC(x)*(1+boolf(p.Complex))
					sA := cb.dabar*sx + cb.evalA
					sg := cb.dg*sx + cb.evalG
					if p.Method == ssm.Bilinear && u0 > 0 {
						f := poleFactor(x, u0*sx)
						sA, sg = sA*f, sg*f
					}
					bv, cv := elemAbs(p, p.B, bi), elemAbs(p, p.C, ci)
					// Four-factor products through prod: Δ·B·u alone can
					// underflow float64 where the bound it is part of does
					// not (FuzzScan: Δ·|B|·u = 3e-345 beside sg = 1e111 gave
					// the φ1 term of sBeta as 0, an output's scale 83× short).
					beta := prod(math.Abs(dt), cb.g, bv, u)
					sBeta := prod(cb.g, bv, u, sdt) + prod(math.Abs(dt), bv, u, sg) + cBeta*beta
					// Where e^x underflows to exactly 0 in float64 (x < −745.2),
					// so does every faithful or flushing exp: Ā = 0 exactly
					// annihilates a bound that overflowed float64 (mul0), as
					// it annihilates the state, instead of ∞·0 = NaN (FuzzScan
					// on the H200: a state of 1e341 met Ā = e^(−1.35e35)), and
					// Ā adds no flush error there.
					flush := H[n]
					if cb.abar == 0 {
						flush = 0
					}
					Sh[n] = mul0(cb.abar, Sh[n]) + mul0(sA, H[n]) + sBeta + cH*(mul0(cb.abar, H[n])+beta)
					// Ā may flush to 0 (error ≤ η·H), and each of the update's
					// four roundings may flush a result below η. So may Δ itself
					// (softplus of a very negative value is subnormal or 0: an
					// absolute error up to η), which reaches h through x = Δ·a
					// and through B̄ = Δ·g·B (FuzzScan found a float32 state of
					// 1e-23 off by 1e-26 through a subnormal Δ times |g·B·u|
					// = 1e20).
					// And a partial product of β's factors that underflows
					// loses up to η, which the factors after it multiply
					// (flushLoss).
					Th[n] = mul0(cb.abar, Th[n]) + flush + 4 + mul0(prod(absC(a[n]), cb.dabar), H[n]) + prod(cb.g, bv, u) +
						flushLoss(math.Abs(dt), cb.g, bv, u)
					Pk[n] = math.Max(Pk[n], H[n])
					R[n] = mul0(cb.abar, math.Max(R[n], H[n]))
					H[n] = mul0(cb.abar, H[n]) + beta
					P[n] = mul0(cb.abar, math.Max(1, P[n]))
					PS[n] = math.Max(PS[n], Sh[n])
					if onState != nil {
						onState(b*p.Dim+d, t, n, H[n], Sh[n], Th[n])
					}
					rowPH, rowPS = math.Max(rowPH, H[n]), math.Max(rowPS, Sh[n])
					maxP = math.Max(maxP, P[n])
					sumCH += cv * H[n]
					sumCS += cv * Sh[n]
					sumCT += cv * Th[n]
					sumCP += mul0(cv, Pk[n])
					sumCR += mul0(cv, R[n])
					bi += rp.bStride
					ci += rp.cStride
				}
				Y, sy, ty, py, ry := sumCH, sumCS+cSum*sumCH, sumCT+2*float64(N), depth*sumCP, depth*sumCR
				if p.Complex {
					Y, sy, ty, py, ry = 2*Y, 2*sy, 2*ty, 2*py, 2*ry
				}
				if p.D != nil {
					// D·u is one more summand, in any place: a kernel may
					// start the sum with it (Mamba's does, and ours on the
					// GPU), so that each of the N additions rounds a partial
					// sum that holds it; besides, the product's rounding and
					// the last addition's.
					du := math.Abs(p.D[d]) * u
					sy += Y + (float64(N)+2)*du
					ty += 2
					Y += du
				}
				if p.Z != nil {
					z := p.Z[i]
					sig := 1 / (1 + math.Exp(-z))
					gate := math.Abs(z * sig)
					// sigmoid and the products: ≈ 5u relative, plus e^{−z}'s
					// exp2Route·|z|·u damped by 1 − σ(z).
					if gate == 0 && z != 0 && sig != 0 {
						// z·σ(z) underflowed (a subnormal z) while y·z·σ(z)
						// need not: apply |z| and σ one after the other
						// (FuzzScan found S = 0 for an output of 2e-58).
						sy = (sy + (5+(1-sig)*exp2Route*math.Abs(z))*Y) * math.Abs(z) * sig
					} else {
						sy = gate * (sy + (5+(1-sig)*exp2Route*math.Abs(z))*Y)
					}
					// sigmoid(z) flushes to 0 below η: an error of |y·z|·η.
					ty = gate*ty + Y*math.Abs(z) + 3
					py, ry = mul0(gate, py), mul0(gate, ry)
					Y *= math.Max(1, math.Abs(z)) // y·z is formed before σ damps it
				}
				s.Out[i], s.TinyOut[i], s.MagOut[i], s.DecayOut[i], s.PeakOut[i], s.ReachOut[i] = sy, ty, Y, maxP, py, ry
				s.PathMagOut[i], s.PathScaleOut[i] = rowPH, rowPS
			}
			copy(s.LastState[(b*p.Dim+d)*N:], Sh)
			copy(s.TinyState[(b*p.Dim+d)*N:], Th)
			copy(s.MagState[(b*p.Dim+d)*N:], H)
			copy(s.DecayState[(b*p.Dim+d)*N:], P)
			copy(s.PathScaleState[(b*p.Dim+d)*N:], PS)
			for n := range N {
				s.PathMagState[(b*p.Dim+d)*N+n] = math.Max(Pk[n], H[n])
				s.PeakState[(b*p.Dim+d)*N+n] = depth * Pk[n]
				s.ReachState[(b*p.Dim+d)*N+n] = depth * R[n]
			}
		}
	}
	return s, nil
}

// exp2Route is what computing e^x as exp2(x·log2e) in float adds to e^x's
// relative error, in units of u per unit of |x|: the rounding of the product
// x·log2e (|x|·u) and that of log2e itself, which float rounds to
// 1.44269502…, 0.224·u below its value: 1.224·|x|·u. A model that counted
// |x|·u alone was exceeded by 13% at v = −44.5 by log1pf(exp2f(v·log2e)),
// measured on every float (docs/journal/findings.md).
const exp2Route = 1.25

// deltaScale returns the step dt and its error scale: the bias addition
// carries u·|v|, softplus (log1p∘exp) damps it by σ(v) = e/(1+e) and adds
// its own rounding.
func deltaScale(p *ssm.Problem, raw float64, d int) (dt, sdt float64) {
	v, sv := raw, 0.0
	if p.DeltaBias != nil {
		v += p.DeltaBias[d]
		sv = math.Abs(v)
	}
	if p.Softplus && v <= 20 {
		e := math.Exp(v)
		dt = math.Log1p(e)
		sigma := e / (1 + e)
		// e^v carries the error of v, its own ulp and, computed as
		// exp2(v·log2e), exp2Route·|v|·u; log1p damps all of it by σ(v). At
		// v = −∞ (a raw Δ or delta_bias of −Inf) the step is exactly 0
		// with no error, the limit of σ(v)·|v|, not 0·∞ = NaN.
		return dt, mul0(sigma, sv+exp2Route*math.Abs(v)+2) + 2*dt
	}
	return v, sv
}

func elemAbs(p *ssm.Problem, s []float64, i int) float64 {
	if p.Complex {
		return math.Hypot(s[i], s[i+1])
	}
	return math.Abs(s[i])
}

// poleFactor is ErrorScaleIn's F for bilinear at x whose rounding may move
// it by up to e: |1 − x/2|/(|1 − x/2| − e/2), or +Inf where e/2 reaches
// |1 − x/2| (the rounded x may be on the pole).
func poleFactor(x complex128, e float64) float64 {
	dn := absC(1 - x/2)
	if e/2 >= dn {
		return math.Inf(1)
	}
	return dn / (dn - e/2)
}

// The partial products below which flushLoss counts a loss: η/u of float32
// and of float64. Above η/u a loss of η is within the u·|β| that the scale
// already allows for rounding β.
const (
	flushLossBelow32 = 0x1p-102
	flushLossBelow64 = 0x1p-969
)

// flushLoss bounds, in units of η, what underflow inside the product
// β = f₀·f₁·f₂·f₃ of nonnegative factors (|Δ|, |g|, |B|, |u|) can cost
// beyond the final product's own flush. Whatever order a kernel takes,
// ((Δ·g)·B)·u, B·(Δ·u) or (Δ·u)·(g·B), it forms at most two partial
// products; one whose magnitude is below η loses up to η (all of it when
// the kernel flushes to zero, half an ulp of the subnormals otherwise), and
// every factor multiplied after it scales that loss: at most η times the
// product of the other factors. A complex product's components may flush
// where its magnitude does not, so a partial product counts from η/u up.
// The bound is 2·max, over the partial products below float32's η/u, of
// the product of the factors outside it; 0 when a factor is 0 (β is then
// exactly 0 in any order). The scale does not know the precision, so it
// takes float32's threshold, the larger, except where the factors outside
// overflow float64 (two of them, one beyond 10¹⁵⁴: a float64 problem), and
// there only float64's threshold counts (else a partial product that no
// float64 kernel can flush would make the bound ∞ and its row unjudged).
// FuzzScan on the H200 found what this covers: Δ·B = 1.07e-42, a float32
// subnormal rounded to 3 digits, times u of up to 2.7e38 put an output off
// by 5e-4 relative, 127 times the scale without it.
func flushLoss(fs ...float64) float64 {
	if smallestPartial(fs) >= flushLossBelow32 {
		return 0 // no partial product counts: the common case, without the 2ⁿ subsets
	}
	return flushLossSubsets(fs)
}

// flushLossSubsets is flushLoss by enumerating the partial products.
func flushLossSubsets(fs []float64) float64 {
	worst := 0.0
	partialProducts(fs, func(in, out float64) {
		if in < flushLossBelow64 || (in < flushLossBelow32 && out <= math.MaxFloat64) {
			worst = math.Max(worst, out)
		}
	})
	return 2 * worst
}

// partialProducts calls f with every partial product of two or more of
// the factors fs but not all of them (some order of multiplication forms
// it) and the product of the factors outside it; not at all when a factor
// is 0 (the product is then exactly 0 in any order).
func partialProducts(fs []float64, f func(in, out float64)) {
	for _, x := range fs {
		if x == 0 {
			return
		}
	}
	for mask := 1; mask < 1<<len(fs)-1; mask++ {
		if k := bits.OnesCount(uint(mask)); k < 2 || k > len(fs)-1 {
			continue
		}
		in, out := 1.0, 1.0
		for i, x := range fs {
			if mask&(1<<i) != 0 {
				in *= x
			} else {
				out *= x
			}
		}
		f(in, out)
	}
}

// smallestPartial is the smallest product of two to n − 1 of the n
// nonnegative factors fs, rounded (NaN propagates, a product that
// underflows in float64 is below any threshold, so the callers' enumeration
// or logarithms decide those): the two smallest factors times every other
// factor below 1 but the largest. The scales call it per state and step, so
// it sorts a copy on the stack; +Inf for fewer than three factors, which
// have no such product.
func smallestPartial(fs []float64) float64 {
	n := len(fs)
	if n < 3 || n > maxFactors {
		return math.Inf(1)
	}
	var buf [maxFactors]float64
	s := buf[:n]
	for i, f := range fs {
		if f != f {
			return f
		}
		s[i] = f
	}
	for i := 1; i < n; i++ { // insertion sort: n ≤ maxFactors
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	p := s[0] * s[1]
	for _, f := range s[2 : n-1] {
		if f < 1 {
			p *= f
		}
	}
	return p
}

// maxFactors is the most factors of one term of the scales (the backward's
// reach nine); smallestPartial leaves longer lists to the slow paths.
const maxFactors = 12

// mul0 is a·b for the nonnegative bounds of ErrorScale, with 0·∞ = 0: an
// exact zero factor — Ā underflowed to 0, or a state that is exactly 0 —
// annihilates the other factor's bound where that overflowed float64, as
// the product does in the real numbers. Where a kernel itself meets ∞·0
// (a time-parallel scan's products of Ā on a zero state), the fuzzers'
// policy judges by DecayOut, not by this scale.
func mul0(a, b float64) float64 {
	if a == 0 || b == 0 {
		return 0
	}
	return a * b
}

// prod is the product of nonnegative bounds, within a rounding per factor:
// where a partial product leaves float64's normal range, the factors are
// multiplied as wide numbers of unbounded exponent (unbounded.go), so that
// no partial product underflows or overflows where the whole does not. Special values
// are IEEE multiplication's, whatever the order of the factors: a zero and
// an infinite factor give NaN (mul0 is the place for 0·∞ = 0), a NaN factor
// NaN.
func prod(fs ...float64) float64 {
	zero, inf := false, false
	for _, f := range fs {
		switch {
		case f != f:
			return f
		case f == 0:
			zero = true
		case math.IsInf(f, 0):
			inf = true
		}
	}
	switch {
	case zero && inf:
		return math.NaN()
	case zero:
		return 0
	case inf:
		return math.Inf(1)
	}
	p := 1.0
	for _, f := range fs {
		p *= f
		if p < 0x1p-1022 || p > math.MaxFloat64 {
			w := wideOf(1, 0)
			for _, f := range fs {
				w = w.mul(wideOf(f, 0))
			}
			p, _ = w.float64s()
			return p
		}
	}
	return p
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// DiscretizeScale returns the error scales of ssmk_discretize's two outputs
// at (Δ, a): Ā and Bcoef = Δ·g, in units of u, by the same model as
// ErrorScale (x = Δ·a carries |x|·u, Ā and g propagate it through their
// derivatives and add their evaluation error, the product Δ·g one more u).
// For complex a compare with the modulus of the error.
func DiscretizeScale(m ssm.Method, delta float64, a complex128, isComplex bool) (sAbar, sBcoef float64) {
	x := complex(delta, 0) * a
	cb := boundCoef(m, x, isComplex)
	sx := absC(x) * (1 + boolf(isComplex))
	sAbar = cb.dabar*sx + cb.evalA
	sBcoef = math.Abs(delta)*(cb.dg*sx+cb.evalG) + math.Abs(delta)*cb.g
	return sAbar, sBcoef
}

// absC is |z|, as cmplx.Abs gives it (Hypot(v, 0) is |v| exactly) but
// without Hypot's scaling where z is real: the scales take the magnitudes
// of real A's coefficients per state and step.
func absC(z complex128) float64 {
	if imag(z) == 0 {
		return math.Abs(real(z))
	}
	return cmplx.Abs(z)
}

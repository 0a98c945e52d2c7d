package mamba3

import (
	"math"

	"ssmverify/mamba2"
)

// The PTX approximations' bounds (PTX ISA, "Floating-point instructions").
const (
	TanhApproxRel   = 0x1p-11 // tanh.approx.f32, relative
	SinCosApproxAbs = 0x1p-20 // sin.approx.f32, cos.approx.f32, absolute
	SigmoidApprox   = 0x1p-12 // ½·tanh.approx(x/2) + ½, absolute
)

// Scale holds the error model's scale of every element of a forward's
// outputs, in units of the arithmetic's u (with η·Tiny for underflow):
// y like V, and the final four-part state.
type Scale struct {
	Y, TinyY                         []float64
	Angle, SSM, K, V                 []float64
	TinyAngle, TinySSM, TinyK, TinyV []float64
}

// ErrorScale is the error model of the forward pass of p under
// p.Arithmetic. Each output is a sum of terms (β·k_prev⊗v_prev or
// γ·k⊗v entered at step s, decayed to t, times q_t), each bounded through
// norms of the rotated pairs, with relative errors of u times
//
//	k0 + E_ts (package mamba2: the chunked or the sequential recurrence)
//	+ (ε_tanh/u + 3)·(Φ_t − Φ_s) + 2π·(t − s)    the rotation's angle
//	+ 2·ε_sincos/u                              its sine and cosine
//	+ ε_σ/u·Δ_s·(…)/|β or γ|                    λ = σ(Trap)
//	+ 4·u_operand/u                              rounded operands
//	+ 2·u_in/u  (β's terms, with HandoffKV)      a handed k_prev, v_prev
//
// where Φ_t is the accumulated |tanh(Angles)·π·DT| (the angle's increments
// err relatively by tanh's error, and the wrapped angle rounds by 2π·u per
// step). The relative angle of q_t and k_s is what rotates their product,
// so its error grows with Φ_t − Φ_s, and decays with the term.
func ErrorScale(p *Problem) *Scale { return ErrorScaleVariant(p, Variant{}) }

// ErrorScaleVariant is the error model of ForwardVariant(p, v): the same
// analysis with v's coefficients and angle increments, so that a slip is
// judged at its own magnitudes (a β or γ without Δ grows the state by 1/Δ,
// and its bounds with it). A bfloat16 angle adds its rounding to the
// final angle's scale.
func ErrorScaleVariant(p *Problem, v Variant) *Scale {
	L, H, Hqk, N, P, A := p.Seqlen, p.Heads, p.HeadsQK, p.N, p.P, p.AngleDim
	ar := p.Arithmetic
	u := ar.U
	ta, sc, sg := 2*u, 2*u, 2*u
	if ar.Approx {
		ta, sc, sg = TanhApproxRel, SinCosApproxAbs, SigmoidApprox
	}
	S := p.NumSeqs()
	out := &Scale{Y: make([]float64, p.Batch*L*H*P), TinyY: make([]float64, p.Batch*L*H*P),
		Angle: make([]float64, S*H*A), SSM: make([]float64, S*H*P*N), K: make([]float64, S*H*N), V: make([]float64, S*H*P),
		TinyAngle: make([]float64, S*H*A), TinySSM: make([]float64, S*H*P*N), TinyK: make([]float64, S*H*N), TinyV: make([]float64, S*H*P)}
	// A bfloat16 angle may round one way in the variant and the other in
	// a kernel that sums it in another order: one ulp of bf16 at [4, 8)
	// (2⁻⁵, the largest below 2π), in the angle and in every rotation by it.
	var angleRounding float64
	if v.AngleBF16 || v.AngleStoredBF16 {
		angleRounding = 0x1p-5 / u
	}
	k0 := float64(N + 2*max(ar.Chunk, 1) + 8)
	k0s := float64(2*max(ar.Chunk, 1) + 8)
	ops := 4 * ar.OperandU / u
	var kv float64 // the handed previous key and value, each rounded once
	if ar.HandoffKV && p.DType.Narrow() {
		kv = 2 * p.DType.OutputRoundoff() / u
	}
	// pn is the norm of the pair an element rotates in (itself if it does not)
	pn := func(x []float64, n int) float64 {
		if n < 2*A {
			i := n &^ 1
			return math.Hypot(x[i], x[i+1])
		}
		return math.Abs(x[n])
	}
	q, k, kp := make([]float64, N), make([]float64, N), make([]float64, N)
	phi := make([]float64, A)
	wcum := make([]float64, L)
	// a head's per-step quantities, shared by its P channels: the
	// coefficients, the rotated pairs' norms of q, k and the previous key
	type step struct{ alpha, beta, gamma, dbl, dgl, cum, bigPhi, prevPhi float64 }
	steps := make([]step, L)
	nq, nk, nkp := make([]float64, L*N), make([]float64, L*N), make([]float64, L*N)
	lastK := make([]float64, N)
	for si, sq := range p.Sequences() {
		b := sq[0]
		for h := 0; h < H; h++ {
			g := h / (H / Hqk)
			var w float64
			for t := 0; t < L; t++ {
				if ar.Chunk > 0 && t%ar.Chunk == 0 {
					w = 0
				}
				w += math.Abs(p.ADT[(b*H+h)*L+t])
				wcum[t] = w
			}
			for i := range phi {
				phi[i] = 0
			}
			for n := range kp {
				kp[n] = 0
			}
			if st := p.State; st != nil {
				copy(phi, st.Angle[(si*H+h)*A:])
				copy(kp, st.K[(si*H+h)*N:(si*H+h+1)*N])
			}
			var cum, bigPhi float64
			for t := sq[1]; t < sq[2]; t++ {
				hl := (b*H+h)*L + t
				dt := p.DT[hl]
				prevPhi := bigPhi
				var fastest float64 // the fastest pair's accumulation bounds every pair's
				for i := 0; i < A; i++ {
					inc := v.increment(p.Angles[((b*L+t)*H+h)*A+i], dt)
					phi[i] += inc
					fastest = math.Max(fastest, math.Abs(inc))
				}
				bigPhi += fastest
				qk := ((b*L+t)*Hqk + g) * N
				for n := 0; n < N; n++ {
					q[n] = p.Q[qk+n] + p.QBias[h*N+n]
					k[n] = p.K[qk+n] + p.KBias[h*N+n]
				}
				rotate(q, phi)
				rotate(k, phi)
				alpha, beta, gamma := v.coefficients(p.ADT[hl], dt, p.Trap[hl])
				// |∂β/∂λ|/α and |∂γ/∂λ|: how λ's error enters
				dbl, dgl := dt, dt
				switch {
				case v.NoPrevious:
					dbl = 0
				case v.BetaNoDt:
					dbl = 1
				}
				if v.GammaNoDt {
					dgl = 1
				}
				cum += p.ADT[hl]
				steps[t] = step{alpha, beta, gamma, dbl, dgl, cum, bigPhi, prevPhi}
				for n := 0; n < N; n++ {
					nq[t*N+n], nk[t*N+n], nkp[t*N+n] = pn(q, n), pn(k, n), pn(kp, n)
				}
				copy(kp, k)
			}
			for n := 0; n < N; n++ {
				lastK[n] = pn(kp, n)
			}
			// each channel's bounds are a recurrence of their own: long
			// sequences run them in parallel (bit for bit the same)
			mamba2.ForEachChannel(P, (sq[2]-sq[1])*N >= mamba2.ParallelWork, func(pp int) {
				terms := make([]*mamba2.Terms, N)
				// per state element: Σ m·Φ_s, Σ m·s, Σ Δ_s·(…) for λ
				rPhi, rPos, rLam, rKV := make([]float64, N), make([]float64, N), make([]float64, N), make([]float64, N)
				var vp float64
				for n := range terms {
					terms[n] = mamba2.NewTerms(ar.Chunk, wcum)
				}
				if st := p.State; st != nil {
					vp = st.V[(si*H+h)*P+pp]
					for n := range terms {
						terms[n].Init(math.Abs(st.SSM[((si*H+h)*P+pp)*N+n]), sq[1])
					}
				}
				var cum, bigPhi float64
				for t := sq[1]; t < sq[2]; t++ {
					s := steps[t]
					alpha, beta, gamma, dbl, dgl, prevPhi := s.alpha, s.beta, s.gamma, s.dbl, s.dgl, s.prevPhi
					cum, bigPhi = s.cum, s.bigPhi
					v := p.V[((b*L+t)*H+h)*P+pp]
					tt := float64(t)
					var y, mag float64
					for n := 0; n < N; n++ {
						pq, pk, pkp := nq[t*N+n], nk[t*N+n], nkp[t*N+n]
						mb, mg := math.Abs(beta)*pkp*math.Abs(vp), math.Abs(gamma)*pk*math.Abs(v)
						terms[n].Step(t, alpha, mb+mg, math.Abs(cum), sq[1])
						rPhi[n] = alpha*rPhi[n] + mb*prevPhi + mg*bigPhi
						rPos[n] = alpha*rPos[n] + (mb+mg)*tt
						rLam[n] = alpha*rLam[n] + dbl*alpha*pkp*math.Abs(vp) + dgl*pk*math.Abs(v)
						rKV[n] = alpha*rKV[n] + mb
						sum := terms[n].Sum()
						rot := (ta/u+3)*(bigPhi*sum-rPhi[n]) + 2*math.Pi*(tt*sum-rPos[n]) + (2*sc/u+2*angleRounding)*sum
						e := terms[n].Scale(t, math.Abs(cum), k0) + rot + sg/u*rLam[n] + ops*sum + kv*rKV[n]
						mag += pq * e
						y += pq * sum
					}
					i := ((b*L+t)*H+h)*P + pp
					if p.D != nil {
						mag += 3 * math.Abs(p.D[h]*v)
					}
					if p.Z != nil {
						gz := math.Abs(p.Z[i] * sigmoid(p.Z[i]))
						mag = mag*gz + 5*(y+math.Abs(v*dOr0(p.D, h)))*gz
					}
					out.Y[i], out.TinyY[i] = mag, float64(N+3)*float64(t-sq[1]+2)
					vp = v
				}
				last := sq[2] - 1
				for n := 0; n < N; n++ {
					sum := terms[n].Sum()
					j := ((si*H+h)*P+pp)*N + n
					out.SSM[j] = terms[n].Scale(last, math.Abs(cum), k0s) + (ta/u+3)*rPhi[n] + 2*math.Pi*rPos[n] + (2*sc/u+angleRounding)*sum + sg/u*rLam[n] + kv*rKV[n]
					out.TinySSM[j] = float64(last - sq[1] + 2)
				}
				if pp == 0 {
					for n := 0; n < N; n++ {
						out.K[(si*H+h)*N+n] = lastK[n] * ((ta/u+3)*bigPhi + 2*math.Pi*float64(last+1) + 2*sc/u + 2 + angleRounding)
						out.TinyK[(si*H+h)*N+n] = 1
					}
					for i := 0; i < A; i++ {
						out.Angle[(si*H+h)*A+i] = (ta/u+3)*bigPhi + 2*math.Pi*float64(last-sq[1]+2) + angleRounding
						out.TinyAngle[(si*H+h)*A+i] = 1
					}
				}
			})
		}
	}
	return out
}

func dOr0(d []float64, h int) float64 {
	if d == nil {
		return 0
	}
	return d[h]
}

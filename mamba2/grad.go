package mamba2

import "math"

// Cotangent is what a backward pass of the prefill is given: the
// cotangent of y (like X) and of the states it returns, the row's final
// states (like InitialStates) and each sequence's (like Output.SeqStates);
// a nil array stands for zero.
type Cotangent struct {
	Y, FinalStates, SeqStates []float64
}

// Grads are the gradients of a prefill, each shaped as what it
// differentiates; those of absent optional inputs are nil.
type Grads struct {
	X, Dt, A, B, C []float64
	D, Z, DtBias   []float64
	InitialStates  []float64
}

// Grad returns the float64 adjoint of Prefill: the gradients of
// J = ⟨ct.Y, y⟩ + ⟨ct.FinalStates, final⟩ + ⟨ct.SeqStates, seq⟩ with
// respect to every input, by the recurrence run backwards. With
// h_t = a_t·h_{t−1} + Δ_t·B_t⊗x_t, a_t = e^{Δ_t·A}, and
// y_t = g(z_t)·(C_t·h_t + D·x_t), the state's cotangent is
//
//	ĥ_t = g(z_t)·ŷ_t·C_t + a_{t+1}·ĥ_{t+1}  (+ the cotangent of h_t where it is returned)
//
// and each step adds ĥ_t·h_{t−1}·a_t to ∂/∂(Δ_t·A), ĥ_t·B_t·x_t to ∂/∂Δ_t,
// ĥ_t·Δ_t·x_t to B_t's and ĥ_t·Δ_t·B_t to x_t's. Δ's chain is the clamp's
// (zero outside (DtMin, DtMax)) times the softplus' (σ, 1 above 20). A
// sequence that starts from the initial state gives it a_0·ĥ_0.
// TestGradCentralDifferences holds it to central differences.
func Grad(p *Problem, ct *Cotangent) *Grads {
	H, P, N, G, L := p.Heads, p.Headdim, p.Dstate, p.Groups, p.Seqlen
	g := &Grads{X: make([]float64, len(p.X)), Dt: make([]float64, len(p.Dt)), A: make([]float64, H),
		B: make([]float64, len(p.B)), C: make([]float64, len(p.C))}
	if p.D != nil {
		g.D = make([]float64, H)
	}
	if p.Z != nil {
		g.Z = make([]float64, len(p.Z))
	}
	if p.DtBias != nil {
		g.DtBias = make([]float64, H)
	}
	if p.InitialStates != nil {
		g.InitialStates = make([]float64, len(p.InitialStates))
	}
	at := func(a []float64, i int) float64 {
		if a == nil {
			return 0
		}
		return a[i]
	}
	lo, hi := p.Limits()
	seqs := p.Sequences()
	delta, chain := make([]float64, L), make([]float64, L) // Δ_t and dΔ/d(dt)
	dDelta := make([]float64, L)
	hs := make([]float64, (L+1)*N) // the states of one channel: hs[t+1] after step t
	hh := make([]float64, N)
	for b := 0; b < p.Batch; b++ {
		for h := 0; h < H; h++ {
			grp := Group(h, H, G)
			bias := 0.0
			if p.DtBias != nil {
				bias = p.DtBias[h]
			}
			for t := 0; t < L; t++ {
				v := p.Dt[(b*L+t)*H+h] + bias
				sp, dsp := v, 1.0
				if p.Softplus && v <= 20 {
					sp, dsp = math.Log1p(math.Exp(v)), 1/(1+math.Exp(-v))
				}
				delta[t] = math.Min(math.Max(sp, lo), hi)
				chain[t] = dsp
				if sp < lo || sp > hi {
					chain[t] = 0
				}
				dDelta[t] = 0
			}
			for si, sq := range seqs {
				for pp := 0; pp < P; pp++ {
					// forward: the channel's states through the sequence
					for n := 0; n < N; n++ {
						hs[sq[0]*N+n] = 0
						if p.InitialStates != nil && si == 0 {
							hs[sq[0]*N+n] = p.InitialStates[((b*H+h)*P+pp)*N+n]
						}
					}
					for t := sq[0]; t < sq[1]; t++ {
						a := math.Exp(delta[t] * p.A[h])
						x := p.X[((b*L+t)*H+h)*P+pp]
						bt := ((b*L+t)*G + grp) * N
						for n := 0; n < N; n++ {
							hs[(t+1)*N+n] = a*hs[t*N+n] + delta[t]*p.B[bt+n]*x
						}
					}
					// backward
					last := sq[1] - 1
					for n := 0; n < N; n++ {
						k := ((si*H+h)*P+pp)*N + n
						if p.CuSeqlens == nil {
							k = ((b*H+h)*P+pp)*N + n
						}
						hh[n] = at(ct.SeqStates, k)
						if si == len(seqs)-1 {
							hh[n] += at(ct.FinalStates, ((b*H+h)*P+pp)*N+n)
						}
					}
					for t := last; t >= sq[0]; t-- {
						i := ((b*L+t)*H+h)*P + pp
						x := p.X[i]
						bt := ((b*L+t)*G + grp) * N
						dy := at(ct.Y, i)
						if p.Z != nil {
							pre := 0.0
							for n := 0; n < N; n++ {
								pre += p.C[bt+n] * hs[(t+1)*N+n]
							}
							if p.D != nil {
								pre += p.D[h] * x
							}
							z := p.Z[i]
							s := 1 / (1 + math.Exp(-z))
							g.Z[i] += dy * pre * s * (1 + z*(1-s))
							dy *= z * s
						}
						if p.D != nil {
							g.D[h] += dy * x
							g.X[i] += dy * p.D[h]
						}
						a := math.Exp(delta[t] * p.A[h])
						var da float64
						for n := 0; n < N; n++ {
							g.C[bt+n] += dy * hs[(t+1)*N+n]
							hh[n] += dy * p.C[bt+n]
							da += hh[n] * hs[t*N+n]
							dDelta[t] += hh[n] * p.B[bt+n] * x
							g.B[bt+n] += hh[n] * delta[t] * x
							g.X[i] += hh[n] * delta[t] * p.B[bt+n]
							hh[n] *= a
						}
						// a = e^{Δ·A}: ∂a/∂Δ = a·A, ∂a/∂A = a·Δ
						dDelta[t] += da * a * p.A[h]
						g.A[h] += da * a * delta[t]
					}
					if p.InitialStates != nil && si == 0 {
						for n := 0; n < N; n++ {
							g.InitialStates[((b*H+h)*P+pp)*N+n] += hh[n]
						}
					}
				}
			}
			for t := 0; t < L; t++ {
				d := dDelta[t] * chain[t]
				g.Dt[(b*L+t)*H+h] += d
				if p.DtBias != nil {
					g.DtBias[h] += d
				}
			}
		}
	}
	return g
}

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

// A GradField is one gradient of Grads, named as the suite reports it.
type GradField struct {
	Name   string
	Values []float64
	// Typed is the type the kernel stores it in: "input" (x, dt, B, C,
	// z), "weight" (A, D, dt_bias) or "state" (the initial states).
	Typed string
}

// Fields lists g's gradients in a fixed order (absent ones with nil
// values).
func (g *Grads) Fields() []GradField {
	return []GradField{{"dx", g.X, "input"}, {"ddt", g.Dt, "input"}, {"dA", g.A, "weight"}, {"dB", g.B, "input"},
		{"dC", g.C, "input"}, {"dD", g.D, "weight"}, {"dz", g.Z, "input"}, {"ddt_bias", g.DtBias, "weight"},
		{"dinitial_states", g.InitialStates, "state"}}
}

// ByName is the gradient Fields names name ("dx", …, "dinitial_states");
// nil for an absent one or an unknown name.
func (g *Grads) ByName(name string) []float64 {
	for _, f := range g.Fields() {
		if f.Name == name {
			return f.Values
		}
	}
	return nil
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
func Grad(p *Problem, ct *Cotangent) *Grads { return adjoint(p, ct, variant{}) }

// A Path is one edge of the prefill's chain rule, which GradWithout cuts:
// the diagnosis compares a kernel's gradient with the reference's without
// each (a backward that lacks a term of its chain rule).
type Path int

const (
	// PathCarry is the state's cotangent carried back a step (a_{t+1}·ĥ_{t+1}).
	PathCarry Path = iota
	// PathDecay is Δ's part in the decay (∂a_t/∂Δ_t = a_t·A).
	PathDecay
	// PathInput is Δ's part in the input (∂(Δ_t·B_t·x_t)/∂Δ_t).
	PathInput
	// PathSkip is the skip connection D·x.
	PathSkip
	// PathGate is the gate's factor on the output's cotangent (g(z)·ŷ).
	PathGate
	// PathFinal is the final states' cotangent.
	PathFinal
	// PathSeq is the per-sequence states' cotangent.
	PathSeq
	// PathOutput is y's cotangent (every term from it).
	PathOutput
	// PathChunkState is the cotangent of the state at each chunk's end
	// (from the chunks after it, or the final and sequence states') taken
	// into the chunk's steps, as a chunked backward reads it: cut, each
	// chunk's gradients are its own outputs' alone (the cotangent carried
	// on is exact). Cut where the row packs sequences, it is a masked
	// chunk state (a sequence index read wrong).
	PathChunkState
	numPaths
)

var pathNames = [numPaths][2]string{
	{"carry", "the state's cotangent carried back a step (a·ĥ)"},
	{"decay", "Δ's part in the decay (∂a/∂Δ = a·A)"},
	{"input", "Δ's part in the input (B·x)"},
	{"skip", "the skip connection D·x"},
	{"gate", "the gate's factor on y's cotangent"},
	{"final", "the final states' cotangent"},
	{"seq", "the sequences' states' cotangents"},
	{"output", "y's cotangent"},
	{"chunk-state", "the cotangent of the state at each chunk's end taken into the chunk"},
}

// Tag is the path's short name ("decay"), String its description.
func (p Path) Tag() string    { return pathNames[p][0] }
func (p Path) String() string { return pathNames[p][1] }

// Paths lists every path of the chain rule.
func Paths() []Path {
	out := make([]Path, numPaths)
	for i := range out {
		out[i] = Path(i)
	}
	return out
}

// GradWithout is Grad with one path of the chain rule cut.
func GradWithout(p *Problem, ct *Cotangent, path Path) *Grads {
	return adjoint(p, ct, variant{cut: path + 1})
}

// GradsWithout returns Grad without each path, by path.
func GradsWithout(p *Problem, ct *Cotangent) map[Path]*Grads {
	out := map[Path]*Grads{}
	for _, path := range Paths() {
		out[path] = GradWithout(p, ct, path)
	}
	return out
}

// A Factor is a factor of the chain rule that a backward may drop while
// keeping its path: GradLacking returns the gradients without it.
type Factor int

const (
	// FactorDeltaInA is Δ in ∂J/∂A = Σ_t Δ_t·∂J/∂(Δ_t·A).
	FactorDeltaInA Factor = iota
	// FactorSoftplus is the softplus' derivative σ(dt + bias) in dt's chain.
	FactorSoftplus
	// FactorFirstDecay is a_0 in the initial state's gradient a_0·ĥ_0.
	FactorFirstDecay
	// FactorCarryDecay is a_{t+1} in the carried cotangent a_{t+1}·ĥ_{t+1}.
	FactorCarryDecay
	// FactorChunkDecay is the decay from a step to its chunk's end,
	// e^{cum_end − cum_t} = a_{t+1}⋯a_end, on the chunk's state path: a
	// chunked backward takes the cotangent of the state at each chunk's
	// end (from the chunks after it, or the final states') into the
	// chunk's steps through that decay; without it, each step of the
	// chunk takes that cotangent undecayed (what the carried part of ĥ_t
	// would be were a = 1 within the chunk). The cotangent carried on is
	// exact: only the gradients read the undecayed part.
	FactorChunkDecay
	numFactors
)

var factorNames = [numFactors][2]string{
	{"Δ", "Δ in ∂J/∂A = Σ Δ·∂J/∂(Δ·A)"},
	{"σ", "the softplus' derivative σ(dt + bias)"},
	{"a₀", "the first step's decay a₀ (the initial state's cotangent undecayed)"},
	{"a", "the decay a in the cotangent carried back a step (ĥ carried undecayed)"},
	{"chunk-decay", "the decay from a step to its chunk's end on the chunk's state path (the state's cotangent at the chunk's end taken into its steps undecayed)"},
}

// Tag is the factor's symbol, String its description.
func (f Factor) Tag() string    { return factorNames[f][0] }
func (f Factor) String() string { return factorNames[f][1] }

// Factors lists the factors GradLacking drops.
func Factors() []Factor {
	out := make([]Factor, numFactors)
	for i := range out {
		out[i] = Factor(i)
	}
	return out
}

// GradLacking is Grad with one factor of the chain rule left out.
func GradLacking(p *Problem, ct *Cotangent, f Factor) *Grads {
	return adjoint(p, ct, variant{lack: f + 1})
}

// variant says how adjoint departs from the exact adjoint: a path cut or
// a factor left out (each 0: none, else the Path or Factor plus one), or,
// with mag, the magnitude adjoint of GradErrorScale (every partial and
// every value replaced by its absolute value, from absolute seeds, the
// part of ∂J/∂(Δ·A) kept apart so that a chunked kernel's reverse
// cumulative sums can be modelled).
type variant struct {
	cut  Path
	lack Factor
	mag  bool
	// edge, with mag: dt's gradient only where Δ before the clamp lies
	// within edgeU of the clamp's ends, as if unclamped (the branch a
	// kernel's rounding may take there), and 0 elsewhere
	edge  bool
	edgeU float64
	// edgeAbs widens that window absolutely (a Δ's absolute rounding)
	edgeAbs float64
}

func (v *variant) cuts(p Path) bool    { return v.cut == p+1 }
func (v *variant) lacks(f Factor) bool { return v.lack == f+1 }
func (v *variant) abs(x float64) float64 {
	if v.mag {
		return math.Abs(x)
	}
	return x
}

func adjoint(p *Problem, ct *Cotangent, v variant) *Grads {
	H, P, N, G, L := p.Heads, p.Headdim, p.Dstate, p.Groups, p.Seqlen
	g := &Grads{X: make([]float64, len(p.X)), Dt: make([]float64, len(p.Dt)), A: make([]float64, H),
		B: make([]float64, len(p.B)), C: make([]float64, len(p.C))}
	if p.D != nil {
		g.D = make([]float64, len(p.D))
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
		return v.abs(a[i])
	}
	if v.cuts(PathFinal) {
		ct = &Cotangent{Y: ct.Y, SeqStates: ct.SeqStates}
	}
	if v.cuts(PathSeq) {
		ct = &Cotangent{Y: ct.Y, FinalStates: ct.FinalStates}
	}
	if v.cuts(PathOutput) {
		ct = &Cotangent{FinalStates: ct.FinalStates, SeqStates: ct.SeqStates}
	}
	lo, hi := p.Limits()
	seqs := p.Sequences()
	delta, chain := make([]float64, L), make([]float64, L) // Δ_t and dΔ/d(dt)
	dIn, dDec := make([]float64, L), make([]float64, L)    // ∂J/∂Δ_t through the input, ∂J/∂(Δ_t·A)
	hs := make([]float64, (L+1)*N)                         // the states of one channel: hs[t+1] after step t
	hh := make([]float64, N)
	// FactorChunkDecay and PathChunkState: the part of ĥ that came from
	// beyond the step's chunk, decayed as ĥ is (hbd) and as it was at the
	// chunk's end (hbdEnd)
	chunkDecayless := v.lacks(FactorChunkDecay) && p.Chunk > 0
	chunkCut := v.cuts(PathChunkState) && p.Chunk > 0
	hbd, hbdEnd := make([]float64, N), make([]float64, N)
	for b := 0; b < p.Batch; b++ {
		for h := 0; h < H; h++ {
			grp := Group(h, H, G)
			bias := 0.0
			if p.DtBias != nil {
				bias = p.DtBias[h]
			}
			for t := 0; t < L; t++ {
				x := p.Dt[(b*L+t)*H+h] + bias
				sp, dsp := x, 1.0
				if p.Softplus && x <= 20 {
					sp, dsp = math.Log1p(math.Exp(x)), 1/(1+math.Exp(-x))
				}
				if v.lacks(FactorSoftplus) {
					dsp = 1
				}
				delta[t] = math.Min(math.Max(sp, lo), hi)
				chain[t] = dsp
				if sp < lo || sp > hi {
					chain[t] = 0
				}
				if v.edge {
					chain[t] = 0
					if near(sp, lo, v.edgeU, v.edgeAbs) || near(sp, hi, v.edgeU, v.edgeAbs) {
						chain[t] = dsp
					}
				}
				dIn[t], dDec[t] = 0, 0
			}
			A := v.abs(p.A[h]) // in the partials; the decay is e^{Δ·A} in every variant
			for si, sq := range seqs {
				for pp := 0; pp < P; pp++ {
					// forward: the channel's states through the sequence
					for n := 0; n < N; n++ {
						hs[sq[0]*N+n] = 0
						if p.InitialStates != nil && si == 0 {
							hs[sq[0]*N+n] = v.abs(p.InitialStates[((b*H+h)*P+pp)*N+n])
						}
					}
					for t := sq[0]; t < sq[1]; t++ {
						a := math.Exp(delta[t] * p.A[h])
						x := v.abs(p.X[((b*L+t)*H+h)*P+pp])
						bt := ((b*L+t)*G + grp) * N
						for n := 0; n < N; n++ {
							hs[(t+1)*N+n] = a*hs[t*N+n] + delta[t]*v.abs(p.B[bt+n])*x
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
						x := v.abs(p.X[i])
						bt := ((b*L+t)*G + grp) * N
						dy := at(ct.Y, i)
						dk := p.DIndex(h, pp)
						d := v.abs(at(p.D, dk))
						if p.Z != nil {
							pre := d * x
							for n := 0; n < N; n++ {
								pre += v.abs(p.C[bt+n]) * hs[(t+1)*N+n]
							}
							z := p.Z[i]
							s := 1 / (1 + math.Exp(-z))
							dg := s * (1 + z*(1-s)) // d(z·σ(z))/dz
							if v.mag {
								dg = s * (1 + math.Abs(z)*(1-s)) // its terms' magnitudes: 1 + z(1−σ) cancels near z ≈ −1.28
							}
							g.Z[i] += dy * pre * dg
							if !v.cuts(PathGate) {
								dy *= v.abs(z * s)
							}
						}
						if p.D != nil && !v.cuts(PathSkip) {
							g.D[dk] += dy * x
							g.X[i] += dy * d
						}
						a := math.Exp(delta[t] * p.A[h])
						if (chunkDecayless || chunkCut) && (t == last || (t+1)%p.Chunk == 0) {
							// the chunk's last step: what ĥ holds yet came from beyond the chunk
							copy(hbdEnd, hh)
							copy(hbd, hh)
						}
						var da, din float64
						for n := 0; n < N; n++ {
							bn, cn := v.abs(p.B[bt+n]), v.abs(p.C[bt+n])
							g.C[bt+n] += dy * hs[(t+1)*N+n]
							hh[n] += dy * cn
							used := hh[n] // ĥ as the gradients read it
							switch {
							case chunkDecayless:
								used += hbdEnd[n] - hbd[n]
							case chunkCut:
								used -= hbd[n]
							}
							hbd[n] *= a
							da += used * hs[t*N+n]
							din += used * bn * x
							g.B[bt+n] += used * delta[t] * x
							g.X[i] += used * delta[t] * bn
							switch {
							case v.cuts(PathCarry):
								hh[n] = 0 // each step's cotangent its own
							case v.lacks(FactorCarryDecay), t == sq[0] && v.lacks(FactorFirstDecay):
							default:
								hh[n] *= a
							}
						}
						if !v.cuts(PathInput) {
							dIn[t] += din
						}
						if !v.cuts(PathDecay) {
							dDec[t] += da * a // ∂J/∂(Δ·A): ∂a/∂Δ = a·A, ∂a/∂A = a·Δ
						}
					}
					if p.InitialStates != nil && si == 0 {
						for n := 0; n < N; n++ {
							g.InitialStates[((b*H+h)*P+pp)*N+n] += hh[n]
						}
					}
				}
			}
			if v.mag && p.Chunk > 0 {
				chunkSums(dDec, p.Chunk)
			}
			for t := 0; t < L; t++ {
				d := (dIn[t] + dDec[t]*A) * chain[t]
				g.Dt[(b*L+t)*H+h] += d
				if p.DtBias != nil {
					g.DtBias[h] += d
				}
				if v.lacks(FactorDeltaInA) {
					g.A[h] += dDec[t]
				} else {
					g.A[h] += dDec[t] * delta[t]
				}
			}
		}
	}
	return g
}

// near reports whether x lies within u·max(|x|, |e|) + abs of e (never
// for an infinite end).
func near(x, e, u, abs float64) bool {
	return !math.IsInf(e, 0) && math.Abs(x-e) <= u*math.Max(math.Abs(x), math.Abs(e))+abs
}

// chunkSums replaces every element of v by the sum of its chunk's (chunks
// of q elements from the start).
func chunkSums(v []float64, q int) {
	for c0 := 0; c0 < len(v); c0 += q {
		c1 := min(c0+q, len(v))
		var s float64
		for _, x := range v[c0:c1] {
			s += x
		}
		for t := c0; t < c1; t++ {
			v[t] = s
		}
	}
}

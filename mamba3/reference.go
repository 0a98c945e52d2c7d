package mamba3

import (
	"math"

	"ssmverify/ssm"
)

// Coefficients returns the exponential-trapezoidal rule's (α, β, γ) for a
// step of length dt with decay adt = a·dt and weight λ.
func Coefficients(adt, dt, lambda float64) (alpha, beta, gamma float64) {
	alpha = math.Exp(adt)
	return alpha, (1 - lambda) * dt * alpha, lambda * dt
}

// Variant changes how the reference evaluates, for the relations and the
// slips a test compares with: Lambda, when set, replaces σ(Trap); NoWrap
// accumulates the angle without reducing it modulo 2π.
type Variant struct {
	Lambda func(trap float64) float64
	NoWrap bool
	// PrevCurrentAngle rotates the previous key by the current step's
	// angle instead of its own (a slip: the state then carries k_prev
	// unrotated).
	PrevCurrentAngle bool
	// NoPrevious drops the previous input's term (β = 0: exponential Euler
	// with the current input); BetaNoDt and GammaNoDt drop Δ from β or γ;
	// HalfSplit rotates the pairs (i, i + N/2) instead of (2i, 2i + 1);
	// AngleNoDt accumulates tanh(Angles)·π without DT.
	NoPrevious, BetaNoDt, GammaNoDt, HalfSplit, AngleNoDt bool
	// AngleBF16 keeps the accumulated angle in bfloat16 (a low-precision
	// wrap); AngleStoredBF16 accumulates it exactly but rotates by, and
	// returns as the final state, its bfloat16 rounding (the angles stored
	// in a bf16 tensor between the kernel that sums them and the one that
	// rotates).
	AngleBF16, AngleStoredBF16 bool
}

// coefficients returns (α, β, γ) of a step as v evaluates them.
func (v Variant) coefficients(adt, dt, trap float64) (alpha, beta, gamma float64) {
	lambda := sigmoid(trap)
	if v.Lambda != nil {
		lambda = v.Lambda(trap)
	}
	alpha, beta, gamma = Coefficients(adt, dt, lambda)
	switch {
	case v.NoPrevious:
		beta = 0
	case v.BetaNoDt:
		beta = (1 - lambda) * alpha
	}
	if v.GammaNoDt {
		gamma = lambda
	}
	return alpha, beta, gamma
}

// increment returns a step's angle increment as v evaluates it.
func (v Variant) increment(angle, dt float64) float64 {
	if v.AngleNoDt {
		return math.Tanh(angle) * math.Pi
	}
	return math.Tanh(angle) * math.Pi * dt
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// Forward returns the float64 reference: y like V, and every sequence's
// final four-part state.
func Forward(p *Problem) ([]float64, *State) { return ForwardVariant(p, Variant{}) }

// ForwardVariant is Forward evaluated as v says.
func ForwardVariant(p *Problem, v Variant) ([]float64, *State) {
	L, H, Hqk, N, P, A := p.Seqlen, p.Heads, p.HeadsQK, p.N, p.P, p.AngleDim
	y := make([]float64, p.Batch*L*H*P)
	S := p.NumSeqs()
	fin := &State{Angle: make([]float64, S*H*A), SSM: make([]float64, S*H*P*N), K: make([]float64, S*H*N), V: make([]float64, S*H*P)}
	phi := make([]float64, A)
	st := make([]float64, P*N)
	kPrev, vPrev, q, k := make([]float64, N), make([]float64, P), make([]float64, N), make([]float64, N)
	for si, sq := range p.Sequences() {
		b := sq[0]
		for h := 0; h < H; h++ {
			g := h / (H / Hqk)
			for i := range phi {
				phi[i] = 0
			}
			for i := range st {
				st[i] = 0
			}
			for i := range kPrev {
				kPrev[i] = 0
			}
			for i := range vPrev {
				vPrev[i] = 0
			}
			if s := p.State; s != nil {
				copy(phi, s.Angle[(si*H+h)*A:])
				copy(st, s.SSM[(si*H+h)*P*N:(si*H+h+1)*P*N])
				copy(kPrev, s.K[(si*H+h)*N:])
				copy(vPrev, s.V[(si*H+h)*P:])
			}
			for t := sq[1]; t < sq[2]; t++ {
				hl := (b*H+h)*L + t
				dt := p.DT[hl]
				for i := 0; i < A; i++ {
					phi[i] += v.increment(p.Angles[((b*L+t)*H+h)*A+i], dt)
					if !v.NoWrap {
						phi[i] -= 2 * math.Pi * math.Floor(phi[i]/(2*math.Pi))
					}
					if v.AngleBF16 {
						phi[i] = ssm.BF16.Round(phi[i])
					}
				}
				qk := ((b*L+t)*Hqk + g) * N
				for n := 0; n < N; n++ {
					q[n] = p.Q[qk+n] + p.QBias[h*N+n]
					k[n] = p.K[qk+n] + p.KBias[h*N+n]
				}
				rot := rotate
				if v.HalfSplit {
					rot = rotateHalves
				}
				angle := phi
				if v.AngleStoredBF16 {
					angle = make([]float64, A)
					for i, a := range phi {
						angle[i] = ssm.BF16.Round(a)
					}
				}
				rot(q, angle)
				rot(k, angle)
				alpha, beta, gamma := v.coefficients(p.ADT[hl], dt, p.Trap[hl])
				if v.PrevCurrentAngle && t > sq[1] {
					rot(kPrev, angle)
				}
				vt := p.V[((b*L+t)*H+h)*P : ((b*L+t)*H+h+1)*P]
				for pp := 0; pp < P; pp++ {
					var acc float64
					for n := 0; n < N; n++ {
						s := alpha*st[pp*N+n] + beta*kPrev[n]*vPrev[pp] + gamma*k[n]*vt[pp]
						st[pp*N+n] = s
						acc += s * q[n]
					}
					i := ((b*L+t)*H+h)*P + pp
					if p.D != nil {
						acc += p.D[h] * vt[pp]
					}
					if p.Z != nil {
						acc *= p.Z[i] * sigmoid(p.Z[i])
					}
					y[i] = acc
				}
				if v.PrevCurrentAngle {
					// keep the unrotated key: the next step rotates it by its angle
					for n := 0; n < N; n++ {
						kPrev[n] = p.K[qk+n] + p.KBias[h*N+n]
					}
				} else {
					copy(kPrev, k)
				}
				copy(vPrev, vt)
			}
			copy(fin.Angle[(si*H+h)*A:], phi)
			if v.AngleStoredBF16 {
				for i := 0; i < A; i++ {
					fin.Angle[(si*H+h)*A+i] = ssm.BF16.Round(phi[i])
				}
			}
			copy(fin.SSM[(si*H+h)*P*N:], st)
			copy(fin.K[(si*H+h)*N:], kPrev)
			copy(fin.V[(si*H+h)*P:], vPrev)
		}
	}
	return y, fin
}

// rotate turns the first len(phi) pairs (2i, 2i+1) of x by the angles phi.
func rotate(x, phi []float64) {
	for i, a := range phi {
		c, s := math.Cos(a), math.Sin(a)
		x0, x1 := x[2*i], x[2*i+1]
		x[2*i], x[2*i+1] = x0*c-x1*s, x0*s+x1*c
	}
}

// rotateHalves turns the pairs (i, i + N/2) instead: the other convention
// of rotary embeddings, a slip against upstream's interleaved pairs.
func rotateHalves(x, phi []float64) {
	half := len(x) / 2
	for i, a := range phi {
		c, s := math.Cos(a), math.Sin(a)
		x0, x1 := x[i], x[i+half]
		x[i], x[i+half] = x0*c-x1*s, x0*s+x1*c
	}
}

// Merge returns the variant that does what a and b both do, false when
// they change the same thing (two λs, two angle precisions, β dropped and
// β without Δ).
func Merge(a, b Variant) (Variant, bool) {
	if (a.Lambda != nil && b.Lambda != nil) || (a.NoPrevious || a.BetaNoDt) && (b.NoPrevious || b.BetaNoDt) ||
		(a.AngleBF16 || a.AngleStoredBF16) && (b.AngleBF16 || b.AngleStoredBF16) {
		return Variant{}, false
	}
	m := a
	if b.Lambda != nil {
		m.Lambda = b.Lambda
	}
	m.NoWrap = a.NoWrap || b.NoWrap
	m.PrevCurrentAngle = a.PrevCurrentAngle || b.PrevCurrentAngle
	m.NoPrevious, m.BetaNoDt = a.NoPrevious || b.NoPrevious, a.BetaNoDt || b.BetaNoDt
	m.GammaNoDt, m.HalfSplit, m.AngleNoDt = a.GammaNoDt || b.GammaNoDt, a.HalfSplit || b.HalfSplit, a.AngleNoDt || b.AngleNoDt
	m.AngleBF16, m.AngleStoredBF16 = a.AngleBF16 || b.AngleBF16, a.AngleStoredBF16 || b.AngleStoredBF16
	return m, true
}

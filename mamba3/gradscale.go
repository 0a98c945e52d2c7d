package mamba3

import (
	"math"

	"ssmverify/ssm"
)

// GradScale is the error model of a backward pass: every gradient element
// of a correct kernel lies within u·Scale + η·Tiny of the float64
// gradient (u the arithmetic's unit roundoff, η its smallest normal),
// shaped like the gradients.
type GradScale struct {
	Scale, Tiny *Grads
}

// GradErrorScale is the error model of the backward of p's forward for the
// cotangent ct under p.Arithmetic.
//
// Every gradient is a sum over the paths from the input to the loss of the
// products of the partial derivatives along the path (reverse mode, as
// Grad evaluates it). A kernel that evaluates each operation with a small
// relative error — of the value it produces, relative to the magnitude of
// the terms it is made of — errs in each path's product by at most the sum
// of the errors of its factors, and in the forward values the partials are
// evaluated at by the same. So
//
//	|δg_i| ≤ r·G_i,   G_i = Σ_paths Π |partial|, at the terms' magnitudes
//
// where G is the tape's magnitude adjoint (tape.magnitudes: the reverse
// pass with absolute partials at absolute magnitudes, from absolute
// seeds) and r is the relative error of one path's product:
//
//	r = 6·u_operand              six factors rounded as matrix operands
//	                             (the cotangent, q or k, v, the state or
//	                             its adjoint, the decay, the coefficient)
//	  + (N + P + 2·c + 2·⌈L/c⌉ + 16)·u   the sums: over N and P, within a
//	                             chunk of c steps (c = 1 step by step),
//	                             and the states handed between chunks
//	  + ε_tanh·(Φ + 3) + 2π·u·L + 2·ε_sincos + 4·ε_σ
//	                             the approximations: the angle's increments
//	                             over its largest accumulated |angle| Φ, the
//	                             reduced angle, sine and cosine, λ
//
// A chunked kernel (Chunk > 0) differentiates the decays through their
// cumulative sums within a chunk: the gradient of ADT at a step is a
// reverse cumulative sum, over the rest of the chunk, of differences of
// the terms of the pairs of steps that end and start there, which cancel
// exactly only in exact arithmetic (at a sequence's first step from a zero
// state the gradient is 0, the kernel's a rounding residue). Its scale at
// every step of a chunk is therefore the sum of G over the chunk.
//
// The bound is normwise (G sums absolute values, so that it is the size of
// the gradient's terms, not of the gradient after their cancellation), as
// ErrorScale's is. Tiny is one per element: a gradient of terms below the
// smallest normal errs by it.
func GradErrorScale(p *Problem, ct *Cotangent) *GradScale {
	r := record(p, ct)
	G := r.grads(r.t.magnitudes(r.seed))
	ar := p.Arithmetic
	u := ar.U
	c := max(ar.Chunk, 1)
	L := p.Seqlen
	ta, sc, sg := 2*u, 2*u, 2*u
	if ar.Approx {
		ta, sc, sg = TanhApproxRel, SinCosApproxAbs, SigmoidApprox
	}
	rel := 6*ar.OperandU + float64(p.N+p.P+2*c+2*((L+c-1)/c)+16)*u + ta*(anglePeak(p)+3) + 2*math.Pi*u*float64(L) + 2*sc + 4*sg
	scale := func(v []float64) []float64 { return ssm.Scaled(v, rel/u) }
	each := func(g *Grads, f func([]float64) []float64) *Grads {
		out := &Grads{Q: f(g.Q), K: f(g.K), V: f(g.V), ADT: f(g.ADT), DT: f(g.DT), Trap: f(g.Trap), QBias: f(g.QBias), KBias: f(g.KBias), Angles: f(g.Angles), D: f(g.D), Z: f(g.Z)}
		if s := g.State; s != nil {
			out.State = &State{Angle: f(s.Angle), SSM: f(s.SSM), K: f(s.K), V: f(s.V)}
		}
		return out
	}
	if ar.Chunk > 0 {
		for _, sq := range p.Sequences() {
			for h := 0; h < p.Heads; h++ {
				row := G.ADT[(sq[0]*p.Heads+h)*L : (sq[0]*p.Heads+h+1)*L]
				for c0 := sq[1]; c0 < sq[2]; c0 += ar.Chunk {
					c1 := min(c0+ar.Chunk, sq[2])
					var sum float64
					for _, g := range row[c0:c1] {
						sum += g
					}
					for t := c0; t < c1; t++ {
						row[t] = sum
					}
				}
			}
		}
	}
	return &GradScale{Scale: each(G, scale), Tiny: each(G, ssm.Ones)}
}

// anglePeak is the largest accumulated |angle| of any pair of any sequence
// (from its initial angle): what the approximated increments' errors
// accumulate over.
func anglePeak(p *Problem) float64 {
	H, A, L := p.Heads, p.AngleDim, p.Seqlen
	var peak float64
	for si, sq := range p.Sequences() {
		b := sq[0]
		for h := 0; h < H; h++ {
			for i := 0; i < A; i++ {
				var phi float64
				if p.State != nil {
					phi = math.Abs(p.State.Angle[(si*H+h)*A+i])
				}
				for t := sq[1]; t < sq[2]; t++ {
					phi += math.Abs(math.Tanh(p.Angles[((b*L+t)*H+h)*A+i]) * math.Pi * p.DT[(b*H+h)*L+t])
				}
				peak = math.Max(peak, phi)
			}
		}
	}
	return peak
}

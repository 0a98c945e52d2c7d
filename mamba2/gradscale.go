package mamba2

import (
	"math"
	"math/bits"

	"ssmverify/ssm"
)

// GradScale is the error model of a backward pass: every gradient element
// of a correct kernel lies within u·Scale + η·Tiny of the float64 gradient
// (u and η those of the arithmetic, float32's for the 16-bit input types),
// shaped like the gradients.
type GradScale struct {
	Scale, Tiny *Grads
}

// GradErrorScale is the error model of the backward of p's prefill for the
// cotangent ct: sequential (p.Chunk 0, a chain of steps run backwards) or
// chunked (upstream's Triton backward).
//
// Every gradient is a sum over the paths from the input to J of the
// products of the partial derivatives along the path (reverse mode, as
// Grad evaluates it). A kernel that evaluates each operation with a small
// relative error of the magnitudes of its terms errs in each path's
// product by at most the sum of its factors' errors, and in the forward
// values the partials are evaluated at by the same, so
//
//	|δg_i| ≤ r·G_i,   G_i = Σ_paths Π |partial|, at the terms' magnitudes
//
// where G is the magnitude adjoint (Grad with every value and partial
// replaced by its absolute value, from absolute cotangents) and r the
// relative error of one path's product:
//
//	r = 6·u_op                       six factors rounded as operands of the
//	                                 products (the cotangent, C or B, x, the
//	                                 state or its adjoint, the decay, Δ) to
//	                                 the inputs' 16-bit type or TF32
//	  + (N + P + H/G + Batch + 2·c + 2·⌈L/c⌉ + 16)·u
//	                                 the sums: over the state, the channels,
//	                                 a group's heads and the rows; within a
//	                                 chunk of c steps (c = 1 sequentially);
//	                                 the states and their cotangents handed
//	                                 between chunks
//	  + ((c + 2ℓ)·W + 4·Λ)·u         the decays e^{cum_t − cum_s} from
//	                                 cumulative sums of Δ·A: W the largest
//	                                 |within-chunk sum|, Λ the largest
//	                                 |sum over a sequence|, ℓ = ⌈log2 c⌉ + 1
//	                                 (chunked only; sequentially each step's
//	                                 decay rounds once, in the count above)
//	  + ⌈L/c⌉·u_state/u              the states kept between chunks in a
//	                                 narrower type, rounded at each hand-over
//
// The chunked kernel differentiates the decays through their cumulative
// sums within a chunk: ∂J/∂(Δ_t·A) is a reverse cumulative sum over the
// rest of the chunk of differences of terms that cancel only in exact
// arithmetic, so its scale at every step of a chunk is the chunk's sum of
// the magnitudes (and dt's, A's and dt_bias' inherit it).
//
// At the dt limit's ends, where dt's gradient jumps between 0 and the
// unclamped chain, a Δ within 16·u of an end (and, with softplus, 4·u
// absolutely: log(e^v + 1) rounds e^v + 1, an absolute error of Δ) may
// fall on either side in the kernel's arithmetic: there the other
// branch's gradient is allowed in full (dt's and dt_bias' scales).
//
// In 16-bit types a chunked kernel rounds ∂J/∂(C_t·B_s) of each chunk to
// the input type for its products; below that type's normal range the
// rounding errs by half the subnormal spacing η absolutely, so dB_s's
// scale adds η/u·Σ_{t ≥ s} |C_t| and dC_t's η/u·Σ_{s ≤ t} |B_s| over the
// chunk (subnormalProducts; negligible for bf16, whose range is float's).
//
// The bound is normwise, as ErrorScale's is: G sums absolute values. Tiny
// is one per element (a gradient of terms below the smallest normal errs
// by it). TestMagnitudeAdjointBoundsTheGradient and the calibration
// (docs/mamba2-backward.md) measure how tight it is.
func GradErrorScale(p *Problem, ct *Cotangent) *GradScale {
	G := adjoint(p, ct, variant{mag: true})
	u := p.DType.Precision().UnitRoundoff()
	c := max(p.Chunk, 1)
	L := p.Seqlen
	hops := float64((L + c - 1) / c)
	opU := 0.0
	if p.DType.Narrow() {
		opU = p.DType.OutputRoundoff()
	}
	opU = math.Max(opU, p.operandU)
	rel := 6*opU + float64(p.Dstate+p.Headdim+p.Heads/p.Groups+p.Batch+2*c+16)*u + 2*hops*u
	W, Lam := decaySums(p)
	rel += 4 * Lam * u
	if p.Chunk > 0 {
		rel += (float64(c) + 2*float64(bits.Len(uint(c)))) * W * u
	}
	if p.StateDType.Narrow() || (p.StateDType == ssm.F32 && p.DType == ssm.F64) {
		rel += hops * p.StateDType.OutputRoundoff()
	}
	scale := func(v []float64) []float64 { return ssm.Scaled(v, rel/u) }
	each := func(g *Grads, f func([]float64) []float64) *Grads {
		return &Grads{X: f(g.X), Dt: f(g.Dt), A: f(g.A), B: f(g.B), C: f(g.C), D: f(g.D), Z: f(g.Z), DtBias: f(g.DtBias), InitialStates: f(g.InitialStates)}
	}
	sc := &GradScale{Scale: each(G, scale), Tiny: each(G, ssm.Ones)}
	if eta := p.DType.OutputSpacing() / 2; eta > 0 && p.Chunk > 0 {
		// ∂J/∂(C_t·B_s) of a chunk, rounded to the 16-bit input type for
		// a product, errs below that type's normal range by up to half its
		// subnormal spacing absolutely; dB_s sums it against C_t over the
		// chunk, dC_t against B_s
		subnormalProducts(p, eta/u, sc.Scale.B, p.C, false)
		subnormalProducts(p, eta/u, sc.Scale.C, p.B, true)
	}
	if !p.DefaultLimits() {
		// At the clamp's ends the gradient of dt jumps between 0 and the
		// unclamped chain: a Δ within its rounding of an end may fall on
		// either side in the kernel's arithmetic, so either value is right
		// there (the branch not taken is allowed in full).
		edgeAbs := 0.0
		if p.Softplus {
			// softplus as log(e^v + 1) rounds e^v + 1, so Δ errs by u
			// absolutely, not relatively: 250·u relative at Δ = 0.004
			edgeAbs = 4 * u
		}
		E := adjoint(p, ct, variant{mag: true, edge: true, edgeU: 16 * u, edgeAbs: edgeAbs})
		for i, e := range E.Dt {
			sc.Scale.Dt[i] += e / u
		}
		for h, e := range E.DtBias {
			sc.Scale.DtBias[h] += e / u
		}
	}
	return sc
}

// decaySums returns the largest |Σ Δ·A| within a chunk (row-aligned
// chunks of p.Chunk steps) and over a sequence, of any row and head.
func decaySums(p *Problem) (within, seq float64) {
	q := max(p.Chunk, 1)
	H, L := p.Heads, p.Seqlen
	lo, hi := p.Limits()
	for b := 0; b < p.Batch; b++ {
		for h := 0; h < H; h++ {
			bias := 0.0
			if p.DtBias != nil {
				bias = p.DtBias[h]
			}
			for _, sq := range p.Sequences() {
				var w, s float64
				for t := sq[0]; t < sq[1]; t++ {
					if t%q == 0 {
						w = 0
					}
					d := math.Abs(p.delta(p.Dt[(b*L+t)*H+h], bias, lo, hi) * p.A[h])
					w += d
					s += d
					within = math.Max(within, w)
				}
				seq = math.Max(seq, s)
			}
		}
	}
	return within, seq
}

// subnormalProducts adds to scale (dB's or dC's, in units of u) eta times
// each element's chunk sum of |other| (C for dB over the chunk's later
// steps t ≥ s, B for dC over its earlier steps s ≤ t, later false and
// true): the absolute error of ∂J/∂(C_t·B_s) rounded below the normal range.
func subnormalProducts(p *Problem, eta float64, scale, other []float64, earlier bool) {
	L, G, N, q := p.Seqlen, p.Groups, p.Dstate, p.Chunk
	for b := 0; b < p.Batch; b++ {
		for c0 := 0; c0 < L; c0 += q {
			c1 := min(c0+q, L)
			for k := 0; k < G*N; k++ {
				sum := 0.0
				at := func(t int) int { return (b*L+t)*G*N + k }
				if earlier {
					for t := c0; t < c1; t++ {
						sum += math.Abs(other[at(t)])
						scale[at(t)] += eta * sum
					}
					continue
				}
				for t := c1 - 1; t >= c0; t-- {
					sum += math.Abs(other[at(t)])
					scale[at(t)] += eta * sum
				}
			}
		}
	}
}

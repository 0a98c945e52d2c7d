package mamba3

import (
	"math"
	"math/rand/v2"

	"ssmverify/ssm"
)

// Options chooses a generated problem's sizes and features.
type Options struct {
	Batch, Seqlen, HeadsQK, Heads, N, P, AngleDim int
	D, Z, State                                   bool
	CuSeqlens                                     []int
}

// Generate draws a problem as a trained layer sees one: DT in
// [0.001, 0.1] (log-uniform), A in [−16, −1], Trap, Angles, Q, K, V, Z,
// the biases and D standard normal (ssm.Normals: an array of billions of
// elements in parallel blocks). The same seed gives the same problem.
func Generate(o Options, seed uint64) *Problem {
	rng := rand.New(rand.NewPCG(seed, 0x3a3))
	p := &Problem{Batch: o.Batch, Seqlen: o.Seqlen, HeadsQK: o.HeadsQK, Heads: o.Heads, N: o.N, P: o.P, AngleDim: o.AngleDim, CuSeqlens: o.CuSeqlens}
	normal := func(n int) []float64 { return ssm.Normals(rng, n) }
	L, B, H := o.Seqlen, o.Batch, o.Heads
	p.Q, p.K = normal(B*L*o.HeadsQK*o.N), normal(B*L*o.HeadsQK*o.N)
	p.V = normal(B * L * H * o.P)
	p.Trap, p.Angles = normal(B*H*L), normal(B*L*H*o.AngleDim)
	p.QBias, p.KBias = normal(H*o.N), normal(H*o.N)
	p.DT, p.ADT = make([]float64, B*H*L), make([]float64, B*H*L)
	a := make([]float64, H) // A per head, as the layer's A_log
	for h := range a {
		a[h] = -math.Exp(rng.Float64() * math.Log(16))
	}
	for b := 0; b < B; b++ {
		for h := 0; h < H; h++ {
			a := a[h]
			for t := 0; t < L; t++ {
				dt := math.Exp(math.Log(0.001) + rng.Float64()*(math.Log(0.1)-math.Log(0.001)))
				p.DT[(b*H+h)*L+t], p.ADT[(b*H+h)*L+t] = dt, a*dt
			}
		}
	}
	if o.D {
		p.D = normal(H)
	}
	if o.Z {
		p.Z = normal(B * L * H * o.P)
	}
	if o.State {
		S := p.NumSeqs()
		p.State = &State{Angle: make([]float64, S*H*o.AngleDim), SSM: normal(S * H * o.P * o.N), K: normal(S * H * o.N), V: normal(S * H * o.P)}
		for i := range p.State.Angle {
			p.State.Angle[i] = 2 * math.Pi * rng.Float64()
		}
	}
	return p
}

// GenerateCotangent draws the cotangent of a backward of p: a standard
// normal weight of every output (rounded to p.DType) and, when withState,
// of every final state (the angle's and the SSM state's in p.DType's
// weight type, k's and v's in p.DType). The same seed gives the same one.
func GenerateCotangent(p *Problem, withState bool, seed uint64) *Cotangent {
	rng := rand.New(rand.NewPCG(seed, 0xc07))
	normal := func(n int, dt ssm.DType) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = dt.Round(rng.NormFloat64())
		}
		return v
	}
	in, w := p.DType, p.DType.Weight()
	c := &Cotangent{Y: normal(p.Batch*p.Seqlen*p.Heads*p.P, in)}
	if withState {
		S, H := p.NumSeqs(), p.Heads
		c.State = &State{Angle: normal(S*H*p.AngleDim, w), SSM: normal(S*H*p.P*p.N, w), K: normal(S*H*p.N, in), V: normal(S*H*p.P, in)}
	}
	return c
}

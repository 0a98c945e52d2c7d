package mamba2

import (
	"math"
	"math/rand/v2"

	"ssmverify/ssm"
)

// Options chooses a generated problem's sizes and features.
type Options struct {
	Batch, Seqlen, Heads, Headdim, Groups, Dstate, Chunk int
	D, Z, DtBias, Softplus, InitialStates                bool
	DPerChannel                                          bool // D per head and channel (with D)
	DtMin, DtMax                                         float64
	CuSeqlens                                            []int
	DType, StateDType                                    ssm.DType
}

// Generate draws a problem with Mamba-2's initialisation: Δ in
// [0.001, 0.1] (log-uniform; with softplus and a bias, the bias is the
// inverse softplus of a draw and dt a small perturbation, as in a trained
// layer), A = −exp(U(0, log 16)), x, B, C, z, D and initial states
// standard normal. The same seed gives the same problem.
func Generate(o Options, seed uint64) *Problem {
	rng := rand.New(rand.NewPCG(seed, 0x55d))
	p := &Problem{Batch: o.Batch, Seqlen: o.Seqlen, Heads: o.Heads, Headdim: o.Headdim, Groups: o.Groups, Dstate: o.Dstate, Chunk: o.Chunk,
		Softplus: o.Softplus, DtMin: o.DtMin, DtMax: o.DtMax, CuSeqlens: o.CuSeqlens, DType: o.DType, StateDType: o.StateDType}
	normal := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return v
	}
	logU := func() float64 { return math.Exp(math.Log(0.001) + rng.Float64()*(math.Log(0.1)-math.Log(0.001))) }
	p.X, p.B, p.C = normal(p.XLen()), normal(p.BCLen()), normal(p.BCLen())
	p.A = make([]float64, p.Heads)
	for h := range p.A {
		p.A[h] = -math.Exp(rng.Float64() * math.Log(16))
	}
	p.Dt = make([]float64, p.DtLen())
	if o.DtBias {
		p.DtBias = make([]float64, p.Heads)
	}
	for h := 0; h < p.Heads; h++ {
		if o.DtBias {
			v := logU()
			if o.Softplus {
				p.DtBias[h] = v + math.Log(-math.Expm1(-v)) // inverse softplus
			} else {
				p.DtBias[h] = v
			}
		}
	}
	for i := range p.Dt {
		switch {
		case o.DtBias && o.Softplus:
			p.Dt[i] = 0.5 * rng.NormFloat64()
		case o.DtBias:
			p.Dt[i] = 0.02 * rng.NormFloat64()
		case o.Softplus:
			v := logU()
			p.Dt[i] = v + math.Log(-math.Expm1(-v))
		default:
			p.Dt[i] = logU()
		}
	}
	switch {
	case o.D && o.DPerChannel:
		p.D = normal(p.Heads * p.Headdim)
	case o.D:
		p.D = normal(p.Heads)
	}
	if o.Z {
		p.Z = normal(p.XLen())
	}
	if o.InitialStates {
		p.InitialStates = normal(p.StateLen())
	}
	return p
}

// StepOptions chooses a generated decode step.
type StepOptions struct {
	Batch, Slots, Heads, Headdim, Groups, Dstate int
	D, Z, DtBias, Softplus                       bool
	Indices                                      []int
	DType, StateDType                            ssm.DType
}

// GenerateStep draws a decode step as Generate draws a prefill, with a
// pool of standard normal states.
func GenerateStep(o StepOptions, seed uint64) *Step {
	p := Generate(Options{Batch: o.Batch, Seqlen: 1, Heads: o.Heads, Headdim: o.Headdim, Groups: o.Groups, Dstate: o.Dstate, Chunk: 1,
		D: o.D, Z: o.Z, DtBias: o.DtBias, Softplus: o.Softplus, DType: o.DType, StateDType: o.StateDType}, seed)
	rng := rand.New(rand.NewPCG(seed, 0x5e9))
	st := make([]float64, o.Slots*o.Heads*o.Headdim*o.Dstate)
	for i := range st {
		st[i] = rng.NormFloat64()
	}
	return &Step{Batch: o.Batch, Slots: o.Slots, Heads: o.Heads, Headdim: o.Headdim, Groups: o.Groups, Dstate: o.Dstate,
		State: st, X: p.X, Dt: p.Dt, A: p.A, B: p.B, C: p.C, D: p.D, Z: p.Z, DtBias: p.DtBias, Softplus: o.Softplus,
		Indices: o.Indices, DType: o.DType, StateDType: o.StateDType}
}

// StepAt returns the decode step that advances a prefill's rows by its
// step t from the given pool (one slot per row): the inputs at t of p.
func StepAt(p *Problem, t int, state []float64) *Step {
	H, P, G, N := p.Heads, p.Headdim, p.Groups, p.Dstate
	s := &Step{Batch: p.Batch, Slots: p.Batch, Heads: H, Headdim: P, Groups: G, Dstate: N, State: state, A: p.A, D: p.D, DtBias: p.DtBias,
		Softplus: p.Softplus, DtMin: p.DtMin, DtMax: p.DtMax, DType: p.DType, StateDType: p.StateDType}
	for b := 0; b < p.Batch; b++ {
		base := (b*p.Seqlen + t)
		s.X = append(s.X, p.X[base*H*P:(base+1)*H*P]...)
		s.Dt = append(s.Dt, p.Dt[base*H:(base+1)*H]...)
		s.B = append(s.B, p.B[base*G*N:(base+1)*G*N]...)
		s.C = append(s.C, p.C[base*G*N:(base+1)*G*N]...)
		if p.Z != nil {
			s.Z = append(s.Z, p.Z[base*H*P:(base+1)*H*P]...)
		}
	}
	return s
}

// Slice returns the prefill of steps [from, to) of p's rows, started from
// the given states (nil: p's own initial states when from is 0, else
// zero). p must not be packed.
func (p *Problem) Slice(from, to int, init []float64) *Problem {
	H, P, G, N, L := p.Heads, p.Headdim, p.Groups, p.Dstate, p.Seqlen
	q := *p
	q.Seqlen = to - from
	q.X, q.Dt, q.B, q.C, q.Z = nil, nil, nil, nil, nil
	for b := 0; b < p.Batch; b++ {
		q.X = append(q.X, p.X[(b*L+from)*H*P:(b*L+to)*H*P]...)
		q.Dt = append(q.Dt, p.Dt[(b*L+from)*H:(b*L+to)*H]...)
		q.B = append(q.B, p.B[(b*L+from)*G*N:(b*L+to)*G*N]...)
		q.C = append(q.C, p.C[(b*L+from)*G*N:(b*L+to)*G*N]...)
		if p.Z != nil {
			q.Z = append(q.Z, p.Z[(b*L+from)*H*P:(b*L+to)*H*P]...)
		}
	}
	if init != nil || from > 0 {
		q.InitialStates = init
	}
	return &q
}

// Unpack returns the sequences of a packed row as problems of their own,
// the first with the row's initial states.
func (p *Problem) Unpack() []*Problem {
	var out []*Problem
	for i, sq := range p.Sequences() {
		q := p.Slice(sq[0], sq[1], nil)
		q.CuSeqlens = nil
		if i == 0 {
			q.InitialStates = p.InitialStates
		}
		out = append(out, q)
	}
	return out
}

// GenerateCotangent draws a backward pass's cotangent for p: Y standard
// normal, and with states the cotangents of the final and per-sequence
// states too (nil without). The same seed gives the same cotangent.
func GenerateCotangent(p *Problem, seed uint64, states bool) *Cotangent {
	rng := rand.New(rand.NewPCG(seed, 7))
	normal := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return v
	}
	ct := &Cotangent{Y: normal(p.XLen())}
	if states {
		ct.FinalStates, ct.SeqStates = normal(p.StateLen()), normal(p.NumSeqs()*p.HeadStateLen())
	}
	return ct
}

// Rounded returns the cotangent as a kernel of p receives it: Y rounded
// to p's input type, the states' cotangents to its state type.
func (c *Cotangent) Rounded(p *Problem) *Cotangent {
	return &Cotangent{Y: p.DType.RoundAll(c.Y), FinalStates: p.StateDType.RoundAll(c.FinalStates), SeqStates: p.StateDType.RoundAll(c.SeqStates)}
}

// Concat returns one row's tokens of a then those of b (problems of one
// row and one sequence, of the same heads and types) from a's initial
// state: a prefix and the tokens that follow it.
func Concat(a, b *Problem) *Problem {
	q := *a
	q.Seqlen = a.Seqlen + b.Seqlen
	cat := func(u, v []float64) []float64 { return append(append([]float64(nil), u...), v...) }
	q.X, q.Dt, q.B, q.C = cat(a.X, b.X), cat(a.Dt, b.Dt), cat(a.B, b.B), cat(a.C, b.C)
	if a.Z != nil {
		q.Z = cat(a.Z, b.Z)
	}
	return &q
}

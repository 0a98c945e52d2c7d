package mamba2

import (
	"fmt"
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
// standard normal (ssm.Normals: an array of billions of elements in
// parallel blocks). The same seed gives the same problem.
func Generate(o Options, seed uint64) *Problem {
	rng := rand.New(rand.NewPCG(seed, 0x55d))
	p := &Problem{Batch: o.Batch, Seqlen: o.Seqlen, Heads: o.Heads, Headdim: o.Headdim, Groups: o.Groups, Dstate: o.Dstate, Chunk: o.Chunk,
		Softplus: o.Softplus, DtMin: o.DtMin, DtMax: o.DtMax, CuSeqlens: o.CuSeqlens, DType: o.DType, StateDType: o.StateDType}
	normal := func(n int) []float64 { return ssm.Normals(rng, n) }
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

// Row is the tokens [from, to) of row b of p as a problem of one
// unpacked row, starting from the row's initial state where from is 0.
func (p *Problem) Row(b, from, to int) *Problem {
	L, H, P, G, N := p.Seqlen, p.Heads, p.Headdim, p.Groups, p.Dstate
	q := *p
	q.Batch, q.Seqlen, q.CuSeqlens, q.InitialStates = 1, to-from, nil, nil
	q.X = p.X[(b*L+from)*H*P : (b*L+to)*H*P]
	q.Dt = p.Dt[(b*L+from)*H : (b*L+to)*H]
	q.B = p.B[(b*L+from)*G*N : (b*L+to)*G*N]
	q.C = p.C[(b*L+from)*G*N : (b*L+to)*G*N]
	if p.Z != nil {
		q.Z = p.Z[(b*L+from)*H*P : (b*L+to)*H*P]
	}
	if from == 0 && p.InitialStates != nil {
		n := H * P * N
		q.InitialStates = p.InitialStates[b*n : (b+1)*n]
	}
	return &q
}

// HeadsOf is the problem p restricted to heads (one group's: they share
// B and C), a problem of one group whose reference is those heads' alone.
// It panics if heads is empty or names a head outside p or of another
// group than the first's.
func (p *Problem) HeadsOf(heads []int) *Problem { return p.ChannelsOf(heads, nil) }

// ChannelsOf is HeadsOf keeping only the given channels of each head (nil:
// all): the channels of a head are recurrences of their own (each its
// row of the state), so the reference of the few is theirs in the whole,
// bit for bit, at a fraction of the work (a million tokens judged at four
// channels). It panics as HeadsOf does, and on a channel outside
// [0, Headdim).
func (p *Problem) ChannelsOf(heads, channels []int) *Problem {
	B, L, H, P, G, N := p.Batch, p.Seqlen, p.Heads, p.Headdim, p.Groups, p.Dstate
	if len(heads) == 0 {
		panic("mamba2: HeadsOf: heads is empty")
	}
	g := Group(heads[0], H, G)
	for _, h := range heads {
		if h < 0 || h >= H || Group(h, H, G) != g {
			panic(fmt.Sprintf("mamba2: HeadsOf: head %d: want heads of %d sharing head %d's group %d", h, H, heads[0], g))
		}
	}
	ch := ssm.Channels("mamba2", P, channels)
	q := *p
	q.Heads, q.Groups, q.Headdim = len(heads), 1, len(ch)
	q.X, q.Dt, q.A, q.B, q.C, q.Z, q.D, q.DtBias, q.InitialStates = nil, nil, nil, nil, nil, nil, nil, nil, nil
	hp := len(heads) * len(ch)
	q.X, q.Dt = make([]float64, 0, B*L*hp), make([]float64, 0, B*L*len(heads))
	q.B, q.C = make([]float64, 0, B*L*N), make([]float64, 0, B*L*N)
	if p.Z != nil {
		q.Z = make([]float64, 0, B*L*hp)
	}
	for b := 0; b < B; b++ {
		for t := 0; t < L; t++ {
			for _, h := range heads {
				i := (b*L+t)*H + h
				q.X = ssm.AppendRows(q.X, p.X, i*P, 1, ch)
				if p.Z != nil {
					q.Z = ssm.AppendRows(q.Z, p.Z, i*P, 1, ch)
				}
				q.Dt = append(q.Dt, p.Dt[i])
			}
			j := ((b*L+t)*G + g) * N
			q.B = append(q.B, p.B[j:j+N]...)
			q.C = append(q.C, p.C[j:j+N]...)
		}
	}
	for _, h := range heads {
		q.A = append(q.A, p.A[h])
		if p.DPerChannel() {
			q.D = ssm.AppendRows(q.D, p.D, h*P, 1, ch)
		} else if p.D != nil {
			q.D = append(q.D, p.D[h])
		}
		if p.DtBias != nil {
			q.DtBias = append(q.DtBias, p.DtBias[h])
		}
	}
	if p.InitialStates != nil {
		for b := 0; b < B; b++ {
			for _, h := range heads {
				q.InitialStates = ssm.AppendRows(q.InitialStates, p.InitialStates, (b*H+h)*P*N, N, ch)
			}
		}
	}
	return &q
}

// HeadsOf is the output o of problem p restricted to heads, as
// Problem.HeadsOf lays them out.
func (out *Output) HeadsOf(p *Problem, heads []int) *Output { return out.ChannelsOf(p, heads, nil) }

// ChannelsOf is the output o of problem p restricted to heads and their
// channels (nil: all), as Problem.ChannelsOf lays them out.
func (out *Output) ChannelsOf(p *Problem, heads, channels []int) *Output {
	B, L, H, P, N := p.Batch, p.Seqlen, p.Heads, p.Headdim, p.Dstate
	ch := ssm.Channels("mamba2", P, channels)
	o := &Output{Y: make([]float64, 0, B*L*len(heads)*len(ch))}
	for b := 0; b < B; b++ {
		for t := 0; t < L; t++ {
			for _, h := range heads {
				i := ((b*L+t)*H + h) * P
				o.Y = ssm.AppendRows(o.Y, out.Y, i, 1, ch)
			}
		}
		for _, h := range heads {
			o.FinalStates = ssm.AppendRows(o.FinalStates, out.FinalStates, (b*H+h)*P*N, N, ch)
		}
	}
	o.SeqStates = o.FinalStates
	return o
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
	normal := func(n int) []float64 { return ssm.Normals(rng, n) }
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

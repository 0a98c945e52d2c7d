package mamba3

import (
	"fmt"

	"ssmverify/ssm"
)

// Problem is one forward pass of the SISO layer in upstream's layout,
// dense row-major float64 arrays, outermost dimension first:
//
//	Q, K            [Batch][Seqlen][HeadsQK][N]
//	V, Z            [Batch][Seqlen][Heads][P]
//	ADT, DT, Trap   [Batch][Heads][Seqlen]      (head-major)
//	QBias, KBias    [Heads][N]
//	Angles          [Batch][Seqlen][Heads][AngleDim]
//	D               [Heads]
//	State           the four-part initial state (nil: zero)
//
// Z, D and State are optional. CuSeqlens packs sequences into one row
// (Batch 1); each starts from State's entry of its own (upstream's
// Input_States has one per sequence) or zero.
type Problem struct {
	Batch, Seqlen, HeadsQK, Heads, N, P, AngleDim int

	Q, K, V, ADT, DT, Trap, QBias, KBias, Angles []float64
	D, Z                                         []float64
	State                                        *State
	CuSeqlens                                    []int

	// DType is the type the kernel reads Q, K, V, Trap, Angles and Z in
	// (upstream's wrapper casts them to bf16 itself): Rounded rounds them
	// to it, the rest to float32 (float64 for F64).
	DType ssm.DType
	// Arithmetic is what the error model (ErrorScale) allows the kernel.
	Arithmetic Arithmetic
	// NonFinite lets the inputs hold NaN and ±Inf (Validate checks their
	// lengths alone): a problem poisoned on purpose, compared kernel
	// against kernel (the isolation property), never against the reference.
	NonFinite bool
}

// Rounded returns a copy of p rounded to what the kernel reads.
func (p *Problem) Rounded() *Problem {
	q := *p
	in, w := p.DType, p.DType.Weight()
	q.Q, q.K, q.V, q.Trap, q.Angles, q.Z = in.RoundAll(p.Q), in.RoundAll(p.K), in.RoundAll(p.V), in.RoundAll(p.Trap), in.RoundAll(p.Angles), in.RoundAll(p.Z)
	q.ADT, q.DT, q.QBias, q.KBias, q.D = w.RoundAll(p.ADT), w.RoundAll(p.DT), w.RoundAll(p.QBias), w.RoundAll(p.KBias), w.RoundAll(p.D)
	if s := p.State; s != nil {
		q.State = &State{Angle: w.RoundAll(s.Angle), SSM: w.RoundAll(s.SSM), K: in.RoundAll(s.K), V: in.RoundAll(s.V)}
	}
	return &q
}

// RoundInPlace is Rounded without the copies: p's own arrays rounded, p
// returned. For the deployment sizes, whose V alone is tens of GiB.
func (p *Problem) RoundInPlace() *Problem {
	in, w := p.DType, p.DType.Weight()
	for _, v := range [][]float64{p.Q, p.K, p.V, p.Trap, p.Angles, p.Z} {
		in.RoundInPlace(v)
	}
	for _, v := range [][]float64{p.ADT, p.DT, p.QBias, p.KBias, p.D} {
		w.RoundInPlace(v)
	}
	if s := p.State; s != nil {
		w.RoundInPlace(s.Angle)
		w.RoundInPlace(s.SSM)
		in.RoundInPlace(s.K)
		in.RoundInPlace(s.V)
	}
	return p
}

// Arithmetic describes how a kernel evaluates the layer, for the error
// model: the chunk length of its chunked algorithm (0: step by step), the
// arithmetic's unit roundoff, the unit roundoff its matrix products'
// operands are rounded to (0: none; 2⁻⁸ for bf16 operands), and whether
// it takes PTX's approximate tanh, sin and cos (tanh.approx.f32: relative
// error 2⁻¹⁰·⁹⁹; sin/cos.approx.f32: absolute 2⁻²⁰·⁹ on [−π, π]; a
// sigmoid as ½·tanh(x/2) + ½: absolute 2⁻¹²), as upstream's do.
type Arithmetic struct {
	Chunk    int
	U        float64
	OperandU float64
	Approx   bool
	// HandoffKV says that the previous key and value reach a step through
	// a state stored in the input type (a chain of decode steps, a forward
	// resumed from a state): the previous input's term then carries their
	// rounding to a 16-bit type.
	HandoffKV bool
}

// State is the four-part state of every sequence: the angles
// [S][Heads][AngleDim], the SSM state [S][Heads][P][N], the previous
// (rotated) key [S][Heads][N] and value [S][Heads][P].
type State struct {
	Angle, SSM, K, V []float64
}

// NumSeqs is the number of sequences.
func (p *Problem) NumSeqs() int {
	if p.CuSeqlens != nil {
		return len(p.CuSeqlens) - 1
	}
	return p.Batch
}

// Validate checks sizes and lengths, naming the offending field.
func (p *Problem) Validate() error {
	if err := ssm.CheckSizes("mamba3: ", ssm.Size{Name: "Batch", V: p.Batch}, ssm.Size{Name: "Seqlen", V: p.Seqlen}, ssm.Size{Name: "HeadsQK", V: p.HeadsQK},
		ssm.Size{Name: "Heads", V: p.Heads}, ssm.Size{Name: "N", V: p.N}, ssm.Size{Name: "P", V: p.P}); err != nil {
		return err
	}
	if p.Heads%p.HeadsQK != 0 {
		return fmt.Errorf("mamba3: HeadsQK = %d does not divide Heads = %d", p.HeadsQK, p.Heads)
	}
	if p.AngleDim < 0 || 2*p.AngleDim > p.N {
		return fmt.Errorf("mamba3: AngleDim = %d, want 0 … N/2 = %d", p.AngleDim, p.N/2)
	}
	L, B, H := p.Seqlen, p.Batch, p.Heads
	qk, v, hl := B*L*p.HeadsQK*p.N, B*L*H*p.P, B*H*L
	if err := ssm.CheckFields("mamba3: ", "", !p.NonFinite,
		ssm.Field{Name: "Q", V: p.Q, Want: qk, Optional: false}, ssm.Field{Name: "K", V: p.K, Want: qk, Optional: false}, ssm.Field{Name: "V", V: p.V, Want: v, Optional: false}, ssm.Field{Name: "ADT", V: p.ADT, Want: hl, Optional: false},
		ssm.Field{Name: "DT", V: p.DT, Want: hl, Optional: false}, ssm.Field{Name: "Trap", V: p.Trap, Want: hl, Optional: false}, ssm.Field{Name: "QBias", V: p.QBias, Want: H * p.N, Optional: false},
		ssm.Field{Name: "KBias", V: p.KBias, Want: H * p.N, Optional: false}, ssm.Field{Name: "Angles", V: p.Angles, Want: B * L * H * p.AngleDim, Optional: false},
		ssm.Field{Name: "D", V: p.D, Want: H, Optional: true}, ssm.Field{Name: "Z", V: p.Z, Want: v, Optional: true}); err != nil {
		return err
	}
	for i, x := range p.ADT {
		if x > 0 {
			return fmt.Errorf("mamba3: ADT[%d] = %g, want ≤ 0 (A·Δ of a decaying state)", i, x)
		}
	}
	if s := p.State; s != nil {
		S := p.NumSeqs()
		if err := ssm.CheckFields("mamba3: ", "", false, ssm.Field{Name: "State.Angle", V: s.Angle, Want: S * H * p.AngleDim, Optional: false},
			ssm.Field{Name: "State.SSM", V: s.SSM, Want: S * H * p.P * p.N, Optional: false}, ssm.Field{Name: "State.K", V: s.K, Want: S * H * p.N, Optional: false},
			ssm.Field{Name: "State.V", V: s.V, Want: S * H * p.P, Optional: false}); err != nil {
			return err
		}
	}
	if c := p.CuSeqlens; c != nil {
		if p.Batch != 1 || len(c) < 2 || c[0] != 0 || c[len(c)-1] != L {
			return fmt.Errorf("mamba3: CuSeqlens = %v with Batch %d, want Batch 1 and [0, …, %d]", c, p.Batch, L)
		}
		for i := 1; i < len(c); i++ {
			if c[i] <= c[i-1] {
				return fmt.Errorf("mamba3: CuSeqlens = %v, want strictly increasing", c)
			}
		}
	}
	return nil
}

// Sequences returns the [row, start, end) of every sequence.
func (p *Problem) Sequences() [][3]int {
	var s [][3]int
	if p.CuSeqlens != nil {
		for i := 0; i+1 < len(p.CuSeqlens); i++ {
			s = append(s, [3]int{0, p.CuSeqlens[i], p.CuSeqlens[i+1]})
		}
		return s
	}
	for b := 0; b < p.Batch; b++ {
		s = append(s, [3]int{b, 0, p.Seqlen})
	}
	return s
}

// Slice returns steps [from, to) of a one-row problem, without a state (a
// test sets the state it resumes from).
func (p *Problem) Slice(from, to int) *Problem {
	q := *p
	L, H, Hqk, N, P, A := p.Seqlen, p.Heads, p.HeadsQK, p.N, p.P, p.AngleDim
	q.Seqlen, q.State, q.CuSeqlens = to-from, nil, nil
	q.Q, q.K = p.Q[from*Hqk*N:to*Hqk*N], p.K[from*Hqk*N:to*Hqk*N]
	q.V, q.Angles = p.V[from*H*P:to*H*P], p.Angles[from*H*A:to*H*A]
	if p.Z != nil {
		q.Z = p.Z[from*H*P : to*H*P]
	}
	q.ADT, q.DT, q.Trap = nil, nil, nil
	for h := 0; h < H; h++ {
		q.ADT = append(q.ADT, p.ADT[h*L+from:h*L+to]...)
		q.DT = append(q.DT, p.DT[h*L+from:h*L+to]...)
		q.Trap = append(q.Trap, p.Trap[h*L+from:h*L+to]...)
	}
	return &q
}

// HeadsOf is the problem p restricted to heads, all of one query/key
// group (they share Q and K): a problem of one group whose reference is
// those heads' alone (the layer's heads never mix). It panics if heads is
// empty or names a head outside p or of another group than the first's.
func (p *Problem) HeadsOf(heads []int) *Problem { return p.ChannelsOf(heads, nil) }

// ChannelsOf is HeadsOf keeping only the given channels of V (and of y,
// z and the state's rows) in each head (nil: all P): a channel is a
// recurrence of its own (its row of the SSM state, its entry of the
// previous V), so the reference of the few is theirs in the whole, at a
// fraction of the work. It panics as HeadsOf does, and on a channel
// outside [0, P).
func (p *Problem) ChannelsOf(heads, channels []int) *Problem {
	B, L, H, Hqk, N, P, A := p.Batch, p.Seqlen, p.Heads, p.HeadsQK, p.N, p.P, p.AngleDim
	if len(heads) == 0 {
		panic("mamba3: HeadsOf: heads is empty")
	}
	g := heads[0] / (H / Hqk)
	for _, h := range heads {
		if h < 0 || h >= H || h/(H/Hqk) != g {
			panic(fmt.Sprintf("mamba3: HeadsOf: head %d: want heads of %d sharing head %d's query/key group %d", h, H, heads[0], g))
		}
	}
	ch := ssm.Channels("mamba3", P, channels)
	q := *p
	nh, nc := len(heads), len(ch)
	q.Heads, q.HeadsQK, q.P = nh, 1, nc
	q.Q, q.K = make([]float64, 0, B*L*N), make([]float64, 0, B*L*N)
	q.V, q.Angles = make([]float64, 0, B*L*nh*nc), make([]float64, 0, B*L*nh*A)
	q.ADT, q.DT, q.Trap = make([]float64, 0, B*nh*L), make([]float64, 0, B*nh*L), make([]float64, 0, B*nh*L)
	q.QBias, q.KBias, q.D, q.Z, q.State = nil, nil, nil, nil, nil
	if p.Z != nil {
		q.Z = make([]float64, 0, B*L*nh*nc)
	}
	for b := 0; b < B; b++ {
		for t := 0; t < L; t++ {
			j := ((b*L+t)*Hqk + g) * N
			q.Q, q.K = append(q.Q, p.Q[j:j+N]...), append(q.K, p.K[j:j+N]...)
			for _, h := range heads {
				i := (b*L+t)*H + h
				q.V = ssm.AppendRows(q.V, p.V, i*P, 1, ch)
				if p.Z != nil {
					q.Z = ssm.AppendRows(q.Z, p.Z, i*P, 1, ch)
				}
				q.Angles = append(q.Angles, p.Angles[i*A:(i+1)*A]...)
			}
		}
		for _, h := range heads {
			i := (b*H + h) * L
			q.ADT, q.DT, q.Trap = append(q.ADT, p.ADT[i:i+L]...), append(q.DT, p.DT[i:i+L]...), append(q.Trap, p.Trap[i:i+L]...)
		}
	}
	for _, h := range heads {
		q.QBias, q.KBias = append(q.QBias, p.QBias[h*N:(h+1)*N]...), append(q.KBias, p.KBias[h*N:(h+1)*N]...)
		if p.D != nil {
			q.D = append(q.D, p.D[h])
		}
	}
	if p.State != nil {
		q.State = p.State.ChannelsOf(H, N, P, A, heads, ch)
	}
	return &q
}

// HeadsOf is the state s of heads heads (of a layer of H heads, state
// N, P, angles A) restricted to heads, for every sequence.
func (s *State) HeadsOf(H, N, P, A int, heads []int) *State {
	return s.ChannelsOf(H, N, P, A, heads, nil)
}

// ChannelsOf is HeadsOf keeping the given channels (nil: all P): their
// rows of the SSM state and entries of V; the angle and K whole.
func (s *State) ChannelsOf(H, N, P, A int, heads, channels []int) *State {
	if s == nil {
		return nil
	}
	ch := ssm.Channels("mamba3", P, channels)
	S := len(s.V) / (H * P)
	o := &State{}
	for si := 0; si < S; si++ {
		for _, h := range heads {
			i := si*H + h
			o.Angle = append(o.Angle, s.Angle[i*A:(i+1)*A]...)
			o.SSM = ssm.AppendRows(o.SSM, s.SSM, i*P*N, N, ch)
			o.V = ssm.AppendRows(o.V, s.V, i*P, 1, ch)
			o.K = append(o.K, s.K[i*N:(i+1)*N]...)
		}
	}
	return o
}

// OutputHeadsOf is the output y ([Batch][Seqlen][Heads][P]) of p
// restricted to heads, as HeadsOf lays them out.
func (p *Problem) OutputHeadsOf(y []float64, heads []int) []float64 {
	return p.OutputChannelsOf(y, heads, nil)
}

// OutputChannelsOf is OutputHeadsOf keeping the given channels (nil: all),
// as ChannelsOf lays them out.
func (p *Problem) OutputChannelsOf(y []float64, heads, channels []int) []float64 {
	ch := ssm.Channels("mamba3", p.P, channels)
	out := make([]float64, 0, p.Batch*p.Seqlen*len(heads)*len(ch))
	for bt := 0; bt < p.Batch*p.Seqlen; bt++ {
		for _, h := range heads {
			i := (bt*p.Heads + h) * p.P
			out = ssm.AppendRows(out, y, i, 1, ch)
		}
	}
	return out
}

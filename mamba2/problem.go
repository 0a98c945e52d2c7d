package mamba2

import (
	"fmt"
	"math"

	"ssmverify/ssm"
)

// Problem is one chunked-prefill problem in upstream's layout: dense
// row-major float64 arrays, outermost dimension first.
//
//	X, Z          [Batch][Seqlen][Heads][Headdim]
//	Dt            [Batch][Seqlen][Heads]
//	A, D, DtBias  [Heads]                 (D also [Heads][Headdim]: per channel)
//	B, C          [Batch][Seqlen][Groups][Dstate]
//	InitialStates [Batch][Heads][Headdim][Dstate]
//
// D, Z, DtBias and InitialStates are optional (nil: absent). CuSeqlens
// packs sequences into the row (Batch 1): [0, l₁, …, Seqlen], strictly
// increasing. DtMin and DtMax clamp Δ after the bias and the softplus;
// DtMax = 0 stands for +∞, so that the zero values are upstream's default
// (0, +∞) (Limits). Chunk is the kernel's chunk length, a parameter of the kernel
// that the error model uses and the reference ignores; 0 stands for a
// sequential evaluation (a chain of decode steps).
type Problem struct {
	Batch, Seqlen, Heads, Headdim, Groups, Dstate int
	Chunk                                         int

	X, Dt, A, B, C    []float64
	D, Z, DtBias      []float64
	InitialStates     []float64
	Softplus          bool
	DtMin, DtMax      float64
	CuSeqlens         []int
	DType, StateDType ssm.DType // inputs' type; the type states are kept in between chunks

	// NonFinite lets the inputs hold NaN and ±Inf (Validate checks their
	// lengths alone): a problem poisoned on purpose, whose results are
	// compared kernel against kernel (the isolation property), never
	// against the reference.
	NonFinite bool

	// naiveSoftplus and operandU describe a kernel's arithmetic for the
	// slips of the diagnosis (Slips): Δ's softplus as log(e^v + 1) in
	// float32, and the chunk's products' operands rounded to a unit
	// roundoff (TF32's 2⁻¹¹).
	naiveSoftplus bool
	operandU      float64
}

// WithOperands returns a copy of p whose error model lets the chunk's
// matrix products round their operands to unit roundoff u (TF32: 2⁻¹¹),
// as Triton's tl.dot does by default for float32.
func WithOperands(p *Problem, u float64) *Problem {
	q := *p
	q.operandU = u
	return &q
}

// DPerChannel reports whether D has one value per head and channel
// ([Heads][Headdim], upstream's D_has_hdim) rather than one per head.
func (p *Problem) DPerChannel() bool { return p.Headdim > 1 && len(p.D) == p.Heads*p.Headdim }

// DIndex is the index into D of head h's channel pp.
func (p *Problem) DIndex(h, pp int) int {
	if p.DPerChannel() {
		return h*p.Headdim + pp
	}
	return h
}

// dLen is the length Validate asks of D: per head, or per head and
// channel where it has that length.
func (p *Problem) dLen() int {
	if p.DPerChannel() {
		return p.Heads * p.Headdim
	}
	return p.Heads
}

// Limits returns the clamp of Δ, (DtMin, DtMax) with DtMax = 0 read as +∞.
func (p *Problem) Limits() (lo, hi float64) { return limits(p.DtMin, p.DtMax) }

// DefaultLimits reports whether the clamp is upstream's default (0, +∞).
func (p *Problem) DefaultLimits() bool { return p.DtMin == 0 && p.DtMax == 0 }

func limits(lo, hi float64) (float64, float64) {
	if hi == 0 {
		hi = math.Inf(1)
	}
	return lo, hi
}

// Group returns the group of B and C that head h reads: h / (Heads/Groups).
func Group(h, heads, groups int) int { return h / (heads / groups) }

// Sequences returns the [start, end) bounds of the sequences of a row.
func (p *Problem) Sequences() [][2]int {
	if p.CuSeqlens == nil {
		return [][2]int{{0, p.Seqlen}}
	}
	var s [][2]int
	for i := 0; i+1 < len(p.CuSeqlens); i++ {
		s = append(s, [2]int{p.CuSeqlens[i], p.CuSeqlens[i+1]})
	}
	return s
}

// NumSeqs is the number of sequences, over all rows.
func (p *Problem) NumSeqs() int { return p.Batch * len(p.Sequences()) }

// XLen, DtLen, BCLen and StateLen are the lengths of the arrays.
func (p *Problem) XLen() int     { return p.Batch * p.Seqlen * p.Heads * p.Headdim }
func (p *Problem) DtLen() int    { return p.Batch * p.Seqlen * p.Heads }
func (p *Problem) BCLen() int    { return p.Batch * p.Seqlen * p.Groups * p.Dstate }
func (p *Problem) StateLen() int { return p.Batch * p.Heads * p.Headdim * p.Dstate }

// HeadStateLen is the length of one sequence's state: Heads·Headdim·Dstate.
func (p *Problem) HeadStateLen() int { return p.Heads * p.Headdim * p.Dstate }

// Shape names the problem's sizes and options, for messages and reports.
func (p *Problem) Shape() string {
	s := fmt.Sprintf("%s/state-%s b=%d l=%d h=%d p=%d g=%d n=%d chunk=%d", p.DType, p.StateDType, p.Batch, p.Seqlen, p.Heads, p.Headdim, p.Groups, p.Dstate, p.Chunk)
	for _, f := range []struct {
		on   bool
		name string
	}{{p.D != nil && !p.DPerChannel(), "D"}, {p.DPerChannel(), "D(per channel)"}, {p.Z != nil, "z"}, {p.DtBias != nil, "dt_bias"}, {p.Softplus, "softplus"},
		{!p.DefaultLimits(), fmt.Sprintf("dt_limit=(%g,%g)", p.DtMin, p.DtMax)},
		{p.InitialStates != nil, "initial_states"}, {p.CuSeqlens != nil, fmt.Sprintf("cu_seqlens=%v", p.CuSeqlens)}} {
		if f.on {
			s += " " + f.name
		}
	}
	return s
}

// Validate checks sizes, lengths and values, naming the offending field.
func (p *Problem) Validate() error {
	if err := ssm.CheckSizes("mamba2: ", ssm.Size{Name: "Batch", V: p.Batch}, ssm.Size{Name: "Seqlen", V: p.Seqlen}, ssm.Size{Name: "Heads", V: p.Heads}, ssm.Size{Name: "Headdim", V: p.Headdim},
		ssm.Size{Name: "Groups", V: p.Groups}, ssm.Size{Name: "Dstate", V: p.Dstate}); err != nil {
		return err
	}
	if p.Chunk < 0 {
		return fmt.Errorf("mamba2: Chunk = %d, want ≥ 0 (0: a sequential evaluation)", p.Chunk)
	}
	if p.Heads%p.Groups != 0 {
		return fmt.Errorf("mamba2: Groups = %d does not divide Heads = %d", p.Groups, p.Heads)
	}
	if !p.DType.Valid() || !p.StateDType.Valid() {
		return fmt.Errorf("mamba2: DType %v or StateDType %v is not a dtype of the ABI", p.DType, p.StateDType)
	}
	if err := ssm.CheckFields("mamba2: ", " for "+p.Shape(), !p.NonFinite,
		ssm.Field{Name: "X", V: p.X, Want: p.XLen(), Optional: false}, ssm.Field{Name: "Dt", V: p.Dt, Want: p.DtLen(), Optional: false}, ssm.Field{Name: "A", V: p.A, Want: p.Heads, Optional: false},
		ssm.Field{Name: "B", V: p.B, Want: p.BCLen(), Optional: false}, ssm.Field{Name: "C", V: p.C, Want: p.BCLen(), Optional: false},
		ssm.Field{Name: "D", V: p.D, Want: p.dLen(), Optional: true}, ssm.Field{Name: "Z", V: p.Z, Want: p.XLen(), Optional: true}, ssm.Field{Name: "DtBias", V: p.DtBias, Want: p.Heads, Optional: true},
		ssm.Field{Name: "InitialStates", V: p.InitialStates, Want: p.StateLen(), Optional: true}); err != nil {
		return err
	}
	for h, a := range p.A {
		if a > 0 {
			return fmt.Errorf("mamba2: A[%d] = %g, want ≤ 0 (Mamba-2's A = −exp(A_log); the kernels clamp exp of positive sums)", h, a)
		}
	}
	if lo, hi := p.Limits(); !(lo <= hi) || math.IsNaN(lo) {
		return fmt.Errorf("mamba2: dt_limit = (%g, %g), want lo ≤ hi", lo, hi)
	}
	if p.CuSeqlens != nil {
		if p.Batch != 1 {
			return fmt.Errorf("mamba2: CuSeqlens with Batch = %d, want 1 (sequences packed in one row)", p.Batch)
		}
		c := p.CuSeqlens
		if len(c) < 2 || c[0] != 0 || c[len(c)-1] != p.Seqlen {
			return fmt.Errorf("mamba2: CuSeqlens = %v, want [0, …, %d]", c, p.Seqlen)
		}
		for i := 1; i < len(c); i++ {
			if c[i] <= c[i-1] {
				return fmt.Errorf("mamba2: CuSeqlens = %v, want strictly increasing (no empty sequence)", c)
			}
		}
	}
	return nil
}

// Rounded returns a copy of p with every array rounded to what the kernel
// reads: the inputs (X, Dt, B, C, Z) to DType, the weights (A, D, DtBias)
// and the initial states to float32 unless DType is F64, the initial
// states to StateDType where it is narrower. Reference and kernel then see
// identical inputs.
func (p *Problem) Rounded() *Problem {
	q := *p
	in, w := p.DType, p.DType.Weight()
	q.X, q.Dt, q.B, q.C, q.Z = in.RoundAll(p.X), in.RoundAll(p.Dt), in.RoundAll(p.B), in.RoundAll(p.C), in.RoundAll(p.Z)
	q.A, q.D, q.DtBias = w.RoundAll(p.A), w.RoundAll(p.D), w.RoundAll(p.DtBias)
	q.InitialStates = p.StateDType.RoundAll(w.RoundAll(p.InitialStates))
	return &q
}

// RoundInPlace is Rounded without the copies: p's own arrays rounded, p
// returned. For the deployment sizes, whose x alone is tens of GiB.
func (p *Problem) RoundInPlace() *Problem {
	in, w := p.DType, p.DType.Weight()
	for _, v := range [][]float64{p.X, p.Dt, p.B, p.C, p.Z} {
		in.RoundInPlace(v)
	}
	for _, v := range [][]float64{p.A, p.D, p.DtBias, p.InitialStates} {
		w.RoundInPlace(v)
	}
	p.StateDType.RoundInPlace(p.InitialStates)
	return p
}

// Output is a prefill's result: Y like X; FinalStates
// [Batch][Heads][Headdim][Dstate], each row's state after its last step;
// SeqStates [NumSeqs][Heads][Headdim][Dstate], every sequence's final
// state (for an unpacked problem, FinalStates again).
type Output struct {
	Y, FinalStates, SeqStates []float64
}

// Step is one decode step (selective_state_update) on a pool of states.
//
//	State    [Slots][Heads][Headdim][Dstate]  (updated in place)
//	X, Z     [Batch][Heads][Headdim]
//	Dt       [Batch][Heads]
//	A, D, DtBias [Heads]
//	B, C     [Batch][Groups][Dstate]
//
// Indices (len Batch) picks the slot of each row; nil means slot b (and
// Slots ≥ Batch); a negative entry is a padding row.
type Step struct {
	Batch, Slots, Heads, Headdim, Groups, Dstate int

	State, X, Dt, A, B, C []float64
	D, Z, DtBias          []float64
	Softplus              bool
	DtMin, DtMax          float64 // as Problem's
	Indices               []int
	DType, StateDType     ssm.DType
	naiveSoftplus         bool
}

// Validate checks a step like Problem.Validate.
func (s *Step) Validate() error {
	if err := ssm.CheckSizes("mamba2: step ", ssm.Size{Name: "Batch", V: s.Batch}, ssm.Size{Name: "Slots", V: s.Slots}, ssm.Size{Name: "Heads", V: s.Heads}, ssm.Size{Name: "Headdim", V: s.Headdim},
		ssm.Size{Name: "Groups", V: s.Groups}, ssm.Size{Name: "Dstate", V: s.Dstate}); err != nil {
		return err
	}
	if s.Heads%s.Groups != 0 {
		return fmt.Errorf("mamba2: step Groups = %d does not divide Heads = %d", s.Groups, s.Heads)
	}
	hs := s.Heads * s.Headdim
	if err := ssm.CheckFields("mamba2: step ", "", false,
		ssm.Field{Name: "State", V: s.State, Want: s.Slots * hs * s.Dstate, Optional: false}, ssm.Field{Name: "X", V: s.X, Want: s.Batch * hs, Optional: false}, ssm.Field{Name: "Dt", V: s.Dt, Want: s.Batch * s.Heads, Optional: false},
		ssm.Field{Name: "A", V: s.A, Want: s.Heads, Optional: false}, ssm.Field{Name: "B", V: s.B, Want: s.Batch * s.Groups * s.Dstate, Optional: false}, ssm.Field{Name: "C", V: s.C, Want: s.Batch * s.Groups * s.Dstate, Optional: false},
		ssm.Field{Name: "D", V: s.D, Want: s.Heads, Optional: true}, ssm.Field{Name: "Z", V: s.Z, Want: s.Batch * hs, Optional: true}, ssm.Field{Name: "DtBias", V: s.DtBias, Want: s.Heads, Optional: true}); err != nil {
		return err
	}
	if s.Indices == nil && s.Slots < s.Batch {
		return fmt.Errorf("mamba2: step Slots = %d < Batch = %d without Indices", s.Slots, s.Batch)
	}
	if s.Indices != nil {
		if len(s.Indices) != s.Batch {
			return fmt.Errorf("mamba2: step len(Indices) = %d, want Batch = %d", len(s.Indices), s.Batch)
		}
		seen := map[int]bool{}
		for b, i := range s.Indices {
			if i >= s.Slots {
				return fmt.Errorf("mamba2: step Indices[%d] = %d, want < Slots = %d (negative: padding)", b, i, s.Slots)
			}
			if i >= 0 && seen[i] {
				return fmt.Errorf("mamba2: step Indices[%d] = %d repeats a slot", b, i)
			}
			seen[i] = true
		}
	}
	return nil
}

// Limits returns the clamp of Δ, as Problem.Limits.
func (s *Step) Limits() (lo, hi float64) { return limits(s.DtMin, s.DtMax) }

// DefaultLimits reports whether the clamp is upstream's default (0, +∞).
func (s *Step) DefaultLimits() bool { return s.DtMin == 0 && s.DtMax == 0 }

// Slot returns row b's slot, or −1 for a padding row.
func (s *Step) Slot(b int) int {
	if s.Indices == nil {
		return b
	}
	return max(s.Indices[b], -1)
}

// ChangedUntouched returns the slots of s's pool that no row names whose
// state in state (the step's result, laid out as s.State) differs from
// s.State in any bit (a NaN kept is no change): a step must leave them.
func (s *Step) ChangedUntouched(state []float64) []int {
	per := s.Heads * s.Headdim * s.Dstate
	named := map[int]bool{}
	for b := 0; b < s.Batch; b++ {
		named[s.Slot(b)] = true
	}
	var changed []int
	for slot := 0; slot < s.Slots && (slot+1)*per <= min(len(state), len(s.State)); slot++ {
		if named[slot] {
			continue
		}
		for i := slot * per; i < (slot+1)*per; i++ {
			if state[i] != s.State[i] && !(math.IsNaN(state[i]) && math.IsNaN(s.State[i])) {
				changed = append(changed, slot)
				break
			}
		}
	}
	return changed
}

// Rounded returns a copy of s rounded as Problem.Rounded rounds.
func (s *Step) Rounded() *Step {
	q := *s
	in, w := s.DType, s.DType.Weight()
	q.X, q.Dt, q.B, q.C, q.Z = in.RoundAll(s.X), in.RoundAll(s.Dt), in.RoundAll(s.B), in.RoundAll(s.C), in.RoundAll(s.Z)
	q.A, q.D, q.DtBias = w.RoundAll(s.A), w.RoundAll(s.D), w.RoundAll(s.DtBias)
	q.State = s.StateDType.RoundAll(w.RoundAll(s.State))
	return &q
}

// StepOutput is a decode step's result: Y [Batch][Heads][Headdim] and the
// whole pool of states after the step.
type StepOutput struct {
	Y, State []float64
}

// Steps are several decode steps of every row in one call, as speculative
// decoding verifies its draft tokens: each row starts from one slot of
// the pool and steps through Tokens tokens, the state after each written
// to a slot of its own, so that the engine keeps whichever the
// verification accepts.
//
//	State            [Slots][Heads][Headdim][Dstate]
//	X, Z             [Batch][Tokens][Heads][Headdim]
//	Dt               [Batch][Tokens][Heads]
//	B, C             [Batch][Tokens][Groups][Dstate]
//	A, D, DtBias     [Heads]
//	ReadSlots        [Batch][Reads]   the slots of the previous call's tokens
//	Accepted         [Batch]          how many of them were accepted (nil: 1)
//	WriteSlots       [Batch][Tokens]  where the state after each token goes (−1: nowhere)
//
// Row b starts from slot ReadSlots[b][Accepted[b]−1] (vLLM's
// state_batch_indices with num_accepted_tokens); a row whose slot is
// negative is padding: its outputs are zero and it writes nothing. Every
// slot no row writes keeps its state bit for bit, the read slots too.
type Steps struct {
	Batch, Slots, Tokens, Reads, Heads, Headdim, Groups, Dstate int

	State, X, Dt, A, B, C []float64
	D, Z, DtBias          []float64
	Softplus              bool
	ReadSlots, Accepted   []int
	WriteSlots            []int
	DType, StateDType     ssm.DType
}

// Validate checks the sizes and the slots: reads within the pool (or
// negative), accepted counts within the reads, writes within the pool and
// none written twice.
func (s *Steps) Validate() error {
	if err := ssm.CheckSizes("mamba2: steps ", ssm.Size{Name: "Batch", V: s.Batch}, ssm.Size{Name: "Slots", V: s.Slots}, ssm.Size{Name: "Tokens", V: s.Tokens},
		ssm.Size{Name: "Reads", V: s.Reads}, ssm.Size{Name: "Heads", V: s.Heads}, ssm.Size{Name: "Headdim", V: s.Headdim}, ssm.Size{Name: "Groups", V: s.Groups},
		ssm.Size{Name: "Dstate", V: s.Dstate}); err != nil {
		return err
	}
	if s.Heads%s.Groups != 0 {
		return fmt.Errorf("mamba2: steps Groups = %d does not divide Heads = %d", s.Groups, s.Heads)
	}
	bt, hs := s.Batch*s.Tokens, s.Heads*s.Headdim
	if err := ssm.CheckFields("mamba2: steps ", "", false,
		ssm.Field{Name: "State", V: s.State, Want: s.Slots * hs * s.Dstate}, ssm.Field{Name: "X", V: s.X, Want: bt * hs}, ssm.Field{Name: "Dt", V: s.Dt, Want: bt * s.Heads},
		ssm.Field{Name: "A", V: s.A, Want: s.Heads}, ssm.Field{Name: "B", V: s.B, Want: bt * s.Groups * s.Dstate}, ssm.Field{Name: "C", V: s.C, Want: bt * s.Groups * s.Dstate},
		ssm.Field{Name: "D", V: s.D, Want: s.Heads, Optional: true}, ssm.Field{Name: "Z", V: s.Z, Want: bt * hs, Optional: true},
		ssm.Field{Name: "DtBias", V: s.DtBias, Want: s.Heads, Optional: true}); err != nil {
		return err
	}
	if len(s.ReadSlots) != s.Batch*s.Reads {
		return fmt.Errorf("mamba2: steps len(ReadSlots) = %d, want Batch·Reads = %d", len(s.ReadSlots), s.Batch*s.Reads)
	}
	if len(s.WriteSlots) != bt {
		return fmt.Errorf("mamba2: steps len(WriteSlots) = %d, want Batch·Tokens = %d", len(s.WriteSlots), bt)
	}
	if s.Accepted != nil && len(s.Accepted) != s.Batch {
		return fmt.Errorf("mamba2: steps len(Accepted) = %d, want Batch = %d", len(s.Accepted), s.Batch)
	}
	for b := 0; b < s.Batch; b++ {
		if a := s.accepted(b); a < 1 || a > s.Reads {
			return fmt.Errorf("mamba2: steps Accepted[%d] = %d, want 1 to Reads = %d", b, a, s.Reads)
		}
	}
	for i, r := range s.ReadSlots {
		if r >= s.Slots {
			return fmt.Errorf("mamba2: steps ReadSlots[%d] = %d, want < Slots = %d (negative: none)", i, r, s.Slots)
		}
	}
	seen := map[int]bool{}
	for i, w := range s.WriteSlots {
		if w >= s.Slots {
			return fmt.Errorf("mamba2: steps WriteSlots[%d] = %d, want < Slots = %d (negative: not written)", i, w, s.Slots)
		}
		if w >= 0 && seen[w] {
			return fmt.Errorf("mamba2: steps WriteSlots[%d] = %d is written twice", i, w)
		}
		seen[w] = true
	}
	return nil
}

func (s *Steps) accepted(b int) int {
	if s.Accepted == nil {
		return 1
	}
	return s.Accepted[b]
}

// Start returns the slot row b starts from (negative: a padding row).
func (s *Steps) Start(b int) int { return max(s.ReadSlots[b*s.Reads+s.accepted(b)-1], -1) }

// Chain returns the prefill that row b's tokens make from its start slot
// (nil for a padding row): one row of Tokens steps from that slot's state,
// evaluated sequentially (each step's state kept in the state type), the
// reference of the states the call writes.
func (s *Steps) Chain(b int) *Problem {
	r := s.Start(b)
	if r < 0 {
		return nil
	}
	H, P, G, N, T := s.Heads, s.Headdim, s.Groups, s.Dstate, s.Tokens
	p := &Problem{Batch: 1, Seqlen: T, Heads: H, Headdim: P, Groups: G, Dstate: N, Chunk: 0, Softplus: s.Softplus,
		X: s.X[b*T*H*P : (b+1)*T*H*P], Dt: s.Dt[b*T*H : (b+1)*T*H], A: s.A, B: s.B[b*T*G*N : (b+1)*T*G*N], C: s.C[b*T*G*N : (b+1)*T*G*N],
		D: s.D, DtBias: s.DtBias, InitialStates: s.State[r*H*P*N : (r+1)*H*P*N], DType: s.DType, StateDType: s.StateDType}
	if s.Z != nil {
		p.Z = s.Z[b*T*H*P : (b+1)*T*H*P]
	}
	return p
}

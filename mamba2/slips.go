package mamba2

import (
	"math"

	"ssmverify/ssm"
)

// A Slip is one of the known ways a Mamba-2 kernel goes wrong, written as
// the reference of what such a kernel computes: the diagnosis compares a
// failing kernel with each (package diagnose). Most are the problem
// transformed (an input dropped, another head→group mapping); the others
// change how the reference evaluates.
type Slip struct {
	Tag, Cause string
	// Precision marks a slip of the arithmetic's precision rather than of
	// the formula: the diagnosis tries them after the formulas.
	Precision bool
	// Apply and ApplyStep, where the slip is a change of the problem,
	// make it on a copy (false: it does not apply), so that two slips can
	// be composed.
	Apply     func(q *Problem) bool
	ApplyStep func(q *Step) bool
	// Prefill and Step return what a kernel with the slip computes, with
	// the error scale of that computation (nil when the slip does not
	// apply to the problem): a slip that is the reference of another
	// problem is judged with that problem's scale, since its values may be
	// of another size altogether (a Δ left unclamped grows the state).
	Prefill func(p *Problem) (*Output, *Scale)
	Step    func(s *Step) (*StepOutput, *StepScale)
}

func withProblem(f func(q *Problem) bool) func(p *Problem) (*Output, *Scale) {
	return func(p *Problem) (*Output, *Scale) {
		q := *p
		if !f(&q) {
			return nil, nil
		}
		return Prefill(&q)
	}
}

func withStep(f func(q *Step) bool) func(s *Step) (*StepOutput, *StepScale) {
	return func(s *Step) (*StepOutput, *StepScale) {
		q := *s
		if !f(&q) {
			return nil, nil
		}
		return Decode(&q)
	}
}

// repeatGroups rewrites B and C so that head h reads group h mod G, as
// repeat (where repeat-interleave was meant) maps heads to groups.
func repeatGroups(b []float64, rows, H, G, N int) []float64 {
	out := make([]float64, rows*H*N)
	for r := 0; r < rows; r++ {
		for h := 0; h < H; h++ {
			copy(out[(r*H+h)*N:(r*H+h+1)*N], b[(r*G+h%G)*N:(r*G+h%G+1)*N])
		}
	}
	return out
}

// transform completes a slip given by Apply and ApplyStep with its
// Prefill and Step.
func transform(s Slip) Slip {
	if s.Apply != nil {
		s.Prefill = withProblem(s.Apply)
	}
	if s.ApplyStep != nil {
		s.Step = withStep(s.ApplyStep)
	}
	return s
}

// Slips returns the catalogue, most specific first, the precisions last.
func Slips() []Slip {
	out := slips()
	for i := range out {
		out[i] = transform(out[i])
	}
	return out
}

func slips() []Slip {
	return []Slip{
		{Tag: "init-state:dropped", Cause: "the initial state is ignored (the scan starts from zero)",
			Apply: func(q *Problem) bool { ok := q.InitialStates != nil; q.InitialStates = nil; return ok }},
		{Tag: "varlen:no-reset", Cause: "the state is not restarted at the boundaries of packed sequences (cu_seqlens / seq_idx ignored)",
			Prefill: noReset},
		{Tag: "groups:repeat", Cause: "head h reads group h mod G of B and C (repeat), not h / (H/G) (repeat-interleave)",
			Apply: func(q *Problem) bool {
				if q.Groups == 1 || q.Groups == q.Heads {
					return false
				}
				rows := q.Batch * q.Seqlen
				q.B, q.C = repeatGroups(q.B, rows, q.Heads, q.Groups, q.Dstate), repeatGroups(q.C, rows, q.Heads, q.Groups, q.Dstate)
				q.Groups = q.Heads
				return true
			},
			ApplyStep: func(q *Step) bool {
				if q.Groups == 1 || q.Groups == q.Heads {
					return false
				}
				q.B, q.C = repeatGroups(q.B, q.Batch, q.Heads, q.Groups, q.Dstate), repeatGroups(q.C, q.Batch, q.Heads, q.Groups, q.Dstate)
				q.Groups = q.Heads
				return true
			}},
		{Tag: "dt:no-limit", Cause: "Δ is not clamped to dt_limit (the default (0, ∞) included: a negative Δ is used as it is)",
			Apply:     func(q *Problem) bool { q.DtMin, q.DtMax = math.Inf(-1), math.Inf(1); return true },
			ApplyStep: func(q *Step) bool { q.DtMin, q.DtMax = math.Inf(-1), math.Inf(1); return true }},
		{Tag: "dt:no-bias", Cause: "dt_bias is not added to dt",
			Apply:     func(q *Problem) bool { ok := q.DtBias != nil; q.DtBias = nil; return ok },
			ApplyStep: func(q *Step) bool { ok := q.DtBias != nil; q.DtBias = nil; return ok }},
		{Tag: "dt:no-softplus", Cause: "softplus is not applied to dt",
			Apply:     func(q *Problem) bool { ok := q.Softplus; q.Softplus = false; return ok },
			ApplyStep: func(q *Step) bool { ok := q.Softplus; q.Softplus = false; return ok }},
		{Tag: "dt:softplus-log-exp", Cause: "Δ's softplus is log(e^v + 1) in float32, without log1p: a small Δ loses its relative precision (Triton ≥ 3's softplus)",
			Apply:     func(q *Problem) bool { q.naiveSoftplus = true; return q.Softplus },
			ApplyStep: func(q *Step) bool { q.naiveSoftplus = true; return q.Softplus }},
		{Tag: "varlen:seq-states-no-init", Cause: "the final state of a packed row's first sequence omits the initial state when the sequence ends inside the first chunk (y and the row's final state are right)",
			Prefill: seqStatesNoInit},
		{Tag: "no-D", Cause: "the skip term D·x is missing",
			Apply:     func(q *Problem) bool { ok := q.D != nil; q.D = nil; return ok },
			ApplyStep: func(q *Step) bool { ok := q.D != nil; q.D = nil; return ok }},
		{Tag: "no-z", Cause: "the gate z·σ(z) is not applied",
			Apply:     func(q *Problem) bool { ok := q.Z != nil; q.Z = nil; return ok },
			ApplyStep: func(q *Step) bool { ok := q.Z != nil; q.Z = nil; return ok }},
		{Tag: "narrow:state-bf16", Precision: true, Cause: "the state is kept in bfloat16 between chunks (steps), though the state type is wider",
			Prefill: func(p *Problem) (*Output, *Scale) { return narrowStates(p, ssm.BF16) }, Step: func(s *Step) (*StepOutput, *StepScale) { return narrowStep(s, ssm.BF16) }},
		{Tag: "narrow:state-fp16", Precision: true, Cause: "the state is kept in fp16 between chunks (steps), though the state type is wider",
			Prefill: func(p *Problem) (*Output, *Scale) { return narrowStates(p, ssm.F16) }, Step: func(s *Step) (*StepOutput, *StepScale) { return narrowStep(s, ssm.F16) }},
		{Tag: "narrow:tf32", Precision: true, Cause: "the chunk's matrix products take TF32 operands (10-bit significands: Triton's tl.dot default for float32), not float32",
			Apply: func(q *Problem) bool {
				q.operandU = TF32Roundoff
				return q.DType == ssm.F32 && q.Chunk > 0
			}},
		{Tag: "decode:state-not-written", Cause: "the updated state is not written back to its slot (y is right)",
			Step: func(s *Step) (*StepOutput, *StepScale) {
				o, sc := Decode(s)
				o.State = append([]float64(nil), s.State...)
				return o, sc
			}},
	}
}

// TF32Roundoff is the unit roundoff of TF32 (10 stored significand bits),
// the operands of Triton's float32 tl.dot unless input_precision says
// "ieee".
const TF32Roundoff = 0x1p-11

// seqStatesNoInit is the reference with the first sequence's final
// state taken without the initial state, where that sequence ends inside
// the first chunk.
func seqStatesNoInit(p *Problem) (*Output, *Scale) {
	if p.CuSeqlens == nil || p.InitialStates == nil || p.Chunk == 0 || p.CuSeqlens[1] > p.Chunk {
		return nil, nil
	}
	o, sc := Prefill(p)
	q := p.Slice(0, p.CuSeqlens[1], nil)
	q.CuSeqlens, q.InitialStates = nil, nil
	first, fsc := Prefill(q)
	copy(o.SeqStates, first.FinalStates)
	copy(sc.SeqStates, fsc.FinalStates)
	return o, sc
}

// noReset is the prefill of a packed row read as one sequence: y of the
// whole row, and as each sequence's final state the row's state at its end.
func noReset(p *Problem) (*Output, *Scale) {
	if p.CuSeqlens == nil {
		return nil, nil
	}
	q := *p
	q.CuSeqlens = nil
	o, sc := Prefill(&q)
	o.SeqStates, sc.SeqStates, sc.TinySeq = nil, nil, nil
	for _, sq := range p.Sequences() {
		pre, psc := Prefill(q.Slice(0, sq[1], nil))
		o.SeqStates = append(o.SeqStates, pre.FinalStates...)
		sc.SeqStates, sc.TinySeq = append(sc.SeqStates, psc.FinalStates...), append(sc.TinySeq, psc.TinyFinal...)
	}
	return o, sc
}

// narrowStates is the prefill with the state rounded to the 16-bit type
// dt at every chunk's end (row-aligned), as a kernel that stores its chunk
// states in 16 bits computes (its final states in dt too), judged with the
// scale of a state type dt; nil for a packed row or a state type no wider
// than dt.
func narrowStates(p *Problem, dt ssm.DType) (*Output, *Scale) {
	if p.CuSeqlens != nil || p.StateDType == dt || p.StateDType.Narrow() || p.Chunk == 0 {
		return nil, nil
	}
	out := &Output{}
	init := p.InitialStates
	if init != nil {
		init = dt.RoundAll(init)
	}
	H, P := p.Heads, p.Headdim
	ys := make([][]float64, 0)
	for c0 := 0; c0 < p.Seqlen; c0 += p.Chunk {
		c1 := min(c0+p.Chunk, p.Seqlen)
		q := p.Slice(c0, c1, init)
		if c0 == 0 {
			q.InitialStates = init
		}
		o, _ := Prefill(q)
		ys = append(ys, o.Y)
		init = dt.RoundAll(o.FinalStates)
		out.FinalStates = o.FinalStates
	}
	out.Y = make([]float64, p.XLen())
	for b := 0; b < p.Batch; b++ {
		for ci, c0 := 0, 0; c0 < p.Seqlen; ci, c0 = ci+1, c0+p.Chunk {
			n := min(p.Chunk, p.Seqlen-c0) * H * P
			copy(out.Y[(b*p.Seqlen+c0)*H*P:], ys[ci][b*n:(b+1)*n])
		}
	}
	out.FinalStates = dt.RoundAll(out.FinalStates)
	out.SeqStates = out.FinalStates
	q := *p
	q.StateDType = dt
	_, sc := Prefill(&q)
	return out, sc
}

func narrowStep(s *Step, dt ssm.DType) (*StepOutput, *StepScale) {
	if s.StateDType == dt || s.StateDType.Narrow() {
		return nil, nil
	}
	o, _ := Decode(s)
	per := s.Heads * s.Headdim * s.Dstate
	for b := 0; b < s.Batch; b++ {
		if slot := s.Slot(b); slot >= 0 {
			copy(o.State[slot*per:(slot+1)*per], dt.RoundAll(o.State[slot*per:(slot+1)*per]))
		}
	}
	q := *s
	q.StateDType = dt
	_, qsc := Decode(&q)
	return o, qsc
}

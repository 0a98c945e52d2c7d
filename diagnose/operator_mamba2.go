package diagnose

import (
	"math"

	"ssmverify/judge"
	"ssmverify/mamba2"
	"ssmverify/ssm"
)

// Mamba-2's operator: with Δ, A, B, C, D and z fixed, row b, head h,
// channel p of y at step t is Σ_s M[t,s]·x[s] with
//
//	M[t,s] = g(z_t)·(C_t·B_s·Δ_s·e^{cum_t − cum_s} + [t = s]·D)   s ≤ t, same sequence
//
// and the initial state's map g(z_t)·e^{cum_t}·C_t[n] (the first sequence
// of a packed row alone starts from it).

// ssdFamily is Mamba-2's part of the operator.
type ssdFamily struct {
	p   *mamba2.Problem
	amp float64
}

// opProbeSteps bounds the steps probed: the structure of the chunks shows
// in the first few, and the calls grow with the square of the length.
const opProbeSteps = 256

// probeProblem is the problem the operator is measured on: p's first row
// and first steps (four chunks, at most opProbeSteps) unless p packs
// sequences, whose boundaries it keeps. A slip of a path shows in every
// row and from the first chunks on.
func probeProblem(p *mamba2.Problem) *mamba2.Problem {
	q := *p
	if p.CuSeqlens != nil || (p.Batch == 1 && p.Seqlen <= opProbeSteps) {
		return &q
	}
	l := min(p.Seqlen, opProbeSteps)
	if p.Chunk > 0 {
		l = min(l, max(4*p.Chunk, 1))
	}
	r := p.Slice(0, l, p.InitialStates)
	return firstRow(r)
}

// firstRow is p's first batch row alone.
func firstRow(p *mamba2.Problem) *mamba2.Problem {
	if p.Batch == 1 {
		return p
	}
	q := *p
	q.Batch = 1
	q.X, q.Dt, q.B, q.C = p.X[:q.XLen()], p.Dt[:q.DtLen()], p.B[:q.BCLen()], p.C[:q.BCLen()]
	if p.Z != nil {
		q.Z = p.Z[:q.XLen()]
	}
	if p.InitialStates != nil {
		q.InitialStates = p.InitialStates[:q.StateLen()]
	}
	return &q
}

// newSSDOperator is the operator of p's problem, its per-step factors
// computed and no entry measured.
func newSSDOperator(q *mamba2.Problem, amp float64) *operator {
	fam := &ssdFamily{p: q, amp: amp}
	op := &operator{fam: fam, batch: q.Batch, seqlen: q.Seqlen, heads: q.Heads, chunk: q.Chunk, dtype: q.DType, hasD: q.D != nil}
	L, H := q.Seqlen, q.Heads
	lo, hi := q.Limits()
	op.seqOf = make([]int, L)
	for i, sq := range q.Sequences() {
		for t := sq[0]; t < sq[1]; t++ {
			op.seqOf[t] = i
		}
	}
	for b := 0; b < q.Batch; b++ {
		for h := 0; h < H; h++ {
			bias := 0.0
			if q.DtBias != nil {
				bias = q.DtBias[h]
			}
			d, a := make([]float64, L), make([]float64, L)
			for t := 0; t < L; t++ {
				d[t] = mamba2.Delta(q.Dt[(b*L+t)*H+h], bias, q.Softplus, lo, hi)
				a[t] = d[t] * q.A[h]
			}
			op.delta, op.dA = append(op.delta, d), append(op.dA, a)
		}
	}
	op.setChunks(false)
	op.accumulate()
	return op
}

// measureSSDOperator measures the operator of the kernel behind run on
// p's Δ, A, B, C, D and z (x and the initial states replaced by impulses).
func measureSSDOperator(p *mamba2.Problem, run SSDRunner) (*operator, error) {
	q := probeProblem(p)
	// fp16's subnormals begin at 6e-5, where a state's rounding has an
	// absolute floor the error model does not carry: impulses of 64 keep
	// the responses of a Mamba block's magnitudes above it
	amp := 1.0
	if q.DType == ssm.F16 || q.StateDType == ssm.F16 {
		amp = 64
	}
	op := newSSDOperator(q, amp)
	call := func(x, init, _ []float64) (opResponse, error) {
		r := *q
		r.X, r.InitialStates = x, init
		got, err := run(&r)
		if err != nil {
			return opResponse{}, err
		}
		want, sc := mamba2.Prefill(&r)
		arrays := judge.PrefillArrays(&r, got, want, sc)
		if e := ssdShape(arrays); e != nil {
			return opResponse{}, e
		}
		_, ratios := ssdJudged(arrays)
		res := opResponse{y: opArray{got.Y, want.Y, sc.Y, sc.TinyY, ratios["y"]},
			states: opArray{got.FinalStates, want.FinalStates, sc.FinalStates, sc.TinyFinal, ratios["final_states"]}}
		if r.CuSeqlens != nil {
			res.states = opArray{got.SeqStates, want.SeqStates, sc.SeqStates, sc.TinySeq, ratios["seq_states"]}
		}
		return res, nil
	}
	pr := opProbe{B: q.Batch, L: q.Seqlen, H: q.Heads, P: q.Headdim, N: q.Dstate, seqs: q.Sequences(), packed: q.CuSeqlens != nil, amp: amp, call: call}
	if q.InitialStates != nil {
		pr.initRows = q.Batch
	}
	if err := op.measure(pr); err != nil {
		return nil, err
	}
	return op, nil
}

// cb is C_t·B_s of row b, head h.
func (f *ssdFamily) cb(b, h, t, s int) float64 {
	q := f.p
	g, N := mamba2.Group(h, q.Heads, q.Groups), q.Dstate
	var v float64
	for n := 0; n < N; n++ {
		v += q.C[((b*q.Seqlen+t)*q.Groups+g)*N+n] * q.B[((b*q.Seqlen+s)*q.Groups+g)*N+n]
	}
	return v
}

// gate is the SiLU gate's factor z·σ(z) of entry e's output (1 without z).
func (f *ssdFamily) gate(_ *operator, e opEntry) float64 {
	if f.p.Z == nil || e.region.kind()&(kindXState|kindInitState) != 0 {
		return 1
	}
	q := f.p
	z := q.Z[((e.b*q.Seqlen+e.t)*q.Heads+e.h)*q.Headdim+e.p]
	return z / (1 + math.Exp(-z))
}

func (f *ssdFamily) skipD(_ *operator, e opEntry) float64 { return f.amp * f.p.D[f.p.DIndex(e.h, e.p)] }

// relations are Mamba-2's own: the factors of B̄ = Δ_s·B_s (the first
// four), B and C swapped, the sequences' reset.
func (f *ssdFamily) relations() []opRelation {
	bh := func(op *operator, e opEntry) int { return e.b*op.heads + e.h }
	dt := func(op *operator, e opEntry, t int) float64 { return op.delta[bh(op, e)][t] }
	return []opRelation{
		{tag: "lacks(dt_s)", words: "lacks the factor Δ_s (the input's step)", factor: func(op *operator, e opEntry) float64 { return 1 / dt(op, e, e.s) }},
		{tag: "extra(dt_s)", words: "has an extra factor Δ_s", factor: func(op *operator, e opEntry) float64 { return dt(op, e, e.s) }},
		{tag: "lacks(dt_t)", words: "lacks a factor Δ_t (the output's step)", factor: func(op *operator, e opEntry) float64 { return 1 / dt(op, e, e.t) }, kinds: kindXY},
		{tag: "extra(dt_t)", words: "has an extra factor Δ_t", factor: func(op *operator, e opEntry) float64 { return dt(op, e, e.t) }, kinds: kindXY | kindInitY},
		{tag: "swapped(B,C)", words: "reads B at the output's step and C at the input's (C_s·B_t for C_t·B_s)", factor: func(op *operator, e opEntry) float64 {
			return f.cb(e.b, e.h, e.s, e.t) / f.cb(e.b, e.h, e.t, e.s)
		}, kinds: kindXY},
		{tag: "no-reset", words: "carries the earlier sequence's terms across its end, as if the row were one sequence", predict: func(op *operator, e opEntry) float64 {
			if e.region != regionCrossSeq {
				return math.NaN()
			}
			bh := bh(op, e)
			return f.amp * f.gate(op, e) * f.cb(e.b, e.h, e.t, e.s) * op.delta[bh][e.s] * math.Exp(op.cumAll[bh][e.t]-op.cumAll[bh][e.s])
		}, kinds: kindXY},
	}
}

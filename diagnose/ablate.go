package diagnose

import (
	"ssmverify/judge"
	"ssmverify/ssm"
)

// feature is one thing a problem may use, and the same problem without it.
type feature struct {
	name    string
	present func(p *ssm.Problem) bool
	drop    func(p *ssm.Problem) *ssm.Problem
}

var features = []feature{
	{"variable B", func(p *ssm.Problem) bool { return p.VariableB }, func(p *ssm.Problem) *ssm.Problem { return constantBC(p, true) }},
	{"variable C", func(p *ssm.Problem) bool { return p.VariableC }, func(p *ssm.Problem) *ssm.Problem { return constantBC(p, false) }},
	{"groups > 1", func(p *ssm.Problem) bool { return p.Groups > 1 && (p.VariableB || p.VariableC) }, oneGroup},
	{"D", func(p *ssm.Problem) bool { return p.D != nil }, func(p *ssm.Problem) *ssm.Problem { return edited(p, func(q *ssm.Problem) { q.D = nil }) }},
	{"z", func(p *ssm.Problem) bool { return p.Z != nil }, func(p *ssm.Problem) *ssm.Problem { return edited(p, func(q *ssm.Problem) { q.Z = nil }) }},
	{"delta_bias", func(p *ssm.Problem) bool { return p.DeltaBias != nil }, noBias},
	{"softplus", func(p *ssm.Problem) bool { return p.Softplus }, noSoftplus},
	{"complex A", func(p *ssm.Problem) bool { return p.Complex }, realParts},
	{"seqlen > 2047", func(p *ssm.Problem) bool { return p.Seqlen > 2047 }, func(p *ssm.Problem) *ssm.Problem { return truncate(p, 2047) }},
	{"batch > 1", func(p *ssm.Problem) bool { return p.Batch > 1 }, firstBatch},
}

// needs switches each present feature off in turn and returns those
// without which the kernel passes.
func needs(s Scanner, p *ssm.Problem, dt ssm.DType) []string {
	var out []string
	for _, f := range features {
		if !f.present(p) {
			continue
		}
		q := f.drop(p)
		q.RoundTo(dt) // what the kernel sees
		got, err := s.Scan(q, dt)
		if err != nil {
			continue
		}
		if c, err := judge.CompareScan(q, got, dt, nil, nil); err == nil && c.Passed(dt) {
			out = append(out, f.name)
		}
	}
	return out
}

// constantBC replaces variable B (or C) by a constant one holding, for
// channel d, the values of batch 0, d's group, step 0.
func constantBC(p *ssm.Problem, isB bool) *ssm.Problem {
	q := p.Clone()
	w := p.ElemWords()
	src := p.C
	if isB {
		src = p.B
	}
	c := make([]float64, p.Dim*p.Dstate*w)
	for d := 0; d < p.Dim; d++ {
		for n := 0; n < p.Dstate; n++ {
			copy(c[(d*p.Dstate+n)*w:(d*p.Dstate+n+1)*w], src[p.BCIndex(true, 0, d, n, 0):][:w])
		}
	}
	if isB {
		q.B, q.VariableB = c, false
	} else {
		q.C, q.VariableC = c, false
	}
	return q
}

// oneGroup keeps group 0's variable B and C for every channel.
func oneGroup(p *ssm.Problem) *ssm.Problem {
	q := p.Clone()
	q.Groups = 1
	per := p.Dstate * p.Seqlen * p.ElemWords()
	keep := func(s []float64, variable bool) []float64 {
		if !variable {
			return s
		}
		out := make([]float64, 0, p.Batch*per)
		for b := 0; b < p.Batch; b++ {
			out = append(out, s[b*p.Groups*per:][:per]...)
		}
		return out
	}
	q.B, q.C = keep(q.B, p.VariableB), keep(q.C, p.VariableC)
	return q
}

// realParts drops the imaginary parts of A, B and C.
func realParts(p *ssm.Problem) *ssm.Problem {
	q := p.Clone()
	q.Complex = false
	re := func(s []float64) []float64 {
		out := make([]float64, len(s)/2)
		for i := range out {
			out[i] = s[2*i]
		}
		return out
	}
	q.A, q.B, q.C = re(p.A), re(p.B), re(p.C)
	return q
}

// truncate keeps the first L steps.
func truncate(p *ssm.Problem, L int) *ssm.Problem {
	q := p.Clone()
	q.Seqlen = L
	seq := func(s []float64, words int) []float64 { return restep(s, p.Seqlen, L, words, nil) }
	q.U, q.Delta, q.Z = seq(p.U, 1), seq(p.Delta, 1), seq(p.Z, 1)
	if p.VariableB {
		q.B = seq(p.B, p.ElemWords())
	}
	if p.VariableC {
		q.C = seq(p.C, p.ElemWords())
	}
	return q
}

// restep re-lays s, rows of from steps of words values each, as rows of
// to steps: the first to steps of each row, or its from steps followed by
// pad(row) in every further word (nil s stays nil).
func restep(s []float64, from, to, words int, pad func(row int) float64) []float64 {
	if s == nil {
		return nil
	}
	rows := len(s) / (from * words)
	out := make([]float64, 0, rows*to*words)
	for r := 0; r < rows; r++ {
		out = append(out, s[r*from*words:][:min(from, to)*words]...)
		for k := from * words; k < to*words; k++ {
			out = append(out, pad(r))
		}
	}
	return out
}

// firstBatch keeps batch row 0.
func firstBatch(p *ssm.Problem) *ssm.Problem {
	q := p.Clone()
	q.Batch = 1
	first := func(s []float64, variable bool) []float64 {
		if s == nil || !variable {
			return s
		}
		return s[:len(s)/p.Batch]
	}
	q.U, q.Delta, q.Z = first(p.U, true), first(p.Delta, true), first(p.Z, p.Z != nil)
	q.B, q.C = first(p.B, p.VariableB), first(p.C, p.VariableC)
	return q
}

// noBias folds delta_bias into delta: the same steps Δ without the bias.
func noBias(p *ssm.Problem) *ssm.Problem {
	q := p.Clone()
	for i := range q.Delta {
		q.Delta[i] += p.DeltaBias[i/p.Seqlen%p.Dim]
	}
	q.DeltaBias = nil
	return q
}

// noSoftplus gives delta such that Δ = delta + bias equals the softplus
// step of p: the same steps without softplus (switching it off alone
// would make Δ negative and the scan unstable).
func noSoftplus(p *ssm.Problem) *ssm.Problem {
	q := p.Clone()
	for i, v := range q.Delta {
		bias := 0.0
		if p.DeltaBias != nil {
			bias = p.DeltaBias[i/p.Seqlen%p.Dim]
		}
		q.Delta[i] = ssm.Softplus(v+bias) - bias
	}
	q.Softplus = false
	return q
}

// Prefix is p cut to its first batch rows, steps and states (the arrays
// re-laid for the smaller shape), for diagnosing a large failing problem
// on a smaller one.
func Prefix(p *ssm.Problem, batch, seqlen, dstate int) *ssm.Problem {
	q := p
	if seqlen < p.Seqlen {
		q = truncate(q, seqlen)
	}
	if batch < q.Batch {
		q = firstBatch(q)
	}
	if dstate < q.Dstate {
		q = fewerStates(q, dstate)
	}
	return q
}

// fewerStates keeps the first n states of A, B, C.
func fewerStates(p *ssm.Problem, n int) *ssm.Problem {
	q := p.Clone()
	q.Dstate = n
	w := p.ElemWords()
	cut := func(s []float64, variable bool) []float64 {
		per := w // words per state element of a row
		if variable {
			per = p.Seqlen * w
		}
		rows := len(s) / (p.Dstate * per)
		out := make([]float64, 0, rows*n*per)
		for r := 0; r < rows; r++ {
			out = append(out, s[r*p.Dstate*per:][:n*per]...)
		}
		return out
	}
	q.A = cut(p.A, false)
	q.B, q.C = cut(p.B, p.VariableB), cut(p.C, p.VariableC)
	return q
}

// edited is a copy of p with f applied.
func edited(p *ssm.Problem, f func(q *ssm.Problem)) *ssm.Problem {
	q := p.Clone()
	f(q)
	return q
}

package diagnose

import (
	"strings"

	"ssmverify/judge"
	"ssmverify/mamba3"
	"ssmverify/ssm"
)

// m3Slices is a Mamba-3 problem as its slices see it (slices.go): Q and K
// per group of heads, DT, ADT and Trap head-major, the four-part state per
// sequence.
type m3Slices struct {
	p *mamba3.Problem
	d *sliceDims
}

func newM3Slices(p *mamba3.Problem) *m3Slices {
	return &m3Slices{p: p, d: newSliceDims(p.Batch, p.Seqlen, p.Heads, p.HeadsQK, p.Sequences(), p.CuSeqlens != nil)}
}

func (s *m3Slices) dims() *sliceDims   { return s.d }
func (s *m3Slices) threshold() float64 { return judge.Threshold(s.p.DType) }

// layoutOf knows the inputs' names, the forward's outputs (mamba3Arrays)
// and the gradients (Grads.Fields).
func (s *m3Slices) layoutOf(name string) (sliceLayout, bool) {
	if l, ok := m3Fields.layout(name); ok {
		return l, true
	}
	switch strings.TrimPrefix(name, "d") {
	case "Q", "K":
		return layTokenGroup, true
	case "V", "Z", "Angles", "y":
		return layTokenHead, true
	case "ADT", "DT", "Trap":
		return layHeadToken, true
	case "Q_bias", "K_bias", "D":
		return layHead, true
	}
	if strings.Contains(name, "state") {
		return laySeqHead, true
	}
	return 0, false
}

// m3Fields are the inputs with where they live in a problem.
var m3Fields = sliceFields[mamba3.Problem]{
	{sliceInput{"q", layTokenGroup, flipped}, func(p *mamba3.Problem) *[]float64 { return &p.Q }},
	{sliceInput{"k", layTokenGroup, flipped}, func(p *mamba3.Problem) *[]float64 { return &p.K }},
	{sliceInput{"v", layTokenHead, flipped}, func(p *mamba3.Problem) *[]float64 { return &p.V }},
	{sliceInput{"z", layTokenHead, flipped}, func(p *mamba3.Problem) *[]float64 { return &p.Z }},
	{sliceInput{"angles", layTokenHead, flipped}, func(p *mamba3.Problem) *[]float64 { return &p.Angles }},
	{sliceInput{"adt", layHeadToken, grown}, func(p *mamba3.Problem) *[]float64 { return &p.ADT }},
	{sliceInput{"dt", layHeadToken, grown}, func(p *mamba3.Problem) *[]float64 { return &p.DT }},
	{sliceInput{"trap", layHeadToken, flipped}, func(p *mamba3.Problem) *[]float64 { return &p.Trap }},
	{sliceInput{"q-bias", layHead, flipped}, func(p *mamba3.Problem) *[]float64 { return &p.QBias }},
	{sliceInput{"k-bias", layHead, flipped}, func(p *mamba3.Problem) *[]float64 { return &p.KBias }},
	{sliceInput{"d", layHead, flipped}, func(p *mamba3.Problem) *[]float64 { return &p.D }},
	{sliceInput{"initial-angle-state", laySeqHead, flipped}, m3State(func(s *mamba3.State) *[]float64 { return &s.Angle })},
	{sliceInput{"initial-ssm-state", laySeqHead, flipped}, m3State(func(s *mamba3.State) *[]float64 { return &s.SSM })},
	{sliceInput{"initial-k-state", laySeqHead, flipped}, m3State(func(s *mamba3.State) *[]float64 { return &s.K })},
	{sliceInput{"initial-v-state", laySeqHead, flipped}, m3State(func(s *mamba3.State) *[]float64 { return &s.V })},
}

func m3State(f func(s *mamba3.State) *[]float64) func(p *mamba3.Problem) *[]float64 {
	return func(p *mamba3.Problem) *[]float64 {
		if p.State == nil {
			return nil
		}
		return f(p.State)
	}
}

func (s *m3Slices) inputs() []sliceInput        { return m3Fields.inputs() }
func (s *m3Slices) input(name string) []float64 { return m3Fields.get(s.p, name) }

func (s *m3Slices) with(x map[string][]float64) sliceProblem {
	q := copyProblem(s.p)
	m3Fields.replace(q, x, (*mamba3.Problem).Rounded)
	return newM3Slices(q)
}

func (s *m3Slices) permutedCotangent(ct any, ax sliceAxis) any {
	c, ok := ct.(*mamba3.Cotangent)
	if !ok || c == nil {
		return ct
	}
	out := &mamba3.Cotangent{Y: s.d.permuted(c.Y, layTokenHead, ax)}
	if st := c.State; st != nil {
		out.State = &mamba3.State{Angle: s.d.permuted(st.Angle, laySeqHead, ax), SSM: s.d.permuted(st.SSM, laySeqHead, ax),
			K: s.d.permuted(st.K, laySeqHead, ax), V: s.d.permuted(st.V, laySeqHead, ax)}
	}
	return out
}

// copyProblem copies p and its state deep enough that an input's array
// may be replaced.
func copyProblem(p *mamba3.Problem) *mamba3.Problem {
	q := *p
	if p.State != nil {
		s := *p.State
		q.State = &s
	}
	return &q
}

// mamba3Slices measures a Mamba-3 result's slice relations (measureSlices)
// with run, a forward's (ct nil) or a backward's; a backward's on the layer
// with a group of Q and K per head where the kernel fails so too, so that
// dQ and dK show one head's slice each.
func mamba3Slices(p *mamba3.Problem, ct *mamba3.Cotangent, base []judge.Array, run func(q *mamba3.Problem, ct *mamba3.Cotangent) ([]judge.Array, error)) (sliceFinding, bool) {
	if run == nil {
		return sliceFinding{}, false
	}
	probe := func(q sliceProblem, c any) ([]judge.Array, error) {
		qc, _ := c.(*mamba3.Cotangent)
		return run(q.(*m3Slices).p, qc)
	}
	var sp sliceProblem = newM3Slices(p)
	if ct != nil && p.HeadsQK < p.Heads {
		sp, base = ungroupedWhereFailing(sp, newM3Slices(ungrouped(p)), ct, base, probe)
	}
	return measureSlices(sp, ct, base, probe)
}

// ungrouped is p with a group of Q and K per head (each head's copy of its
// group's): the same layer, whose Q's and K's gradients are then each
// one head's, so that a slice relation of one head shows in them.
func ungrouped(p *mamba3.Problem) *mamba3.Problem {
	q := copyProblem(p)
	H, Hq, N := p.Heads, p.HeadsQK, p.N
	if Hq == 0 || H%Hq != 0 {
		return q
	}
	g := H / Hq
	rep := func(x []float64) []float64 {
		out := make([]float64, p.Batch*p.Seqlen*H*N)
		for r := 0; r < p.Batch*p.Seqlen; r++ {
			for h := 0; h < H; h++ {
				copy(out[(r*H+h)*N:(r*H+h+1)*N], x[(r*Hq+h/g)*N:(r*Hq+h/g+1)*N])
			}
		}
		return out
	}
	q.Q, q.K, q.HeadsQK = rep(p.Q), rep(p.K), H
	return q
}

// cotangentInputs are y's cotangent and each final state part's, each
// rounded as mamba3.GenerateCotangent draws it.
func (s *m3Slices) cotangentInputs(ct any) []cotangentInput {
	c, ok := ct.(*mamba3.Cotangent)
	if !ok || c == nil {
		return nil
	}
	in, w := s.p.DType, s.p.DType.Weight()
	var out []cotangentInput
	if c.Y != nil {
		out = append(out, cotangentInput{sliceInput{"dy", layTokenHead, flipped}, c.Y, func(v []float64) any {
			return &mamba3.Cotangent{Y: roundChanged(in, c.Y, v), State: c.State}
		}})
	}
	if c.State == nil {
		return out
	}
	parts := []struct {
		name string
		dt   ssm.DType
		of   func(st *mamba3.State) *[]float64
	}{
		{"dfinal-angle-state", w, func(st *mamba3.State) *[]float64 { return &st.Angle }},
		{"dfinal-ssm-state", w, func(st *mamba3.State) *[]float64 { return &st.SSM }},
		{"dfinal-k-state", in, func(st *mamba3.State) *[]float64 { return &st.K }},
		{"dfinal-v-state", in, func(st *mamba3.State) *[]float64 { return &st.V }},
	}
	for _, pt := range parts {
		if v := *pt.of(c.State); v != nil {
			out = append(out, cotangentInput{sliceInput{pt.name, laySeqHead, flipped}, v, func(v []float64) any {
				st := *c.State
				*pt.of(&st) = roundChanged(pt.dt, *pt.of(c.State), v)
				return &mamba3.Cotangent{Y: c.Y, State: &st}
			}})
		}
	}
	return out
}

package diagnose

import (
	"ssmverify/judge"
	"ssmverify/mamba2"
)

// ssdSlices is a Mamba-2 prefill problem as its slices see it (slices.go):
// B and C per group of heads, Δ per token and head, A, D and dt_bias per
// head, the initial state per batch row. The batch rows are its sequences
// (a packed row's sequences are one slice: its initial state is its first
// sequence's).
type ssdSlices struct {
	p *mamba2.Problem
	d *sliceDims
}

func newSSDSlices(p *mamba2.Problem) *ssdSlices {
	rows := make([][3]int, p.Batch)
	for b := range rows {
		rows[b] = [3]int{b, 0, p.Seqlen}
	}
	return &ssdSlices{p: p, d: newSliceDims(p.Batch, p.Seqlen, p.Heads, p.Groups, rows, false)}
}

func (s *ssdSlices) dims() *sliceDims   { return s.d }
func (s *ssdSlices) threshold() float64 { return judge.Threshold(s.p.DType) }

// ssdFields are the inputs with where they live in a problem. Δ and A
// grow (a Δ without softplus stays positive, A negative); the rest flip.
var ssdFields = sliceFields[mamba2.Problem]{
	{sliceInput{"x", layTokenHead, flipped}, func(p *mamba2.Problem) *[]float64 { return &p.X }},
	{sliceInput{"dt", layTokenHead, grown}, func(p *mamba2.Problem) *[]float64 { return &p.Dt }},
	{sliceInput{"b", layTokenGroup, flipped}, func(p *mamba2.Problem) *[]float64 { return &p.B }},
	{sliceInput{"c", layTokenGroup, flipped}, func(p *mamba2.Problem) *[]float64 { return &p.C }},
	{sliceInput{"z", layTokenHead, flipped}, func(p *mamba2.Problem) *[]float64 { return &p.Z }},
	{sliceInput{"a", layHead, grown}, func(p *mamba2.Problem) *[]float64 { return &p.A }},
	{sliceInput{"d", layHead, flipped}, func(p *mamba2.Problem) *[]float64 { return &p.D }},
	{sliceInput{"dt-bias", layHead, grown}, func(p *mamba2.Problem) *[]float64 { return &p.DtBias }},
	{sliceInput{"initial-states", laySeqHead, flipped}, func(p *mamba2.Problem) *[]float64 { return &p.InitialStates }},
}

// layoutOf knows the inputs' names, the prefill's outputs and the
// gradients (Grads.Fields).
func (s *ssdSlices) layoutOf(name string) (sliceLayout, bool) {
	if l, ok := ssdFields.layout(name); ok {
		return l, true
	}
	switch name {
	case "y", "dx", "dz", "ddt":
		return layTokenHead, true
	case "dB", "dC":
		return layTokenGroup, true
	case "dA", "dD", "ddt_bias":
		return layHead, true
	case "final_states", "dinitial_states":
		return laySeqHead, true
	}
	return 0, false
}

func (s *ssdSlices) inputs() []sliceInput        { return ssdFields.inputs() }
func (s *ssdSlices) input(name string) []float64 { return ssdFields.get(s.p, name) }

func (s *ssdSlices) with(x map[string][]float64) sliceProblem {
	q := *s.p
	ssdFields.replace(&q, x, (*mamba2.Problem).Rounded)
	return newSSDSlices(&q)
}

func (s *ssdSlices) permutedCotangent(ct any, ax sliceAxis) any {
	c, ok := ct.(*mamba2.Cotangent)
	if !ok || c == nil {
		return ct
	}
	out := &mamba2.Cotangent{Y: s.d.permuted(c.Y, layTokenHead, ax), FinalStates: s.d.permuted(c.FinalStates, laySeqHead, ax)}
	// a packed row's sequences' states: as many slices as sequences
	seq := *s.d
	seq.nSeq = s.p.NumSeqs()
	out.SeqStates = seq.permuted(c.SeqStates, laySeqHead, ax)
	return out
}

// ssdSlicesOf measures a Mamba-2 backward's slice relations
// (measureSlices) with run, on the layer with a group of B and C per head
// where the kernel fails so too, so that dB and dC show one head's slice
// each.
func ssdSlicesOf(p *mamba2.Problem, ct *mamba2.Cotangent, base []judge.Array, run func(q *mamba2.Problem, ct *mamba2.Cotangent) ([]judge.Array, error)) (sliceFinding, bool) {
	probe := func(q sliceProblem, c any) ([]judge.Array, error) {
		qc, _ := c.(*mamba2.Cotangent)
		return run(q.(*ssdSlices).p, qc)
	}
	var sp sliceProblem = newSSDSlices(p)
	if p.Groups < p.Heads {
		sp, base = ungroupedWhereFailing(sp, newSSDSlices(ssdUngrouped(p)), ct, base, probe)
	}
	return measureSlices(sp, ct, base, probe)
}

// ssdUngrouped is p with a group of B and C per head (each head's copy of
// its group's): the same layer, whose dB and dC are then each one head's.
func ssdUngrouped(p *mamba2.Problem) *mamba2.Problem {
	q := *p
	H, G, N := p.Heads, p.Groups, p.Dstate
	if G == 0 || H%G != 0 {
		return &q
	}
	rep := func(x []float64) []float64 {
		out := make([]float64, p.Batch*p.Seqlen*H*N)
		for r := 0; r < p.Batch*p.Seqlen; r++ {
			for h := 0; h < H; h++ {
				g := mamba2.Group(h, H, G)
				copy(out[(r*H+h)*N:(r*H+h+1)*N], x[(r*G+g)*N:(r*G+g+1)*N])
			}
		}
		return out
	}
	q.B, q.C, q.Groups = rep(p.B), rep(p.C), H
	return &q
}

// cotangentInputs are y's cotangent and the final states' (a packed row's
// sequences' states, one slice per row here, are left out).
func (s *ssdSlices) cotangentInputs(ct any) []cotangentInput {
	c, ok := ct.(*mamba2.Cotangent)
	if !ok || c == nil {
		return nil
	}
	var out []cotangentInput
	if c.Y != nil {
		out = append(out, cotangentInput{sliceInput{"dy", layTokenHead, flipped}, c.Y, func(v []float64) any {
			q := *c
			q.Y = roundChanged(s.p.DType, c.Y, v)
			return &q
		}})
	}
	if c.FinalStates != nil {
		out = append(out, cotangentInput{sliceInput{"dfinal-states", laySeqHead, flipped}, c.FinalStates, func(v []float64) any {
			q := *c
			q.FinalStates = roundChanged(s.p.StateDType, c.FinalStates, v)
			return &q
		}})
	}
	return out
}

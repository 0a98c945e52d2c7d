package ssm

import (
	"slices"
	"testing"
)

// TestGradFieldsInABIOrder: Fields lists every gradient of a problem with
// every option, in GradNames' order, each named once.
func TestGradFieldsInABIOrder(t *testing.T) {
	p := &Problem{Batch: 1, Dim: 2, Seqlen: 3, Dstate: 2, Groups: 1, VariableB: true, VariableC: true,
		D: []float64{0, 0}, Z: make([]float64, 6), DeltaBias: []float64{0, 0}}
	var names []string
	for _, f := range NewGrads(p, true).Fields() {
		names = append(names, f.Name)
	}
	if !slices.Equal(names, GradNames) {
		t.Errorf("Fields names %v, GradNames %v", names, GradNames)
	}
	// without the optional inputs their gradients are absent, the rest in order
	p.D, p.Z, p.DeltaBias = nil, nil, nil
	names = names[:0]
	for _, f := range NewGrads(p, false).Fields() {
		names = append(names, f.Name)
	}
	if want := []string{"du", "ddelta", "dA", "dB", "dC"}; !slices.Equal(names, want) {
		t.Errorf("without D, z, delta_bias and the initial state: %v, want %v", names, want)
	}
}

// TestGradsCloneIsDeep: a clone shares no array with its original and
// keeps absent gradients absent.
func TestGradsCloneIsDeep(t *testing.T) {
	g := &Grads{U: []float64{1, 2}, A: []float64{3}}
	c := g.Clone()
	c.U[0], c.A[0] = 9, 9
	if g.U[0] != 1 || g.A[0] != 3 || c.D != nil || c.InitialState != nil || len(c.U) != 2 {
		t.Errorf("clone %+v of %+v", c, g)
	}
}

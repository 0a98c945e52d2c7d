package ssm

import (
	"fmt"
	"slices"
)

// Cotangent is what flows into the backward pass of a scan: the gradient of
// a real loss with respect to the scan's outputs. Out is [Batch][Dim]
// [Seqlen] (dout); LastState is [Batch][Dim][Dstate] (×2 when Complex), or
// nil for a loss that does not read the last state.
type Cotangent struct {
	Out, LastState []float64
}

// Validate checks the lengths against p's and names the offending field.
func (c *Cotangent) Validate(p *Problem) error {
	if c == nil {
		return fmt.Errorf("cotangent: nil, want dout of %d elements", p.OutLen())
	}
	if len(c.Out) != p.OutLen() {
		return fmt.Errorf("cotangent: len(Out) = %d, want %d (batch·dim·seqlen)", len(c.Out), p.OutLen())
	}
	if c.LastState != nil && len(c.LastState) != p.StateLen() {
		return fmt.Errorf("cotangent: len(LastState) = %d, want %d (batch·dim·dstate%s) or nil", len(c.LastState), p.StateLen(),
			map[bool]string{true: "×2", false: ""}[p.Complex])
	}
	return nil
}

// Clone returns a deep copy.
func (c *Cotangent) Clone() *Cotangent {
	cp := func(s []float64) []float64 {
		if s == nil {
			return nil
		}
		return append([]float64(nil), s...)
	}
	return &Cotangent{Out: cp(c.Out), LastState: cp(c.LastState)}
}

// RoundTo rounds the cotangent in place to the types a backward of dt
// reads it in: Out (dout) to the input type (saturated at its largest
// finite value, as Problem.RoundTo does for the inputs), LastState to the
// weights' (float32 for F32 and the 16-bit types; F64 not at all).
func (c *Cotangent) RoundTo(dt DType) {
	for i, v := range c.Out {
		c.Out[i] = dt.RoundFinite(v)
	}
	if dt != F64 {
		for i, v := range c.LastState {
			c.LastState[i] = float64(float32(v))
		}
	}
}

// InputTyped reports whether the gradient named name (ssm.GradNames) of
// problem p is stored in the input type — du, ddelta, dz, and dB or dC
// where B or C is variable — rather than the weights' type; in a 16-bit
// dtype these are rounded once to it (the ABI's BACKWARD PASS).
func InputTyped(p *Problem, name string) bool {
	switch name {
	case "du", "ddelta", "dz":
		return true
	case "dB":
		return p.VariableB
	case "dC":
		return p.VariableC
	}
	return false
}

// Grads are the gradients of a real loss L with respect to a Problem's
// inputs, each in the layout of its input (Problem's shapes): U, Delta and
// Z per element; A, D and DeltaBias summed over batch and time; B and C
// summed over batch and time when constant, and per (batch, group, state,
// time) when variable, summed over the channels of the group. Delta's is
// with respect to the raw delta, before delta_bias and softplus.
//
// A complex input w = p + i·q has the gradient ∂L/∂p + i·∂L/∂q, interleaved
// like the input: PyTorch's w.grad for a real loss (the conjugate Wirtinger
// derivative times 2), so that w − lr·grad descends.
//
// D, Z and DeltaBias are nil where the problem has none; InitialState (the
// gradient with respect to the initial state, the layout of the last state)
// is nil where it was not asked for.
type Grads struct {
	U, Delta, A, B, C []float64
	D, Z, DeltaBias   []float64
	InitialState      []float64
}

// NewGrads returns zero gradients shaped for p; InitialState only when
// withInitial.
func NewGrads(p *Problem, withInitial bool) *Grads {
	lens := p.Lens()
	opt := func(s []float64, name string) []float64 {
		if s == nil {
			return nil
		}
		return make([]float64, lens[name])
	}
	g := &Grads{
		U: make([]float64, lens["U"]), Delta: make([]float64, lens["Delta"]), A: make([]float64, lens["A"]),
		B: make([]float64, lens["B"]), C: make([]float64, lens["C"]),
		D: opt(p.D, "D"), Z: opt(p.Z, "Z"), DeltaBias: opt(p.DeltaBias, "DeltaBias"),
	}
	if withInitial {
		g.InitialState = make([]float64, p.StateLen())
	}
	return g
}

// Clone returns a deep copy of g (absent gradients stay nil).
func (g *Grads) Clone() *Grads {
	return &Grads{U: slices.Clone(g.U), Delta: slices.Clone(g.Delta), A: slices.Clone(g.A), B: slices.Clone(g.B), C: slices.Clone(g.C),
		D: slices.Clone(g.D), Z: slices.Clone(g.Z), DeltaBias: slices.Clone(g.DeltaBias), InitialState: slices.Clone(g.InitialState)}
}

// GradField is one gradient array with its ABI name ("du", "ddelta", …).
type GradField struct {
	Name string
	// Input is the Problem field it is the gradient of ("U", …).
	Input  string
	Values []float64
}

// ByName is the gradients present, by ABI name ("du", …).
func (g *Grads) ByName() map[string][]float64 {
	m := map[string][]float64{}
	for _, f := range g.Fields() {
		m[f.Name] = f.Values
	}
	return m
}

// GradNames are the gradients' ABI names in ABI order (struct
// ssmk_scan_grads): the order of Fields and of every report of gradients.
var GradNames = []string{"du", "ddelta", "dA", "dB", "dC", "dD", "dz", "ddelta_bias", "dinitial_state"}

// Fields lists the present gradients in ABI order (GradNames).
func (g *Grads) Fields() []GradField {
	all := []GradField{{"du", "U", g.U}, {"ddelta", "Delta", g.Delta}, {"dA", "A", g.A}, {"dB", "B", g.B},
		{"dC", "C", g.C}, {"dD", "D", g.D}, {"dz", "Z", g.Z}, {"ddelta_bias", "DeltaBias", g.DeltaBias},
		{"dinitial_state", "InitialState", g.InitialState}}
	out := all[:0]
	for _, f := range all {
		if f.Values != nil {
			out = append(out, f)
		}
	}
	return out
}

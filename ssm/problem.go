package ssm

import (
	"fmt"
	"math"
)

// Problem is one selective-scan forward problem in the ABI's memory layout:
// dense row-major arrays, complex values as interleaved (re, im) pairs. The
// same Problem feeds the reference and, converted to the kernel's dtype, the
// kernel under test, so both see identical inputs.
//
// Shapes (outermost first; "×2" when Complex):
//
//	U, Delta, Z       [Batch][Dim][Seqlen]
//	A                 [Dim][Dstate] ×2
//	B, C constant     [Dim][Dstate] ×2
//	B, C variable     [Batch][Groups][Dstate][Seqlen] ×2
//	D, DeltaBias      [Dim]
//	InitialState      [Batch][Dim][Dstate] ×2
//
// D, Z and DeltaBias are optional: nil means absent. InitialState (an ABI
// extension, SSMK_CAP_INITIAL_STATE) is h before step 0, the layout of the
// last state; nil means h = 0, as in ABI v1.
type Problem struct {
	Batch, Dim, Seqlen, Dstate int
	Groups                     int // n_groups ≥ 1, dividing Dim; channel d uses group d / (Dim/Groups)

	Method               Method
	Complex              bool
	VariableB, VariableC bool
	Softplus             bool

	U, Delta, A, B, C []float64
	D, Z, DeltaBias   []float64
	InitialState      []float64
}

// Shape names a problem's sizes and flags without its data, for messages.
func (p *Problem) Shape() string {
	kind := AKind(p.Complex)
	return fmt.Sprintf("%v %s batch=%d dim=%d seqlen=%d dstate=%d groups=%d varB=%t varC=%t D=%t z=%t bias=%t softplus=%t",
		p.Method, kind, p.Batch, p.Dim, p.Seqlen, p.Dstate, p.Groups, p.VariableB, p.VariableC,
		p.D != nil, p.Z != nil, p.DeltaBias != nil, p.Softplus) + map[bool]string{true: " initial_state", false: ""}[p.InitialState != nil]
}

// ElemWords is the number of float64 words per element of the
// complex-capable arrays (A, B, C, last state): 2 when Complex, else 1.
func (p *Problem) ElemWords() int {
	if p.Complex {
		return 2
	}
	return 1
}

// Lens returns the length, in float64 words, that each array must have,
// by field name (U, Delta, A, B, C, D, Z, DeltaBias).
func (p *Problem) Lens() map[string]int {
	bc := func(variable bool) int {
		if variable {
			return p.Batch * p.Groups * p.Dstate * p.Seqlen * p.ElemWords()
		}
		return p.Dim * p.Dstate * p.ElemWords()
	}
	seq := p.Batch * p.Dim * p.Seqlen
	return map[string]int{
		"U": seq, "Delta": seq, "Z": seq,
		"A": p.Dim * p.Dstate * p.ElemWords(),
		"B": bc(p.VariableB), "C": bc(p.VariableC),
		"D": p.Dim, "DeltaBias": p.Dim, "InitialState": p.StateLen(),
	}
}

// OutLen is the length of the output: Batch·Dim·Seqlen.
func (p *Problem) OutLen() int { return p.Batch * p.Dim * p.Seqlen }

// StateLen is the length in float64 words of the last state:
// Batch·Dim·Dstate, twice that when Complex.
func (p *Problem) StateLen() int { return p.Batch * p.Dim * p.Dstate * p.ElemWords() }

// Validate checks sizes, flags and array lengths. Its error names the
// offending field, what was expected and what was given.
func (p *Problem) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"Batch", p.Batch}, {"Dim", p.Dim}, {"Seqlen", p.Seqlen}, {"Dstate", p.Dstate}, {"Groups", p.Groups}} {
		if f.v <= 0 || f.v > math.MaxInt32 {
			return fmt.Errorf("problem: %s = %d, want 1…%d", f.name, f.v, math.MaxInt32)
		}
	}
	if p.Dim%p.Groups != 0 {
		return fmt.Errorf("problem: Groups = %d does not divide Dim = %d", p.Groups, p.Dim)
	}
	if !p.Method.Valid() {
		return fmt.Errorf("problem: Method = %d, want 0…5 (zoh foh bilinear poly highorder rk4)", int32(p.Method))
	}
	want := p.Lens()
	for _, f := range []struct {
		name     string
		s        []float64
		optional bool
	}{
		{"U", p.U, false}, {"Delta", p.Delta, false}, {"A", p.A, false}, {"B", p.B, false}, {"C", p.C, false},
		{"D", p.D, true}, {"Z", p.Z, true}, {"DeltaBias", p.DeltaBias, true}, {"InitialState", p.InitialState, true},
	} {
		if f.optional && f.s == nil {
			continue
		}
		if len(f.s) != want[f.name] {
			return fmt.Errorf("problem: len(%s) = %d, want %d (%s)", f.name, len(f.s), want[f.name], p.layout(f.name))
		}
	}
	return nil
}

func (p *Problem) layout(name string) string {
	c := ""
	if p.Complex {
		c = "×2 (complex interleaved)"
	}
	switch name {
	case "InitialState":
		return "batch·dim·dstate" + c
	case "U", "Delta", "Z":
		return "batch·dim·seqlen"
	case "A":
		return "dim·dstate" + c
	case "B", "C":
		variable := p.VariableB
		if name == "C" {
			variable = p.VariableC
		}
		if variable {
			return "batch·groups·dstate·seqlen" + c
		}
		return "dim·dstate" + c
	}
	return "dim"
}

// RoundToFloat32 rounds every input to the nearest float32 in place, so a
// float32 kernel and the float64 reference see exactly the same numbers.
func (p *Problem) RoundToFloat32() {
	for _, s := range [][]float64{p.U, p.Delta, p.A, p.B, p.C, p.D, p.Z, p.DeltaBias, p.InitialState} {
		for i, v := range s {
			s[i] = float64(float32(v))
		}
	}
}

// RoundTo rounds every input in place to the element type a kernel of dt
// reads it in, so that kernel and reference see exactly the same numbers:
// F32 as RoundToFloat32, F64 not at all; for a 16-bit dtype u, Δ, z and
// variable B and C to that type (saturated at its largest finite value, so
// that a problem drawn for float32 stays finite) and the weights and the
// initial state to float32.
func (p *Problem) RoundTo(dt DType) {
	switch {
	case dt == F32:
		p.RoundToFloat32()
		return
	case !dt.Narrow():
		return
	}
	in := [][]float64{p.U, p.Delta, p.Z}
	w := [][]float64{p.A, p.D, p.DeltaBias, p.InitialState}
	for _, bc := range []struct {
		s        []float64
		variable bool
	}{{p.B, p.VariableB}, {p.C, p.VariableC}} {
		if bc.variable {
			in = append(in, bc.s)
		} else {
			w = append(w, bc.s)
		}
	}
	for _, s := range in {
		for i, v := range s {
			s[i] = dt.RoundFinite(v)
		}
	}
	for _, s := range w {
		for i, v := range s {
			s[i] = float64(float32(v))
		}
	}
}

// Clone returns a deep copy.
func (p *Problem) Clone() *Problem {
	q := *p
	cp := func(s []float64) []float64 {
		if s == nil {
			return nil
		}
		return append([]float64(nil), s...)
	}
	q.U, q.Delta, q.A, q.B, q.C = cp(p.U), cp(p.Delta), cp(p.A), cp(p.B), cp(p.C)
	q.D, q.Z, q.DeltaBias, q.InitialState = cp(p.D), cp(p.Z), cp(p.DeltaBias), cp(p.InitialState)
	return &q
}

// BCIndex returns the word index of element n of B or C (whichever is
// described by variable) for batch row b, channel d, time t; the imaginary
// part of a complex element follows it.
func (p *Problem) BCIndex(variable bool, b, d, n, t int) int {
	if variable {
		grp := d / (p.Dim / p.Groups)
		return (((b*p.Groups+grp)*p.Dstate+n)*p.Seqlen + t) * p.ElemWords()
	}
	return (d*p.Dstate + n) * p.ElemWords()
}

// Output is the result of a forward scan: Out is [Batch][Dim][Seqlen];
// LastState is [Batch][Dim][Dstate], interleaved (re, im) when Complex.
type Output struct {
	Out, LastState []float64
}

// AKind names the kind of A: "complex" or "real", as reports print it.
func AKind(isComplex bool) string {
	if isComplex {
		return "complex"
	}
	return "real"
}

// Steps returns steps t0 … t1−1 of p as a problem of its own (every array
// along time cut to the window, the rest shared by copy), with no initial
// state: the caller sets one to resume a scan there.
func (p *Problem) Steps(t0, t1 int) (*Problem, error) {
	if t0 < 0 || t1 > p.Seqlen || t0 >= t1 {
		return nil, fmt.Errorf("problem: steps %d…%d of a sequence of %d: want 0 ≤ t0 < t1 ≤ %d", t0, t1, p.Seqlen, p.Seqlen)
	}
	q := p.Clone()
	q.Seqlen, q.InitialState = t1-t0, nil
	L, w := p.Seqlen, t1-t0
	seq := func(s []float64) []float64 {
		if s == nil {
			return nil
		}
		out := make([]float64, 0, p.Batch*p.Dim*w)
		for r := 0; r < p.Batch*p.Dim; r++ {
			out = append(out, s[r*L+t0:r*L+t1]...)
		}
		return out
	}
	bc := func(s []float64, variable bool) []float64 {
		if !variable {
			return s
		}
		ew := p.ElemWords()
		out := make([]float64, 0, p.Batch*p.Groups*p.Dstate*w*ew)
		for k := 0; k < p.Batch*p.Groups*p.Dstate; k++ {
			out = append(out, s[(k*L+t0)*ew:(k*L+t1)*ew]...)
		}
		return out
	}
	q.U, q.Delta, q.Z = seq(p.U), seq(p.Delta), seq(p.Z)
	q.B, q.C = bc(q.B, p.VariableB), bc(q.C, p.VariableC)
	return q, q.Validate()
}

// PutSteps writes the output of Steps(t0, t1) (Batch·Dim rows of t1 − t0
// steps) into its place in out, an output of p (OutLen elements).
func (p *Problem) PutSteps(out, piece []float64, t0, t1 int) {
	w := t1 - t0
	for r := 0; r < p.Batch*p.Dim; r++ {
		copy(out[r*p.Seqlen+t0:r*p.Seqlen+t1], piece[r*w:(r+1)*w])
	}
}

// InPieces scans p cut at cuts (0 = cuts[0] < … < cuts[len−1] = Seqlen)
// with scan, each piece (Steps) given as its InitialState the last state
// scan returned for the one before, the first p's initial state; it returns
// the pieces' outputs in their places (PutSteps) and the last state. A
// kernel's scan in pieces and the reference's replays of it share it.
func (p *Problem) InPieces(cuts []int, scan func(piece *Problem) (*Output, error)) (*Output, error) {
	out := &Output{Out: make([]float64, p.OutLen())}
	state := p.InitialState
	for k := 1; k < len(cuts); k++ {
		q, err := p.Steps(cuts[k-1], cuts[k])
		if err != nil {
			return nil, err
		}
		q.InitialState = state
		o, err := scan(q)
		if err != nil {
			return nil, fmt.Errorf("the piece of steps %d…%d: %w", cuts[k-1], cuts[k], err)
		}
		p.PutSteps(out.Out, o.Out, cuts[k-1], cuts[k])
		state = o.LastState
	}
	out.LastState = state
	return out, nil
}

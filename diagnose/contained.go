package diagnose

import (
	"fmt"

	"ssmverify/contain"
	"ssmverify/judge"
	"ssmverify/mamba2"
	"ssmverify/mamba3"
	"ssmverify/ssm"
)

// contained is deferred by every exported diagnosis: a panic inside it (a
// bug of the suite, whatever the kernel returned) becomes the finding,
// tagged contain.Tag with the step, the input and the line, and the test
// goes on to report it (package contain).
func contained(f *Finding, step string, input func() string) {
	if e := contain.Recovered(recover(), step, input); e != nil {
		*f = Finding{Tag: contain.Tag, Cause: e.Error(), Evidence: []string{"site: " + e.Site}}
	}
}

// mamba3Shape and stepShape describe a problem for an internal error's
// input line.
func mamba3Shape(p *mamba3.Problem) string {
	return fmt.Sprintf("%v b=%d l=%d h=%d hqk=%d n=%d p=%d angles=%d seqs=%d", p.DType, p.Batch, p.Seqlen, p.Heads, p.HeadsQK, p.N, p.P, p.AngleDim, len(p.CuSeqlens))
}

func stepShape(s *mamba2.Step) string {
	return fmt.Sprintf("%s/state-%s b=%d slots=%d h=%d p=%d g=%d n=%d", s.DType, s.StateDType, s.Batch, s.Slots, s.Heads, s.Headdim, s.Groups, s.Dstate)
}

// ShapeError is a result that is not of its problem's shape: no result, or
// an array of another length than the problem gives it. The diagnosis
// names it as the cause (tag "shape") rather than reading past the end.
type ShapeError struct {
	Array     string // "out", "last_state", "dU", "y", …; "" for no result at all
	Got, Want int
}

func (e *ShapeError) Error() string {
	if e.Array == "" {
		return "the kernel returned no result and no error"
	}
	return fmt.Sprintf("the kernel returned %d elements of %s, want %d", e.Got, e.Array, e.Want)
}

// shapeFinding is the finding of a result of the wrong shape.
func shapeFinding(e *ShapeError) Finding {
	return Finding{Tag: "shape", Cause: e.Error() + ": the result is not of the problem's shape (a layout, size or stride the kernel reads otherwise)", Where: e.Array}
}

// checkedKernel hands the diagnosis only results of the problem's shape:
// a result of another shape is a *ShapeError, so that the probes, which
// index a result by the problem's shape, never read past it. Gradients
// the kernel did not return stay absent (the comparison names them
// missing); only those of the wrong length are errors.
type checkedKernel struct{ s Scanner }

func (k checkedKernel) Scan(p *ssm.Problem, dt ssm.DType) (*ssm.Output, error) {
	o, err := k.s.Scan(p, dt)
	if err != nil {
		return nil, err
	}
	if err := outputShape(p, o); err != nil {
		return nil, err
	}
	return o, nil
}

func outputShape(p *ssm.Problem, o *ssm.Output) *ShapeError {
	switch {
	case o == nil:
		return &ShapeError{}
	case len(o.Out) != p.OutLen():
		return &ShapeError{"out", len(o.Out), p.OutLen()}
	case len(o.LastState) != p.StateLen():
		return &ShapeError{"last_state", len(o.LastState), p.StateLen()}
	}
	return nil
}

func (k checkedKernel) Backward(p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType, withInitial bool) (*ssm.Grads, error) {
	d, ok := k.s.(Differentiator)
	if !ok {
		return nil, fmt.Errorf("the kernel has no backward pass")
	}
	g, err := d.Backward(p, ct, dt, withInitial)
	if err != nil {
		return nil, err
	}
	if err := gradsShape(p, g); err != nil {
		return nil, err
	}
	return g, nil
}

func gradsShape(p *ssm.Problem, g *ssm.Grads) *ShapeError {
	if g == nil {
		return &ShapeError{}
	}
	lens := p.Lens()
	for _, f := range g.Fields() {
		if want, ok := lens[f.Input]; ok && len(f.Values) != want {
			return &ShapeError{f.Name, len(f.Values), want}
		}
	}
	return nil
}

// ssdShape is the first array of a Mamba-2 or Mamba-3 result whose length
// is not its reference's.
func ssdShape(arrays []judge.Array) *ShapeError {
	for _, a := range arrays {
		if len(a.Got) != len(a.Want) {
			return &ShapeError{a.Name, len(a.Got), len(a.Want)}
		}
	}
	return nil
}

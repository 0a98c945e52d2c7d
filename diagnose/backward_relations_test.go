package diagnose

import (
	"math"
	"strings"
	"testing"

	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// transformed is a backward that returns the reference's gradients as f
// changes them, beside a forward that is right (or, with wrongForward,
// one whose output is doubled).
type transformed struct {
	f            func(p *ssm.Problem, g *ssm.Grads)
	wrongForward bool
}

func (k transformed) Scan(p *ssm.Problem, _ ssm.DType) (*ssm.Output, error) {
	out, err := mamba1.Scan(p, ssm.Float64)
	if err == nil && k.wrongForward {
		for i := range out.Out {
			out.Out[i] *= 2
		}
	}
	return out, err
}

func (k transformed) Backward(p *ssm.Problem, ct *ssm.Cotangent, _ ssm.DType, withInitial bool) (*ssm.Grads, error) {
	g, err := mamba1.ScanGrad(p, ct, withInitial)
	if err == nil {
		k.f(p, g)
	}
	return g, err
}

// TestBackwardRelations: gradients changed as generated mutants change
// them — a gradient zeroed, shifted a step in time, summed into one slot,
// or scrambled — are named by the relation, none of which is a catalogued
// slip; scrambled gradients with a right forward are placed in the
// backward, with a wrong forward they are "none".
func TestBackwardRelations(t *testing.T) {
	p := mamba1.Generate(mamba1.MambaBlock(ssm.ZOH, 1, 4, 40, 3), 5)
	p.RoundTo(ssm.F32)
	ct := mamba1.NewCotangent(p, 5, false)
	scramble := func(v []float64) {
		for i := range v {
			v[i] *= 1 + 0.5*math.Sin(float64(i*i+1))
		}
	}
	for _, c := range []struct {
		name, want string
		k          transformed
	}{
		{"dz never written", "bwd-zero:dz", transformed{f: func(p *ssm.Problem, g *ssm.Grads) {
			for i := range g.Z {
				g.Z[i] = 0
			}
		}}},
		{"du one step late", "bwd-shift:du", transformed{f: func(p *ssm.Problem, g *ssm.Grads) {
			L := p.Seqlen
			for i := range g.U {
				if i%L < L-1 {
					g.U[i] = g.U[i+1]
				}
			}
		}}},
		{"dD into the first channel", "bwd-wrong-slot:dD", transformed{f: func(p *ssm.Problem, g *ssm.Grads) {
			for i := 1; i < len(g.D); i++ {
				g.D[0] += g.D[i]
				g.D[i] = 0
			}
		}}},
		{"du and dB scrambled", "bwd-gradients:", transformed{f: func(p *ssm.Problem, g *ssm.Grads) { scramble(g.U); scramble(g.B) }}},
		{"du and dB scrambled, forward wrong", "none", transformed{f: func(p *ssm.Problem, g *ssm.Grads) { scramble(g.U); scramble(g.B) }, wrongForward: true}},
	} {
		f := Backward(c.k, p, ct, ssm.F32)
		if !strings.HasPrefix(f.Tag, c.want) {
			t.Errorf("%s: diagnosed [%s] %s, want [%s]", c.name, f.Tag, f.Cause, c.want)
		}
	}
}

// TestShiftNeedsARow: on a row of one step, which a shrunk case often is,
// undoing a shift replaces every element by the reference's; a shift is
// not told there.
func TestShiftNeedsARow(t *testing.T) {
	p := mamba1.Generate(mamba1.MambaBlock(ssm.ZOH, 1, 2, 1, 3), 5)
	p.RoundTo(ssm.F32)
	ct := mamba1.NewCotangent(p, 5, false)
	k := transformed{f: func(p *ssm.Problem, g *ssm.Grads) {
		for i := range g.Delta {
			g.Delta[i] *= 1 + 0.3*float64(i+1)
		}
	}}
	if f := Backward(k, p, ct, ssm.F32); strings.HasPrefix(f.Tag, "bwd-shift") {
		t.Errorf("seqlen 1: diagnosed [%s] %s", f.Tag, f.Cause)
	}
}

// TestSimpleRatio: one element's ratio is a pattern only when it is a
// slip's factor.
func TestSimpleRatio(t *testing.T) {
	for _, c := range []struct {
		v  []complex128
		ok bool
	}{{[]complex128{-1}, true}, {[]complex128{complex(2.000001, 0)}, true}, {[]complex128{1.3}, false}, {[]complex128{-1, -1}, false},
		{[]complex128{complex(math.NaN(), 0), -1}, true}} {
		if _, ok := simpleRatio(c.v); ok != c.ok {
			t.Errorf("simpleRatio(%v) = %t, want %t", c.v, ok, c.ok)
		}
	}
}

package diagnose

import (
	"math"
	"testing"

	"ssmverify/gen"
	"ssmverify/reference"
	"ssmverify/ssm"
)

// forkLike is a library as a Mamba fork's autograd runs it: its forward
// computes p with A scaled by fwdScale (1: right; the fork's zoh decays as
// e^{1.44·Δa}), its backward differentiates method bwd and forms dz from
// that forward's output, as Mamba's kernel does from the saved y.
type forkLike struct {
	bwd      ssm.Method
	fwdScale float64
	// f32: dz formed in float32 with σ(z) off by 3e-7 relative, as a
	// fast-math kernel forms it
	f32 bool
}

func (k forkLike) forward(p *ssm.Problem) *ssm.Problem {
	q := p.Clone()
	for i := range q.A {
		q.A[i] *= k.fwdScale
	}
	return q
}

func (k forkLike) Scan(p *ssm.Problem, _ ssm.DType) (*ssm.Output, error) {
	return reference.Scan(k.forward(p), ssm.Float64)
}

func (k forkLike) Backward(p *ssm.Problem, ct *ssm.Cotangent, _ ssm.DType, withInitial bool) (*ssm.Grads, error) {
	q := p.Clone()
	q.Method = k.bwd
	g, err := reference.ScanGrad(q, ct, withInitial)
	if err != nil {
		return nil, err
	}
	ungated := k.forward(p)
	ungated.Z = nil
	y, err := reference.Scan(ungated, ssm.Float64)
	if err != nil {
		return nil, err
	}
	for i, z := range p.Z {
		sig := 1 / (1 + math.Exp(-z))
		g.Z[i] = ct.Out[i] * y.Out[i] * sig * (1 + z*(1-sig))
		if k.f32 {
			f := func(v float64) float64 { return float64(float32(v)) }
			s := f(sig * (1 + 3e-7))
			g.Z[i] = f(f(f(ct.Out[i]*y.Out[i])*s) * f(1+f(z*f(1-s))))
		}
	}
	return g, nil
}

// TestBackwardNamesForkGradients: zoh's backward run after another
// method's forward (the fork's autograd) is named bwd-method:zoh whether
// that forward is right (dz then the method's) or wrong (dz then neither);
// a right backward after a wrong forward is bwd-dz-forward; a right pair
// passes.
func TestBackwardNamesForkGradients(t *testing.T) {
	for _, c := range []struct {
		name   string
		m      ssm.Method
		kernel forkLike
		tag    string
	}{
		{"foh's forward wrong, zoh's backward", ssm.FOH, forkLike{ssm.ZOH, 1.4427, false}, "bwd-method:zoh"},
		{"bilinear's forward right, zoh's backward", ssm.Bilinear, forkLike{ssm.ZOH, 1, false}, "bwd-method:zoh"},
		{"zoh's forward wrong, its backward right", ssm.ZOH, forkLike{ssm.ZOH, 1.4427, false}, "bwd-dz-forward"},
		{"rk4 right", ssm.RK4, forkLike{ssm.RK4, 1, false}, ""},
		{"zoh's forward wrong, dz in float32 near the gate derivative's root", ssm.ZOH, forkLike{ssm.ZOH, 1.4427, true}, "bwd-dz-forward"},
	} {
		for _, isComplex := range []bool{false, true} {
			p := problem(c.m, isComplex, nil)
			for i := 0; i < len(p.Z); i += 7 {
				p.Z[i] = -1.27846454 // 1 + z·(1 − σ(z)) = 0 within 1e-8
			}
			ct := gen.NewCotangent(p, 5, false)
			f := Backward(c.kernel, p, ct, ssm.F64)
			if f.Tag != c.tag {
				t.Errorf("%s, complex %t: diagnosed %q, want %q: %s", c.name, isComplex, f.Tag, c.tag, f)
			}
		}
	}
}

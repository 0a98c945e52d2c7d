package mamba3

import (
	"math"
	"math/rand/v2"
	"testing"
)

func loss(p *Problem, ct *Cotangent) float64 {
	y, st := Forward(p)
	var l float64
	for i, v := range y {
		l += ct.Y[i] * v
	}
	if cs := ct.State; cs != nil {
		for _, pair := range [][2][]float64{{cs.Angle, st.Angle}, {cs.SSM, st.SSM}, {cs.K, st.K}, {cs.V, st.V}} {
			for i := range pair[0] {
				l += pair[0][i] * pair[1][i]
			}
		}
	}
	return l
}

// TestGradMatchesDifferences: every gradient of the float64 adjoint
// against central differences of Forward, on problems with every option
// (a state, D, z, heads sharing q/k, packed sequences), for a loss of y
// and of the final states.
func TestGradMatchesDifferences(t *testing.T) {
	for _, o := range []Options{
		{Batch: 2, Seqlen: 7, HeadsQK: 1, Heads: 2, N: 6, P: 2, AngleDim: 2, D: true, Z: true, State: true},
		{Batch: 1, Seqlen: 9, HeadsQK: 2, Heads: 4, N: 4, P: 3, AngleDim: 1, D: true, State: true, CuSeqlens: []int{0, 4, 5, 9}},
	} {
		p := Generate(o, 9)
		rng := rand.New(rand.NewPCG(3, 4))
		normal := func(n int) []float64 {
			v := make([]float64, n)
			for i := range v {
				v[i] = rng.NormFloat64()
			}
			return v
		}
		S := p.NumSeqs()
		ct := &Cotangent{Y: normal(len(p.V)), State: &State{Angle: normal(S * o.Heads * o.AngleDim), SSM: normal(S * o.Heads * o.P * o.N), K: normal(S * o.Heads * o.N), V: normal(S * o.Heads * o.P)}}
		g := Grad(p, ct)
		fields := []struct {
			name string
			x    []float64
			g    []float64
		}{{"Q", p.Q, g.Q}, {"K", p.K, g.K}, {"V", p.V, g.V}, {"ADT", p.ADT, g.ADT}, {"DT", p.DT, g.DT}, {"Trap", p.Trap, g.Trap},
			{"Q_bias", p.QBias, g.QBias}, {"K_bias", p.KBias, g.KBias}, {"Angles", p.Angles, g.Angles}, {"D", p.D, g.D}, {"Z", p.Z, g.Z},
			{"state.angle", p.State.Angle, g.State.Angle}, {"state.ssm", p.State.SSM, g.State.SSM}, {"state.k", p.State.K, g.State.K}, {"state.v", p.State.V, g.State.V}}
		for _, f := range fields {
			if f.x == nil {
				continue
			}
			var norm float64
			for _, v := range f.g {
				norm = math.Max(norm, math.Abs(v))
			}
			for i := range f.x {
				x := f.x[i]
				h := 1e-6 * math.Max(1, math.Abs(x))
				f.x[i] = x + h
				lp := loss(p, ct)
				f.x[i] = x - h
				lm := loss(p, ct)
				f.x[i] = x
				fd := (lp - lm) / (2 * h)
				if d := math.Abs(fd - f.g[i]); d > 1e-6*(norm+1) {
					t.Errorf("%v: d%s[%d] = %.12g, central difference %.12g", o.CuSeqlens, f.name, i, f.g[i], fd)
					break
				}
			}
		}
	}
}

// TestGradCheckCanFail: the same differences, of the layer without the
// previous input's term, disagree with the adjoint of the true layer.
func TestGradCheckCanFail(t *testing.T) {
	p := Generate(Options{Batch: 1, Seqlen: 6, HeadsQK: 1, Heads: 1, N: 4, P: 2, AngleDim: 1, State: true}, 11)
	ct := &Cotangent{Y: make([]float64, len(p.V))}
	for i := range ct.Y {
		ct.Y[i] = 1
	}
	g := Grad(p, ct)
	slipLoss := func() float64 {
		y, _ := ForwardVariant(p, Variant{NoPrevious: true})
		var l float64
		for _, v := range y {
			l += v
		}
		return l
	}
	differs := false
	for i := range p.V {
		x, h := p.V[i], 1e-6
		p.V[i] = x + h
		lp := slipLoss()
		p.V[i] = x - h
		lm := slipLoss()
		p.V[i] = x
		if math.Abs((lp-lm)/(2*h)-g.V[i]) > 1e-6*(1+math.Abs(g.V[i])) {
			differs = true
		}
	}
	if !differs {
		t.Error("the differences of a layer without its previous-input term match the true adjoint: the check cannot fail")
	}
}

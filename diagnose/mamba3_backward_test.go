package diagnose

import (
	"math"
	"strings"
	"testing"

	"ssmverify/mamba3"
)

// TestMamba3BackwardRelations: gradients transformed as a backward's
// slips transform them are named by the relation, none of which was
// written for the slip: a path cut, a sign, a factor, a per-element factor,
// a sum into the wrong slot, a shift in time; noise is "none".
func TestMamba3BackwardRelations(t *testing.T) {
	p := mamba3.Generate(mamba3.Options{Batch: 1, Seqlen: 24, HeadsQK: 1, Heads: 2, N: 8, P: 3, AngleDim: 2, D: true, Z: true}, 11)
	p.Arithmetic = mamba3.Arithmetic{U: 0x1p-24}
	ct := mamba3.GenerateCotangent(p, false, 3)
	y, st := mamba3.Forward(p)
	H, L := p.Heads, p.Seqlen
	cases := []struct {
		name, want string
		slip       func(g *mamba3.Grads)
	}{
		{"dADT through α only", "bwd:dADT:no-path:beta", func(g *mamba3.Grads) { g.ADT = mamba3.GradWithout(p, ct, mamba3.PathBeta).ADT }},
		{"dD doubled", "bwd:dD:factor(2)", func(g *mamba3.Grads) {
			for i := range g.D {
				g.D[i] *= 2
			}
		}},
		{"dTrap without σ'", "bwd:dTrap:lacks(λ(1−λ))", func(g *mamba3.Grads) {
			for i, x := range p.Trap {
				s := 1 / (1 + math.Exp(-x))
				g.Trap[i] /= s * (1 - s)
			}
		}},
		{"dQ_bias into head 0", "bwd:dQ_bias:wrong-slot", func(g *mamba3.Grads) {
			N := p.N
			for h := 1; h < H; h++ {
				for n := 0; n < N; n++ {
					g.QBias[n] += g.QBias[h*N+n]
					g.QBias[h*N+n] = 0
				}
			}
		}},
		{"dDT one step late", "bwd:dDT:shift(+1)", func(g *mamba3.Grads) {
			for h := 0; h < H; h++ {
				copy(g.DT[h*L:(h+1)*L-1], append([]float64(nil), g.DT[h*L+1:(h+1)*L]...))
				g.DT[(h+1)*L-1] = 0
			}
		}},
		{"dV without the previous input", "bwd:dV:no-path:previous", func(g *mamba3.Grads) { g.V = mamba3.GradWithout(p, ct, mamba3.PathPrevious).V }},
		{"dZ never written", "bwd:dZ:zero", func(g *mamba3.Grads) {
			for i := range g.Z {
				g.Z[i] = 0
			}
		}},
		{"dK noise", "bwd:dK:none", func(g *mamba3.Grads) {
			for i := range g.K {
				g.K[i] += 0.3 * math.Sin(float64(i*i))
			}
		}},
	}
	for _, c := range cases {
		g := mamba3.Grad(p, ct)
		c.slip(g)
		f := Mamba3Backward(p, ct, y, st, g, nil, nil)
		if f.Tag != c.want {
			t.Errorf("%s: diagnosis [%s] %s; want [%s]", c.name, f.Tag, f, c.want)
		}
	}
	// the sign of the angle's path: dAngles flips whole, dDT in its angle part
	g := mamba3.Grad(p, ct)
	cut := mamba3.GradWithout(p, ct, mamba3.PathAngle)
	for i := range g.Angles {
		g.Angles[i] = -g.Angles[i]
	}
	for i := range g.DT {
		g.DT[i] = 2*cut.DT[i] - g.DT[i]
	}
	if f := Mamba3Backward(p, ct, y, st, g, nil, nil); !strings.Contains(f.Tag, "bwd:dAngles:factor(-1)") || !strings.Contains(f.Tag, "bwd:dDT:negated-path:angle") {
		t.Errorf("angle's path negated: diagnosis [%s] %s", f.Tag, f)
	}
}

package golden

import (
	"math"
	"math/big"
	"testing"

	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// TestExactFunctions: the derivation's exp, log, sin and cos against Go's
// math at float64 (within an ulp: both are that close to the truth) and
// against identities at the working precision (exp(log y) = y and
// sin² + cos² = 1 to 2⁻²⁴⁰).
func TestExactFunctions(t *testing.T) {
	for _, x := range []float64{0, 1e-300, -1e-20, 1e-8, 0.5, -0.75, 1, -2, 3.5, 20, -87.3, 700, -745, 1e4 + 0.25} {
		e, ok := bexp(bf(x))
		if !ok {
			t.Fatalf("bexp(%g) refused", x)
		}
		if got, _ := e.Float64(); judge.ULPs(got, math.Exp(x), ssm.F64) > 1 {
			t.Errorf("bexp(%g) = %.17g, math.Exp %.17g", x, got, math.Exp(x))
		}
		if x > 0 && x < 700 {
			y, _ := bexp(bf(x))
			back := blog(y)
			if d := bsub(back, bf(x)); d.Sign() != 0 && d.MantExp(nil) > -240+max(0, math.Ilogb(x)) {
				t.Errorf("log(exp(%g)) − %g = %g", x, x, d)
			}
		}
		s, c := bsincos(bf(x))
		sf, _ := s.Float64()
		cf, _ := c.Float64()
		if math.Abs(x) < 1e5 && (judge.ULPs(sf, math.Sin(x), ssm.F64) > 1 && math.Abs(sf-math.Sin(x)) > 1e-300 || judge.ULPs(cf, math.Cos(x), ssm.F64) > 1) {
			t.Errorf("bsincos(%g) = %.17g, %.17g; math %.17g, %.17g", x, sf, cf, math.Sin(x), math.Cos(x))
		}
		one := badd(bmul(s, s), bmul(c, c))
		if d := bsub(one, bf(1)); d.Sign() != 0 && d.MantExp(nil) > -240 {
			t.Errorf("sin² + cos² − 1 = %g at %g", d, x)
		}
	}
	if e, _ := bexp(bf(-1e7)); e.Sign() != 0 {
		t.Error("bexp(−1e7) is not 0")
	}
	if _, ok := bexp(bf(1e7)); ok {
		t.Error("bexp(1e7) accepted")
	}
	if v, _ := ln2.Float64(); v != math.Ln2 {
		t.Errorf("ln 2 = %.17g", v)
	}
	if v, _ := pi.Float64(); v != math.Pi {
		t.Errorf("π = %.17g", v)
	}
}

// TestExactMethods: the header's table at points where it is known in
// closed form, and its refusals.
func TestExactMethods(t *testing.T) {
	f := func(v bc) complex128 { re, _ := v.re.Float64(); im, _ := v.im.Float64(); return complex(re, im) }
	for _, c := range []struct {
		m       ssm.Method
		x       complex128
		abar, g complex128
	}{
		{ssm.ZOH, 0, 1, 1},
		{ssm.FOH, 0, 1, 1},
		{ssm.FOH, complex(math.Log(2), 0), 2, complex(1/math.Log(2), 0)},
		{ssm.FOH, complex(0, math.Pi), -1, complex(0, 2/math.Pi)}, // (e^{iπ} − 1)/(iπ) = 2i/π
		{ssm.Bilinear, 1, 3, 2},
		{ssm.Bilinear, complex(0, 2), complex(0, 1), complex(0.5, 0.5)},
		{ssm.Poly, 1, complex(math.E, 0), 1 + 0.5 + 1.0/6},
		{ssm.HighOrder, -2, complex(math.Exp(-2), 0), 0},
		{ssm.RK4, 2, complex(math.Exp(2), 0), 1 + 1 + 4.0/6 + 8.0/24},
	} {
		abar, g, err := exactMethod(c.m, bcOf(real(c.x), imag(c.x)))
		if err != nil {
			t.Fatalf("%v at %v: %v", c.m, c.x, err)
		}
		ga, gg := f(abar), f(g)
		for _, p := range [][2]complex128{{ga, c.abar}, {gg, c.g}} {
			if d := p[0] - p[1]; math.Hypot(real(d), imag(d)) > 4e-16*math.Max(1, math.Hypot(real(p[1]), imag(p[1]))) {
				t.Errorf("%v at %v: (Ā, g) = (%v, %v), want (%v, %v)", c.m, c.x, ga, gg, c.abar, c.g)
			}
		}
	}
	if _, _, err := exactMethod(ssm.Bilinear, bcOf(2, 0)); err == nil {
		t.Error("bilinear at its pole x = 2 accepted")
	}
	if _, _, err := exactMethod(ssm.ZOH, bcOf(2e6, 0)); err == nil {
		t.Error("e^(2e6) accepted")
	}
}

// TestExactScanInitialState: from an initial state the exact scan agrees
// with the float64 reference within its error model, and in two pieces
// (the first's last state passed on) with itself in one.
func TestExactScanInitialState(t *testing.T) {
	for _, isComplex := range []bool{false, true} {
		p := mamba1.Generate(mamba1.Spec{Batch: 1, Dim: 2, Seqlen: 9, Dstate: 3, Groups: 1, Method: ssm.RK4, Complex: isComplex, HasD: true, Dist: mamba1.Realistic}, 3)
		mamba1.SetInitialState(p, 4)
		whole, err := ExactScan(p)
		if err != nil {
			t.Fatal(err)
		}
		cmp, err := judge.CompareScan(p, &ssm.Output{Out: whole.Out, LastState: whole.LastState}, ssm.F64, nil, nil)
		if err != nil || !cmp.Passed(ssm.F64) {
			t.Fatalf("%s: the exact scan from a state is off the reference: %v %v", ssm.AKind(isComplex), cmp.Worst, err)
		}
		q, _ := p.Steps(4, 9)
		first, _ := p.Steps(0, 4)
		first.InitialState = p.InitialState
		o1, err := ExactScan(first)
		if err != nil {
			t.Fatal(err)
		}
		q.InitialState = o1.LastState
		o2, err := ExactScan(q)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range o2.LastState {
			if d := math.Abs(v - whole.LastState[i]); d > 1e-15*math.Max(1, math.Abs(v)) {
				t.Errorf("%s: last_state[%d] %v in pieces, %v whole", ssm.AKind(isComplex), i, v, whole.LastState[i])
			}
		}
	}
}

// TestExactGradMatchesDifferences holds the exact adjoint to the exact
// scan itself: for every input array of small problems (each method, real
// and complex A, every option, an initial state and a gradient of the last
// state), ⟨ExactGrad, v⟩ for a random direction v against the central
// difference (L(θ + εv) − L(θ − εv))/2ε at ε = 2⁻⁸⁰ in 256 bits, whose
// truncation (ε²) and rounding (2⁻²⁵⁶/ε) are below 2⁻¹⁵⁰. They agree to the
// rounding of the gradients to float64.
func TestExactGradMatchesDifferences(t *testing.T) {
	for _, m := range ssm.Methods() {
		for _, isComplex := range []bool{false, true} {
			s := mamba1.MambaBlock(m, 1, 2, 5, 2)
			s.Complex = isComplex
			p := mamba1.Generate(s, 3)
			mamba1.SetInitialState(p, 3)
			ct := mamba1.NewCotangent(p, 3, true)
			g, err := ExactGrad(p, ct, true)
			if err != nil {
				t.Fatal(err)
			}
			eps := new(big.Float).SetPrec(exactPrec).SetMantExp(bf(1), -80)
			for fi, f := range g.Fields() {
				v := make([]float64, len(f.Values))
				var want, mag float64
				for i := range v {
					v[i] = float64((i*7+fi*3)%5) - 2
					want += f.Values[i] * v[i]
					mag += math.Abs(f.Values[i] * v[i])
				}
				plus, err1 := exactLoss(p, ct, &inputs{field: f.Input, v: v, eps: eps})
				minus, err2 := exactLoss(p, ct, &inputs{field: f.Input, v: v, eps: bnew().Neg(eps)})
				if err1 != nil || err2 != nil {
					t.Fatal(err1, err2)
				}
				fd, _ := bquo(bsub(plus, minus), bmul(bf(2), eps)).Float64()
				if math.Abs(fd-want) > 1e-14*mag+1e-300 {
					t.Errorf("%v %s %s: ⟨ExactGrad, v⟩ = %.17g, differences %.17g", m, ssm.AKind(isComplex), f.Name, want, fd)
				}
			}
		}
	}
}

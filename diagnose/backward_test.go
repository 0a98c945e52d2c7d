package diagnose

import (
	"math"
	"strings"
	"testing"

	"ssmverify/judge"
	"ssmverify/mamba1"
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
	return mamba1.Scan(k.forward(p), ssm.Float64)
}

func (k forkLike) Backward(p *ssm.Problem, ct *ssm.Cotangent, _ ssm.DType, withInitial bool) (*ssm.Grads, error) {
	q := p.Clone()
	q.Method = k.bwd
	g, err := mamba1.ScanGrad(q, ct, withInitial)
	if err != nil {
		return nil, err
	}
	ungated := k.forward(p)
	ungated.Z = nil
	y, err := mamba1.Scan(ungated, ssm.Float64)
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
			ct := mamba1.NewCotangent(p, 5, false)
			f := Backward(c.kernel, p, ct, ssm.F64)
			if f.Tag != c.tag {
				t.Errorf("%s, complex %t: diagnosed %q, want %q: %s", c.name, isComplex, f.Tag, c.tag, f)
			}
		}
	}
}

// steps is a library whose gradients of the steps (du, ddelta, dz, dB, dC)
// are wrong on one side of step T: before it, those of a sweep that drops
// the adjoint carried back from T on (dout zeroed from T, the summed
// gradients from it too); from it on (after), the reference's times
// 1 + 1e-3, as from a wrong state carried into T. fade > 0 keeps the
// error to the fade steps next to T, as a lost adjoint or state decays.
type steps struct {
	t     int
	after bool
	fade  int
}

// near reports whether step i of a row of l steps is on k's wrong side
// and, with a fade, within it of T.
func (k steps) near(i, l int) bool {
	t := i % l
	if k.after {
		return t >= k.t && (k.fade == 0 || t < k.t+k.fade)
	}
	return t < k.t && (k.fade == 0 || t >= k.t-k.fade)
}

func (k steps) Scan(p *ssm.Problem, _ ssm.DType) (*ssm.Output, error) {
	return mamba1.Scan(p, ssm.Float64)
}

func (k steps) Backward(p *ssm.Problem, ct *ssm.Cotangent, _ ssm.DType, withInitial bool) (*ssm.Grads, error) {
	full, err := mamba1.ScanGrad(p, ct, withInitial)
	if err != nil || k.after {
		if err == nil {
			for _, s := range [][]float64{full.U, full.Delta, full.Z} {
				for i := range s {
					if k.near(i, p.Seqlen) {
						s[i] *= 1 + 1e-3
					}
				}
			}
		}
		return full, err
	}
	cut := &ssm.Cotangent{Out: append([]float64(nil), ct.Out...)}
	for i := range cut.Out {
		if i%p.Seqlen >= k.t {
			cut.Out[i] = 0
		}
	}
	g, err := mamba1.ScanGrad(p, cut, withInitial)
	if err != nil {
		return nil, err
	}
	for _, pair := range [][2][]float64{{g.U, full.U}, {g.Delta, full.Delta}, {g.Z, full.Z}} {
		for i := range pair[0] {
			if !k.near(i, p.Seqlen) {
				pair[0][i] = pair[1][i]
			}
		}
	}
	w := p.ElemWords()
	for _, pair := range [][2][]float64{{g.B, full.B}, {g.C, full.C}} {
		for i := range pair[0] {
			if !k.near(i/w, p.Seqlen) {
				pair[0][i] = pair[1][i]
			}
		}
	}
	return g, nil
}

// TestBackwardNamesChunkBoundary: gradients of the steps wrong only before
// step 64 (the adjoint from later steps dropped) or only from it on (a
// wrong state carried in), whether or not the error reaches the row's end,
// are bwd-chunk; wrong only before step 6, which no chunk of 32 or more ends
// at, are not.
func TestBackwardNamesChunkBoundary(t *testing.T) {
	for _, c := range []struct {
		name   string
		kernel steps
		chunk  bool
		cause  string
	}{
		{"adjoint dropped at 64", steps{64, false, 0}, true, "only before step 64"},
		{"adjoint dropped at 64, faded by step 40", steps{64, false, 24}, true, "only before step 64"},
		{"state wrong from 64", steps{64, true, 0}, true, "only from step 64 on"},
		{"state wrong from 64, faded by step 80", steps{64, true, 16}, true, "only from step 64 on"},
		{"adjoint dropped at 6", steps{6, false, 0}, false, ""},
	} {
		for _, isComplex := range []bool{false, true} {
			p := problem(ssm.Poly, isComplex, func(s *mamba1.Spec) { s.Seqlen = 100 })
			ct := mamba1.NewCotangent(p, 9, false)
			f := Backward(c.kernel, p, ct, ssm.F64)
			if (f.Tag == "bwd-chunk") != c.chunk || !strings.Contains(f.Cause, c.cause) {
				t.Errorf("%s, complex %t: diagnosed %q (%s), want bwd-chunk %t", c.name, isComplex, f.Tag, f.Cause, c.chunk)
			}
		}
	}
}

// recoveredLike is a backward whose dA carries an error of factor times
// the part of the recovered-state scale (mamba1.GradErrorScaleRecovered)
// beyond the standard one: what a kernel that forms Ā·h_{t−1} as h_t − β_t
// (Mamba's) adds where the subtraction cancels.
type recoveredLike struct {
	rightForward
	factor float64
}

// rightForward is a test library's forward: the reference's scan.
type rightForward struct{}

func (rightForward) Scan(p *ssm.Problem, _ ssm.DType) (*ssm.Output, error) {
	return mamba1.Scan(p, ssm.Float64)
}

func (k recoveredLike) Backward(p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType, withInitial bool) (*ssm.Grads, error) {
	g, err := mamba1.ScanGrad(p, ct, withInitial)
	if err != nil {
		return nil, err
	}
	std, err := mamba1.GradErrorScale(p, ct, withInitial, dt.Precision())
	if err != nil {
		return nil, err
	}
	rec, err := mamba1.GradErrorScaleRecovered(p, ct, withInitial, dt.Precision())
	if err != nil {
		return nil, err
	}
	u := dt.Precision().UnitRoundoff()
	for i := range g.A {
		g.A[i] += k.factor * u * (rec.Scale.A[i] - std.Scale.A[i])
	}
	return g, nil
}

// TestBackwardNamesRecoveredState: dA off by half the recovered-state
// scale's excess, at seqlen 1 (h_{t−1} = 0: the exact dA is 0, and a
// carried state leaves it so) is named bwd-state-recovered; off by ten
// times that excess it is not: dA alone is wrong (bwd-only:dA).
func TestBackwardNamesRecoveredState(t *testing.T) {
	s := mamba1.MambaBlock(ssm.ZOH, 1, 2, 1, 3)
	p := mamba1.Generate(s, 3)
	p.RoundTo(ssm.F32)
	ct := mamba1.NewCotangent(p, 3, false)
	for _, c := range []struct {
		factor float64
		tag    string
	}{{0.5, "bwd-state-recovered"}, {10, "bwd-only:dA"}} {
		f := Backward(recoveredLike{factor: c.factor}, p, ct, ssm.F32)
		if f.Tag != c.tag {
			t.Errorf("dA off by %g of the recovered state's excess: diagnosed %q (%s), want %q", c.factor, f.Tag, f.Cause, c.tag)
		}
	}
}

// nanLike returns the reference gradients with du[0] NaN.
type nanLike struct{ rightForward }

func (k nanLike) Backward(p *ssm.Problem, ct *ssm.Cotangent, _ ssm.DType, withInitial bool) (*ssm.Grads, error) {
	g, err := mamba1.ScanGrad(p, ct, withInitial)
	if err == nil {
		g.U[0] = math.NaN()
	}
	return g, err
}

// TestBackwardNamesNonFinite: a backward whose only failure is a NaN
// gradient (no ratio to rank) is diagnosed without a panic, placed in the
// backward (its forward is right), and the finding names the NaN.
func TestBackwardNamesNonFinite(t *testing.T) {
	p := mamba1.Generate(mamba1.MambaBlock(ssm.ZOH, 1, 2, 5, 3), 3)
	p.RoundTo(ssm.F32)
	ct := mamba1.NewCotangent(p, 3, false)
	f := Backward(nanLike{}, p, ct, ssm.F32)
	if f.Tag != "bwd-gradients:du (1 non-finite)" || !strings.Contains(f.Where, "du") || !strings.Contains(strings.Join(f.Evidence, "; "), "non-finite gradients where the reference is finite, the first du[0]: kernel NaN") {
		t.Errorf("diagnosed %q at %q (%v), want bwd-gradients:du (1 non-finite) with the NaN named", f.Tag, f.Where, f.Evidence)
	}
}

// TestGradientSet: which gradients are wrong names a relation where no
// slip fits — the derivatives through x, or one gradient's own formula —
// and nothing where NaN hides the set or the set says no more.
func TestGradientSet(t *testing.T) {
	set := func(names ...string) []judge.GradWorst {
		var g []judge.GradWorst
		for _, n := range names {
			g = append(g, judge.GradWorst{Name: n, Ratio: 100})
		}
		return g
	}
	for _, c := range []struct {
		failing []judge.GradWorst
		nan     int
		want    string
	}{
		{set("ddelta", "dA"), 0, "bwd-derivative"},
		{set("dA", "ddelta", "ddelta_bias"), 0, "bwd-derivative"},
		{set("dB"), 0, "bwd-only:dB"},
		{set("dD"), 0, "bwd-only:dD"},
		{set("du", "dB", "dA"), 0, ""},
		{set("dA"), 3, ""},
		{set("dA"), 0, "bwd-only:dA"},
	} {
		tag, _, ok := gradientSet(c.failing, c.nan)
		if tag != c.want || ok != (c.want != "") {
			t.Errorf("%v (NaN %d): %q, want %q", c.failing, c.nan, tag, c.want)
		}
	}
}

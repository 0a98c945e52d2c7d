package mamba1

import (
	"fmt"
	"math"
	"math/cmplx"
	"math/rand/v2"
	"strings"
	"testing"

	"ssmverify/ssm"

	"pgregory.net/rapid"
)

// coefAt is (Ā, g) at x through the method table CoefDeriv differentiates:
// Real on the real axis, Complex off it.
func coefAt(m ssm.Method, x complex128) (complex128, complex128) {
	if imag(x) == 0 {
		a, g := Real(m, real(x))
		return complex(a, 0), complex(g, 0)
	}
	return Complex(m, x)
}

// richardson is f'(x) along the real direction by the 4th-order central
// difference with step 10⁻³, extrapolated once more (Richardson): an
// independent check of the derivative, to about 1e-11 relative where f is
// smooth on the scale of the step (here: 0.11 from bilinear's pole at the
// closest).
func richardson(f func(complex128) complex128, x complex128) complex128 {
	d := func(h float64) complex128 {
		hc := complex(h, 0)
		return (-f(x+2*hc) + 8*f(x+hc) - 8*f(x-hc) + f(x-2*hc)) / complex(12*h, 0)
	}
	const h = 1e-3
	return (16*d(h/2) - d(h)) / 15
}

// The derivatives of the method table, tabulated where they are delicate:
// x → 0 (foh's series against its quotient), across foh's switch at
// |x| = 1/2, near bilinear's pole at x = 2 and at it, and large |x|.
// Against Richardson's differences of the method table.
func TestCoefDeriv(t *testing.T) {
	reals := []float64{0, 1e-300, -1e-12, 1e-8, -0.3, 0.49999, 0.5, -0.50001, 1, -2, -30, -700, 1.5, 1.999, -1e4}
	cpx := []complex128{1e-9i, 0.3 + 0.2i, -0.35 + 0.35i, 0.6i, -1 + 3i, -20 - 50i, 1.9 + 0.05i, -300 + 1e3i}
	for _, m := range ssm.Methods() {
		xs := append([]complex128(nil), cpx...)
		for _, x := range reals {
			xs = append(xs, complex(x, 0))
		}
		for _, x := range xs {
			da, dg := CoefDeriv(m, x)
			wa := richardson(func(z complex128) complex128 { a, _ := coefAt(m, z); return a }, x)
			wg := richardson(func(z complex128) complex128 { _, g := coefAt(m, z); return g }, x)
			// The differences' rounding: about 10u·|f|/h.
			fa, fg := coefAt(m, x)
			if cmplx.Abs(da-wa) > 1e-9*cmplx.Abs(wa)+1e-11*cmplx.Abs(fa) ||
				cmplx.Abs(dg-wg) > 1e-9*(cmplx.Abs(wg)+cmplx.Abs(wa))+1e-11*cmplx.Abs(fg) {
				t.Errorf("%v at x = %v: (dĀ, dg) = (%v, %v), differences give (%v, %v)", m, x, da, dg, wa, wg)
			}
		}
	}
	// The pole: bilinear's derivatives are infinite at x = 2, not NaN.
	if da, dg := CoefDeriv(ssm.Bilinear, 2); !cmplx.IsInf(da) || !cmplx.IsInf(dg) {
		t.Errorf("bilinear at the pole x = 2: (dĀ, dg) = (%v, %v), want infinite", da, dg)
	}
	// The limits at 0: dĀ = 1 for every method, dg = 0 for zoh, 1/2 else.
	for _, m := range ssm.Methods() {
		da, dg := CoefDeriv(m, 0)
		want := 0.5
		if m == ssm.ZOH {
			want = 0
		}
		if da != 1 || dg != complex(want, 0) {
			t.Errorf("%v at x = 0: (dĀ, dg) = (%v, %v), want (1, %g)", m, da, dg, want)
		}
	}
}

// loss is Σ ct.Out·out + Σ ct.LastState·last_state of the float64 forward:
// the function whose gradient ScanGrad returns.
func loss(p *ssm.Problem, ct *ssm.Cotangent) float64 {
	o, err := Scan(p, ssm.Float64)
	if err != nil {
		panic(err)
	}
	var s float64
	for i, v := range o.Out {
		s += ct.Out[i] * v
	}
	for i, v := range ct.LastState {
		s += v * o.LastState[i]
	}
	return s
}

// fieldOf is the array of p named f (a Problem field) for perturbing it.
func fieldOf(p *ssm.Problem, f string) []float64 {
	return map[string][]float64{"U": p.U, "Delta": p.Delta, "A": p.A, "B": p.B, "C": p.C, "D": p.D,
		"Z": p.Z, "DeltaBias": p.DeltaBias, "InitialState": p.InitialState}[f]
}

// directional compares, for one input array at a time, the gradient's
// inner product with a random direction v against the derivative of the
// loss along v by Richardson-extrapolated central differences of the
// float64 forward (which shares no code with the adjoint). It returns a
// description of the first disagreement beyond rel·Σ|gᵢvᵢ| (plus the
// differences' own rounding), or "".
func directional(p *ssm.Problem, ct *ssm.Cotangent, g *ssm.Grads, seed uint64, rel float64) string {
	r := rand.New(rand.NewPCG(seed, 23))
	for _, f := range g.Fields() {
		base := fieldOf(p, f.Input)
		v := make([]float64, len(base))
		var want, mag float64
		for i := range v {
			v[i] = r.NormFloat64()
			want += f.Values[i] * v[i]
			mag += math.Abs(f.Values[i] * v[i])
		}
		at := func(eps float64) float64 {
			q := p.Clone()
			s := fieldOf(q, f.Input)
			for i := range s {
				s[i] += eps * v[i]
			}
			return loss(q, ct)
		}
		d := func(h float64) float64 { return (-at(2*h) + 8*at(h) - 8*at(-h) + at(-2*h)) / (12 * h) }
		// The loss varies on the scale 1/(|a|·Σ|v|-weighted steps): the
		// step shrinks with the largest |a| so that the differences'
		// truncation (h⁶ times those powers) stays below rel.
		amax := 0.0
		for _, x := range p.A {
			amax = math.Max(amax, math.Abs(x))
		}
		h := 1e-3 / (1 + amax)
		got := (16*d(h/2) - d(h)) / 15
		noise := 1e-15 * math.Abs(at(0)) / h * 30
		if math.Abs(got-want) > rel*mag+noise {
			return fmt.Sprintf("%s: ⟨grad, v⟩ = %.12g, finite differences %.12g (Σ|gᵢvᵢ| = %.3g)", f.Name, want, got, mag)
		}
	}
	return ""
}

// ScanGrad against finite differences of the forward, for every input, on
// drawn problems of every method, real and complex A, every option, from
// h = 0 or an initial state, with and without a gradient of the last
// state.
func TestScanGradFiniteDifferences(t *testing.T) {
	l := Small
	l.MaxSeqlen, l.Dists = 12, []Dist{Realistic}
	rapid.Check(t, func(t *rapid.T) {
		c := Problems(l).Draw(t, "problem")
		p := c.Problem
		if rapid.Bool().Draw(t, "initial state") {
			SetInitialState(p, c.Seed)
		}
		ct := NewCotangent(p, c.Seed, rapid.Bool().Draw(t, "dlast_state"))
		g, err := ScanGrad(p, ct, p.InitialState != nil)
		if err != nil {
			t.Fatal(err)
		}
		if msg := directional(p, ct, g, c.Seed, 1e-7); msg != "" {
			t.Fatalf("%v: %s", c, msg)
		}
	})
}

// The check can fail: a gradient with one planted error (a factor 1.001 on
// one element of each array in turn, or zoh's coefficients for another
// method) is caught.
func TestScanGradFiniteDifferencesCanFail(t *testing.T) {
	s := MambaBlock(ssm.FOH, 1, 2, 6, 3)
	p := Generate(s, 1)
	SetInitialState(p, 1)
	ct := NewCotangent(p, 1, true)
	g, err := ScanGrad(p, ct, true)
	if err != nil {
		t.Fatal(err)
	}
	if msg := directional(p, ct, g, 1, 1e-7); msg != "" {
		t.Fatalf("the unplanted gradient fails: %s", msg)
	}
	for _, f := range g.Fields() {
		i := len(f.Values) / 2
		old := f.Values[i]
		f.Values[i] = old*1.001 + 1e-3
		if directional(p, ct, g, 1, 1e-7) == "" {
			t.Errorf("%s with element %d off by 0.1%%: not caught", f.Name, i)
		}
		f.Values[i] = old
	}
	q := p.Clone()
	q.Method = ssm.ZOH
	gz, _ := ScanGrad(q, ct, true)
	if directional(p, ct, gz, 1, 1e-7) == "" {
		t.Errorf("zoh's gradients for a foh problem: not caught")
	}
}

func TestScanGradRefusesBadInput(t *testing.T) {
	p := Generate(MambaBlock(ssm.ZOH, 1, 2, 4, 2), 1)
	for _, c := range []struct {
		ct   *ssm.Cotangent
		want string
	}{
		{nil, "cotangent: nil"},
		{&ssm.Cotangent{Out: make([]float64, 3)}, "len(Out) = 3, want 8"},
		{&ssm.Cotangent{Out: make([]float64, 8), LastState: make([]float64, 3)}, "len(LastState) = 3, want 4"},
	} {
		if _, err := ScanGrad(p, c.ct, false); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ScanGrad with %+v: error %v, want one containing %q", c.ct, err, c.want)
		}
	}
}

// termFlush: a partial product below η/u loses at most itself and at most
// η, times the factors after it; nothing where no partial product is that
// small or a factor is 0.
func TestTermFlush(t *testing.T) {
	const eta = 0x1p-126
	for _, c := range []struct {
		fs   []float64
		want float64 // in units of η
	}{
		{[]float64{1, 2, 3}, 0},                                     // nothing small
		{[]float64{1e-20, 1e-20, 1e30}, 2 * 1e-40 * 1e30 / eta},     // g² flushed: at most the term itself, 1e-10
		{[]float64{1e-20, 1e-20, 0.5}, 2 * 1e-40 * 0.5 / eta},       // the whole term is below η: at most itself
		{[]float64{1e-20, 0, 1e30}, 0},                              // an exact zero
		{[]float64{0x1p-100, 0x1p-100, 0x1p120}, 2 * 0x1p-80 / eta}, // below the forward's η·q (2⁻⁶): the term, 2⁻⁸⁰
	} {
		got := termFlush(ssm.Float32, c.fs...)
		if math.Abs(got-c.want) > 1e-9*c.want {
			t.Errorf("termFlush(%v) = %g η, want %g η", c.fs, got, c.want)
		}
	}
}

// A gated dy = dout·z·σ(z) that flushes in the kernel's precision before it
// meets the state: the backward's underflow bound for dC = k·dy·h must
// cover the whole term (FuzzBackward/26c8cc470d7b8f84: z = 6.7e-44 and
// h ≈ 10¹⁵ in float32, where a kernel's dC is 0 for −7.6e-32), and stay
// within a few times it (termFlush caps a loss by its term).
func TestGradScaleGatedDyFlush(t *testing.T) {
	p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 1, Dstate: 1, Groups: 1, Method: ssm.ZOH, VariableB: true,
		U: []float64{2}, Delta: []float64{0.076}, A: []float64{6.4e-10}, B: []float64{7.7e14}, C: []float64{0.076},
		D: []float64{6.4e-10}, Z: []float64{6.7e-44}, Softplus: true}
	ct := &ssm.Cotangent{Out: []float64{-0.002}}
	want, err := ScanGrad(p, ct, false)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := GradErrorScale(p, ct, false, ssm.Float32)
	if err != nil {
		t.Fatal(err)
	}
	allow := sc.Scale.C[0]*ssm.Float32.UnitRoundoff() + sc.Tiny.C[0]*ssm.Float32.Tiny()
	if term := math.Abs(want.C[0]); allow < term || allow > 10*term {
		t.Errorf("dC = %g flushes to 0 in float32; the error bound allows %g, want between 1 and 10 times it", want.C[0], allow)
	}

	// The same dy meeting a large u in dD = Σ dy·u (FuzzBackward/6ecf5b9501139d38:
	// highorder, complex A, dD = 3.6e-29 off by 0.4 %, where the bound had no
	// underflow part for dD).
	p.U[0] = 7.7e14
	if want, err = ScanGrad(p, ct, false); err != nil {
		t.Fatal(err)
	}
	if sc, err = GradErrorScale(p, ct, false, ssm.Float32); err != nil {
		t.Fatal(err)
	}
	allow = sc.Scale.D[0]*ssm.Float32.UnitRoundoff() + sc.Tiny.D[0]*ssm.Float32.Tiny()
	if term := math.Abs(want.D[0]); allow < term || allow > 10*term {
		t.Errorf("dD = %g flushes in float32; the error bound allows %g, want between 1 and 10 times it", want.D[0], allow)
	}
}

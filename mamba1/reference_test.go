package mamba1_test

import (
	"fmt"
	"math"
	"math/cmplx"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// convolve is the LTI form of the scan for constant Δ, B and C: the impulse
// response K[k] = Σₙ C[n]·Āₙᵏ·B̄[n] convolved with u, Āₙᵏ by Pow rather than
// by repeated multiplication. It returns the outputs of channel (b, d) and,
// per output, the error scale of the convolution itself: each term of the
// double sum carries about (k + t + N + 4)·u of its magnitude (the power,
// the products, a sum of t + 1 terms of N terms each).
func convolve(p *ssm.Problem, b, d int) (y, scale []float64) {
	N, L := p.Dstate, p.Seqlen
	row := (b*p.Dim + d) * L
	dt := p.Delta[row]
	if p.DeltaBias != nil {
		dt += p.DeltaBias[d]
	}
	if p.Softplus && dt <= 20 {
		dt = math.Log1p(math.Exp(dt))
	}
	abar := make([]complex128, N)
	bbar := make([]complex128, N)
	cvec := make([]complex128, N)
	for n := 0; n < N; n++ {
		var a, bv, cv complex128
		if p.Complex {
			i := 2 * (d*N + n)
			a, bv, cv = complex(p.A[i], p.A[i+1]), complex(p.B[i], p.B[i+1]), complex(p.C[i], p.C[i+1])
		} else {
			a, bv, cv = complex(p.A[d*N+n], 0), complex(p.B[d*N+n], 0), complex(p.C[d*N+n], 0)
		}
		var ab, g complex128
		if p.Complex {
			ab, g = mamba1.Complex(p.Method, complex(dt, 0)*a)
		} else {
			ra, rg := mamba1.Real(p.Method, dt*real(a))
			ab, g = complex(ra, 0), complex(rg, 0)
		}
		abar[n], bbar[n], cvec[n] = ab, complex(dt, 0)*g*bv, cv
	}
	K := make([]complex128, L)
	Kmag := make([]float64, L)
	for k := 0; k < L; k++ {
		for n := 0; n < N; n++ {
			pw := cmplx.Pow(abar[n], complex(float64(k), 0))
			if k == 0 {
				pw = 1
			}
			K[k] += cvec[n] * pw * bbar[n]
			Kmag[k] += float64(k+N+4) * cmplx.Abs(cvec[n]) * math.Pow(cmplx.Abs(abar[n]), float64(k)) * cmplx.Abs(bbar[n])
		}
	}
	y, scale = make([]float64, L), make([]float64, L)
	for t := 0; t < L; t++ {
		var acc complex128
		var mag float64
		for k := 0; k <= t; k++ {
			uu := p.U[row+t-k]
			acc += K[k] * complex(uu, 0)
			mag += (Kmag[k] + float64(t)*Kmag[k]/float64(k+N+4)) * math.Abs(uu)
		}
		v := real(acc)
		if p.Complex {
			v, mag = 2*v, 2*mag
		}
		uu := p.U[row+t]
		if p.D != nil {
			v += p.D[d] * uu
			mag += 2 * (math.Abs(v) + math.Abs(p.D[d]*uu))
		}
		if p.Z != nil {
			z := p.Z[row+t]
			// e^{−z} through e^{−z/2} squared: math.Exp is +Inf just below
			// log(MaxFloat64) although the true value is finite there.
			h := math.Exp(-z / 2)
			gate := z / (1 + h*h)
			mag = math.Abs(gate)*mag + 5*math.Abs(v*gate)
			v *= gate
		}
		y[t], scale[t] = v, mag
	}
	return y, scale
}

// For constant Δ, B and C the system is LTI and the recurrence equals the
// convolution y = Σₖ K[k]·u[t−k] — an independent algorithm. The two agree
// within u times the sum of their error scales.
func TestPropScanEqualsConvolution(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := mamba1.Specs(mamba1.Small).Draw(t, "spec")
		s.VariableB, s.VariableC = false, false
		seed := rapid.Uint64().Draw(t, "seed")
		p := mamba1.Generate(s, seed)
		for i := range p.Delta { // one Δ per channel: LTI
			p.Delta[i] = p.Delta[i-i%p.Seqlen]
		}
		out, err := mamba1.Scan(p, ssm.Float64)
		require.NoError(t, err)
		sc, err := mamba1.ErrorScale(p)
		require.NoError(t, err)
		for b := 0; b < p.Batch; b++ {
			for d := 0; d < p.Dim; d++ {
				y, cs := convolve(p, b, d)
				for tt := range y {
					i := (b*p.Dim+d)*p.Seqlen + tt
					if r := mamba1.Ratio(out.Out[i]-y[tt], sc.Out[i]+cs[tt], sc.TinyOut[i], ssm.Float64); !(r <= 1) {
						t.Fatalf("%v seed %d: out[%d,%d,%d] = %.17g, convolution %.17g: ratio %.3g > 1",
							s, seed, b, d, tt, out.Out[i], y[tt], r)
					}
				}
			}
		}
	})
}

// The float32 evaluation mode stays within the error scale: the scale is a
// bound on the error of an implementation that rounds like float32, so the
// ratio of Scan(Float32) against Scan(Float64) must stay ≤ 1 for every
// element, realistic and stressing inputs alike.
func TestPropFloat32ModeWithinScale(t *testing.T) {
	worst := 0.0
	rapid.Check(t, func(t *rapid.T) {
		c := mamba1.Problems(mamba1.Small).Draw(t, "case")
		p := c.Problem
		p.RoundToFloat32()
		ref, err := mamba1.Scan(p, ssm.Float64)
		require.NoError(t, err)
		f32, err := mamba1.Scan(p, ssm.Float32)
		require.NoError(t, err)
		sc, err := mamba1.ErrorScale(p)
		require.NoError(t, err)
		for i := range ref.Out {
			r := mamba1.Ratio(f32.Out[i]-ref.Out[i], sc.Out[i], sc.TinyOut[i], ssm.Float32)
			worst = math.Max(worst, r)
			if !(r <= 1) {
				t.Fatalf("%v: out[%d] float32 %.9g, float64 %.17g, scale %.3g: ratio %.3g > 1",
					c, i, f32.Out[i], ref.Out[i], sc.Out[i], r)
			}
		}
		cw := len(ref.LastState) / len(sc.LastState)
		for i := range sc.LastState {
			var d float64
			if cw == 2 {
				d = math.Hypot(f32.LastState[2*i]-ref.LastState[2*i], f32.LastState[2*i+1]-ref.LastState[2*i+1])
			} else {
				d = math.Abs(f32.LastState[i] - ref.LastState[i])
			}
			if r := mamba1.Ratio(d, sc.LastState[i], sc.TinyState[i], ssm.Float32); !(r <= 1) {
				t.Fatalf("%v: last_state[%d] error %.3g, scale %.3g: ratio %.3g > 1", c, i, d, sc.LastState[i], r)
			}
		}
	})
	t.Logf("largest float32-mode ratio: %.3g", worst)
}

// A complex problem whose imaginary parts are all 0 is the real problem
// written with the 2·Re convention: its output is twice the real output
// (without D, which is added after the doubling) and its state the same.
func TestPropComplexWithZeroImagIsTwiceReal(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := mamba1.Specs(mamba1.Limits{MaxBatch: 2, MaxDim: 4, MaxSeqlen: 20, MaxDstate: 6, Complex: 1}).Draw(t, "spec")
		s.HasD = false
		p := mamba1.Generate(s, rapid.Uint64().Draw(t, "seed"))
		q := p.Clone()
		q.Complex = true
		widen := func(v []float64) []float64 {
			w := make([]float64, 2*len(v))
			for i, x := range v {
				w[2*i] = x
			}
			return w
		}
		q.A, q.B, q.C = widen(p.A), widen(p.B), widen(p.C)
		rr, err := mamba1.Scan(p, ssm.Float64)
		require.NoError(t, err)
		cr, err := mamba1.Scan(q, ssm.Float64)
		require.NoError(t, err)
		for i := range rr.Out {
			if d := math.Abs(cr.Out[i] - 2*rr.Out[i]); d > 1e-12*math.Max(1, math.Abs(rr.Out[i])) {
				t.Fatalf("%v: complex out %.17g, 2·real %.17g", s, cr.Out[i], 2*rr.Out[i])
			}
		}
		for i, v := range rr.LastState {
			if d := math.Abs(cr.LastState[2*i] - v); d > 1e-12*math.Max(1, math.Abs(v)) || cr.LastState[2*i+1] != 0 {
				t.Fatalf("%v: complex state (%g, %g), real %g", s, cr.LastState[2*i], cr.LastState[2*i+1], v)
			}
		}
	})
}

// One step by hand: batch, dim, seqlen, dstate 1, every feature on.
func TestScanOneStepByHand(t *testing.T) {
	p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 2, Dstate: 1, Groups: 1, Method: ssm.Bilinear,
		Softplus: true, U: []float64{2, -1}, Delta: []float64{0.5, 30}, A: []float64{-1}, B: []float64{3}, C: []float64{0.5},
		D: []float64{0.25}, Z: []float64{1, 0}, DeltaBias: []float64{-0.5}}
	out, err := mamba1.Scan(p, ssm.Float64)
	require.NoError(t, err)
	dt := math.Log(2) // softplus(0.5 − 0.5)
	x := -dt
	h := dt / (1 - x/2) * 3 * 2
	y := (0.5*h + 0.25*2) * 1 / (1 + math.Exp(-1))
	assert.InEpsilon(t, y, out.Out[0], 1e-15)
	// Step 2: dt = 29.5 > 20 passes softplus unchanged; the gate z = 0 zeroes y.
	dt2 := 29.5
	x2 := -dt2
	h2 := (1+x2/2)/(1-x2/2)*h + dt2/(1-x2/2)*3*-1
	assert.Equal(t, 0.0, out.Out[1])
	assert.InEpsilon(t, h2, out.LastState[0], 1e-15)
}

func TestScanValidation(t *testing.T) {
	base := func() *ssm.Problem {
		return mamba1.Generate(mamba1.Spec{Batch: 2, Dim: 4, Seqlen: 3, Dstate: 2, Groups: 2, VariableB: true, HasD: true}, 1)
	}
	for _, tc := range []struct {
		name string
		edit func(p *ssm.Problem)
		want string
	}{
		{"zero batch", func(p *ssm.Problem) { p.Batch = 0 }, "Batch = 0, want 1…"},
		{"negative dstate", func(p *ssm.Problem) { p.Dstate = -1 }, "Dstate = -1"},
		{"groups", func(p *ssm.Problem) { p.Groups = 3 }, "Groups = 3 does not divide Dim = 4"},
		{"method", func(p *ssm.Problem) { p.Method = 6 }, "Method = 6"},
		{"short U", func(p *ssm.Problem) { p.U = p.U[:5] }, "len(U) = 5, want 24 (batch·dim·seqlen)"},
		{"short B", func(p *ssm.Problem) { p.B = p.B[:1] }, "len(B) = 1, want 24 (batch·groups·dstate·seqlen)"},
		{"long D", func(p *ssm.Problem) { p.D = append(p.D, 1) }, "len(D) = 5, want 4 (dim)"},
		{"complex A", func(p *ssm.Problem) { p.Complex = true }, "len(A) = 8, want 16 (dim·dstate×2 (complex interleaved))"},
	} {
		p := base()
		tc.edit(p)
		_, err := mamba1.Scan(p, ssm.Float64)
		assert.ErrorContains(t, err, tc.want, tc.name)
		_, err = mamba1.ErrorScale(p)
		assert.ErrorContains(t, err, tc.want, tc.name)
	}
	_, err := mamba1.Scan(base(), ssm.Precision(7))
	assert.ErrorContains(t, err, "precision 7")
}

func ExampleScan() {
	p := mamba1.Generate(mamba1.MambaBlock(ssm.RK4, 1, 2, 4, 3), 42)
	out, _ := mamba1.Scan(p, ssm.Float64)
	scale, _ := mamba1.ErrorScale(p)
	fmt.Printf("%d outputs, %d state words, scale of out[0] %.3g\n", len(out.Out), len(out.LastState), scale.Out[0])
	// Output: 8 outputs, 6 state words, scale of out[0] 0.738
}

// The magnitude bounds of ErrorScale bound the reference's own outputs and
// states (the fuzzers rely on them to know when an order of summation may
// overflow): |out| ≤ MagOut and |h| ≤ MagState, to rounding.
func TestPropMagnitudeBoundsValues(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := mamba1.Problems(mamba1.Small).Draw(t, "case")
		p := c.Problem
		ref, err := mamba1.Scan(p, ssm.Float64)
		require.NoError(t, err)
		sc, err := mamba1.ErrorScale(p)
		require.NoError(t, err)
		for i, y := range ref.Out {
			if !(math.Abs(y) <= sc.MagOut[i]*(1+1e-12)) {
				t.Fatalf("%v: |out[%d]| = %.17g > MagOut %.17g", c, i, math.Abs(y), sc.MagOut[i])
			}
		}
		cw := len(ref.LastState) / len(sc.MagState)
		for i := range sc.MagState {
			h := math.Abs(ref.LastState[cw*i])
			if cw == 2 {
				h = math.Hypot(ref.LastState[2*i], ref.LastState[2*i+1])
			}
			if !(h <= sc.MagState[i]*(1+1e-12)) {
				t.Fatalf("%v: |last_state[%d]| = %.17g > MagState %.17g", c, i, h, sc.MagState[i])
			}
		}
	})
}

// PathMagOut and PathMagState are running maxima of the magnitude bound H
// over the steps (and, for an output, over the row's states): at least the
// element's own MagState, never falling along a row, and at a row's last
// step an output's is the largest of its row's states'. So are PathScaleOut
// and PathScaleState of the error scale.
func TestPropPathBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := mamba1.Problems(mamba1.Small).Draw(t, "case").Problem
		sc, err := mamba1.ErrorScale(p)
		require.NoError(t, err)
		N, L := p.Dstate, p.Seqlen
		for row := 0; row < p.Batch*p.Dim; row++ {
			mag, scale := 0.0, 0.0
			for n := 0; n < N; n++ {
				i := row*N + n
				if !(sc.PathMagState[i] >= sc.MagState[i]) {
					t.Fatalf("row %d state %d: PathMagState %g < MagState %g", row, n, sc.PathMagState[i], sc.MagState[i])
				}
				if !(sc.PathScaleState[i] >= sc.LastState[i]) {
					t.Fatalf("row %d state %d: PathScaleState %g < the state's scale %g", row, n, sc.PathScaleState[i], sc.LastState[i])
				}
				mag, scale = math.Max(mag, sc.PathMagState[i]), math.Max(scale, sc.PathScaleState[i])
			}
			for s := 1; s < L; s++ {
				i := row*L + s
				if !(sc.PathMagOut[i] >= sc.PathMagOut[i-1] && sc.PathScaleOut[i] >= sc.PathScaleOut[i-1]) {
					t.Fatalf("row %d step %d: the path bounds fell (%g, %g after %g, %g)", row, s,
						sc.PathMagOut[i], sc.PathScaleOut[i], sc.PathMagOut[i-1], sc.PathScaleOut[i-1])
				}
			}
			last := row*L + L - 1
			if sc.PathMagOut[last] != mag || sc.PathScaleOut[last] != scale {
				t.Fatalf("row %d: the last output's path bounds %g, %g, the states' %g, %g", row,
					sc.PathMagOut[last], sc.PathScaleOut[last], mag, scale)
			}
		}
	})
}

// DecayOut and DecayState are the largest product of consecutive |Ā| up to
// each step: e^{Σ x} over the unstable stretch that ends there, at least |Ā|
// of the step itself (zoh, dstate 1, Δ = 1 without softplus: every x is a,
// and the products are powers of e^a).
func TestScaleDecayBound(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    float64
		want []float64 // DecayOut over 4 steps
	}{
		{"stable: one step's |Ā|", -1, []float64{math.Exp(-1), math.Exp(-1), math.Exp(-1), math.Exp(-1)}},
		{"neutral", 0, []float64{1, 1, 1, 1}},
		{"unstable: e^{t·a}", 2, []float64{math.Exp(2), math.Exp(4), math.Exp(6), math.Exp(8)}},
		{"beyond float32 after two steps", 50, []float64{math.Exp(50), math.Exp(100), math.Exp(150), math.Exp(200)}},
	} {
		p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 4, Dstate: 1, Groups: 1, Method: ssm.ZOH,
			U: []float64{0, 0, 0, 0}, Delta: []float64{1, 1, 1, 1}, A: []float64{tc.a}, B: []float64{1}, C: []float64{1}}
		sc, err := mamba1.ErrorScale(p)
		require.NoError(t, err, tc.name)
		for i, w := range tc.want {
			assert.InEpsilon(t, w, sc.DecayOut[i], 1e-12, "%s: step %d", tc.name, i)
		}
		assert.InEpsilon(t, tc.want[3], sc.DecayState[0], 1e-12, tc.name)
		// u = 0: the states and outputs are 0, so only the decay says that
		// a parallel scan's products leave float32's range.
		assert.Equal(t, 0.0, sc.MagOut[3], tc.name)
		assert.Equal(t, tc.a == 50, sc.DecayOut[1] > math.MaxFloat32, tc.name)
	}
}

// Under softplus a raw Δ (or delta_bias) of −Inf is the step Δ = 0 exactly,
// the limit of a very negative one: its error scale is that of Δ = −1000,
// whose softplus is 0 in float64 too, not σ(−∞)·∞ = NaN, which made every
// later output of the row unjudgeable (FuzzScan/02547bf9f1271ad2 on the
// H200).
func TestScaleSoftplusOfMinusInf(t *testing.T) {
	inf := math.Inf(-1)
	for _, tc := range []struct {
		name          string
		delta, deltaL []float64 // raw Δ, and the finite limit: −1000 for −Inf
		bias, biasL   float64
	}{
		{"Δ = −Inf at step 0", []float64{inf, 0.5, 0.25}, []float64{-1000, 0.5, 0.25}, 0, 0},
		{"delta_bias = −Inf", []float64{0.5, 0.5, 0.25}, []float64{0.5, 0.5, 0.25}, inf, -1000},
	} {
		scale := func(delta []float64, bias float64) *mamba1.Scale {
			p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 3, Dstate: 1, Groups: 1, Method: ssm.ZOH,
				Softplus: true, U: []float64{3, 2, 1}, Delta: delta, DeltaBias: []float64{bias},
				A: []float64{-1}, B: []float64{0.5}, C: []float64{1}}
			sc, err := mamba1.ErrorScale(p)
			require.NoError(t, err, tc.name)
			return sc
		}
		got, want := scale(tc.delta, tc.bias), scale(tc.deltaL, tc.biasL)
		for i := range want.Out {
			assert.False(t, math.IsNaN(got.Out[i]), "%s: out[%d] is NaN", tc.name, i)
			assert.Equal(t, want.Out[i], got.Out[i], "%s: out[%d]", tc.name, i)
		}
		assert.Equal(t, want.LastState, got.LastState, tc.name)
	}
}

// The error scale is linear in u (every term of the analysis carries one
// factor of |u| or of a state made from it), so scaling u by a power of two
// scales Out and LastState by it exactly, up to the analysis's own
// roundings, wherever the bounds themselves stay in range. FuzzScan found
// the φ1 term of the input coefficient's bound, Δ·|B|·u·sg, computed as 0
// where Δ·|B|·u alone underflowed float64 (|B| = 2e-81, u = 4e-264, sg =
// 1e111): an output's scale 83× short, and a correct kernel rejected.
func TestScaleHomogeneousInU(t *testing.T) {
	for _, tc := range []struct {
		name    string
		m       ssm.Method
		complex bool
		a, b    []float64
		u       float64
	}{
		{"foh, real, x = 250: Δ·|B|·u underflows", ssm.FOH, false, []float64{250}, []float64{2e-81}, 4e-264},
		{"foh, complex (FuzzScan-2903bcf9994869ac's state)", ssm.FOH, true, []float64{709.78, -0.0025},
			[]float64{6.3e-199, -2.03e-81}, -3.66e-264},
		{"ordinary", ssm.ZOH, false, []float64{-1}, []float64{0.5}, 2},
	} {
		c := []float64{1}
		if tc.complex {
			c = []float64{0.9, 0.5}
		}
		scale := func(u float64) *mamba1.Scale {
			p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 2, Dstate: 1, Groups: 1, Method: tc.m, Complex: tc.complex,
				U: []float64{u, u / 2}, Delta: []float64{1, 0.5}, A: tc.a, B: tc.b, C: c}
			sc, err := mamba1.ErrorScale(p)
			require.NoError(t, err, tc.name)
			return sc
		}
		small, big := scale(tc.u), scale(tc.u*0x1p300)
		for i := range small.Out {
			assert.InEpsilon(t, big.Out[i]*0x1p-300, small.Out[i], 1e-13, "%s: out[%d]", tc.name, i)
		}
		assert.InEpsilon(t, big.LastState[0]*0x1p-300, small.LastState[0], 1e-13, "%s: last state", tc.name)
	}
}

// A partial product of the input term β = Δ·g·B·u that underflows loses
// up to η, and the factors multiplied after it scale the loss: the float32
// evaluation must stay within the scale there too. The first case is
// FuzzScan/904e6309af6a319c (the CUDA build, H200) cut to one row: Δ, a
// and B all −1.04e-21, so Δ·B = 1.07e-42 is a float32 subnormal of 3
// digits, times u of up to 2.7e38; the float32 evaluation was 127 times
// its scale off before flushLoss.
func TestScaleFlushedPartialProduct(t *testing.T) {
	const c = -1.03636966192693e-21
	us := []float64{1e-08, -9.17e-27, -1.1541e+38, -1.7665e-19, -1.0634e+26, 1.1755e-38, -7.5e-28, -0.0087, 2.09e-36,
		0.0192, -1.5e-31, 1, -2.0228, -1.14e-17, 2.6e-09, -1, -2.6536e+38, 3.1416, -0.193, -0.51, 0.5488}
	cs := []float64{0.105, -0.0765, -0.564, 0.110, 0.651, 0.474, -0.667, -0.105, 0.826, -0.901, 0.850, 0.0956}
	for _, tc := range []struct {
		name    string
		complex bool
		a, b    []float64
	}{
		{"zoh, complex (FuzzScan/904e6309af6a319c)", true, []float64{c, c}, []float64{c, c}},
		{"zoh, real", false, []float64{c}, []float64{c}},
		{"zoh, real, B = −1e-17: Δ·B = 1.04e-38, just below η", false, []float64{c}, []float64{-1e-17}},
	} {
		L := len(us)
		p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: L, Dstate: 1, Groups: 1, Method: ssm.ZOH, Complex: tc.complex,
			VariableC: true, U: us, Delta: make([]float64, L), A: tc.a, B: tc.b, C: make([]float64, L*len(tc.a))}
		for i := range p.Delta {
			p.Delta[i] = c
		}
		for i := range p.C {
			p.C[i] = cs[i%len(cs)]
		}
		p.RoundToFloat32()
		sc, err := mamba1.ErrorScale(p)
		require.NoError(t, err, tc.name)
		for i, r := range float32Ratios(t, p, sc) {
			assert.LessOrEqual(t, r, 1.0, "%s: out[%d]", tc.name, i)
		}
	}
}

// float32Ratios is the test ratio of every output of the float32 evaluation
// of p against the float64 reference, by the scale sc.
func float32Ratios(t *testing.T, p *ssm.Problem, sc *mamba1.Scale) []float64 {
	exact, err := mamba1.Scan(p, ssm.Float64)
	require.NoError(t, err)
	f32, err := mamba1.Scan(p, ssm.Float32)
	require.NoError(t, err)
	rs := make([]float64, len(exact.Out))
	for i := range rs {
		rs[i] = mamba1.Ratio(math.Abs(f32.Out[i]-exact.Out[i]), sc.Out[i], sc.TinyOut[i], ssm.Float32)
	}
	return rs
}

// Where the rounding of x can carry bilinear's x onto its pole, the
// first-order scale is not a bound: FuzzScan/1e247606c600d547 cut to one
// state. Δ = 1 + 2⁻²³ and a = 2 − 2⁻²³ + 1.94e-23i give an exact
// x 1.2e-7 past the pole that float32 rounds to exactly 2: its Ā is 2e23
// instead of −3.4e7. ErrorScaleIn(p, Float32) bounds the float32 evaluation
// (the scale +Inf from that step on), where ErrorScale is off by 10¹⁰ and
// more; x a few ulps from the pole keeps a finite scale, and x far from it
// ErrorScale's.
func TestScaleBilinearRoundedOntoPole(t *testing.T) {
	pole := func(dt, are float64) *ssm.Problem {
		p := &ssm.Problem{Batch: 1, Dim: 1, Seqlen: 4, Dstate: 1, Groups: 1, Method: ssm.Bilinear, Complex: true,
			U: []float64{1, 3.14e-13, 2, 1}, Delta: []float64{0.5, dt, 0.25, 0.5},
			A: []float64{are, 1.94e-23}, B: []float64{-1e-21, -1e-21}, C: []float64{1, 0.5}}
		p.RoundToFloat32()
		return p
	}
	for _, tc := range []struct {
		name      string
		dt, are   float64 // Δ at step 1; Re a
		onPole    bool    // the scale is +Inf from step 1 on
		firstLike bool    // within 0.1 % of ErrorScale's
	}{
		{"x rounds onto the pole (FuzzScan/1e247606c600d547)", 1 + 0x1p-23, 2 - 0x1p-23, true, false},
		{"x = 2 − 2⁻²³, within the model's rounding of x (2 ulps in complex) of the pole", 1, 2 - 0x1p-23, true, false},
		{"x = 2 − 2⁻²⁰: 1 − x/2 four times that rounding's reach, F = 4/3", 1, 2 - 0x1p-20, false, false},
		{"x = 1.99, far from the pole in float32 ulps", 1, 1.99, false, true},
	} {
		p := pole(tc.dt, tc.are)
		first, err := mamba1.ErrorScale(p)
		require.NoError(t, err, tc.name)
		sc, err := mamba1.ErrorScaleIn(p, ssm.Float32)
		require.NoError(t, err, tc.name)
		worstFirst := 0.0
		for _, r := range float32Ratios(t, p, first) {
			worstFirst = math.Max(worstFirst, r)
		}
		for i, r := range float32Ratios(t, p, sc) {
			assert.LessOrEqual(t, r, 1.0, "%s: out[%d]", tc.name, i)
			assert.Equal(t, tc.onPole && i >= 1, math.IsInf(sc.Out[i], 1), "%s: out[%d] scale %g", tc.name, i, sc.Out[i])
			if tc.firstLike {
				assert.InEpsilon(t, first.Out[i], sc.Out[i], 1e-3, "%s: out[%d]", tc.name, i)
			}
		}
		if tc.dt != 1 {
			assert.Greater(t, worstFirst, 1e10, "%s: the first-order scale should miss the float32 error", tc.name)
		}
	}
}

// TestPrecisionConstants: u, η and the largest finite number of each
// precision, against the math package's own constants.
func TestPrecisionConstants(t *testing.T) {
	for _, tc := range []struct {
		p                ssm.Precision
		u, tiny, largest float64
	}{
		{ssm.Float32, 0x1p-24, math.SmallestNonzeroFloat32 * 0x1p23, math.MaxFloat32},
		{ssm.Float64, 0x1p-53, math.SmallestNonzeroFloat64 * 0x1p52, math.MaxFloat64},
		{ssm.Float64Natural, 0x1p-53, math.SmallestNonzeroFloat64 * 0x1p52, math.MaxFloat64},
	} {
		if u, tiny, l := tc.p.UnitRoundoff(), tc.p.Tiny(), tc.p.Largest(); u != tc.u || tiny != tc.tiny || l != tc.largest {
			t.Errorf("%v: u %g, η %g, largest %g; want %g, %g, %g", tc.p, u, tiny, l, tc.u, tc.tiny, tc.largest)
		}
	}
}

// TestScanResumes: the float64 reference scanned in pieces, each from the
// last state of the one before, is the one-call scan bit for bit (the same
// operations in the same order), with and without an initial state.
func TestScanResumes(t *testing.T) {
	for _, isComplex := range []bool{false, true} {
		for _, m := range ssm.Methods() {
			s := mamba1.Spec{Batch: 2, Dim: 3, Seqlen: 23, Dstate: 4, Groups: 3, Method: m, Complex: isComplex,
				VariableB: true, VariableC: true, Softplus: true, HasD: true, HasZ: true, HasBias: true, Dist: mamba1.Realistic}
			p := mamba1.Generate(s, 3)
			for _, h0 := range []bool{false, true} {
				if h0 {
					mamba1.SetInitialState(p, 4)
				}
				whole, err := mamba1.Scan(p, ssm.Float64)
				if err != nil {
					t.Fatal(err)
				}
				state := p.InitialState
				out := make([]float64, p.OutLen())
				cuts := []int{0, 1, 2, 9, 10, 22, 23}
				for k := 1; k < len(cuts); k++ {
					q, err := p.Steps(cuts[k-1], cuts[k])
					if err != nil {
						t.Fatal(err)
					}
					q.InitialState = state
					o, err := mamba1.Scan(q, ssm.Float64)
					if err != nil {
						t.Fatal(err)
					}
					state = o.LastState
					p.PutSteps(out, o.Out, cuts[k-1], cuts[k])
				}
				for i := range whole.Out {
					if math.Float64bits(whole.Out[i]) != math.Float64bits(out[i]) {
						t.Fatalf("%v %s h0=%t: out[%d] = %v in pieces, %v in one call", m, ssm.AKind(isComplex), h0, i, out[i], whole.Out[i])
					}
				}
				for i := range whole.LastState {
					if math.Float64bits(whole.LastState[i]) != math.Float64bits(state[i]) {
						t.Fatalf("%v %s h0=%t: last_state[%d] differs", m, ssm.AKind(isComplex), h0, i)
					}
				}
			}
		}
	}
}

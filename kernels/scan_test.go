package kernels

import (
	"bytes"
	"fmt"
	"math"
	"math/cmplx"
	"ssmverify/cudalib"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// ratioLimit bounds the scaled error ratio of these binding tests. The
// error scale is a first-order bound (a correct float32-rounding evaluation
// stays below 1), and a kernel's libm adds a few ulp per call (CUDA's expf,
// exp2f, expm1f are within 2 ulp); 16 leaves room for that while a logic
// error shows up at 10⁶ (float32) or 10¹⁴ (float64). The verification
// suite sets its thresholds from measured maxima.
const ratioLimit = 16

func precisionOf(dt ssm.DType) ssm.Precision {
	if dt == ssm.F32 {
		return ssm.Float32
	}
	return ssm.Float64
}

// worstRatio compares a kernel output with the reference and returns the
// largest ratio and where it is.
func worstRatio(p *ssm.Problem, got *ssm.Output, dt ssm.DType) (float64, string) {
	ref, err := mamba1.Scan(p, ssm.Float64)
	if err != nil {
		panic(err)
	}
	sc, err := mamba1.ErrorScale(p)
	if err != nil {
		panic(err)
	}
	prec := precisionOf(dt)
	worst, where := 0.0, ""
	for i := range ref.Out {
		r := mamba1.Ratio(got.Out[i]-ref.Out[i], sc.Out[i], sc.TinyOut[i], prec)
		if math.IsNaN(got.Out[i]) {
			r = math.Inf(1)
		}
		if r > worst || math.IsNaN(r) {
			worst, where = r, fmt.Sprintf("out[%d] = %.9g, reference %.17g", i, got.Out[i], ref.Out[i])
		}
	}
	cw := len(ref.LastState) / len(sc.LastState)
	for i := range sc.LastState {
		var d float64
		if cw == 2 {
			d = cmplx.Abs(complex(got.LastState[2*i]-ref.LastState[2*i], got.LastState[2*i+1]-ref.LastState[2*i+1]))
		} else {
			d = got.LastState[i] - ref.LastState[i]
		}
		if r := mamba1.Ratio(d, sc.LastState[i], sc.TinyState[i], prec); r > worst || math.IsNaN(r) {
			worst, where = r, fmt.Sprintf("last_state[%d] error %.3g", i, d)
		}
	}
	return worst, where
}

// scanRatio runs p through the library in dtype dt — its inputs rounded to
// float32 first for F32, so that the reference sees what the kernel sees —
// and returns worstRatio's largest ratio and where it is.
func scanRatio(t *testing.T, l *cudalib.Library, p *ssm.Problem, dt ssm.DType) (float64, string) {
	t.Helper()
	if dt == ssm.F32 {
		p.RoundToFloat32()
	}
	got, err := l.Scan(p, dt)
	require.NoError(t, err, p.Shape())
	return worstRatio(p, got, dt)
}

// Every method × dtype × real/complex × feature combination, on small
// shapes that exercise groups, odd seqlen and dstate, against the reference.
func TestScanMatchesReference(t *testing.T) {
	l := open(t)
	type feat struct{ varB, varC, softplus, D, z, bias bool }
	feats := []feat{
		{}, {varB: true, varC: true, softplus: true, D: true, z: true, bias: true},
		{varB: true}, {varC: true}, {softplus: true, bias: true}, {D: true}, {z: true},
	}
	worst := map[ssm.DType]float64{}
	for _, m := range ssm.Methods() {
		for _, dt := range ssm.DTypes() {
			for _, isComplex := range []bool{false, true} {
				for fi, f := range feats {
					for _, dist := range []mamba1.Dist{mamba1.Realistic, mamba1.Stress} {
						s := mamba1.Spec{Batch: 2, Dim: 6, Seqlen: 37, Dstate: 5, Groups: 3, Method: m, Complex: isComplex,
							VariableB: f.varB, VariableC: f.varC, Softplus: f.softplus, HasD: f.D, HasZ: f.z, HasBias: f.bias, Dist: dist}
						r, where := scanRatio(t, l, mamba1.Generate(s, uint64(fi+1)), dt)
						worst[dt] = math.Max(worst[dt], r)
						if !(r <= ratioLimit) {
							t.Errorf("%v %v: ratio %.3g > %d at %s", s, dt, r, ratioLimit, where)
						}
					}
				}
			}
		}
	}
	t.Logf("largest ratio: fp32 %.3g, fp64 %.3g (limit %d)", worst[ssm.F32], worst[ssm.F64], ratioLimit)
}

// Shapes at the edges: one element, seqlen not a multiple of any chunk, the
// library's maximum dstate, dstate just past a power of two.
func TestScanShapes(t *testing.T) {
	l := open(t)
	for _, sh := range [][5]int{{1, 1, 1, 1, 1}, {1, 1, 1, l.MaxDstate(), 1}, {2, 4, 257, 33, 2}, {1, 3, 1000, 17, 1}, {3, 2, 5, 64, 2}, {1, 1, 3, 129, 1}} {
		for _, dt := range ssm.DTypes() {
			s := mamba1.MambaBlock(ssm.RK4, sh[0], sh[1], sh[2], sh[3])
			s.Groups = sh[4]
			r, where := scanRatio(t, l, mamba1.Generate(s, 7), dt)
			assert.LessOrEqual(t, r, float64(ratioLimit), "%v %v: %s", s, dt, where)
		}
	}
}

// A grid of 16384 rows (4096 blocks of the CUDA build's scan) with full
// tiles and a partial one, for the methods whose kernels differ most in
// their fast paths: a block's rows share its shared-memory carries, and a
// kernel that indexes them by the wrong warp fails here first. Any backend
// must pass it.
func TestScanManyRows(t *testing.T) {
	if testing.Short() {
		t.Skip("2.2 M steps per method")
	}
	l := open(t)
	for _, m := range []ssm.Method{ssm.Bilinear, ssm.Poly, ssm.ZOH} {
		s := mamba1.MambaBlock(m, 2, 8192, 136, 2)
		r, where := scanRatio(t, l, mamba1.Generate(s, 11), ssm.F32)
		assert.LessOrEqual(t, r, float64(ratioLimit), "%v: %s", s, where)
	}
}

// TestScanUnstableProducts: mamba1.UnstableProducts for every method, dtype
// and real/complex A (the suite's TestUnstableProducts judges a user's
// library on the same problems). The CPU build, which is sequential, passes
// by construction.
func TestScanUnstableProducts(t *testing.T) {
	l := open(t)
	for _, m := range ssm.Methods() {
		for _, dt := range ssm.DTypes() {
			for _, isComplex := range []bool{false, true} {
				p := mamba1.UnstableProducts(m, dt, isComplex)
				r, where := scanRatio(t, l, p, dt)
				assert.LessOrEqual(t, r, float64(ratioLimit), "%v %v %s: %s", m, dt, ssm.AKind(isComplex), where)
			}
		}
	}
}

// Rows whose |a| sit at the edges of the range where the CUDA build's float
// fast path forms Δ·g of poly and rk4 as a polynomial in Δ with per-state
// coefficients c_k·a^k (scan_terms.cuh's dpoly_coefs: 2^-20 ≤ |a| ≤ 2^20, or
// a = 0) and just outside it, where the row must take the exact path: a
// coefficient formed outside the range underflows or overflows (|a| =
// 10⁻³⁰ makes a³/24 zero). Δ is scaled with 1/|a| so that x = Δ·a spans
// about [−60, −1/4], where every term of g matters (rk4's x³/24 is −9000
// at x = −60) and every e^x is normal; seqlen covers full tiles and a
// partial one. Every method runs, so the other fast votes see these rows
// too.
func TestScanFastPathScales(t *testing.T) {
	l := open(t)
	rows := []struct{ mag, step float64 }{ // |a| of the row's state n: mag·(1 + step·n/dstate)
		{0x1p20, -0.5},                  // the top of the range
		{0x1p20 + 1, 0.5},               // just above it
		{0x1p-20, 0.5},                  // the bottom of the range
		{0x1p-20 * (1 - 0x1p-20), -0.5}, // just below it
		{0, 0},                          // a = 0 (even states) and a = −1 (odd)
		{1e-30, 1},                      // far below it
	}
	worst := map[ssm.DType]float64{}
	for _, m := range ssm.Methods() {
		for _, dt := range ssm.DTypes() {
			s := mamba1.Spec{Batch: 2, Dim: len(rows), Seqlen: 2*256 + 37, Dstate: 16, Groups: 1, Method: m,
				VariableB: true, VariableC: true, HasD: true, HasZ: true, Dist: mamba1.Realistic}
			p := mamba1.Generate(s, 13)
			for d, row := range rows {
				mag := row.mag
				if mag == 0 {
					mag = 1 // the row of a = 0 and a = −1
				}
				for n := 0; n < s.Dstate; n++ {
					a := row.mag * (1 + row.step*float64(n)/float64(s.Dstate))
					if row.mag == 0 {
						a = float64(n % 2)
					}
					p.A[d*s.Dstate+n] = -a
				}
				for b := 0; b < s.Batch; b++ {
					for i := 0; i < s.Seqlen; i++ {
						// Δ·mag log-spaced over [1/2, 40], in a scrambled order
						f := float64((i*7919+b*104729)%1000) / 999
						p.Delta[(b*s.Dim+d)*s.Seqlen+i] = 0.5 * math.Pow(80, f) / mag
					}
				}
			}
			r, where := scanRatio(t, l, p, dt)
			worst[dt] = math.Max(worst[dt], r)
			assert.LessOrEqual(t, r, float64(ratioLimit), "%v %v: %s (row d = index / seqlen mod dim)", s, dt, where)
		}
	}
	t.Logf("largest ratio: fp32 %.3g, fp64 %.3g (limit %d)", worst[ssm.F32], worst[ssm.F64], ratioLimit)
}

// foh's branches on the GPU's float fast path, chosen per state and tile
// of 256 steps: near (every |x| = |Δ·a| below 3/4: φ1 by a polynomial), far
// (every |x| at least 1/2 and |a| ≥ 2^-100: Δ·φ1 = (e^x − 1)/a from the exp)
// and exact (the rest: both, selected per step). Each row's Δ spans
// [lo, 2·lo] in a scrambled order, lo itself at the first step of every
// tile, and in the first rows the states' |a| = 2^((n − 8)/4) span
// 1/4 … 3.4, so that one row's states fall on every branch and on the
// boundaries: at lo = 1/2 states 0–6 are near, 7 exact, 8 far with
// |x| = 1/2 exactly at its smallest steps and 9–15 far; at lo just below
// 1/2 state 8 is exact. The CPU build has one path; it is held to the same
// bound.
func TestScanFohBranches(t *testing.T) {
	l := open(t)
	spread := func(n int) float64 { return math.Exp2(float64(n-8) / 4) } // |a| of state n: 1/4 … 3.4
	rows := []struct {
		lo   float64 // Δ in [lo, 2·lo]
		aMag func(n int) float64
	}{
		{0.5, spread},
		{0.5 * (1 - 0x1p-20), spread},
		{0.03, spread}, // every state near
		{0.15, spread}, // near, 14 exact, 15 far
		{3, spread},    // every state far
		{0x1p110, func(int) float64 { return 0x1p-110 }},     // |x| ≥ 1/2 but 1/a too large: exact
		{0x1p90, func(int) float64 { return 0x1p-90 }},       // far, 1/a = 2^90
		{0.4, func(n int) float64 { return float64(n % 2) }}, // a = 0 beside a = −1
	}
	worst := map[ssm.DType]float64{}
	for _, dt := range ssm.DTypes() {
		s := mamba1.Spec{Batch: 2, Dim: len(rows), Seqlen: 2*256 + 37, Dstate: 16, Groups: 1, Method: ssm.FOH,
			VariableB: true, VariableC: true, HasD: true, HasZ: true, Dist: mamba1.Realistic}
		p := mamba1.Generate(s, 17)
		for d, row := range rows {
			for n := 0; n < s.Dstate; n++ {
				p.A[d*s.Dstate+n] = -row.aMag(n)
			}
			for b := 0; b < s.Batch; b++ {
				for i := 0; i < s.Seqlen; i++ {
					f := float64((i*7919+b*104729)%1000) / 999
					if i%256 == 0 {
						f = 0
					}
					p.Delta[(b*s.Dim+d)*s.Seqlen+i] = row.lo * (1 + f)
				}
			}
		}
		r, where := scanRatio(t, l, p, dt)
		worst[dt] = r
		assert.LessOrEqual(t, r, float64(ratioLimit), "%v: %s (row d = index / seqlen mod dim)", dt, where)
	}
	t.Logf("largest ratio: fp32 %.3g, fp64 %.3g (limit %d)", worst[ssm.F32], worst[ssm.F64], ratioLimit)
}

func TestDiscretizeMatchesReference(t *testing.T) {
	l := open(t)
	xs := []float64{-1e3, -50, -3, -1, -0.3, -1e-3, -1e-7, 0, 1e-7, 1e-3, 0.5, 1, 1.9, 3, 10}
	for i, x := range xs {
		xs[i] = float64(float32(x)) // exactly representable in both dtypes
	}
	for _, m := range ssm.Methods() {
		for _, dt := range ssm.DTypes() {
			u := precisionOf(dt).UnitRoundoff()
			// Real: delta 1, A = x.
			delta := make([]float64, len(xs))
			for i := range delta {
				delta[i] = 1
			}
			abar, bcoef, err := l.Discretize(m, dt, false, delta, xs)
			require.NoError(t, err)
			for i, x := range xs {
				ra, rg := mamba1.Real(m, x)
				// Ā's error: exp's conditioning |x| plus a few ulp.
				tolA := (4 + 2*math.Abs(x)) * u * math.Abs(ra)
				if m == ssm.Bilinear {
					tolA = 8 * u * (1 + math.Abs(x)) * (1 + math.Abs(ra)) / math.Abs(1-x/2)
				}
				assert.InDelta(t, ra, abar[i], tolA+1e-300, "%v %v Ā(%g)", m, dt, x)
				assert.InDelta(t, rg, bcoef[i], 16*u*(1+math.Abs(x)*math.Abs(rg))+1e-300, "%v %v g(%g)", m, dt, x)
			}
			// Complex: the same x rotated.
			a := make([]float64, 2*len(xs))
			for i, x := range xs {
				a[2*i], a[2*i+1] = float64(float32(x)), float64(float32(0.7*x+0.1))
			}
			cabar, cbcoef, err := l.Discretize(m, dt, true, delta, a)
			require.NoError(t, err)
			for i := range xs {
				z := complex(a[2*i], a[2*i+1])
				ra, rg := mamba1.Complex(m, z)
				ga, gg := complex(cabar[2*i], cabar[2*i+1]), complex(cbcoef[2*i], cbcoef[2*i+1])
				// The error model's scales (mamba1.DiscretizeScale, Δ = 1)
				// at the suite's threshold 4. A hand-made bound here used to
				// divide bilinear's whole tolerance by |1 − z/2|², which leaves
				// out the quotient's own rounding (≈ u·|Ā|) at large |z|: it
				// failed a correct GPU build at z = −1000 − 700i (error 0.16
				// ulp of Ā against a bound of 0.1 ulp).
				sA, sB := mamba1.DiscretizeScale(m, 1, z, true)
				prec := precisionOf(dt)
				assert.LessOrEqual(t, mamba1.Ratio(cmplx.Abs(ga-ra), sA, 2, prec), 4.0, "%v %v Ā(%v)", m, dt, z)
				assert.LessOrEqual(t, mamba1.Ratio(cmplx.Abs(gg-rg), sB, 2, prec), 4.0, "%v %v g(%v)", m, dt, z)
			}
		}
	}
}

// The kernel never changes its inputs.
func TestInputsUnchanged(t *testing.T) {
	l := open(t)
	for _, dt := range ssm.DTypes() {
		for _, isComplex := range []bool{false, true} {
			s := mamba1.MambaBlock(ssm.Bilinear, 2, 4, 19, 6)
			s.Complex = isComplex
			b, err := l.NewScanBuffers(mamba1.Generate(s, 3), dt)
			require.NoError(t, err)
			var before [][]byte
			for _, in := range b.Inputs() {
				before = append(before, bytes.Clone(in.Bytes()))
			}
			require.NoError(t, l.RunScan(b))
			for i, in := range b.Inputs() {
				assert.True(t, bytes.Equal(before[i], in.Bytes()), "%v complex=%t: %s changed", dt, isComplex, in.Name)
			}
		}
	}
}

// Plans: the same results as ssmk_scan_fwd, device timing, discretize
// plans, and the misuse of a plan.
func TestPlans(t *testing.T) {
	l := open(t)
	p := mamba1.Generate(mamba1.MambaBlock(ssm.Poly, 2, 8, 64, 16), 5)
	want, err := l.Scan(p, ssm.F32)
	require.NoError(t, err)
	b, err := l.NewScanBuffers(p, ssm.F32)
	require.NoError(t, err)
	plan, err := l.NewPlan(b)
	require.NoError(t, err)
	defer plan.Close()
	_, _, err = plan.Fetch()
	assert.ErrorContains(t, err, "not been launched")
	require.NoError(t, plan.Launch())
	require.NoError(t, plan.Sync())
	ms, err := plan.Time(5)
	require.NoError(t, err)
	assert.Greater(t, ms, 0.0)
	out, last, err := plan.Fetch()
	require.NoError(t, err)
	assert.Equal(t, want.Out, out, "a plan computes what ssmk_scan_fwd computes, bit for bit")
	assert.Equal(t, want.LastState, last)
	_, err = plan.Time(0)
	assert.ErrorContains(t, err, "iters = 0")
	plan.Close()
	plan.Close()
	assert.ErrorContains(t, plan.Launch(), "closed plan")

	delta, a := []float64{0.1, 0.2, 0.5}, []float64{-1, -2, 3}
	wa, wb, err := l.Discretize(ssm.RK4, ssm.F64, false, delta, a)
	require.NoError(t, err)
	dp, err := l.NewDiscretizePlan(ssm.RK4, ssm.F64, false, delta, a)
	require.NoError(t, err)
	defer dp.Close()
	require.NoError(t, dp.Launch())
	ga, gb, err := dp.Fetch()
	require.NoError(t, err)
	assert.Equal(t, wa, ga)
	assert.Equal(t, wb, gb)
}

// BenchmarkScanKernelCPU is the comparator of BenchmarkScanReference: the
// library's scan of the same problem, one host thread, float64.
func BenchmarkScanKernelCPU(b *testing.B) {
	l, err := cudalib.OpenDefault()
	if err != nil {
		b.Fatal(err)
	}
	if l.Backend != "cpu" {
		b.Skipf("backend %s: this benchmark times the CPU build", l.Backend)
	}
	prev := l.SetNumThreads(1)
	defer l.SetNumThreads(prev)
	for _, c := range []struct {
		m         ssm.Method
		isComplex bool
		dt        ssm.DType
	}{
		{ssm.ZOH, false, ssm.F64}, {ssm.RK4, false, ssm.F64}, {ssm.Bilinear, false, ssm.F64},
		{ssm.ZOH, true, ssm.F64}, {ssm.ZOH, false, ssm.F32},
	} {
		s := mamba1.MambaBlock(c.m, 1, 64, 256, 16)
		s.Complex = c.isComplex
		p := mamba1.Generate(s, 1)
		kind := map[bool]string{false: "real", true: "complex"}[c.isComplex]
		bufs, err := l.NewScanBuffers(p, c.dt)
		if err != nil {
			b.Fatal(err)
		}
		prec := map[ssm.DType]string{ssm.F64: "float64", ssm.F32: "float32"}[c.dt]
		b.Run(fmt.Sprintf("%v/%s/%s", c.m, kind, prec), func(b *testing.B) {
			updates := float64(p.Batch * p.Dim * p.Seqlen * p.Dstate)
			for b.Loop() {
				if err := l.RunScan(bufs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/updates, "ns/update")
		})
	}
}

// TestScanFromInitialState: a scan from a given state (the initial-state
// extension) is within the error model in every dtype, real and complex A,
// and its plan gives the direct call's answer.
func TestScanFromInitialState(t *testing.T) {
	l := open(t)
	require.True(t, l.HasInitialState(), "this project's libraries export the extension")
	for _, isComplex := range []bool{false, true} {
		for _, dt := range ssm.DTypes() {
			s := mamba1.Spec{Batch: 2, Dim: 3, Seqlen: 70, Dstate: 5, Groups: 1, Method: ssm.FOH, Complex: isComplex,
				VariableB: true, HasD: true, Dist: mamba1.Realistic}
			p := mamba1.Generate(s, 8)
			mamba1.SetInitialState(p, 9)
			assert.True(t, l.Capabilities(ssm.FOH, dt, isComplex).InitialState())
			r, where := scanRatio(t, l, p, dt)
			assert.LessOrEqual(t, r, float64(ratioLimit), "%v %s: %s", dt, ssm.AKind(isComplex), where)
			// The plan form gives the same answer.
			b, err := l.NewScanBuffers(p, dt)
			require.NoError(t, err)
			plan, err := l.NewPlan(b)
			require.NoError(t, err)
			require.NoError(t, plan.Launch())
			out, _, err := plan.Fetch()
			require.NoError(t, err)
			plan.Close()
			got, err := l.Scan(p, dt)
			require.NoError(t, err)
			assert.Equal(t, got.Out, out, "%v %s: the plan and the scan from the same state differ", dt, ssm.AKind(isComplex))
		}
	}
}

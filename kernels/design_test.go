package kernels

import (
	"fmt"
	"math"
	"slices"
	"ssmverify/cudalib"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// The CUDA build's two forward designs (docs/performance.md): the row
// kernel (a warp per row, a scan across lanes) and the channel-sequential
// kernel (lanes are channels, P of them per channel), chosen by shape;
// SSMK_FORWARD forces one where its conditions hold. Complex A's channel
// kernel takes P = 4, 8 or 16 (scan_chan_cplx.cuh), real A's 2 or 4; a
// design whose conditions fail runs the row kernel. The CPU build has one
// design and ignores the variable.
var (
	forwardDesigns        = []string{"row", "chan2", "chan4"}
	complexForwardDesigns = []string{"row", "chan4", "chan8", "chan16"}
)

// designsOf lists the designs worth forcing on l for real or complex A.
func designsOf(l *cudalib.Library, complex bool) []string {
	switch {
	case l.Backend != "cuda":
		return []string{"auto"}
	case complex:
		return complexForwardDesigns
	}
	return forwardDesigns
}

// designCase is one case of TestForwardDesigns and TestBackwardDesigns.
type designCase struct {
	spec mamba1.Spec
	dt   ssm.DType
	full bool // every option on, an initial state (and a gradient of the last state)
}

// designCases are every method, input type and option on shapes a channel
// design takes (two groups of dim/2 channels, N of 16 and 8) with a partial
// last tile, and the Stress distribution (tiles off the fast path, Ā near
// 1, large Δ); the CPU build (one design, judged everywhere else) the fp32
// ones; -short (under compute-sanitizer) zoh and foh in fp32 and bf16,
// N = 16. declared filters the method and input types a test may run.
func designCases(l *cudalib.Library, dim, seqlen int, declared func(ssm.Method, ssm.DType) bool) []designCase {
	dtypes, methods, states := []ssm.DType{ssm.F32, ssm.F16, ssm.BF16}, ssm.Methods(), []int{16, 8}
	if l.Backend != "cuda" {
		dtypes = dtypes[:1]
	}
	if testing.Short() {
		dtypes, methods, states = []ssm.DType{ssm.F32, ssm.BF16}, []ssm.Method{ssm.ZOH, ssm.FOH}, states[:1]
	}
	var cs []designCase
	for _, m := range methods {
		for _, dt := range dtypes {
			if !declared(m, dt) {
				continue
			}
			for _, o := range []struct {
				full bool
				dist mamba1.Dist
			}{{true, mamba1.Realistic}, {false, mamba1.Realistic}, {true, mamba1.Stress}} {
				for _, n := range states {
					s := mamba1.Spec{Batch: 2, Dim: dim, Seqlen: seqlen, Dstate: n, Groups: 2, Method: m,
						VariableB: true, VariableC: true, Softplus: o.full, HasD: o.full, HasZ: o.full,
						HasBias: o.full, Dist: o.dist}
					cs = append(cs, designCase{s, dt, o.full})
				}
			}
		}
	}
	return cs
}

// complexDesignCases are designCases' shapes with complex A: fp32 inputs
// (complex A with 16-bit inputs is refused), every method (the channel
// kernel's fast tiles for zoh and the Taylor methods, its exact path for
// foh and bilinear and for Stress's tiles off the fast vote); -short zoh and
// foh, N = 16.
func complexDesignCases(dim, seqlen int) []designCase {
	methods, states := ssm.Methods(), []int{16, 8}
	if testing.Short() {
		methods, states = []ssm.Method{ssm.ZOH, ssm.FOH}, states[:1]
	}
	var cs []designCase
	for _, m := range methods {
		for _, o := range []struct {
			full bool
			dist mamba1.Dist
		}{{true, mamba1.Realistic}, {false, mamba1.Realistic}, {true, mamba1.Stress}} {
			for _, n := range states {
				s := mamba1.Spec{Batch: 2, Dim: dim, Seqlen: seqlen, Dstate: n, Groups: 2, Method: m, Complex: true,
					VariableB: true, VariableC: true, Softplus: o.full, HasD: o.full, HasZ: o.full,
					HasBias: o.full, Dist: o.dist}
				cs = append(cs, designCase{s, ssm.F32, o.full})
			}
		}
	}
	return cs
}

// Every case of designCases and complexDesignCases through each design, on
// 128 channels (P = 2 and 4 both take whole blocks) and seqlen 200 =
// 12·16 + 8, judged by judge.CompareScan's error model. A design that
// indexes a channel, a state or a step wrongly fails at the first case.
func TestForwardDesigns(t *testing.T) {
	l := open(t)
	for _, k := range []struct {
		complex bool
		cases   []designCase
	}{
		{false, designCases(l, 128, 200, func(ssm.Method, ssm.DType) bool { return true })},
		{true, complexDesignCases(128, 200)},
	} {
		for _, design := range designsOf(l, k.complex) {
			t.Run(ssm.AKind(k.complex)+"/"+design, func(t *testing.T) {
				t.Setenv("SSMK_FORWARD", design)
				for _, c := range k.cases {
					got := judgedScan(t, l, c.spec, uint64(c.spec.Dstate), c.full, c.dt)
					assert.True(t, got.Passed(c.dt), "%s %v %v: %s", design, c.spec, c.dt, got.Worst)
				}
			})
		}
	}
}

// The designs are different arithmetic: the channel kernel sums a
// channel's states in P partial sums, the row kernel in one, so some
// outputs differ in their last bits. Identical outputs would mean that
// SSMK_FORWARD did not reach the library (and TestForwardDesigns judged one
// kernel three times).
func TestForwardDesignsDiffer(t *testing.T) {
	l := open(t)
	if l.Backend != "cuda" {
		t.Skip("one design in the CPU build")
	}
	for _, complex := range []bool{false, true} {
		s := mamba1.MambaBlock(ssm.ZOH, 2, 128, 64, 16)
		s.Complex = complex
		p := mamba1.Generate(s, 9)
		p.RoundTo(ssm.F32)
		designs := designsOf(l, complex)
		outs := forwardOutputs(t, l, p, ssm.F32, designs)
		for _, d := range designs[1:] {
			assert.NotEqual(t, outs["row"], outs[d], "%s A: %s computes bit for bit what the row kernel does", ssm.AKind(complex), d)
		}
	}
}

// forwardOutputs are p's outputs through each of designs, forced in turn.
func forwardOutputs(t *testing.T, l *cudalib.Library, p *ssm.Problem, dt ssm.DType, designs []string) map[string][]float64 {
	t.Helper()
	outs := map[string][]float64{}
	for _, d := range designs {
		t.Setenv("SSMK_FORWARD", d)
		got, err := l.Scan(p, dt)
		require.NoError(t, err, d)
		outs[d] = got.Out
	}
	return outs
}

// The complex channel kernel's fast tiles take sin and cos of Δ·Im a by
// their own range reduction up to |Δ·Im a| = 65536 (scan_chan_cplx.cuh's
// kSincosMax), tiles past it the exact path: Im a log-uniform from 10^-3 to
// 10^5 over a row's states, Δ log-uniform in [10^-3, 1] (no softplus), so
// that angles from 10^-6 to 10^5 meet both paths, near and far from the
// bound, judged against the error model's allowance for e^x (whose
// argument's rounding grows with |x|).
func TestForwardComplexAngles(t *testing.T) {
	l := open(t)
	s := mamba1.Spec{Batch: 2, Dim: 64, Seqlen: 96, Dstate: 16, Groups: 1, Method: ssm.ZOH, Complex: true,
		VariableB: true, VariableC: true, HasD: true}
	for _, m := range []ssm.Method{ssm.ZOH, ssm.RK4} {
		s.Method = m
		p := mamba1.Generate(s, 5)
		for d := 0; d < p.Dim; d++ {
			for n := 0; n < p.Dstate; n++ {
				i := 2 * (d*p.Dstate + n)
				p.A[i] = -0.25
				p.A[i+1] = math.Pow(10, -3+8*float64((n+d)%p.Dstate)/float64(p.Dstate-1)) * float64(1-2*(n%2))
			}
		}
		for i := range p.Delta {
			p.Delta[i] = math.Pow(10, -3+3*float64(i%97)/96)
		}
		p.RoundTo(ssm.F32)
		for _, design := range designsOf(l, true) {
			t.Setenv("SSMK_FORWARD", design)
			got, err := l.Scan(p, ssm.F32)
			require.NoError(t, err, design)
			c, err := judge.CompareScan(p, got, ssm.F32, nil, nil)
			require.NoError(t, err)
			assert.True(t, c.Passed(ssm.F32), "%v %s: %s", m, design, c.Worst)
		}
	}
}

// The fast tiles of zoh (real and complex A) and bilinear form the input
// term as B·(Δ·u·g) with Δ·u formed once per step, where the CPU build
// forms ((Δ·g)·B)·u; the tile votes that every Δ·u is finite
// (run_du_exact). Here Δ = 10^30 and u ≈ 10^10 overflow float32 in Δ·u
// while Δ·B (B ≈ 10^-25) and Δ·B·u stay finite, and a ≈ 10^-31 keeps every
// Δ·a in the fast tiles' range: a kernel whose vote forgot the overflow
// writes non-finite outputs (∞, then NaN) where the reference is finite.
func TestForwardDeltaUOverflow(t *testing.T) {
	l := open(t)
	for _, c := range []struct {
		m       ssm.Method
		complex bool
	}{{ssm.ZOH, false}, {ssm.Bilinear, false}, {ssm.ZOH, true}} {
		s := mamba1.Spec{Batch: 2, Dim: 64, Seqlen: 96, Dstate: 16, Groups: 1, Method: c.m, Complex: c.complex,
			VariableB: true, VariableC: true}
		p := mamba1.Generate(s, 7)
		for i := range p.Delta {
			p.Delta[i] = 1e30 * (1 + float64(i%7)/7)
		}
		for i := range p.U {
			p.U[i] = 1e10 * (1 + math.Abs(p.U[i]))
		}
		for i := range p.B {
			p.B[i] *= 1e-25
		}
		for i := range p.A {
			p.A[i] *= 1e-31
		}
		p.RoundTo(ssm.F32)
		for _, design := range designsOf(l, c.complex) {
			t.Setenv("SSMK_FORWARD", design)
			got, err := l.Scan(p, ssm.F32)
			require.NoError(t, err, design)
			cmp, err := judge.CompareScan(p, got, ssm.F32, nil, nil)
			require.NoError(t, err)
			assert.True(t, cmp.Passed(ssm.F32), "%v %s %s: %s", c.m, ssm.AKind(c.complex), design, cmp.Worst)
		}
	}
}

// A value of SSMK_FORWARD the library does not know is refused at launch,
// by name, never taken for the default.
func TestForwardDesignRefusesUnknown(t *testing.T) {
	l := open(t)
	if l.Backend != "cuda" {
		t.Skip("the CPU build reads no SSMK_FORWARD")
	}
	t.Setenv("SSMK_FORWARD", "chan3")
	_, err := l.Scan(mamba1.Generate(mamba1.MambaBlock(ssm.ZOH, 1, 64, 16, 16), 1), ssm.F32)
	assert.ErrorContains(t, err, `SSMK_FORWARD = "chan3": want row, chan, chan2, chan4, chan8, chan16 or auto`)
}

// BenchmarkForwardDesigns times the designs side by side on the benchmark
// sizes (docs/performance.md): per size, dtype and method, one plan, and
// for each of 7 rounds every design's median of 20 launches in turn (the
// variable is read at each launch), after 10 launches of warm-up each; the
// median over rounds per design, in µs and as a fraction of the copy
// bandwidth. Run with -bench ForwardDesigns -benchtime 1x on a GPU.
func BenchmarkForwardDesigns(b *testing.B) {
	l, copyBW := openForBench(b)
	kinds := []struct {
		dt      ssm.DType
		complex bool
	}{{ssm.F32, false}, {ssm.BF16, false}, {ssm.F32, true}} // complex A with 16-bit inputs is refused
	for _, size := range [][2]int{{512, 1024}, {2048, 4096}} {
		for _, k := range kinds {
			s := mamba1.MambaBlock(ssm.ZOH, 8, size[0], size[1], 16)
			s.Complex = k.complex
			p, dt := mamba1.Generate(s, 1), k.dt
			designs := append([]string{"auto"}, designsOf(l, k.complex)...)
			for _, m := range ssm.Methods() {
				p.Method = m
				bufs, err := l.NewScanBuffers(p, dt)
				if err != nil {
					b.Fatal(err)
				}
				b.Run(fmt.Sprintf("%dx%d/%v/%s/%v", size[0], size[1], dt, ssm.AKind(k.complex), m), func(b *testing.B) {
					plan, err := l.NewPlan(bufs)
					if err != nil {
						b.Fatal(err)
					}
					defer plan.Close()
					var med map[string]float64
					for b.Loop() {
						med = designMedians(b, plan, "SSMK_FORWARD", designs, 10, 7, 20)
					}
					bytes := float64(cudalib.ScanBytes(p, dt))
					for _, d := range designs {
						b.ReportMetric(med[d]*1e3, d+"-us")
						b.ReportMetric(math.Round(1000*bytes/(med[d]*1e6)/copyBW)/10, d+"-%copy")
					}
				})
			}
		}
	}
	b.Logf("%s; copy bandwidth %.0f GB/s", l, copyBW)
}

// designMedians times plan under each value of the environment variable
// env (read by the library at every launch) in turn: warm launches of each,
// then for each of rounds every design's median of per launches; the median
// over rounds per design, in ms a launch.
func designMedians(b *testing.B, plan *cudalib.Plan, env string, designs []string, warm, rounds, per int) map[string]float64 {
	times := map[string][]float64{}
	for _, d := range designs {
		b.Setenv(env, d)
		if _, err := plan.Time(warm); err != nil {
			b.Fatal(err)
		}
	}
	for r := 0; r < rounds; r++ {
		for _, d := range designs {
			b.Setenv(env, d)
			ms, err := plan.Time(per)
			if err != nil {
				b.Fatal(err)
			}
			times[d] = append(times[d], ms/float64(per))
		}
	}
	med := map[string]float64{}
	for d, ts := range times {
		slices.Sort(ts)
		med[d] = ts[len(ts)/2]
	}
	return med
}

// tookDesign names the design whose outputs are the automatic choice's,
// bit for bit: the first design of order whose outputs in outs are the
// same (a channel design whose conditions fail runs the row kernel, listed
// first), or another.
func tookDesign(auto []float64, order []string, outs map[string][]float64) string {
	for _, d := range order {
		if slices.Equal(auto, outs[d]) {
			return d
		}
	}
	return "another design"
}

// The shape and method choose the design (kernels.cu's chan_lanes): the
// channel kernel for fp32 methods whose policy says so once the channels
// fill the GPU (64×2048 channels fill any GPU of up to 256 SMs at 8 warps
// each), at P = 4 where N allows, the row kernel for foh, for 16-bit inputs
// and for few channels; with complex A the channel kernel for zoh and the
// Taylor methods whatever the channels, at P = 8 where N allows (else 4),
// the row kernel for foh and bilinear. Each choice is recognised by the
// bits of its outputs.
func TestForwardAutoChoice(t *testing.T) {
	l := open(t)
	if l.Backend != "cuda" {
		t.Skip("one design in the CPU build")
	}
	cases := []struct {
		m             ssm.Method
		dt            ssm.DType
		complex       bool
		batch, dim, n int
		want          string
	}{
		{ssm.ZOH, ssm.F32, false, 64, 2048, 16, "chan4"},
		{ssm.RK4, ssm.F32, false, 64, 2048, 16, "chan4"},
		{ssm.ZOH, ssm.F32, false, 64, 2048, 6, "chan2"},
		{ssm.FOH, ssm.F32, false, 64, 2048, 16, "row"},
		{ssm.ZOH, ssm.BF16, false, 64, 2048, 16, "row"},
		{ssm.ZOH, ssm.F32, false, 2, 128, 16, "row"},
		{ssm.ZOH, ssm.F32, true, 2, 128, 16, "chan8"}, // at any number of channels
		{ssm.RK4, ssm.F32, true, 2, 128, 16, "chan8"},
		{ssm.ZOH, ssm.F32, true, 2, 128, 12, "chan4"},
		{ssm.FOH, ssm.F32, true, 2, 128, 16, "row"},
		{ssm.Bilinear, ssm.F32, true, 2, 128, 16, "row"},
	}
	for _, c := range cases {
		s := mamba1.MambaBlock(c.m, c.batch, c.dim, 16, c.n)
		s.Complex = c.complex
		p := mamba1.Generate(s, 4)
		p.RoundTo(c.dt)
		order := designsOf(l, c.complex) // the row design first
		outs := forwardOutputs(t, l, p, c.dt, append([]string{"auto"}, order...))
		took := tookDesign(outs["auto"], order, outs)
		assert.Equal(t, c.want, took, "%v %v %s %d×%d N=%d", c.m, c.dt, ssm.AKind(c.complex), c.batch, c.dim, c.n)
	}
}

package kernels

import (
	"fmt"
	"ssmverify/cudalib"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// The CUDA build's backward designs (docs/performance.md): the row design
// (a row's threads own runs of steps, scans of affine maps across them, the
// chunks' entering states by the row kernel) and the channel-sequential one
// (bwd_chan.cuh: lanes are channels, the states a tile apart by the channel
// forward) at four or eight lanes a channel, chosen by shape; SSMK_BACKWARD
// forces one where its conditions hold. The CPU build has one design.
var backwardDesigns = []string{"row", "chan4", "chan8"}

func backwardDesignsOf(l *cudalib.Library) []string {
	if l.Backend != "cuda" {
		return []string{"auto"}
	}
	return backwardDesigns
}

// judgedBackward runs the backward of p (rounded to dt) and judges its
// gradients against the float64 reference by the suite's error model.
func judgedBackward(t *testing.T, l *cudalib.Library, p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType, withInitial bool) judge.GradComparison {
	t.Helper()
	p.RoundTo(dt)
	ct.RoundTo(dt)
	got, err := l.Backward(p, ct, dt, withInitial)
	require.NoError(t, err, "%v %v", p.Method, dt)
	want, err := mamba1.ScanGrad(p, ct, withInitial)
	require.NoError(t, err)
	sc, err := mamba1.GradErrorScale(p, ct, withInitial, dt.Precision())
	require.NoError(t, err)
	return judge.CompareGrads(p, got, dt, want, sc)
}

// Every case of designCases through each design, on 64 channels (a block
// of 32 per group) and seqlen 72 = 4·16 + 8, with an initial state and a
// gradient of the last state where the options are on (every gradient of
// the ABI), judged by judge.CompareGrads' error model. A design that indexes
// a channel, a state or a step wrongly, or drops a term, fails at the first
// case.
func TestBackwardDesigns(t *testing.T) {
	l := openBackward(t)
	cases := designCases(l, 64, 72, func(m ssm.Method, dt ssm.DType) bool {
		return l.Capabilities(m, dt, false).Backward()
	})
	for _, design := range backwardDesignsOf(l) {
		t.Run(design, func(t *testing.T) {
			t.Setenv("SSMK_BACKWARD", design)
			for _, c := range cases {
				p := mamba1.Generate(c.spec, uint64(c.spec.Dstate))
				if c.full {
					mamba1.SetInitialState(p, 3)
				}
				ct := mamba1.NewCotangent(p, uint64(c.spec.Dstate)+1, c.full)
				got := judgedBackward(t, l, p, ct, c.dt, c.full)
				assert.True(t, got.Passed(c.dt), "%s %v %v: %s", design, c.spec, c.dt, got.Worst())
			}
		})
	}
}

// The designs are different arithmetic (the channel design sums a step's
// states in four or eight partial sums and dB, dC over channels in other
// orders), so some gradients differ in their last bits. Identical gradients
// would mean that SSMK_BACKWARD did not reach the library.
func TestBackwardDesignsDiffer(t *testing.T) {
	l := openBackward(t)
	if l.Backend != "cuda" {
		t.Skip("one design in the CPU build")
	}
	p := mamba1.Generate(mamba1.MambaBlock(ssm.ZOH, 2, 128, 64, 16), 9)
	ct := mamba1.NewCotangent(p, 9, false)
	p.RoundTo(ssm.F32)
	ct.RoundTo(ssm.F32)
	du := map[string][]float64{}
	for _, design := range backwardDesigns {
		t.Setenv("SSMK_BACKWARD", design)
		got, err := l.Backward(p, ct, ssm.F32, false)
		require.NoError(t, err, design)
		du[design] = got.U
	}
	for i, a := range backwardDesigns {
		for _, b := range backwardDesigns[i+1:] {
			assert.NotEqual(t, du[a], du[b], "%s computes bit for bit what %s does", a, b)
		}
	}
}

// A value of SSMK_BACKWARD the library does not know is refused at launch,
// by name, never taken for the default.
func TestBackwardDesignRefusesUnknown(t *testing.T) {
	l := openBackward(t)
	if l.Backend != "cuda" {
		t.Skip("the CPU build reads no SSMK_BACKWARD")
	}
	t.Setenv("SSMK_BACKWARD", "channel")
	p := mamba1.Generate(mamba1.MambaBlock(ssm.ZOH, 1, 64, 16, 16), 1)
	_, err := l.Backward(p, mamba1.NewCotangent(p, 1, false), ssm.F32, false)
	assert.ErrorContains(t, err, `SSMK_BACKWARD = "channel": want row, chan, chan4, chan8 or auto`)
}

// BenchmarkBackwardDesigns times the backward designs side by side on the
// benchmark sizes (docs/performance.md), as BenchmarkForwardDesigns does
// the forward's: per size, dtype and method, one plan, and for each of 5
// rounds every design's median of 5 launches in turn (the variable is read
// at each launch), after 3 launches of warm-up each; the median over rounds
// per design, in µs. Run with -bench BackwardDesigns -benchtime 1x on a GPU.
func BenchmarkBackwardDesigns(b *testing.B) {
	l, _ := openForBench(b)
	designs := append([]string{"auto"}, backwardDesignsOf(l)...)
	for _, size := range [][2]int{{512, 1024}, {2048, 4096}} {
		p := mamba1.Generate(mamba1.MambaBlock(ssm.ZOH, 8, size[0], size[1], 16), 1)
		ct := mamba1.NewCotangent(p, 1, false)
		for _, dt := range []ssm.DType{ssm.F32, ssm.BF16} {
			for _, m := range ssm.Methods() {
				p.Method = m
				bufs, err := l.NewGradBuffers(p, ct, dt, false)
				if err != nil {
					b.Fatal(err)
				}
				b.Run(fmt.Sprintf("%dx%d/%v/%v", size[0], size[1], dt, m), func(b *testing.B) {
					plan, err := l.NewBackwardPlan(bufs)
					if err != nil {
						b.Fatal(err)
					}
					defer plan.Close()
					var med map[string]float64
					for b.Loop() {
						med = designMedians(b, plan.Plan, "SSMK_BACKWARD", designs, 3, 5, 5)
					}
					for _, d := range designs {
						b.ReportMetric(med[d]*1e3, d+"-us")
					}
				})
			}
		}
	}
	b.Logf("%s", l)
}

// The shape chooses the backward design (backward.cu's
// chan_backward_lanes), for every method and input type: the channel design
// at four lanes a channel once they fill the GPU (64×2048 channels: 8 warps
// per SM on any GPU of up to 256 SMs), at eight lanes where four do not fill
// it or a group's channels are not whole blocks of 32 but eight lanes make 6
// warps per SM (64×144 channels on any GPU of up to 384 SMs; 8×512 on one of
// 65 to 170 SMs, the H100's and H200's 132 among them); the row design for
// fewer channels. Each choice is recognised by the bits of its gradient of u.
func TestBackwardAutoChoice(t *testing.T) {
	l := openBackward(t)
	if l.Backend != "cuda" {
		t.Skip("one design in the CPU build")
	}
	run := func(design string, p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType) []float64 {
		t.Setenv("SSMK_BACKWARD", design)
		got, err := l.Backward(p, ct, dt, false)
		require.NoError(t, err, design)
		return got.U
	}
	cases := []struct {
		m          ssm.Method
		dt         ssm.DType
		batch, dim int
		want       string
	}{
		{ssm.ZOH, ssm.F32, 64, 2048, "chan4"},
		{ssm.FOH, ssm.F32, 64, 2048, "chan4"},
		{ssm.ZOH, ssm.BF16, 64, 2048, "chan4"},
		{ssm.ZOH, ssm.F32, 64, 144, "chan8"},
		{ssm.ZOH, ssm.F32, 8, 512, "chan8"},
		{ssm.FOH, ssm.BF16, 8, 512, "chan8"},
		{ssm.ZOH, ssm.F32, 2, 128, "row"},
	}
	for _, c := range cases {
		p := mamba1.Generate(mamba1.MambaBlock(c.m, c.batch, c.dim, 32, 16), 4)
		ct := mamba1.NewCotangent(p, 4, false)
		p.RoundTo(c.dt)
		ct.RoundTo(c.dt)
		outs := map[string][]float64{}
		for _, d := range backwardDesigns {
			outs[d] = run(d, p, ct, c.dt)
		}
		for _, d := range backwardDesigns {
			if d != c.want {
				require.NotEqual(t, outs[d], outs[c.want], "%v %v %dx%d: %s and %s cannot be told apart", c.m, c.dt, c.batch, c.dim, d, c.want)
			}
		}
		took := tookDesign(run("auto", p, ct, c.dt), backwardDesigns, outs)
		assert.Equal(t, c.want, took, "%v %v %dx%d", c.m, c.dt, c.batch, c.dim)
	}
}

package kernels

import (
	"fmt"
	"math"
	"ssmverify/cudalib"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

func openSaved(t *testing.T) *cudalib.Library {
	t.Helper()
	l := openBackward(t)
	if !l.HasSavedBackward() {
		t.Skipf("%s does not export ssmk_plan_create_bwd_saved", l.Path)
	}
	return l
}

// savedCase is a problem whose rows span several of the backward's
// chunks in every design: seqlen 1096 is more than the CUDA row design's
// chunk of 1024 steps (512 with complex A), 69 tiles of the channel
// design's 16 and 18 chunks of the CPU build's 64, so that the saved
// states enter every chunk after the first; 64 channels in two groups
// (whole blocks of 32 and 16 channels for the channel design).
type savedCase struct {
	m         ssm.Method
	dt        ssm.DType
	isComplex bool
	full      bool // initial state, dlast_state, D, z, bias, softplus
}

var savedCases = []savedCase{
	{ssm.ZOH, ssm.F32, false, true},
	{ssm.FOH, ssm.BF16, false, false},
	{ssm.Bilinear, ssm.F32, true, true},
	{ssm.RK4, ssm.F64, false, true},
}

func (c savedCase) problem() (*ssm.Problem, *ssm.Cotangent) {
	s := mamba1.Spec{Batch: 2, Dim: 64, Seqlen: 1096, Dstate: 16, Groups: 2, Method: c.m, Complex: c.isComplex,
		VariableB: true, VariableC: true, Softplus: c.full, HasD: c.full, HasZ: c.full, HasBias: c.full, Dist: mamba1.Realistic}
	p := mamba1.Generate(s, 17)
	if c.full {
		mamba1.SetInitialState(p, 17)
	}
	ct := mamba1.NewCotangent(p, 18, c.full)
	p.RoundTo(c.dt)
	ct.RoundTo(c.dt)
	return p, ct
}

// launchOnce makes a backward plan of bufs with newPlan
// (Library.NewBackwardPlan or NewSavedBackwardPlan), launches it once and
// returns its gradients, the plan closed.
func launchOnce(t *testing.T, newPlan func(*cudalib.GradBuffers) (*cudalib.BackwardPlan, error), bufs *cudalib.GradBuffers, msg ...any) *ssm.Grads {
	t.Helper()
	plan, err := newPlan(bufs)
	require.NoError(t, err, msg...)
	defer plan.Close()
	require.NoError(t, plan.Launch(), msg...)
	g, err := plan.FetchGrads()
	require.NoError(t, err, msg...)
	return g
}

// sameGrads asserts that b's gradients are a's: bit for bit, or, where the
// library declares atomics, up to their order of addition (a relative 10⁻⁴
// of the float sums) and, in a 16-bit dtype, the one ulp by which two
// roundings of sums that differ in their last bits may part
// (TestBackwardPlanAndDeterminism's rule with the 16-bit rounding).
func sameGrads(t *testing.T, atomic bool, dt ssm.DType, a, b *ssm.Grads, what string) {
	t.Helper()
	bf := b.Fields()
	for k, f := range a.Fields() {
		for i, v := range f.Values {
			w := bf[k].Values[i]
			if math.Float64bits(v) == math.Float64bits(w) {
				continue
			}
			tol := 1e-4*(1+math.Abs(v)) + 2*dt.OutputRoundoff()*math.Max(math.Abs(v), math.Abs(w)) + dt.OutputSpacing()
			if atomic && math.Abs(v-w) <= tol {
				continue
			}
			t.Errorf("%s: %s[%d] = %.9g, the plain plan's %.9g", what, f.Name, i, w, v)
			break
		}
	}
}

// A plan on saved states gives the plain plan's gradients at its first
// launch and at every launch after it (the saved states are read, never
// consumed), and they pass the suite's error model; through every backward
// design of the CUDA build. A plan whose launches ran on states it never
// saved, or on states a launch overwrote, fails here.
func TestBackwardSavedPlan(t *testing.T) {
	l := openSaved(t)
	for _, design := range backwardDesignsOf(l) {
		t.Run(design, func(t *testing.T) {
			t.Setenv("SSMK_BACKWARD", design)
			for _, c := range savedCases {
				caps := l.Capabilities(c.m, c.dt, c.isComplex)
				if !caps.BackwardSaved() {
					continue
				}
				what := fmt.Sprintf("%s %v %v %s", design, c.m, c.dt, ssm.AKind(c.isComplex))
				p, ct := c.problem()
				bufs, err := l.NewGradBuffers(p, ct, c.dt, c.full)
				require.NoError(t, err, what)
				want := launchOnce(t, l.NewBackwardPlan, bufs, what)
				saved, err := l.NewSavedBackwardPlan(bufs)
				require.NoError(t, err, what)
				defer saved.Close()
				for launch := 1; launch <= 2; launch++ {
					require.NoError(t, saved.Launch(), what)
					got, err := saved.FetchGrads()
					require.NoError(t, err, what)
					sameGrads(t, caps.BackwardAtomic(), c.dt, want, got, fmt.Sprintf("%s, launch %d of the saved plan", what, launch))
					if launch == 1 {
						ref, err := mamba1.ScanGrad(p, ct, c.full)
						require.NoError(t, err)
						sc, err := mamba1.GradErrorScale(p, ct, c.full, c.dt.Precision())
						require.NoError(t, err)
						cmp := judge.CompareGrads(p, got, c.dt, ref, sc)
						assert.True(t, cmp.Passed(c.dt), "%s: %s", what, cmp.Worst())
					}
				}
			}
		})
	}
}

// A plan on saved states keeps the backward design its states were made
// for: the states of the row design lie a chunk of 1024 steps apart, the
// channel design's a tile of 16, so gradients of one design on the other's
// states would be wrong. SSMK_BACKWARD changed between the plan's creation
// and its launches must change nothing.
func TestBackwardSavedKeepsDesign(t *testing.T) {
	l := openSaved(t)
	if l.Backend != "cuda" {
		t.Skip("one design in the CPU build")
	}
	c := savedCases[0]
	p, ct := c.problem()
	bufs, err := l.NewGradBuffers(p, ct, c.dt, c.full)
	require.NoError(t, err)
	for _, pair := range [][2]string{{"row", "chan8"}, {"chan4", "row"}, {"chan8", "chan4"}} {
		t.Setenv("SSMK_BACKWARD", pair[0])
		want := launchOnce(t, l.NewBackwardPlan, bufs)
		saved, err := l.NewSavedBackwardPlan(bufs)
		require.NoError(t, err)
		t.Setenv("SSMK_BACKWARD", pair[1])
		require.NoError(t, saved.Launch())
		got, err := saved.FetchGrads()
		require.NoError(t, err)
		saved.Close()
		sameGrads(t, true, c.dt, want, got, fmt.Sprintf("states of %s, launched under SSMK_BACKWARD=%s", pair[0], pair[1]))
	}
}

// The saved plan's creation validates as ssmk_plan_create_bwd does, and a
// design the library does not know is refused at creation, where the
// states are made.
func TestBackwardSavedRefuses(t *testing.T) {
	l := openSaved(t)
	c := savedCases[0]
	p, ct := c.problem()
	bufs, err := l.NewGradBuffers(p, ct, c.dt, c.full)
	require.NoError(t, err)
	bufs.DOut = cudalib.Array{}
	_, err = l.NewSavedBackwardPlan(bufs)
	assert.ErrorContains(t, err, "dout")
	if l.Backend != "cuda" {
		return
	}
	bufs, err = l.NewGradBuffers(p, ct, c.dt, c.full)
	require.NoError(t, err)
	t.Setenv("SSMK_BACKWARD", "channel")
	_, err = l.NewSavedBackwardPlan(bufs)
	assert.ErrorContains(t, err, `SSMK_BACKWARD = "channel"`)
}

package mamba3

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"ssmverify/bridge"
	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/mamba3"
	"ssmverify/report"
)

// backwardBase is the backward's problem: two chunks of upstream's 64
// steps and a part (the float64 adjoint records every operation, so the
// sizes are the forward's halved).
func backwardBase() mamba3.Options {
	return mamba3.Options{Batch: 2, Seqlen: 96, HeadsQK: 1, Heads: 2, N: 32, P: 16, AngleDim: 4}
}

var backwardCases = []struct {
	name      string
	mod       func(o *mamba3.Options)
	withState bool // cotangents of the final state too
}{
	{"plain", func(o *mamba3.Options) {}, false},
	{"D+z+state", func(o *mamba3.Options) { o.D, o.Z, o.State = true, true, true }, true},
	{"packed", func(o *mamba3.Options) { o.Batch, o.CuSeqlens, o.State, o.D = 1, []int{0, 40, 41, 96}, true, true }, true},
}

// judgeBackward runs the kernel's backward on p for ct and judges its
// forward and every gradient against the float64 adjoint (mamba3.Grad)
// with the gradients' error model (mamba3.GradErrorScale); a failure is
// diagnosed by the relation of each wrong gradient to the reference. With
// record, the verdict and the diagnosis go into the report (not for a
// planted slip's kernel, whose failure is the test's expectation).
func judgeBackward(t *testing.T, k *bridge.Mamba3, p *mamba3.Problem, ct *mamba3.Cotangent, record bool) (float64, report.Finding, bool) {
	t.Helper()
	op := bridge.OpMamba3Backward
	var y []float64
	var st *mamba3.State
	var g *mamba3.Grads
	if !call(t, k, op, p, func() (err error) {
		y, st, g, err = k.Backward(p, ct)
		return err
	}) {
		return math.Inf(1), report.Finding{}, false
	}
	v := judgedBackward(k, p, ct, y, st, g)
	if v.err != nil {
		t.Fatal(v.err)
	}
	t.Log(v.each)
	if record {
		rep.AddKernel(t.Name(), op, p.DType, p.DType.Weight(), v.worst.Ratio, v.passed(), v.worst.String())
	}
	if v.passed() {
		return v.worst.Ratio, report.Finding{}, true
	}
	if !v.fwdOK && k.Supports(bridge.OpMamba3Forward, p) == "" {
		// the same forward without autograd: does the failure need the backward's bookkeeping?
		if y1, st1, err := k.Forward(bridge.OpMamba3Forward, p); err == nil {
			want, wst := mamba3.Forward(p)
			c1, _, _ := judge.CompareArrays(judge.Mamba3Arrays(p, y1, want, st1, wst, mamba3.ErrorScale(p)))
			t.Logf("the forward alone (%s) on this problem: worst %s", bridge.OpMamba3Forward, c1.Worst)
		}
	}
	if record {
		rep.AddKernelDiagnosis(t.Name(), op, p.DType, p.DType.Weight(), v.finding)
	}
	return v.worst.Ratio, v.finding, false
}

// backwardVerdict is one backward's judgement.
type backwardVerdict struct {
	worst         judge.Worst // the worse of the forward's and the gradients'
	fwdOK, gradOK bool
	each          string // the forward's worst, every gradient's, the gradients'
	finding       report.Finding
	err           error // the arrays could not be compared
}

func (v backwardVerdict) passed() bool { return v.fwdOK && v.gradOK }

// judgedBackward judges k's backward result (y, st, g) of p for ct: the
// forward it ran and every gradient against the float64 adjoint with
// the gradients' error model, a failure diagnosed by
// diagnose.Mamba3Backward (with k's forward where declared). The one
// judgement of TestMamba3Backward and FuzzMamba3Backward.
func judgedBackward(k *bridge.Mamba3, p *mamba3.Problem, ct *mamba3.Cotangent, y []float64, st *mamba3.State, g *mamba3.Grads) backwardVerdict {
	var v backwardVerdict
	want, wst := mamba3.Forward(p)
	fc, _, err := judge.CompareArrays(judge.Mamba3Arrays(p, y, want, st, wst, mamba3.ErrorScale(p)))
	if err != nil {
		v.err = err
		return v
	}
	ref := mamba3.Grad(p, ct)
	ga, err := judge.Mamba3GradArrays(p, g, ref, mamba3.GradErrorScale(p, ct))
	if err != nil {
		v.err = err
		return v
	}
	gc, ratios, err := judge.CompareArrays(ga)
	if err != nil {
		v.err = err
		return v
	}
	v.each = fmt.Sprintf("forward: worst %s; gradients: %s; worst %s", fc.Worst, judge.WorstByArray(ga, ratios), gc.Worst)
	th := judge.Threshold(p.DType)
	v.fwdOK = fc.NonFinite == 0 && fc.Worst.Ratio <= th
	v.gradOK = gc.NonFinite == 0 && gc.Worst.Ratio <= th
	v.worst = fc.Worst
	if gc.Worst.Ratio > v.worst.Ratio || math.IsNaN(gc.Worst.Ratio) {
		v.worst = gc.Worst
	}
	if v.passed() {
		// within the model, a gradient may still follow a wrong formula
		// the normwise bound is too wide to see
		if f := diagnose.Mamba3BackwardHidden(p, ct, ref, ga); f.Tag != "" {
			v.gradOK, v.finding = false, f
		}
		return v
	}
	var run diagnose.Mamba3Runner
	if k.Supports(bridge.OpMamba3Forward, p) == "" {
		run = func(q *mamba3.Problem) ([]float64, *mamba3.State, error) { return k.Forward(bridge.OpMamba3Forward, q) }
	}
	runBwd := func(q *mamba3.Problem, c *mamba3.Cotangent) ([]float64, *mamba3.State, *mamba3.Grads, error) {
		if why := k.Supports(bridge.OpMamba3Backward, q); why != "" {
			return nil, nil, nil, fmt.Errorf("%s", why)
		}
		return k.Backward(q, c)
	}
	v.finding = diagnose.Mamba3Backward(p, ct, y, st, g, run, runBwd)
	return v
}

// TestMamba3Backward judges the backward (upstream: mamba3_siso_combined
// under autograd) on every declared input type: the forward it runs, and
// the gradients of every input and of the initial state, for cotangents of
// y and, where the case says, of the final state.
func TestMamba3Backward(t *testing.T) {
	track(t)
	for _, dt := range dtypes(bridge.OpMamba3Backward) {
		for i, c := range backwardCases {
			t.Run(fmt.Sprintf("%v/%s", dt, c.name), func(t *testing.T) {
				o := backwardBase()
				c.mod(&o)
				p := prepare(t, bridge.OpMamba3Backward, mamba3.Generate(o, uint64(300+i)), dt)
				ct := mamba3.GenerateCotangent(p, c.withState, uint64(310+i))
				ratio, f, ok := judgeBackward(t, kernel, p, ct, true)
				if !ok && f.Tag != "" {
					t.Errorf("mamba3_bwd %v: ratio %.3g > %g; diagnosis [%s] %s", dt, ratio, judge.Threshold(dt), f.Tag, f)
				} else if ok {
					t.Logf("ratio %.3g", ratio)
				}
			})
		}
	}
}

// TestMamba3BackwardDiagnosisOfPlantedSlips plants each backward slip of
// the numpy path (slip=bwd-…) and requires that the judgement fails it
// and that the diagnosis names the wrong gradient and its relation to the
// reference — relations found from the structure of the layer's chain
// rule, none written for these slips.
func TestMamba3BackwardDiagnosisOfPlantedSlips(t *testing.T) {
	track(t)
	for _, c := range []struct{ slip, want string }{
		{"bwd-dtrap-no-sigmoid", "bwd:dTrap:lacks(λ(1−λ))"},
		{"bwd-dadt-alpha-only", "bwd:dADT:no-path:beta"},
		{"bwd-dangle-sign", "bwd:dAngles:factor(-1)"},
		{"bwd-dv-no-previous", "bwd:dV:no-path:previous"},
		{"bwd-dd-double", "bwd:dD:factor(2)"},
		{"bwd-dqbias-first-head", "bwd:dQ_bias:wrong-slot"},
	} {
		t.Run(c.slip, func(t *testing.T) {
			o := mamba3.Options{Batch: 1, Seqlen: 30, HeadsQK: 1, Heads: 2, N: 8, P: 4, AngleDim: 2, D: true}
			k, p := plantedSlip(t, c.slip, bridge.OpMamba3Backward, mamba3.Generate(o, 320))
			ratio, f, ok := judgeBackward(t, k, p, mamba3.GenerateCotangent(p, false, 321), false)
			switch {
			case ok:
				t.Errorf("slip %s passed the judgement (ratio %.3g)", c.slip, ratio)
			case !strings.Contains(f.Tag, c.want):
				t.Errorf("slip %s (ratio %.3g): diagnosis [%s] %s, want %s", c.slip, ratio, f.Tag, f, c.want)
			default:
				t.Logf("slip %s: ratio %.3g, [%s] %s", c.slip, ratio, f.Tag, f)
			}
		})
	}
}

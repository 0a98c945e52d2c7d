package mamba2

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"ssmverify/bridge"
	"ssmverify/judge"
	"ssmverify/mamba2"
	"ssmverify/ssm"
)

// driftSteps is how many decode steps TestMamba2DecodeDrift chains after
// a prefill: the engines serve thousands of tokens from one state, and a
// state type's rounding, a decay's error or a slip small per step shows
// only over many of them.
const driftSteps = 10000

// driftVerdict is a decode chain's judgement: the worst ratio, and of y
// by windows of steps.
type driftVerdict struct {
	judged, passed bool
	worst          judge.Worst
	windows        string
}

// decodeDrift runs k's decode step n times after its prefill of 130 steps
// of one row and judges the chain against the longer prefill's reference
// with the sequential recurrence's error model (its scale grows with the
// steps as the rounding does).
func decodeDrift(t *testing.T, k *bridge.SSD, dt pair, n int) driftVerdict {
	t.Helper()
	o := base(dt)
	o.Batch, o.Heads, o.Groups, o.Headdim, o.Dstate = 1, 2, 1, 4, 8
	o.D, o.Z, o.DtBias, o.Softplus = true, true, true, true
	const pre = 130
	o.Seqlen = pre + n
	p := mamba2.Generate(o, 77).Rounded()
	head := p.Slice(0, pre, nil)
	if why := k.Supports(head); why != "" {
		rep.KernelUnsupported(t.Name(), bridge.OpPrefill, head.DType, head.StateDType, why)
		return driftVerdict{}
	}
	h, err := k.Prefill(head)
	if err != nil {
		t.Errorf("prefill %s: %v", head.Shape(), err)
		return driftVerdict{}
	}
	_, hsc := mamba2.Prefill(head)
	q, want, sc := continuation(p, pre, 0, hsc)
	state := h.FinalStates
	hp := p.Heads * p.Headdim
	got := &mamba2.Output{Y: make([]float64, 0, n*hp)}
	for step := pre; step < p.Seqlen; step++ {
		s := mamba2.StepAt(p, step, state)
		if why := k.SupportsStep(s); why != "" {
			rep.KernelUnsupported(t.Name(), bridge.OpStep, s.DType, s.StateDType, why)
			return driftVerdict{}
		}
		out, err := k.Step(s)
		if err != nil {
			t.Errorf("decode step %d of %s: %v", step-pre+1, q.Shape(), err)
			return driftVerdict{}
		}
		got.Y = append(got.Y, out.Y...) // one row: step-major is q's order
		state = out.State
	}
	got.FinalStates, got.SeqStates = state, state
	c, ratios, err := judge.CompareArrays(judge.PrefillArrays(q, got, want, sc))
	if err != nil {
		t.Errorf("decode chain of %s: %v", q.Shape(), err)
		return driftVerdict{}
	}
	var rows []string
	for lo, hi := 0, min(10, n); lo < n; lo, hi = hi, min(hi*10, n) {
		worst := 0.0
		for i := lo * hp; i < hi*hp; i++ {
			worst = math.Max(worst, ratios["y"][i])
		}
		rows = append(rows, fmt.Sprintf("steps %d–%d: %.3g", lo+1, hi, worst))
	}
	fs := 0.0
	for _, r := range ratios["final_states"] {
		fs = math.Max(fs, r)
	}
	rows = append(rows, fmt.Sprintf("the state after the last: %.3g", fs))
	return driftVerdict{judged: true, passed: c.NonFinite == 0 && c.Worst.Ratio <= judge.Threshold(q.DType), worst: c.Worst, windows: strings.Join(rows, ", ")}
}

// TestMamba2DecodeDrift: decode steps chained 10⁴ times after a prefill
// equal the longer prefill, in each state type, within the error model;
// the worst ratio of y in windows of steps (1–10, 11–100, 101–1000,
// 1001–10⁴) and of the last state is reported as a table, so that drift
// shows before it fails (a 16-bit y hides less than its own rounding).
func TestMamba2DecodeDrift(t *testing.T) {
	track(t)
	for _, dt := range pairs[:5] {
		t.Run(dt.String(), func(t *testing.T) {
			v := decodeDrift(t, kernel, dt, driftSteps)
			if !v.judged {
				return
			}
			what := fmt.Sprintf("%d decode steps after a prefill; worst ratio of y by steps: %s", driftSteps, v.windows)
			rep.AddKernel(t.Name(), bridge.OpStep, dt.in, dt.state, v.worst.Ratio, v.passed, what+": "+v.worst.String())
			t.Log(what)
			if !v.passed {
				t.Errorf("%s: ratio %.3g at %s", what, v.worst.Ratio, v.worst)
			}
		})
	}
}

// TestMamba2DecodeDriftCanFail: a decode step that keeps a float32 state
// in bfloat16 (the numpy path's state-bf16 slip) drifts past the model
// within the chain.
func TestMamba2DecodeDriftCanFail(t *testing.T) {
	track(t)
	v := decodeDrift(t, slipKernel(t, "state-bf16"), pair{ssm.F32, ssm.F32}, 1000)
	if !v.judged || v.passed {
		t.Fatalf("a state kept in bf16 over 1000 steps: judged %v, passed %v (worst %s)", v.judged, v.passed, v.worst)
	}
	t.Logf("state kept in bf16: worst %s; by steps: %s", v.worst, v.windows)
}

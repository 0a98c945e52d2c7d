package mamba2

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"ssmverify/bridge"
	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/mamba2"
	"ssmverify/report"
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
	// handed diagnoses the prefill where the state it handed to the chain
	// fails its model (nil where it passes): the chain's error is then the
	// prefill's, carried and forgotten step by step, and its diagnosis the
	// cause. Called only for a chain that fails (it calls the kernel again).
	handed func() report.Finding
	// handedRatio is the prefill's worst ratio.
	handedRatio float64
}

// decodeDrift runs k's decode step n times after its prefill of 130 steps
// of one row and judges the chain against the longer prefill's reference
// with the sequential recurrence's error model (its scale grows with the
// steps as the rounding does).
func decodeDrift(t *testing.T, k *bridge.SSD, dt pair, n int, mod func(*mamba2.Options)) driftVerdict {
	t.Helper()
	rk := repFor(k)
	o := base(dt)
	o.Batch, o.Heads, o.Groups, o.Headdim, o.Dstate = 1, 2, 1, 4, 8
	o.D, o.Z, o.DtBias, o.Softplus = true, true, true, true
	if mod != nil {
		mod(&o)
	}
	const pre = 130
	o.Seqlen = pre + n
	p := mamba2.Generate(o, 77).Rounded()
	head := p.Slice(0, pre, nil)
	if why := k.Supports(head); why != "" {
		rk.KernelUnsupported(t.Name(), bridge.OpPrefill, head.DType, head.StateDType, why)
		return driftVerdict{}
	}
	h, err := k.Prefill(head)
	if bridge.Unsupported(err) {
		rk.KernelUnsupported(t.Name(), bridge.OpPrefill, head.DType, head.StateDType, err.Error())
		return driftVerdict{}
	}
	if err != nil {
		t.Errorf("prefill %s: %v", head.Shape(), err)
		return driftVerdict{}
	}
	refHead, hsc := mamba2.Prefill(head)
	v := driftVerdict{}
	if hc, _, err := judge.CompareArrays(judge.PrefillArrays(head, h, refHead, hsc)); err == nil && (hc.NonFinite > 0 || hc.Worst.Ratio > judge.Threshold(head.DType)) {
		v.handed = func() report.Finding {
			return diagnose.SSDPrefill(head, h, func(q *mamba2.Problem) (*mamba2.Output, error) { return k.Prefill(q) })
		}
		v.handedRatio = hc.Worst.Ratio
	}
	q, want, sc := continuation(p, pre, 0, hsc)
	state := h.FinalStates
	hp := p.Heads * p.Headdim
	got := &mamba2.Output{Y: make([]float64, 0, n*hp)}
	for step := pre; step < p.Seqlen; step++ {
		s := mamba2.StepAt(p, step, state)
		if why := k.SupportsStep(s); why != "" {
			rk.KernelUnsupported(t.Name(), bridge.OpStep, s.DType, s.StateDType, why)
			return driftVerdict{}
		}
		out, err := k.Step(s)
		if bridge.Unsupported(err) {
			rk.KernelUnsupported(t.Name(), bridge.OpStep, s.DType, s.StateDType, err.Error())
			return driftVerdict{}
		}
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
	v.judged, v.passed, v.worst, v.windows = true, c.NonFinite == 0 && c.Worst.Ratio <= judge.Threshold(q.DType), c.Worst, strings.Join(rows, ", ")
	return v
}

// inherited is a failing chain's diagnosis when the prefill it starts from
// fails on its own and the chain errs no more than that state does (the
// error handed over, carried and forgotten, not grown by decode): the
// prefill's cause, said to be carried into decode. A chain that errs more
// than its start has a decode slip of its own, whatever the prefill's.
func (v driftVerdict) inherited() (report.Finding, bool) {
	if v.handed == nil || v.worst.Ratio > v.handedRatio {
		return report.Finding{}, false
	}
	f := v.handed()
	f.Cause = fmt.Sprintf("the chain starts from the prefill's state, which fails its own model (ratio %.3g): %s", v.handedRatio, f.Cause)
	f.Evidence = append(f.Evidence, "the decode chain by windows of steps: "+v.windows)
	return f, true
}

// TestMamba2DecodeDrift: decode steps chained 10⁴ times after a prefill
// equal the longer prefill, in each state type, within the error model;
// the worst ratio of y in windows of steps (1–10, 11–100, 101–1000,
// 1001–10⁴) and of the last state is reported as a table, so that drift
// shows before it fails (a 16-bit y hides less than its own rounding).
//
// Each state type's chain runs on a worker of its own, the five at once: a
// chain is 10⁴ round trips of one small launch each, bound by latency, and
// on one worker they would take five times as long (about 50 s a chain
// through a Triton copy on the H200).
func TestMamba2DecodeDrift(t *testing.T) {
	track(t)
	for _, dt := range pairs[:5] {
		t.Run(dt.String(), func(t *testing.T) {
			track(t)
			t.Parallel()
			v := decodeDrift(t, &bridge.SSD{W: suite.Another(t)}, dt, driftSteps, nil)
			if !v.judged {
				return
			}
			what := fmt.Sprintf("%d decode steps after a prefill; worst ratio of y by steps: %s", driftSteps, v.windows)
			rep.AddKernel(t.Name(), bridge.OpStep, dt.in, dt.state, v.worst.Ratio, v.passed, what+": "+v.worst.String())
			t.Log(what)
			if !v.passed {
				t.Errorf("%s: ratio %.3g at %s", what, v.worst.Ratio, v.worst)
				if f, ok := v.inherited(); ok {
					rep.AddKernelDiagnosis(t.Name(), bridge.OpStep, dt.in, dt.state, f)
					t.Logf("diagnosis: [%s] %s", f.Tag, f)
				}
			}
		})
	}
}

// TestMamba2DecodeDriftCanFail: a decode step that keeps a float32 state
// in bfloat16 (the numpy path's state-bf16 slip) drifts past the model
// within the chain.
func TestMamba2DecodeDriftCanFail(t *testing.T) {
	track(t)
	v := decodeDrift(t, slipKernel(t, "state-bf16"), pair{ssm.F32, ssm.F32}, 1000, nil)
	if !v.judged || v.passed {
		t.Fatalf("a state kept in bf16 over 1000 steps: judged %v, passed %v (worst %s)", v.judged, v.passed, v.worst)
	}
	if f, ok := v.inherited(); ok {
		t.Errorf("a decode slip blamed on the prefill: [%s] %s", f.Tag, f)
	}
	t.Logf("state kept in bf16: worst %s; by steps: %s", v.worst, v.windows)
}

// TestMamba2DecodeDriftInheritedCanFail: a chain that fails because the
// prefill it starts from is wrong (the numpy path's group-repeat slip, in
// the prefill alone) is diagnosed by the prefill's own cause, said to be
// carried into decode, not as drift.
func TestMamba2DecodeDriftInheritedCanFail(t *testing.T) {
	track(t)
	v := decodeDrift(t, slipKernel(t, "group-repeat"), pair{ssm.F32, ssm.F32}, 20, func(o *mamba2.Options) { o.Heads, o.Groups = 4, 2 })
	if !v.judged || v.passed {
		t.Fatalf("a chain from a prefill with heads mapped to groups wrongly: judged %v, passed %v (worst %s)", v.judged, v.passed, v.worst)
	}
	f, ok := v.inherited()
	if !ok || f.Tag != "groups:repeat" || !strings.Contains(f.Cause, "starts from the prefill's state") {
		t.Fatalf("inherited %v: [%s] %s; want [groups:repeat] said to come from the prefill", ok, f.Tag, f)
	}
	t.Logf("[%s] %s", f.Tag, f)
}

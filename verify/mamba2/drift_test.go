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
	// via is how the steps were launched: one OpDecodeChain call
	// (FeatureStepLoop) or one OpStep call a token
	via string
	// y and state are the steps' outputs: y of the tokens after the
	// prefill, the state after the last
	y, state []float64
}

// chainsSteps reports whether k's decode chain of p is its step kernel
// looped on the device (FeatureStepLoop), which the drift may use in
// place of a round trip a token.
func chainsSteps(k *bridge.SSD, p *mamba2.Problem) bool {
	c, ok := k.Cap(bridge.OpDecodeChain)
	return ok && c.Has(bridge.FeatureStepLoop) && k.SupportsDecodeChain(p) == ""
}

// decodeDrift runs k's decode step n times after its prefill of 130 steps
// of one row and judges the chain against the longer prefill's reference
// with the sequential recurrence's error model (its scale grows with the
// steps as the rounding does). The steps are one OpDecodeChain call where
// k declares its chain the step kernel looped (FeatureStepLoop) and
// perStep is false, else one OpStep call a token, the state sent back
// each time.
func decodeDrift(t *testing.T, k *bridge.SSD, dt pair, n int, mod func(*mamba2.Options), perStep bool) driftVerdict {
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
	if !perStep && chainsSteps(k, p) {
		v.via = "one " + bridge.OpDecodeChain + " call (" + bridge.FeatureStepLoop + ")"
		out, err := k.DecodeChain(p, pre)
		if err == nil && out.FinalStates == nil {
			err = fmt.Errorf("the adapter declares %s and returned no final_states", bridge.FeatureStepLoop)
		}
		if err != nil {
			t.Errorf("decode chain of %d steps after %s: %v", n, head.Shape(), err)
			return driftVerdict{}
		}
		got.Y, state = out.Y[pre*hp:], out.FinalStates // one row: the tokens after the prefill's
	} else {
		v.via = "one " + bridge.OpStep + " call a token"
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
	v.y, v.state = got.Y, state
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
// The steps of a chain are one call where the adapter declares its decode
// chain the step kernel looped on the device (FeatureStepLoop: upstream's
// Triton adapter, the numpy path; TestMamba2DecodeDriftChainIsTheSteps
// holds the two ways equal), else 10⁴ round trips of one small launch
// each, bound by latency on a shared GPU (about 5 ms a step through
// upstream's adapter on an H200 beside other suites, 2026-12-04); each
// state type's chain runs on a worker of its own, the five at once.
func TestMamba2DecodeDrift(t *testing.T) {
	track(t)
	for _, dt := range pairs[:5] {
		t.Run(dt.String(), func(t *testing.T) {
			track(t)
			t.Parallel()
			v := decodeDrift(t, &bridge.SSD{W: suite.Another(t)}, dt, driftSteps, nil, false)
			if !v.judged {
				return
			}
			what := fmt.Sprintf("%d decode steps after a prefill (%s); worst ratio of y by steps: %s", driftSteps, v.via, v.windows)
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
	v := decodeDrift(t, slipKernel(t, "state-bf16"), pair{ssm.F32, ssm.F32}, 1000, nil, false)
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
	v := decodeDrift(t, slipKernel(t, "group-repeat"), pair{ssm.F32, ssm.F32}, 20, func(o *mamba2.Options) { o.Heads, o.Groups = 4, 2 }, false)
	if !v.judged || v.passed {
		t.Fatalf("a chain from a prefill with heads mapped to groups wrongly: judged %v, passed %v (worst %s)", v.judged, v.passed, v.worst)
	}
	f, ok := v.inherited()
	if !ok || f.Tag != "groups:repeat" || !strings.Contains(f.Cause, "starts from the prefill's state") {
		t.Fatalf("inherited %v: [%s] %s; want [groups:repeat] said to come from the prefill", ok, f.Tag, f)
	}
	t.Logf("[%s] %s", f.Tag, f)
}

// TestMamba2DecodeDriftChainIsTheSteps: where the kernel's decode chain is
// its step kernel looped (FeatureStepLoop), the drift's steps launched in
// one chain call equal the same steps launched one call a token, the
// state sent back each time, bit for bit: y of every step and the last
// state, in a float32 state and a 16-bit one. TestMamba2DecodeDrift may
// then take the one call for the 10⁴.
func TestMamba2DecodeDriftChainIsTheSteps(t *testing.T) {
	track(t)
	for _, dt := range []pair{pairs[0], pairs[2]} {
		t.Run(dt.String(), func(t *testing.T) {
			track(t)
			chained := decodeDrift(t, kernel, dt, 300, nil, false)
			if !chained.judged {
				return
			}
			if !strings.Contains(chained.via, bridge.FeatureStepLoop) {
				repFor(kernel).KernelUnsupported(t.Name(), bridge.OpDecodeChain, dt.in, dt.state, "the adapter's decode chain is not its step looped ("+bridge.FeatureStepLoop+" not declared)")
				t.Skip("no " + bridge.FeatureStepLoop + " chain: TestMamba2DecodeDrift takes one call a token")
			}
			stepped := decodeDrift(t, kernel, dt, 300, nil, true)
			if !stepped.judged {
				t.Fatal("the steps one call a token not judged where the chain was")
			}
			for _, c := range []struct {
				name      string
				got, want []float64
			}{{"y", chained.y, stepped.y}, {"the last state", chained.state, stepped.state}} {
				if i := firstDiffering(c.got, c.want); i >= 0 {
					t.Errorf("%s of the chain differs from the steps': element %d of %d, %.9g against %.9g", c.name, i, len(c.want), at(c.got, i), at(c.want, i))
				}
			}
		})
	}
	// and it can fail: the numpy path whose chain decodes from the last
	// chunk boundary's state, the prefill's tail (tokens 128–129 of 130)
	// never replayed
	slip := slipKernel(t, "chain-no-tail")
	chained, stepped := decodeDrift(t, slip, pairs[0], 20, nil, false), decodeDrift(t, slip, pairs[0], 20, nil, true)
	if !strings.Contains(chained.via, bridge.FeatureStepLoop) || firstDiffering(chained.y, stepped.y) < 0 {
		t.Errorf("a chain that drops the prefill's tail (%s): its y equals the steps'; want them to differ", chained.via)
	}
}

// firstDiffering is the first index where a and b differ bit for bit
// (their lengths' minimum where they differ in length), -1 where equal.
func firstDiffering(a, b []float64) int {
	for i := range min(len(a), len(b)) {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// at is v[i], NaN past its end.
func at(v []float64, i int) float64 {
	if i < len(v) {
		return v[i]
	}
	return math.NaN()
}

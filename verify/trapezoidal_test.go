package verify

import (
	"fmt"
	"testing"

	"ssmverify/bridge"
	"ssmverify/judge"
	"ssmverify/mamba3"
	"ssmverify/ssm"
)

// TestTrapezoidal judges the exponential-trapezoidal method — Mamba-3's
// discretization (package mamba3: h_t = α·h_{t−1} + β·B_{t−1}x_{t−1} +
// γ·B_t x_t, λ = σ(Trap)) — in the method table beside the ABI's six. The
// ABI's scan carries no previous input, so the method is reached as
// Mamba-3's kernels are, through the bridge: here the suite's own CPU path
// of it (numpy_mamba3, the counterpart of the CPU build), for every type
// it declares, without a rotation (A real) and with one (the rotation is
// Mamba-3's complex state), forward, decode step and backward, each
// judged by package mamba3's error models. Upstream's kernels are judged
// by verify/mamba3 (scripts/gpu.sh mamba3).
func TestTrapezoidal(t *testing.T) {
	track(t)
	k := trapezoidalKernel(t, "")
	const method = "exp-trapezoidal"
	for _, dt := range []ssm.DType{ssm.F32, ssm.F64, ssm.BF16} {
		for _, rotated := range []bool{false, true} {
			kind := map[bool]string{false: "real", true: "rotation"}[rotated]
			for _, op := range []string{bridge.OpMamba3Forward, bridge.OpMamba3Step, bridge.OpMamba3Backward} {
				if _, err := k.Arithmetic(op, dt); err != nil {
					rep.AddMethodCell(t.Name(), method, dt, kind, "no", 0, 0, true, "")
					continue
				}
				c, err := judgeTrapezoidal(k, op, dt, rotated)
				if err != nil {
					rep.AddMethodCell(t.Name(), method, dt, kind, "bridge", 0, 0, false, op+": "+err.Error())
					t.Errorf("%v %s %s: %v", dt, kind, op, err)
					continue
				}
				passed := c.NonFinite == 0 && c.Worst.Ratio <= judge.Threshold(dt)
				rep.AddMethodCell(t.Name(), method, dt, kind, "bridge", c.Worst.Ratio, c.Worst.ULP, passed, op+": "+c.Worst.String())
				if !passed {
					t.Errorf("%v %s %s: ratio %.3g > %g at %s", dt, kind, op, c.Worst.Ratio, judge.Threshold(dt), c.Worst)
				}
			}
		}
	}
}

// TestTrapezoidalCanFail: the same judgement fails the numpy path with
// γ's Δ dropped (slip=gamma-no-dt) in the forward, and with σ' dropped
// from dTrap in the backward.
func TestTrapezoidalCanFail(t *testing.T) {
	for _, c := range []struct{ slip, op string }{{"gamma-no-dt", bridge.OpMamba3Forward}, {"bwd-dtrap-no-sigmoid", bridge.OpMamba3Backward}} {
		cmp, err := judgeTrapezoidal(trapezoidalKernel(t, c.slip), c.op, ssm.F32, true)
		if err != nil {
			t.Fatal(err)
		}
		if cmp.Worst.Ratio <= judge.Threshold(ssm.F32) {
			t.Errorf("slip %s passed (ratio %.3g)", c.slip, cmp.Worst.Ratio)
		}
	}
}

// trapezoidalKernel starts the numpy path (with slip planted, if any); a
// machine without python3 and numpy skips the test.
func trapezoidalKernel(t *testing.T, slip string) *bridge.Mamba3 {
	t.Helper()
	var args []string
	if slip != "" {
		args = []string{"slip=" + slip}
	}
	w, err := bridge.Start(bridge.Spec{Python: bridge.FindPython(), Adapter: "numpy_mamba3", Args: args})
	if err != nil {
		t.Skipf("the bridge's numpy path does not start (python3 with numpy): %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return &bridge.Mamba3{W: w}
}

// judgeTrapezoidal runs op of k on a Mamba block's problem in dt (a
// rotation on two pairs, or none) with D, z and an initial state, and
// judges every output (and, for the backward, every gradient).
func judgeTrapezoidal(k *bridge.Mamba3, op string, dt ssm.DType, rotated bool) (judge.Comparison, error) {
	o := mamba3.Options{Batch: 2, Seqlen: 48, HeadsQK: 1, Heads: 2, N: 8, P: 4, D: true, Z: true, State: true}
	if rotated {
		o.AngleDim = 2
	}
	if op == bridge.OpMamba3Step {
		o.Seqlen = 1
	}
	p := mamba3.Generate(o, 500)
	p.DType = dt
	a, err := k.Arithmetic(op, dt)
	if err != nil {
		return judge.Comparison{}, err
	}
	p.Arithmetic = a
	p = p.Rounded()
	want, wst := mamba3.Forward(p)
	var arrays []judge.Array
	if op == bridge.OpMamba3Backward {
		ct := mamba3.GenerateCotangent(p, true, 501)
		y, st, g, err := k.Backward(p, ct)
		if err != nil {
			return judge.Comparison{}, err
		}
		ga, err := judge.Mamba3GradArrays(p, g, mamba3.Grad(p, ct), mamba3.GradErrorScale(p, ct))
		if err != nil {
			return judge.Comparison{}, err
		}
		arrays = append(judge.Mamba3Arrays(p, y, want, st, wst, mamba3.ErrorScale(p)), ga...)
	} else {
		y, st, err := k.Forward(op, p)
		if err != nil {
			return judge.Comparison{}, err
		}
		arrays = judge.Mamba3Arrays(p, y, want, st, wst, mamba3.ErrorScale(p))
	}
	c, _, err := judge.CompareArrays(arrays)
	if err != nil {
		return c, fmt.Errorf("judging %s: %w", op, err)
	}
	return c, nil
}

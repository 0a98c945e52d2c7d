package mamba2

import (
	"testing"

	"ssmverify/bridge"
	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/mamba2"
	"ssmverify/report"
	"ssmverify/ssm"
)

// slipKernel is the numpy path with slip planted, in a worker of its own
// (whatever SSMK_BRIDGE says), closed with the test.
func slipKernel(t *testing.T, slip string) *bridge.SSD {
	t.Helper()
	w, err := bridge.Start(bridge.Spec{Python: spec.Python, Adapter: "numpy_ssd", Args: []string{"slip=" + slip}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return &bridge.SSD{W: w}
}

// TestMamba2DiagnosisOfPlantedSlips plants each slip of the numpy path
// (bridge/python/adapters/numpy_ssd.py, slip=NAME) in a worker of its own,
// whatever SSMK_BRIDGE says, and requires that the suite's judgement fails
// it and the diagnosis names it: the proof that each check of this
// package can fail, and the diagnosis' own test on a real kernel path.
func TestMamba2DiagnosisOfPlantedSlips(t *testing.T) {
	track(t)
	f32 := pair{ssm.F32, ssm.F32}
	prefill := func(mod func(o *mamba2.Options)) func() (*mamba2.Problem, *mamba2.Step) {
		return func() (*mamba2.Problem, *mamba2.Step) {
			o := mamba2.Options{Batch: 2, Seqlen: 150, Heads: 4, Headdim: 4, Groups: 2, Dstate: 8, Chunk: 32, DType: f32.in, StateDType: f32.state}
			mod(&o)
			p := mamba2.Generate(o, 71)
			if !o.Softplus && o.DtBias {
				for h := range p.DtBias {
					p.DtBias[h] = -0.02
				}
			}
			return p.Rounded(), nil
		}
	}
	step := func(o mamba2.StepOptions) func() (*mamba2.Problem, *mamba2.Step) {
		return func() (*mamba2.Problem, *mamba2.Step) {
			o.DType, o.StateDType = ssm.F32, ssm.F32
			return nil, mamba2.GenerateStep(o, 72).Rounded()
		}
	}
	for _, c := range []struct {
		slip, want string
		problem    func() (*mamba2.Problem, *mamba2.Step)
	}{
		{"drop-init", "init-state:dropped", prefill(func(o *mamba2.Options) { o.InitialStates = true })},
		{"no-reset", "varlen:no-reset", prefill(func(o *mamba2.Options) { o.Batch, o.CuSeqlens = 1, []int{0, 40, 41, 100, 150} })},
		{"group-repeat", "groups:repeat", prefill(func(o *mamba2.Options) {})},
		{"no-dt-limit", "dt:no-limit", prefill(func(o *mamba2.Options) { o.DtBias = true })},
		{"state-bf16", "narrow:state-bf16", prefill(func(o *mamba2.Options) { o.InitialStates = true })},
		{"softplus-log-exp", "dt:softplus-log-exp", prefill(func(o *mamba2.Options) { o.DtBias, o.Softplus = true, true })},
		{"seq-states-no-init", "varlen:seq-states-no-init", prefill(func(o *mamba2.Options) { o.Batch, o.CuSeqlens, o.InitialStates = 1, []int{0, 20, 150}, true })},
		{"no-bias-decode", "dt:no-bias", step(mamba2.StepOptions{Batch: 2, Slots: 2, Heads: 4, Headdim: 4, Groups: 2, Dstate: 8, DtBias: true, Softplus: true})},
		{"padding-written", "decode:padding-written", step(mamba2.StepOptions{Batch: 3, Slots: 4, Heads: 4, Headdim: 4, Groups: 2, Dstate: 8, Indices: []int{2, -1, 0}})},
		{"last-state-stale", "decode:state-not-written", step(mamba2.StepOptions{Batch: 2, Slots: 2, Heads: 4, Headdim: 4, Groups: 2, Dstate: 8})},
	} {
		t.Run(c.slip, func(t *testing.T) {
			k := slipKernel(t, c.slip)
			p, s := c.problem()
			var f report.Finding
			var ratio float64
			if p != nil {
				got, err := k.Prefill(p)
				if err != nil {
					t.Fatal(err)
				}
				want, sc := mamba2.Prefill(p)
				cmp, _, _ := judge.CompareArrays(judge.PrefillArrays(p, got, want, sc))
				ratio = cmp.Worst.Ratio
				f = diagnose.SSDPrefill(p, got, k.Prefill)
			} else {
				got, err := k.Step(s)
				if err != nil {
					t.Fatal(err)
				}
				want, sc := mamba2.Decode(s)
				cmp, _, _ := judge.CompareArrays(judge.StepArrays(s, got, want, sc))
				ratio = cmp.Worst.Ratio
				f = diagnose.SSDStep(s, got)
			}
			if ratio <= judge.Threshold(ssm.F32) {
				t.Fatalf("slip %s passed the judgement (ratio %.3g)", c.slip, ratio)
			}
			if f.Tag != c.want {
				t.Errorf("slip %s (ratio %.3g): diagnosis [%s] %s, want %s", c.slip, ratio, f.Tag, f, c.want)
			} else {
				t.Logf("slip %s: ratio %.3g, [%s] %s", c.slip, ratio, f.Tag, f)
			}
		})
	}
}

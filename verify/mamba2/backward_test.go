package mamba2

import (
	"errors"
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

// backwardBase is the backward's problem: the forward's dimensions on a
// shorter row (three chunks of 64 and a part), two groups of two heads.
func backwardBase(dt pair) mamba2.Options {
	o := base(dt)
	o.Seqlen, o.Chunk = 200, backwardChunk()
	return o
}

// backwardChunk is the chunk the kernel's backward declares (chunk's rule
// for ssd_bwd: 0 for a sequential backward).
func backwardChunk() int {
	c, ok := kernel.Cap(bridge.OpBackward)
	switch {
	case !ok:
		return chunk()
	case c.Algorithm == "sequential":
		return 0
	case len(c.ChunkSizes) > 0:
		return c.ChunkSizes[0]
	}
	return 64
}

// backwardCases are the combinations of TestMamba2Backward: each option
// of upstream's backward (D, z, dt_bias with softplus, the dt limit's
// clamp, initial states, packed sequences with seq_idx), then all of them.
// With states the cotangent has the final states' part too.
var backwardCases = []struct {
	name   string
	mod    func(o *mamba2.Options)
	states bool
	all    bool // run in every dtype pair, not only fp32 and bf16/state-fp32
}{
	{"plain", func(o *mamba2.Options) {}, false, true},
	{"D+z", func(o *mamba2.Options) { o.D, o.Z = true, true }, false, false},
	{"dt_bias+softplus", func(o *mamba2.Options) { o.DtBias, o.Softplus = true, true }, false, false},
	{"dt_limit", func(o *mamba2.Options) { o.DtBias, o.Softplus, o.DtMin, o.DtMax = true, true, 0.004, 0.05 }, false, false},
	{"initial_states", func(o *mamba2.Options) { o.InitialStates = true }, true, false},
	{"one_group", func(o *mamba2.Options) { o.Groups = 1 }, false, false},
	// a model's sizes (headdim 64, dstate 128): several programs along
	// the head dimension and the state, where the kernels' program axes
	// and block offsets are more than 0
	{"headdim_64+dstate_128", func(o *mamba2.Options) { o.Headdim, o.Dstate, o.D, o.DtBias, o.Softplus = 64, 128, true, true, true }, true, false},
	// sixteen heads in one group: several programs over a group's heads
	{"16_heads_1_group", func(o *mamba2.Options) { o.Heads, o.Groups = 16, 1 }, false, false},
	{"packed", func(o *mamba2.Options) { o.Batch, o.CuSeqlens = 1, []int{0, 40, 41, 130, 200} }, true, false},
	{"packed+initial_states", func(o *mamba2.Options) { o.Batch, o.CuSeqlens, o.InitialStates = 1, []int{0, 40, 41, 130, 200}, true }, true, false},
	{"all", func(o *mamba2.Options) {
		o.D, o.Z, o.DtBias, o.Softplus, o.InitialStates, o.DtMin, o.DtMax = true, true, true, true, true, 0.001, 0.1
	}, true, true},
	// D per head and channel (upstream's D_has_hdim), with the gate: the
	// per-channel branches of the dz and dx kernels (last, so that the
	// cases before keep the seeds they were measured with)
	{"D_per_channel+z", func(o *mamba2.Options) { o.D, o.DPerChannel, o.Z = true, true, true }, false, false},
	// a group per head: more than two groups, so that a head's group
	// index gone wrong reads another's B and C
	{"group_per_head", func(o *mamba2.Options) { o.Groups = o.Heads }, false, false},
	// D per channel without the gate: a kernel may take dD from another
	// kernel when z is given (upstream's dz kernel) and from its dx kernel
	// without, so each is judged (a mutant of the dx kernel's per-channel
	// dD survived D_per_channel+z alone)
	{"D_per_channel", func(o *mamba2.Options) { o.D, o.DPerChannel = true, true }, false, false},
	// more chunks times heads than SMs (2 rows · 8 chunks · 12 heads): upstream's
	// _chunk_state_bwd_db gives each program ⌈batch·chunks·heads / SMs⌉
	// heads of a group (2 here on GPUs of fewer than 192 SMs, an H200's
	// 132), so that a group of 3 heads ends in a partial share — the bound
	// of that loop, which no smaller problem reaches
	{"512_steps_3_heads_per_group", func(o *mamba2.Options) { o.Seqlen, o.Heads, o.Groups = 512, 12, 4 }, false, false},
}

// backwardProblem returns case c's problem in dt and its cotangent (the
// final states' part where the case says; never the sequences' states,
// which TestMamba2BackwardSeqStates asks for), both rounded to the types
// the kernel receives them in.
func backwardProblem(name string, dt pair) (*mamba2.Problem, *mamba2.Cotangent) {
	for i, c := range backwardCases {
		if c.name == name {
			o := backwardBase(dt)
			c.mod(&o)
			p := mamba2.Generate(o, uint64(600+i)).Rounded()
			ct := mamba2.GenerateCotangent(p, uint64(620+i), c.states)
			ct.SeqStates = nil
			return p, ct.Rounded(p)
		}
	}
	return nil, nil
}

// backwardVerdict is one backward's judgement.
type backwardVerdict struct {
	out     *mamba2.Output
	g       *mamba2.Grads
	worst   judge.Worst // the worse of the forward's and the gradients'
	ratio   float64     // worst's
	each    string      // the forward's worst, and every gradient's
	passed  bool
	finding report.Finding
	judged  bool // false: refused, or no result (recorded already)
}

// judgedBackward judges a backward's result (out, g) of p for ct: the
// forward it ran and every gradient against the float64 adjoint
// (mamba2.Grad) with the gradients' error model (mamba2.GradErrorScale),
// a failure diagnosed by diagnose.SSDBackward with run (the kernel's
// prefill; nil: none) and runBwd (its backward, for the slices' probes); a pass is failed where a gradient follows a
// structural relation within the model (diagnose.SSDBackwardHidden). The one judgement of the backward's tests, its fuzz
// target and the planted Triton mutants.
func judgedBackward(p *mamba2.Problem, ct *mamba2.Cotangent, out *mamba2.Output, g *mamba2.Grads, run diagnose.SSDRunner, runBwd diagnose.SSDBackwardRunner) backwardVerdict {
	v := backwardVerdict{out: out, g: g, judged: true, ratio: math.Inf(1)}
	want, sc := mamba2.Prefill(p)
	fc, _, err := judge.CompareArrays(judge.PrefillArrays(p, out, want, sc))
	var ga []judge.Array
	ref := mamba2.Grad(p, ct)
	if err == nil {
		ga, err = judge.Mamba2GradArrays(p, g, ref, mamba2.GradErrorScale(p, ct))
	}
	var gc judge.Comparison
	var ratios map[string][]float64
	if err == nil {
		gc, ratios, err = judge.CompareArrays(ga)
	}
	if err != nil {
		// a missing array or one of the wrong length: the kernel's failure
		v.finding = report.Finding{Tag: "bwd:missing", Cause: err.Error(), Where: p.Shape()}
		v.worst = judge.Worst{Ratio: v.ratio, Array: err.Error()}
		return v
	}
	v.each = fmt.Sprintf("forward: worst %s; gradients: %s", fc.Worst, judge.WorstByArray(ga, ratios))
	th := judge.Threshold(p.DType)
	fwdOK := fc.NonFinite == 0 && fc.Worst.Ratio <= th
	gradOK := gc.NonFinite == 0 && gc.Worst.Ratio <= th
	v.worst = fc.Worst
	if gc.Worst.Ratio > v.worst.Ratio || math.IsNaN(gc.Worst.Ratio) || gc.NonFinite > 0 {
		v.worst = gc.Worst
	}
	v.ratio, v.passed = v.worst.Ratio, fwdOK && gradOK
	if !v.passed {
		v.finding = diagnose.SSDBackward(p, ct, out, g, run, runBwd)
		return v
	}
	// within the model, a gradient may still follow a wrong formula the
	// normwise bound is too wide to see
	if f := diagnose.SSDBackwardHidden(p, ct, ref, ga); f.Tag != "" {
		v.passed, v.finding = false, f
	}
	return v
}

// prefillRunner is k's prefill for the backward's diagnosis, at the
// prefill's own chunk (a sequential backward's problem has none); nil
// where k declares no prefill of p.
func prefillRunner(k *bridge.SSD, p *mamba2.Problem) diagnose.SSDRunner {
	if k.SupportsOp(bridge.OpPrefill, p) != "" {
		return nil
	}
	return func(q *mamba2.Problem) (*mamba2.Output, error) {
		f := *q
		f.Chunk = chunk()
		return k.Prefill(&f)
	}
}

// runBackward runs k's backward on p for ct, telling a crash, a refusal and
// an exception apart.
func runBackward(t *testing.T, k *bridge.SSD, p *mamba2.Problem, ct *mamba2.Cotangent, record bool) (*mamba2.Output, *mamba2.Grads, bool) {
	t.Helper()
	op := bridge.OpBackward
	if why := k.SupportsOp(op, p); why != "" {
		if record {
			rep.KernelUnsupported(t.Name(), op, p.DType, p.StateDType, why)
		}
		t.Logf("not declared: %s", why)
		return nil, nil, false
	}
	out, g, err := k.Backward(p, ct)
	var crash *bridge.CrashError
	switch {
	case errors.As(err, &crash):
		if record {
			rep.KernelCrash(t.Name(), op, p.DType, p.StateDType, crash.Cause)
		}
		t.Errorf("ssd_bwd %s: crash: %s", p.Shape(), crash.Cause)
		return nil, nil, false
	case bridge.Unsupported(err):
		if record {
			rep.KernelUnsupported(t.Name(), op, p.DType, p.StateDType, err.Error())
		}
		t.Logf("unsupported: %v", err)
		return nil, nil, false
	case err != nil:
		if record {
			rep.AddKernel(t.Name(), op, p.DType, p.StateDType, math.Inf(1), false, err.Error())
			rep.AddKernelDiagnosis(t.Name(), op, p.DType, p.StateDType, raised(err, p.Shape()))
		}
		t.Errorf("ssd_bwd %s: %v", p.Shape(), err)
		return nil, nil, false
	}
	return out, g, true
}

// judgeBackward runs k's backward on p for ct and judges it
// (judgedBackward). With record the verdict and the diagnosis go into the
// report (not for a planted slip's kernel).
func judgeBackward(t *testing.T, k *bridge.SSD, p *mamba2.Problem, ct *mamba2.Cotangent, record bool) backwardVerdict {
	t.Helper()
	op := bridge.OpBackward
	out, g, ok := runBackward(t, k, p, ct, record)
	if !ok {
		return backwardVerdict{ratio: math.Inf(1)}
	}
	v := judgedBackward(p, ct, out, g, prefillRunner(k, p), k.Backward)
	if v.each != "" {
		t.Log(v.each)
	}
	if record {
		text := v.worst.String()
		if v.each == "" {
			text = v.finding.Cause // no comparison: the missing array
		}
		rep.AddKernel(t.Name(), op, p.DType, p.StateDType, v.ratio, v.passed, text)
		if !v.passed {
			rep.AddKernelDiagnosis(t.Name(), op, p.DType, p.StateDType, v.finding)
		}
	}
	return v
}

// TestMamba2Backward judges the backward (upstream: mamba_chunk_scan_combined
// under autograd) in every declared dtype pair: the forward it runs and the
// gradients of x, dt, A, B, C, D, z, dt_bias and the initial states.
func TestMamba2Backward(t *testing.T) {
	track(t)
	for _, dt := range pairs {
		for _, c := range backwardCases {
			if !c.all && !(dt == pairs[0] || dt == pairs[1]) {
				continue
			}
			t.Run(dt.String()+"/"+c.name, func(t *testing.T) {
				p, ct := backwardProblem(c.name, dt)
				v := judgeBackward(t, kernel, p, ct, true)
				if why := kernel.SupportsOp(bridge.OpBackward, p); why != "" {
					t.Skipf("not declared: %s", why) // recorded in the report; a skip, not a pass, in go test's counts
				}
				if v.judged && !v.passed {
					t.Errorf("ssd_bwd %s: ratio %.3g > %g; diagnosis [%s] %s", p.Shape(), v.ratio, judge.Threshold(p.DType), v.finding.Tag, v.finding)
				}
			})
		}
	}
}

// TestMamba2BackwardSeqStates asks for the gradients of a packed row's
// per-sequence states too (the cotangent of every sequence's final state):
// judged where the kernel takes it, recorded as unsupported where it
// declares it so (upstream's backward asserts return_varlen_states off).
func TestMamba2BackwardSeqStates(t *testing.T) {
	track(t)
	dt := pairs[0]
	o := backwardBase(dt)
	o.Batch, o.CuSeqlens, o.InitialStates, o.D = 1, []int{0, 64, 65, 200}, true, true
	p := mamba2.Generate(o, 640).Rounded()
	ct := mamba2.GenerateCotangent(p, 641, true).Rounded(p)
	v := judgeBackward(t, kernel, p, ct, true)
	if v.judged && !v.passed {
		t.Errorf("ssd_bwd with d_seq_states: ratio %.3g; diagnosis [%s] %s", v.ratio, v.finding.Tag, v.finding)
	}
}

// TestMamba2BackwardDiagnosisOfPlantedSlips plants each backward slip of
// the numpy path (slip=bwd-…) and requires that the judgement fails it
// and that the diagnosis names the wrong gradient and its relation to the
// reference: relations read from the structure of the chain rule
// (mamba2.GradWithout, mamba2.GradLacking), none written for these slips.
func TestMamba2BackwardDiagnosisOfPlantedSlips(t *testing.T) {
	track(t)
	for _, c := range []struct{ slip, want string }{
		{"bwd-da-no-delta", "bwd:dA:lacks(Δ)"},
		{"bwd-dx-no-skip", "bwd:dx:no-path:skip"},
		{"bwd-dinit-undecayed", "bwd:dinitial_states:lacks(a₀)"},
	} {
		t.Run(c.slip, func(t *testing.T) {
			k := slipKernel(t, c.slip)
			o := mamba2.Options{Batch: 2, Seqlen: 40, Heads: 4, Headdim: 4, Groups: 2, Dstate: 8, D: true, InitialStates: true, DType: ssm.F32, StateDType: ssm.F32}
			p := mamba2.Generate(o, 650).Rounded()
			v := judgeBackward(t, k, p, mamba2.GenerateCotangent(p, 651, true).Rounded(p), false)
			switch {
			case !v.judged:
				t.Fatalf("slip %s: no result to judge", c.slip)
			case v.passed:
				t.Errorf("slip %s passed the judgement (ratio %.3g)", c.slip, v.ratio)
			case !strings.Contains(v.finding.Tag, c.want):
				t.Errorf("slip %s (ratio %.3g): diagnosis [%s] %s, want %s", c.slip, v.ratio, v.finding.Tag, v.finding, c.want)
			default:
				t.Logf("slip %s: ratio %.3g, [%s] %s", c.slip, v.ratio, v.finding.Tag, v.finding)
			}
		})
	}
}

// TestMamba2BackwardHiddenRelation: in bf16 the numpy path's dA summed
// without Δ stays within the model's normwise bound (as upstream's kernel
// with the same slip did on the H200), and the judgement fails it all the
// same, named by the relation it follows (diagnose.SSDBackwardHidden).
func TestMamba2BackwardHiddenRelation(t *testing.T) {
	track(t)
	k := slipKernel(t, "bwd-da-no-delta")
	p, ct := backwardProblem("plain", pair{ssm.BF16, ssm.F32})
	p.Chunk = 64
	out, g, err := k.Backward(p, ct)
	if err != nil {
		t.Fatal(err)
	}
	v := judgedBackward(p, ct, out, g, nil, nil)
	switch {
	case v.ratio > judge.Threshold(p.DType):
		t.Fatalf("the slip is beyond the model (ratio %.3g): no test of the hidden relation", v.ratio)
	case v.passed || !strings.Contains(v.finding.Tag, "bwd:dA:lacks(Δ)"):
		t.Errorf("dA without Δ within the model (ratio %.3g): passed %v, diagnosis [%s], want bwd:dA:lacks(Δ)", v.ratio, v.passed, v.finding.Tag)
	default:
		t.Logf("[%s] %s", v.finding.Tag, v.finding.Cause)
	}
}

package mamba3

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"ssmverify/bridge"
	"ssmverify/judge"
	"ssmverify/mamba3"
	"ssmverify/report"
	"ssmverify/ssm"
	"ssmverify/verify/bridgetest"
)

// A scaleCase is a Mamba-3 call at a deployment's size: the operation,
// its shape (one query/key group, so that any heads can be cut out), and
// the heads judged against the float64 reference of those heads alone
// (mamba3.Problem.HeadsOf: the layer's heads never mix), where the whole
// problem's reference would not fit in memory.
type scaleCase struct {
	name                    string
	op                      string
	batch, seqlen           int
	heads, n, p, angles     int
	judged                  []int
	withState, withDAndGate bool
}

// scaleCases are the sizes the engines serve: a million tokens; V and y
// past 2³¹ elements (128 heads of 64: a 32-bit element offset wraps at
// token 2³¹/8192 = 262144); 64 heads of 64 with a state of 128 at 64K
// tokens; a decode step of 4100 rows whose SSM state passes 2³¹ elements
// (rows from 4096 on: 64 heads of 64 by 128 is 2¹⁹ a row).
var scaleCases = []scaleCase{
	{"1M-tokens", bridge.OpMamba3Forward, 1, 1 << 20, 2, 64, 64, 16, []int{1}, false, true},
	{"v-past-2^31-elements", bridge.OpMamba3Forward, 1, 1<<18 + 1<<12, 128, 64, 64, 16, []int{127}, false, false},
	{"64-heads-state-128-64K", bridge.OpMamba3Forward, 1, 1 << 16, 64, 128, 64, 32, []int{0, 63}, true, true},
	{"step-state-past-2^31-elements", bridge.OpMamba3Step, 4100, 1, 64, 128, 64, 32, []int{0, 63}, true, true},
}

// scaleProblem draws case c with seqlen tokens and batch rows, bf16 (what
// upstream's wrapper casts to), prepared for k's declared arithmetic.
func scaleProblem(k *bridge.Mamba3, c scaleCase, batch, seqlen int) (*mamba3.Problem, error) {
	o := mamba3.Options{Batch: batch, Seqlen: seqlen, HeadsQK: 1, Heads: c.heads, N: c.n, P: c.p, AngleDim: c.angles,
		D: c.withDAndGate, Z: c.withDAndGate, State: c.withState}
	p := mamba3.Generate(o, 85)
	p.DType = ssm.BF16
	a, err := k.Arithmetic(c.op, p.DType)
	if err != nil {
		return nil, err
	}
	p.Arithmetic = a
	return p.RoundInPlace(), nil
}

// judgeHeads judges k's output of p at heads (their channels
// bridgetest.ScaleChannels) against their float64 reference: whether it passes, the worst, and the first failing token
// (a step: row) of y (−1: none).
func judgeHeads(p *mamba3.Problem, y []float64, st *mamba3.State, heads []int) (bool, judge.Worst, int) {
	ch := bridgetest.ScaleChannels(p.P)
	q := p.ChannelsOf(heads, ch)
	want, wst := mamba3.Forward(q)
	gy, gst := p.OutputChannelsOf(y, heads, ch), st.ChannelsOf(p.Heads, p.N, p.P, p.AngleDim, heads, ch)
	c, ratios, err := judge.CompareArrays(judge.Mamba3Arrays(q, gy, want, gst, wst, mamba3.ErrorScale(q)))
	if err != nil {
		return false, judge.Worst{Ratio: math.Inf(1), Array: err.Error()}, 0
	}
	th := judge.Threshold(p.DType)
	first := -1
	per := len(heads) * len(ch)
	for i, r := range ratios["y"] {
		if r > th || math.IsNaN(r) {
			first = i / per // token index over batch × seqlen
			break
		}
	}
	return c.NonFinite == 0 && c.Worst.Ratio <= th, c.Worst, first
}

// scaleCheck runs case c against k, failing t where strict, and returns
// the finding of a failure (no Tag where it passed). A case that fails, a
// crash included, is run again at half its length (a step: half its rows)
// and half again (bridgetest.ScaleFinding): a failure that appears only
// past a size is said so (scale:past-size), with the sizes and the first
// failing token's element offset of V.
func scaleCheck(t *testing.T, k *bridge.Mamba3, c scaleCase, strict bool) report.Finding {
	rep := repFor(k)
	fail := t.Logf
	if strict {
		fail = t.Errorf
	}
	size := func(q *mamba3.Problem) string {
		return fmt.Sprintf("%d×%d tokens: V and y of %d elements, the SSM state of %d", q.Batch, q.Seqlen, q.Batch*q.Seqlen*q.Heads*q.P,
			q.NumSeqs()*q.Heads*q.P*q.N)
	}
	run := func(batch, seqlen int) (*mamba3.Problem, bool, string, int, bool) {
		p, err := scaleProblem(k, c, batch, seqlen)
		if err != nil {
			return nil, false, err.Error(), -1, false
		}
		if why := k.Supports(c.op, p); why != "" {
			rep.KernelUnsupported(t.Name(), c.op, p.DType, p.DType.Weight(), why)
			t.Skip(why)
		}
		y, st, err := k.Forward(c.op, p)
		if bridge.Unsupported(err) {
			rep.KernelUnsupported(t.Name(), c.op, p.DType, p.DType.Weight(), err.Error())
			t.Skip("not supported: " + err.Error())
		}
		if err != nil {
			return p, false, "the call: " + err.Error(), -1, true
		}
		ok, w, first := judgeHeads(p, y, st, c.judged)
		return p, ok, fmt.Sprintf("heads %v, channels %v: worst %s", c.judged, bridgetest.ScaleChannels(p.P), w), first, false
	}
	p, ok, where, first, crashed := run(c.batch, c.seqlen)
	if p == nil {
		t.Fatalf("%s: %s", c.name, where)
	}
	rep.AddKernel(t.Name(), c.op, p.DType, p.DType.Weight(), 0, ok, where)
	if ok {
		t.Logf("%s (%s): %s", c.name, size(p), where)
		return report.Finding{}
	}
	full := bridgetest.ScaleRun{Crashed: crashed, Size: size(p), Where: where, First: first, Offset: first * p.Heads * p.P}
	f, _ := bridgetest.ScaleFinding(full, "V", func(k int) (bridgetest.ScaleRun, bool) {
		hb, hl := c.batch, c.seqlen>>k
		if c.op == bridge.OpMamba3Step {
			hb, hl = c.batch>>k, c.seqlen
		}
		if hb < 1 || hl < 1 {
			return bridgetest.ScaleRun{}, false
		}
		q, qok, qwhere, _, qcrashed := run(hb, hl)
		if q == nil {
			return bridgetest.ScaleRun{}, false
		}
		return bridgetest.ScaleRun{OK: qok, Crashed: qcrashed, Size: size(q), Where: qwhere}, true
	})
	rep.AddKernelDiagnosis(t.Name(), c.op, p.DType, p.DType.Weight(), f)
	fail("%s: %s; diagnosis [%s] %s", c.name, where, f.Tag, f)
	return f
}

// TestMamba3Scale runs Mamba-3's forward and decode step at the sizes the
// engines serve (scaleCases), each judged at some heads against their
// float64 reference. Tens of GiB of host memory and many minutes of CPU
// for the references: it runs only with SSMK_SCALE=1 (scripts/gpu.sh
// scale3), else it is skipped; TestMamba3ScaleMachinery runs its
// judgement on small shapes everywhere.
func TestMamba3Scale(t *testing.T) {
	track(t)
	if os.Getenv("SSMK_SCALE") != "1" {
		t.Skip("the deployment sizes run with SSMK_SCALE=1 (scripts/gpu.sh scale3): tens of GiB")
	}
	for _, c := range scaleCases {
		t.Run(c.name, func(t *testing.T) { scaleCheck(t, kernel, c, true) })
	}
}

// TestMamba3ScaleMachinery runs TestMamba3Scale's judgement on small
// shapes against the numpy path: the forward and the step pass, and the
// numpy path's slip past-size (the outputs of tokens, or of a step's rows,
// from 512 on corrupted) is diagnosed scale:past-size with token 512 the
// first failing one.
func TestMamba3ScaleMachinery(t *testing.T) {
	track(t)
	small := []scaleCase{
		{"small", bridge.OpMamba3Forward, 1, 1024, 4, 8, 4, 2, []int{0, 3}, true, true},
		{"small-step", bridge.OpMamba3Step, 1024, 1, 4, 8, 4, 2, []int{1}, true, true},
	}
	start := func(slip string) *bridge.Mamba3 {
		w, err := bridge.Start(bridge.Spec{Python: spec.Python, Adapter: "numpy_mamba3", Args: []string{"slip=" + slip}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		return &bridge.Mamba3{W: w}
	}
	right, wrong := start(""), start("past-size")
	for _, c := range small {
		if f := scaleCheck(t, right, c, true); f.Tag != "" {
			t.Errorf("%s: the numpy path: [%s] %s", c.name, f.Tag, f)
		}
		f := scaleCheck(t, wrong, c, false)
		if f.Tag != "scale:past-size" || !strings.Contains(f.Where, "first failing token 512") {
			t.Errorf("%s: a kernel wrong past token 512 diagnosed [%s] %s, want scale:past-size at token 512", c.name, f.Tag, f)
		}
	}
}

package mamba2

import (
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"ssmverify/bridge"
	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/mamba2"
	"ssmverify/report"
	"ssmverify/ssm"
	"ssmverify/verify/bridgetest"
)

// A scaleCase is a prefill at a deployment's size: its shape, the heads
// whose outputs are judged against the float64 reference of those heads
// alone at a few of their channels (bridgetest.ScaleChannels), over the
// whole sequence of each, where the whole problem's reference would not
// fit in memory, and whether the inputs come as strided views of one
// fused projection (bridge.FeatureFusedProjection).
type scaleCase struct {
	name                string
	batch, seqlen       int
	heads, headdim, dst int
	judged              []int
	fused               bool
}

// scaleCases are the sizes the engines serve: a million tokens; x, y past
// 2³¹ elements (a 32-bit element offset wraps at token 2³¹/(heads·headdim)
// = 262144 here); a state of 256; Mamba-2 2.7B's layer (80 heads of 64,
// state 128) at 64K tokens; the same fed as views of a fused in_proj.
var scaleCases = []scaleCase{
	{"1M-tokens", 1, 1 << 20, 2, 64, 128, []int{1}, false},
	{"x-past-2^31-elements", 1, 1<<18 + 1<<12, 128, 64, 128, []int{127}, false},
	{"dstate-256", 2, 4096, 8, 64, 256, []int{0, 7}, false},
	{"mamba2-2.7b-64K", 1, 1 << 16, 80, 64, 128, []int{0, 40, 79}, false},
	{"mamba2-2.7b-64K-fused-views", 1, 1 << 16, 80, 64, 128, []int{0, 79}, true},
}

// judgeHeads judges the kernel's output of p at heads (their channels
// bridgetest.ScaleChannels) against their float64 reference: whether it
// passes, the worst ratio, and the first failing token (−1: none).
func judgeHeads(p *mamba2.Problem, out *mamba2.Output, heads []int) (bool, judge.Worst, int) {
	ch := bridgetest.ScaleChannels(p.Headdim)
	q := p.ChannelsOf(heads, ch)
	want, sc := mamba2.Prefill(q)
	c, ratios, err := judge.CompareArrays(judge.PrefillArrays(q, out.ChannelsOf(p, heads, ch), want, sc))
	if err != nil {
		return false, judge.Worst{Ratio: math.Inf(1), Array: err.Error()}, 0
	}
	th := judge.Threshold(p.DType)
	first := -1
	per := q.Heads * q.Headdim
	for i, r := range ratios["y"] {
		if r > th || math.IsNaN(r) {
			first = i / per % q.Seqlen
			break
		}
	}
	return c.NonFinite == 0 && c.Worst.Ratio <= th, c.Worst, first
}

// scaleGenerate draws a scale case's problem: bf16 inputs with float32
// states, D, dt_bias and softplus, one group.
func scaleGenerate(c scaleCase, seqlen int) *mamba2.Problem {
	o := mamba2.Options{Batch: c.batch, Seqlen: seqlen, Heads: c.heads, Headdim: c.headdim, Groups: 1, Dstate: c.dst,
		Chunk: chunk(), D: true, DtBias: true, Softplus: true, DType: pairs[1].in, StateDType: pairs[1].state}
	return mamba2.Generate(o, 81).RoundInPlace()
}

// TestMamba2Scale runs the prefill at the sizes the engines serve
// (scaleCases), each judged at some heads against their float64
// reference over the whole sequence. A case that fails, a crash
// included, is run again at half its length and half again
// (bridgetest.ScaleFinding): a failure that appears only past a size is
// said so, with the sizes and the first failing token's element offset
// (the mark of a 32-bit offset). Minutes of CPU and tens of GiB: it runs only with
// SSMK_SCALE=1 (scripts/gpu.sh scale), else it is skipped;
// TestMamba2ScaleMachinery runs its judgement on small shapes everywhere.
func TestMamba2Scale(t *testing.T) {
	track(t)
	if os.Getenv("SSMK_SCALE") != "1" {
		t.Skip("the deployment sizes run with SSMK_SCALE=1 (scripts/gpu.sh scale): tens of GiB")
	}
	for _, c := range scaleCases {
		t.Run(c.name, func(t *testing.T) {
			track(t)
			scaleCheck(t, kernel, c, true)
		})
	}
	// a pool of 2100 slots of 128 heads of 64 by 128: 2.2·10⁹ elements,
	// slot 2048 the first past 2³¹ (a 32-bit offset of slot·stride wraps)
	t.Run("decode-pool-past-2^31-elements", func(t *testing.T) {
		track(t)
		poolCheck(t, kernel, 2100, 128, 64, 128, []int{0, 1000, 2047, 2048, 2098, 2099, -1, 1500}, true)
	})
}

// A poolResult is one decode step on a pool judged: the named slots and
// the rows' outputs against the float64 step of those slots alone, and
// the elements of every other slot that changed.
type poolResult struct {
	ok                    bool
	worst                 judge.Worst
	touched, firstTouched int
	elems                 int
	sub                   *mamba2.Step       // the named slots' step, for the diagnosis
	got                   *mamba2.StepOutput // the kernel's outputs of it
}

// poolStep runs one decode step of rows naming slots (−1: padding) of a
// pool of that many slots, bf16 inputs and states, and judges it. The
// pool is filled by a pattern, not drawn: nothing but its size matters
// here. The step, or why not (unsupported, or the kernel's error).
func poolStep(k *bridge.SSD, slots, heads, headdim, dstate int, rows []int) (poolResult, *mamba2.Step, error) {
	o := mamba2.StepOptions{Batch: len(rows), Slots: 1, Heads: heads, Headdim: headdim, Groups: 1, Dstate: dstate, D: true, DtBias: true,
		Softplus: true, Indices: rows, DType: pairs[2].in, StateDType: pairs[2].state}
	s := mamba2.GenerateStep(o, 83).Rounded()
	n := heads * headdim * dstate
	// filled after the rounding, rounded as it is filled: the pool's copies
	// would not fit beside it
	s.Slots, s.State = slots, make([]float64, slots*n)
	ssm.ParallelBlocks(len(s.State), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			s.State[i] = s.StateDType.Round(float64(uint32(i)*2654435761%2001)/1000 - 1)
		}
	})
	res := poolResult{elems: len(s.State), firstTouched: -1}
	if why := k.SupportsStep(s); why != "" {
		return res, s, &bridge.KernelError{Op: bridge.OpStep, Kind: "unsupported", Message: why}
	}
	out, err := k.Step(s)
	if err != nil {
		return res, s, err
	}
	// the reference: a pool of the named slots alone
	sub := *s
	sub.State, sub.Indices = nil, make([]int, len(rows))
	named := map[int]int{}
	var order []int
	for i, r := range rows {
		sub.Indices[i] = -1
		if r < 0 {
			continue
		}
		if _, ok := named[r]; !ok {
			named[r] = len(order)
			order = append(order, r)
			sub.State = append(sub.State, s.State[r*n:(r+1)*n]...)
		}
		sub.Indices[i] = named[r]
	}
	sub.Slots = len(order)
	want, sc := mamba2.Decode(&sub)
	got := &mamba2.StepOutput{Y: out.Y}
	for _, r := range order {
		got.State = append(got.State, out.State[r*n:(r+1)*n]...)
	}
	c, _, err := judge.CompareArrays(judge.StepArrays(&sub, got, want, sc))
	if err != nil {
		return res, s, err
	}
	res.ok, res.worst, res.sub, res.got = c.NonFinite == 0 && c.Worst.Ratio <= judge.Threshold(s.DType), c.Worst, &sub, got
	for slot := 0; slot < slots; slot++ {
		if _, isNamed := named[slot]; isNamed {
			continue
		}
		for i := slot * n; i < (slot+1)*n; i++ {
			if math.Float64bits(out.State[i]) != math.Float64bits(s.State[i]) {
				res.touched++
				if res.firstTouched < 0 {
					res.firstTouched = slot
				}
			}
		}
	}
	return res, s, nil
}

// poolCheck judges one decode step of rows on a pool of slots (poolStep),
// failing t where strict. A failing pool, a crash included, is stepped
// again at half its slots and half again (the rows' slots taken modulo
// the size; bridgetest.ScaleFinding): a failure only past a size is
// scale:past-size, with the sizes. One at every size is scale:pool (slots
// no row names changed, or the named ones wrong), or the step's own
// diagnosis where it names a cause (diagnose.SSDStep on the named slots:
// a property of the step, not of the pool's size). A crash past a size
// whose smaller pools compute wrong numbers is both: past-size, and the
// step's own cause found at the largest pool that runs.
func poolCheck(t *testing.T, k *bridge.SSD, slots, heads, headdim, dstate int, rows []int, strict bool) report.Finding {
	rk := repFor(k)
	fail := t.Logf
	if strict {
		fail = t.Errorf
	}
	size := func(slots int) string {
		return fmt.Sprintf("pool of %d slots, %d elements", slots, slots*heads*headdim*dstate)
	}
	// verdict is a step's judgement in words: the worst, the slots no row
	// names that changed, or the kernel's error
	verdict := func(res poolResult, err error) (bool, string) {
		switch {
		case err != nil:
			return false, "the call: " + err.Error()
		case res.touched > 0:
			return false, fmt.Sprintf("%d elements of slots no row names changed, the first in slot %d (its offset %d)", res.touched, res.firstTouched,
				res.firstTouched*heads*headdim*dstate)
		}
		return res.ok, "worst " + res.worst.String()
	}
	res, s, err := poolStep(k, slots, heads, headdim, dstate, rows)
	skipRefused(t, rk, bridge.OpStep, s.DType, s.StateDType, err)
	ok, why := verdict(res, err)
	where := fmt.Sprintf("%s; slots %v: %s", size(slots), rows, why)
	dt, sdt := s.DType, s.StateDType
	s = nil // tens of GiB: the smaller pools need the memory
	rk.AddKernel(t.Name(), bridge.OpStep, dt, sdt, res.worst.Ratio, ok, where)
	if ok {
		t.Logf("%s; every other slot unchanged", where)
		return report.Finding{}
	}
	halves := map[int]poolResult{} // the smaller pools that ran, for their step's diagnosis
	f, at := bridgetest.ScaleFinding(bridgetest.ScaleRun{Crashed: err != nil, Size: size(slots), Where: why, First: -1}, "state", func(k2 int) (bridgetest.ScaleRun, bool) {
		m := slots >> k2
		if m < 1 {
			return bridgetest.ScaleRun{}, false
		}
		mrows, seen := make([]int, len(rows)), map[int]bool{}
		for i, r := range rows {
			mrows[i] = -1
			if r >= 0 && !seen[r%m] {
				mrows[i], seen[r%m] = r%m, true
			}
		}
		h, _, herr := poolStep(k, m, heads, headdim, dstate, mrows)
		if herr == nil {
			halves[k2] = h
		}
		hok, hwhy := verdict(h, herr)
		return bridgetest.ScaleRun{OK: hok, Crashed: herr != nil, Size: size(m), Where: hwhy}, true
	})
	// the step's own diagnosis of a wrong step: at full size where every
	// size is wrong, or at the largest that runs where the larger crash
	stepped, stepWhere := res, where
	if h, ran := halves[at]; ran && f.Tag == "scale:past-size" {
		stepped, stepWhere = h, size(slots>>at)
	}
	var d report.Finding
	if !stepped.ok && stepped.touched == 0 && stepped.sub != nil && (err == nil || f.Tag == "scale:past-size") {
		d = diagnose.SSDStep(stepped.sub, stepped.got)
	}
	switch named := d.Tag != "" && d.Tag != "none"; {
	case f.Tag == "scale:fails" && named:
		d.Where = stepWhere + "; " + d.Where
		f = d
	case f.Tag == "scale:fails" && err != nil:
		f.Tag = "raises" // at every size tried
	case f.Tag == "scale:fails":
		f.Tag = "scale:pool"
	case named: // past-size: a crash past a size, the step wrong below it for a cause of its own
		f.Tag += "+" + d.Tag
		f.Cause += fmt.Sprintf("; and at %s the step's own cause: %s", stepWhere, d.Cause)
		f.Evidence = append(f.Evidence, d.Evidence...)
	}
	rk.AddKernelDiagnosis(t.Name(), bridge.OpStep, dt, sdt, f)
	fail("%s; diagnosis [%s] %s", where, f.Tag, f)
	return f
}

// scaleCheck runs case c against k, failing t where strict; it returns
// the finding of a failure (no Tag where it passed).
func scaleCheck(t *testing.T, k *bridge.SSD, c scaleCase, strict bool) report.Finding {
	rk := repFor(k)
	p := scaleGenerate(c, c.seqlen)
	fail := t.Logf
	if strict {
		fail = t.Errorf
	}
	params := map[string]any{}
	if c.fused {
		if cp, ok := k.Cap(bridge.OpPrefill); !ok || !cp.Has(bridge.FeatureFusedProjection) {
			rk.KernelUnsupported(t.Name(), bridge.OpPrefill, p.DType, p.StateDType, "the adapter declares no "+bridge.FeatureFusedProjection)
			t.Skip("not declared: " + bridge.FeatureFusedProjection)
		}
		params[bridge.FeatureFusedProjection] = true
	}
	if why := k.Supports(p); why != "" {
		rk.KernelUnsupported(t.Name(), bridge.OpPrefill, p.DType, p.StateDType, why)
		t.Skip(why)
	}
	elems := func(q *mamba2.Problem) string {
		if q.Chunk < 1 { // a kernel without chunks (the ABI's scan)
			return fmt.Sprintf("l=%d: x and y of %d elements", q.Seqlen, q.XLen())
		}
		return fmt.Sprintf("l=%d: x and y of %d elements, chunk states of %d", q.Seqlen, q.XLen(), q.Batch*q.Heads*q.Headdim*q.Dstate*((q.Seqlen+q.Chunk-1)/q.Chunk))
	}
	run := func(q *mamba2.Problem) (bool, string, int, bool) {
		out, err := k.PrefillWith(q, params)
		skipRefused(t, rk, bridge.OpPrefill, q.DType, q.StateDType, err)
		if err != nil {
			return false, "the call: " + err.Error(), -1, true
		}
		ok, w, first := judgeHeads(q, out, c.judged)
		return ok, fmt.Sprintf("heads %v, channels %v: worst %s", c.judged, bridgetest.ScaleChannels(q.Headdim), w), first, false
	}
	ok, where, first, crashed := run(p)
	rk.AddKernel(t.Name(), bridge.OpPrefill, p.DType, p.StateDType, 0, ok, where)
	if ok {
		t.Logf("%s (%s): %s", c.name, elems(p), where)
		return report.Finding{}
	}
	full := bridgetest.ScaleRun{Crashed: crashed, Size: elems(p), Where: where, First: first, Offset: first * p.Heads * p.Headdim}
	dt, sdt := p.DType, p.StateDType
	p = nil // tens of GiB: the smaller sizes need the memory
	f, _ := bridgetest.ScaleFinding(full, "x", func(k int) (bridgetest.ScaleRun, bool) {
		if c.seqlen>>k < 1 {
			return bridgetest.ScaleRun{}, false
		}
		q := scaleGenerate(c, c.seqlen>>k)
		qok, qwhere, _, qcrashed := run(q)
		return bridgetest.ScaleRun{OK: qok, Crashed: qcrashed, Size: elems(q), Where: qwhere}, true
	})
	rk.AddKernelDiagnosis(t.Name(), bridge.OpPrefill, dt, sdt, f)
	fail("%s: %s; diagnosis [%s] %s", c.name, where, f.Tag, f)
	return f
}

// TestMamba2ScaleMachinery runs TestMamba2Scale's judgement on small
// shapes against the numpy path: a case that passes passes, and a kernel
// wrong only past a size (the numpy path's slip past-size, which corrupts
// the outputs of tokens past 512) is diagnosed scale:past-size with the
// first failing token; the pool's judgement passes the numpy step, fails
// the one that writes a padding row's slot (scale:pool), names the cause
// of one wrong at every size by the step's own diagnosis, and says of the
// one wrong in slots from 512 on that it fails only past a size.
func TestMamba2ScaleMachinery(t *testing.T) {
	track(t)
	small := scaleCase{"small", 1, 1024, 4, 8, 16, []int{0, 3}, false}
	if f := scaleCheck(t, slipKernel(t, ""), small, true); f.Tag != "" {
		t.Errorf("the numpy path at %d tokens: [%s] %s", small.seqlen, f.Tag, f)
	}
	f := scaleCheck(t, slipKernel(t, "past-size"), small, false)
	if f.Tag != "scale:past-size" {
		t.Errorf("a kernel wrong past token 512 diagnosed [%s] %s, want scale:past-size", f.Tag, f)
	}
	t.Logf("[%s] %s", f.Tag, f)
	if f := poolCheck(t, slipKernel(t, ""), 40, 2, 4, 8, []int{0, 39, -1, 20}, true); f.Tag != "" {
		t.Errorf("the numpy step on a pool: [%s] %s", f.Tag, f)
	}
	if f := poolCheck(t, slipKernel(t, "padding-written"), 40, 2, 4, 8, []int{0, 39, -1, 20}, false); f.Tag != "scale:pool" {
		t.Errorf("a step that writes a padding row's slot: [%s] %s, want scale:pool", f.Tag, f)
	}
	// a crash past a size, in the prefill and in the step, is past-size too
	if f := scaleCheck(t, slipKernel(t, "crash-past-size"), small, false); f.Tag != "scale:past-size" || !strings.Contains(f.Cause, "passes at l=512") {
		t.Errorf("a prefill that crashes past 512 tokens diagnosed [%s] %s, want scale:past-size passing at l=512", f.Tag, f)
	}
	if f := poolCheck(t, slipKernel(t, "crash-past-size"), 2048, 1, 2, 4, []int{0, 600, -1, 2047}, false); f.Tag != "scale:past-size" ||
		!strings.Contains(f.Cause, "passes at pool of 512 slots") || !strings.Contains(f.Cause, "fails at pool of 1024 slots, 8192 elements (the call:") {
		t.Errorf("a step that crashes past 512 slots diagnosed [%s] %s, want scale:past-size between 512 and 1024 slots", f.Tag, f)
	}
	// wrong at every size for a cause of the step's own: the step's diagnosis
	// names it (the engines' softplus, a bias left out), not the pool
	if f := poolCheck(t, slipKernel(t, "no-bias-decode"), 40, 2, 4, 8, []int{0, 39, -1, 20}, false); f.Tag != "dt:no-bias" {
		t.Errorf("a step without dt_bias on a pool: [%s] %s, want the step's own diagnosis dt:no-bias", f.Tag, f)
	}
	// a crash past 512 slots beside a step wrong at every size: both said,
	// the step's cause found at the largest pool that runs
	if f := poolCheck(t, slipKernel(t, "crash-past-size+no-bias-decode"), 2048, 1, 2, 4, []int{0, 600, -1, 2047}, false); f.Tag != "scale:past-size+dt:no-bias" ||
		!strings.Contains(f.Cause, "crashes only past a size: runs at pool of 512 slots") || !strings.Contains(f.Cause, "at pool of 512 slots, 4096 elements the step's own cause") {
		t.Errorf("a step crashing past 512 slots, without dt_bias below: [%s] %s, want scale:past-size+dt:no-bias", f.Tag, f)
	}
	// a pool whose slots from 512 on are written wrong passes at half its slots
	if f := poolCheck(t, slipKernel(t, "past-size"), 1024, 1, 2, 4, []int{0, 600, -1, 1023}, false); f.Tag != "scale:past-size" {
		t.Errorf("a step wrong in slots past 512 diagnosed [%s] %s, want scale:past-size", f.Tag, f)
	}
}

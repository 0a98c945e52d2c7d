package diagnose

import (
	"math"
	"slices"
	"strings"
	"testing"

	"ssmverify/judge"
	"ssmverify/mamba2"
	"ssmverify/mamba3"
	"ssmverify/ssm"
)

func ssdProblem(mod func(o *mamba2.Options)) *mamba2.Problem {
	o := mamba2.Options{Batch: 2, Seqlen: 90, Heads: 4, Headdim: 3, Groups: 2, Dstate: 4, Chunk: 32, D: true, Z: true, DtBias: true, Softplus: true,
		InitialStates: true, DType: ssm.F32, StateDType: ssm.F32}
	mod(&o)
	return mamba2.Generate(o, 5).Rounded()
}

func slipByTag(tag string) mamba2.Slip {
	for _, s := range mamba2.Slips() {
		if s.Tag == tag {
			return s
		}
	}
	panic(tag)
}

// TestSSDPrefillNamesEachSlip: a fake kernel computing each slip of the
// catalogue is named by it (the diagnosis' own test without a worker).
func TestSSDPrefillNamesEachSlip(t *testing.T) {
	for _, c := range []struct {
		tag string
		mod func(o *mamba2.Options)
	}{
		{"init-state:dropped", func(o *mamba2.Options) {}},
		{"varlen:no-reset", func(o *mamba2.Options) { o.Batch, o.CuSeqlens = 1, []int{0, 30, 31, 90} }},
		{"varlen:seq-states-no-init", func(o *mamba2.Options) { o.Batch, o.CuSeqlens = 1, []int{0, 20, 90} }},
		{"groups:repeat", func(o *mamba2.Options) {}},
		{"dt:no-bias", func(o *mamba2.Options) {}},
		{"dt:no-softplus", func(o *mamba2.Options) {}},
		{"no-D", func(o *mamba2.Options) {}},
		{"no-z", func(o *mamba2.Options) {}},
		{"narrow:state-bf16", func(o *mamba2.Options) { o.Z = false }},
	} {
		p := ssdProblem(c.mod)
		got, _ := slipByTag(c.tag).Prefill(p)
		f := SSDPrefill(p, got, nil)
		if f.Tag != c.tag && !slices.Contains(f.Also, c.tag) {
			t.Errorf("%s: diagnosis [%s] %s", c.tag, f.Tag, f)
		}
	}
}

// TestSSDPrefillNamesTwoSlips: two slips at once are named together, the
// formula before the precision.
func TestSSDPrefillNamesTwoSlips(t *testing.T) {
	p := ssdProblem(func(o *mamba2.Options) {})
	q := *p
	slipByTag("dt:no-bias").Apply(&q)
	got, _ := slipByTag("no-D").Prefill(&q)
	f := SSDPrefill(p, got, nil)
	if tags := strings.Split(f.Tag, "+"); !slices.Contains(tags, "no-D") || !slices.Contains(tags, "dt:no-bias") {
		t.Errorf("dt:no-bias with no-D: diagnosis [%s] %s", f.Tag, f)
	}
}

// TestSSDStepNamesEachSlip is the same for the decode step.
func TestSSDStepNamesEachSlip(t *testing.T) {
	s := mamba2.GenerateStep(mamba2.StepOptions{Batch: 2, Slots: 3, Heads: 4, Headdim: 3, Groups: 2, Dstate: 4, D: true, Z: true, DtBias: true, Softplus: true,
		DType: ssm.F32, StateDType: ssm.F32}, 6).Rounded()
	for _, tag := range []string{"groups:repeat", "dt:no-bias", "dt:no-softplus", "no-D", "no-z", "decode:state-not-written", "narrow:state-bf16"} {
		got, _ := slipByTag(tag).Step(s)
		if f := SSDStep(s, got); f.Tag != tag && !slices.Contains(f.Also, tag) {
			t.Errorf("%s: diagnosis [%s] %s", tag, f.Tag, f)
		}
	}
	// a padding row's slot written
	s.Indices = []int{2, -1}
	got, _ := mamba2.Decode(s)
	got.State[1*4*3*4] = 7
	if f := SSDStep(s, got); f.Tag != "decode:padding-written" {
		t.Errorf("padding slot written: diagnosis [%s] %s", f.Tag, f)
	}
}

// TestMamba3NamesEachSlip: a fake kernel computing each slip of Mamba-3's
// catalogue is named by it.
func TestMamba3NamesEachSlip(t *testing.T) {
	p := mamba3.Generate(mamba3.Options{Batch: 1, Seqlen: 40, HeadsQK: 1, Heads: 2, N: 8, P: 3, AngleDim: 2, D: true, Z: true, State: true}, 7)
	p.Arithmetic = mamba3.Arithmetic{U: 0x1p-24}
	for _, s := range mamba3.Slips() {
		y, st := mamba3.ForwardVariant(p, s.Variant)
		if f := Mamba3(p, y, st, nil); f.Tag != s.Tag && !slices.Contains(f.Also, s.Tag) {
			t.Errorf("%s: diagnosis [%s] %s", s.Tag, f.Tag, f)
		}
	}
}

// TestMamba3NamesTwoSlipsAndResiduals: two slips together are named as a
// pair; a slip plus a fault outside the catalogue (one corrupted final
// state element) is named with the residual said; a property of the
// arithmetic beside such a fault is said and not named; a result no slip
// comes near is "none".
func TestMamba3NamesTwoSlipsAndResiduals(t *testing.T) {
	p := mamba3.Generate(mamba3.Options{Batch: 1, Seqlen: 40, HeadsQK: 1, Heads: 2, N: 8, P: 3, AngleDim: 2, D: true, Z: true, State: true}, 7)
	p.Arithmetic = mamba3.Arithmetic{U: 0x1p-24}
	slips := mamba3.Slips()
	byTag := map[string]mamba3.Variant{}
	for _, s := range slips {
		byTag[s.Tag] = s.Variant
	}
	v, ok := mamba3.Merge(byTag["m3:gamma-no-dt"], byTag["m3:angle-no-dt"])
	if !ok {
		t.Fatal("Merge refused two independent slips")
	}
	y, st := mamba3.ForwardVariant(p, v)
	if f := Mamba3(p, y, st, nil); f.Tag != "m3:gamma-no-dt+m3:angle-no-dt" {
		t.Errorf("two slips: diagnosis [%s] %s", f.Tag, f)
	}
	if _, ok := mamba3.Merge(byTag["m3:no-previous"], byTag["m3:beta-no-dt"]); ok {
		t.Error("Merge accepted two changes of β")
	}

	y, st = mamba3.ForwardVariant(p, byTag["m3:beta-no-dt"])
	st.SSM[5] += 1
	f := Mamba3(p, y, st, nil)
	if f.Tag != "m3:beta-no-dt" || !strings.Contains(f.Cause, "second fault") || !strings.Contains(f.Where, "ssm_state: 1 of") {
		t.Errorf("slip plus a stray element: diagnosis [%s] %s", f.Tag, f)
	}

	// a property (the angle in bf16) beside a stray element: the property
	// is said, never named as the failure's cause
	y, st = mamba3.ForwardVariant(p, byTag["m3:angle-bf16"])
	st.SSM[5] += 1
	if f := Mamba3(p, y, st, nil); f.Tag == "m3:angle-bf16" || f.Tag == "m3:angle-stored-bf16" || !strings.Contains(strings.Join(f.Evidence, "; "), "a property of the kernel's arithmetic") {
		t.Errorf("bf16 angles plus a stray element: diagnosis [%s] %s; evidence %v", f.Tag, f, f.Evidence)
	}

	y, st = mamba3.Forward(p)
	for i := range y {
		y[i] = -y[i]
	}
	if f := Mamba3(p, y, st, nil); f.Tag != "none" {
		t.Errorf("negated output: diagnosis [%s] %s", f.Tag, f)
	}
}

// TestMamba3PrecisionNeedsItsValues: a float64 kernel whose results are
// rounded to float32 passes the bf16 angles' variant (whose error scale
// carries their rounding) but lies nearer the reference's values than the
// variant's: the angles' precision is not named as its cause.
func TestMamba3PrecisionNeedsItsValues(t *testing.T) {
	p := mamba3.Generate(mamba3.Options{Batch: 1, Seqlen: 40, HeadsQK: 1, Heads: 2, N: 8, P: 3, AngleDim: 2, D: true, Z: true, State: true}, 7)
	p.DType, p.Arithmetic = ssm.F64, mamba3.Arithmetic{U: 0x1p-53}
	y, st := mamba3.Forward(p)
	y, st.Angle, st.SSM = ssm.F32.RoundAll(y), ssm.F32.RoundAll(st.Angle), ssm.F32.RoundAll(st.SSM)
	f := Mamba3(p, y, st, nil)
	if strings.Contains(f.Tag, "m3:angle") {
		t.Errorf("float32 results of a float64 kernel: diagnosis [%s] %s", f.Tag, f)
	}
}

// TestMamba3PrecisionBesideSmallFault: a kernel with the bf16-stored
// angles of upstream's, on a problem where that property alone passes the
// reference (2048 tokens: the error model's angle term has grown past
// it), plus a fault that takes some elements just past the reference's
// threshold and not past the wider one of the property's variant. The
// residual after correcting for the property is the fault: the property
// is not the cause (a mutant storing the backward's Scale at −head was
// once named m3:angle-stored-bf16 so).
func TestMamba3PrecisionBesideSmallFault(t *testing.T) {
	p := mamba3.Generate(mamba3.Options{Batch: 1, Seqlen: 2048, HeadsQK: 2, Heads: 4, N: 32, P: 16, AngleDim: 8, D: true, Z: true}, 240)
	p, v := upstreamBF16(p)
	want, wst := mamba3.Forward(p)
	y, st := mamba3.ForwardVariant(p, v)
	sc := mamba3.ErrorScale(p)
	th := judge.Threshold(p.DType)
	if ok, _ := ssdJudged(judge.Mamba3Arrays(p, y, want, st, wst, sc)); !ok {
		t.Fatal("the property alone fails the reference here: the case tests nothing")
	}
	ratio := func(y []float64) []float64 {
		_, rs := ssdJudged(judge.Mamba3Arrays(p, y, want, st, wst, sc))
		return rs["y"]
	}
	// one head's channel 0 over a stretch of tokens, each taken to 1.3
	// times the threshold (past the output's rounding, the ratio is
	// linear in a difference of one sign: two probes give its slope)
	hp := p.Heads * p.P
	var idx []int
	for t := 1000; t < 1040; t++ {
		idx = append(idx, t*hp+2*p.P)
	}
	probe := func(k float64) ([]float64, []float64) {
		q := append([]float64(nil), y...)
		for _, i := range idx {
			q[i] += k * math.Copysign(0.05*math.Abs(want[i])+1e-3, y[i]-want[i])
		}
		return q, ratio(q)
	}
	q1, r1 := probe(1)
	q2, r2 := probe(2)
	got := append([]float64(nil), y...)
	for _, i := range idx {
		if !(r1[i] > 0 && r2[i] > r1[i]) {
			t.Fatalf("element %d: ratios %g, %g of two probes: not past the output's rounding", i, r1[i], r2[i])
		}
		got[i] = q1[i] + (1.3*th-r1[i])*(q2[i]-q1[i])/(r2[i]-r1[i])
	}
	if r := ratio(got); worstRatio(map[string][]float64{"y": r}) > 1.4*th {
		t.Fatalf("the fault reaches ratio %.3g, want about 1.3 thresholds", worstRatio(map[string][]float64{"y": r}))
	}
	_, rv := ssdJudged(judge.Mamba3Arrays(p, got, y, st, st, mamba3.ErrorScaleVariant(p, v)))
	if w := worstRatio(rv); w > th {
		t.Fatalf("the fault fails the property's variant too (ratio %.3g): the case is not the one meant", w)
	}
	f := Mamba3(p, got, st, nil)
	if strings.HasPrefix(f.Tag, "m3:angle") {
		t.Errorf("bf16 angles beside a fault of 1.3 thresholds on %d elements: diagnosis [%s] %s", len(idx), f.Tag, f)
	}
}

// TestMamba3PrecisionWithMarginalElements: a kernel with the bf16-stored
// angles whose other roundings take a share of the state's elements a
// little past the threshold too (upstream's on a sequence of one token:
// the angle state fails by thousands of thresholds, a tenth of the SSM
// state by a few) is named by the property: those elements are not the
// failure's bulk, and the property produces the bulk.
func TestMamba3PrecisionWithMarginalElements(t *testing.T) {
	p := mamba3.Generate(mamba3.Options{Batch: 2, Seqlen: 1, HeadsQK: 2, Heads: 4, N: 16, P: 8, AngleDim: 4, D: true, Z: true, State: true}, 31)
	p, v := upstreamBF16(p)
	want, wst := mamba3.Forward(p)
	y, st := mamba3.ForwardVariant(p, v)
	sc := mamba3.ErrorScale(p)
	th := judge.Threshold(p.DType)
	ssmRatio := func(x []float64) []float64 {
		s := *st
		s.SSM = x
		_, rs := ssdJudged(judge.Mamba3Arrays(p, y, want, &s, wst, sc))
		return rs["ssm_state"]
	}
	// every third element of the SSM state where the property leaves it
	// within the model, taken to 1.5 thresholds the way it errs
	r0 := ssmRatio(st.SSM)
	q1, q2 := append([]float64(nil), st.SSM...), append([]float64(nil), st.SSM...)
	var idx []int
	for i := range st.SSM {
		if i%3 == 0 && r0[i] <= th/2 {
			d := math.Copysign(0.05*math.Abs(wst.SSM[i])+1e-3, st.SSM[i]-wst.SSM[i])
			q1[i], q2[i] = st.SSM[i]+d, st.SSM[i]+2*d
			idx = append(idx, i)
		}
	}
	r1, r2 := ssmRatio(q1), ssmRatio(q2)
	marginal := append([]float64(nil), st.SSM...)
	for _, i := range idx {
		if r2[i] > r1[i] && r1[i] > 0 {
			marginal[i] = q1[i] + (1.5*th-r1[i])*(q2[i]-q1[i])/(r2[i]-r1[i])
		}
	}
	got := *st
	got.SSM = marginal
	_, rs := ssdJudged(judge.Mamba3Arrays(p, y, want, &got, wst, sc))
	failing, fails := failingSet(rs, th), 0
	for e := range failing {
		if e[0] == 2 {
			fails++
		}
	}
	if 10*fails < 2*len(failing) || worstRatio(rs) < 100*th {
		t.Fatalf("the case is not the one meant: %d of %d failing elements in the SSM state, worst ratio %.3g", fails, len(failing), worstRatio(rs))
	}
	// one token: the angle kept in bf16 and the angle stored in it are
	// the same values (upstream's unmutated kernel is named either)
	if f := Mamba3(p, y, &got, nil); f.Tag != "m3:angle-stored-bf16" && f.Tag != "m3:angle-bf16" {
		t.Errorf("bf16 angles with %d marginal SSM state elements of %d failing: diagnosis [%s] %s", fails, len(failing), f.Tag, f)
	}
}

// upstreamBF16 is p in bf16 with the arithmetic upstream's Triton adapter
// declares (chunks of 64, bf16 operands, approximate functions), and the
// variant of its bf16-stored angles.
func upstreamBF16(p *mamba3.Problem) (*mamba3.Problem, mamba3.Variant) {
	p.DType = ssm.BF16
	p.Arithmetic = mamba3.Arithmetic{Chunk: 64, Approx: true, U: ssm.BF16.Precision().UnitRoundoff(), OperandU: ssm.BF16.OutputRoundoff()}
	var v mamba3.Variant
	for _, s := range mamba3.Slips() {
		if s.Tag == "m3:angle-stored-bf16" {
			v = s.Variant
		}
	}
	return p.Rounded(), v
}

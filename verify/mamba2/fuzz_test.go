package mamba2

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ssmverify/bridge"
	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/mamba2"
	"ssmverify/report"
	"ssmverify/verify/bridgetest"
)

// The fuzz targets of the bridged Mamba-2 kernel (SSMK_BRIDGE, the numpy
// path by default): the fuzzer's bytes decode into a prefill — shapes, a
// chunk, sequence boundaries, options, dtypes and the value regimes where
// the chunked kernels' reported bugs sat (an exponent of a cumulative-sum
// difference at large |A|·Δ, Δ near 0 and at the dt limit's edges,
// boundaries at chunk edges, sequences of one token, dstate above 128) —
// judged by the suite's judge and diagnosed by its diagnosis.
//
//	go test ./verify/mamba2 -run FuzzMamba2            replay the corpus (make test)
//	go test ./verify/mamba2 -run '^$' -fuzz '^FuzzMamba2Prefill$' -fuzztime 60s
//	scripts/fuzz.sh FuzzMamba2Prefill FuzzMamba2Isolation   (make fuzz runs them beside the ABI's)

// The decoded problem's byte layout (fuzzSpec.bytes writes it).
const (
	fuzzFlagD = 1 << iota
	fuzzFlagZ
	fuzzFlagBias
	fuzzFlagSoftplus
	fuzzFlagInit
	fuzzFlagLimit
	fuzzFlagPacked
	fuzzFlagDPerChannel
)

var (
	fuzzHeads    = []int{1, 2, 3, 4, 8}
	fuzzHeaddims = []int{1, 2, 3, 4, 8, 16, 64}
	fuzzDstates  = []int{1, 2, 4, 8, 16, 64, 130}
	fuzzChunks   = []int{1, 3, 8, 16, 32, 64}
)

// fuzzSpec is a decoded input, and the seeds' way to write one.
type fuzzSpec struct {
	pair, flags, seqlen, heads, groups, headdim, dstate, chunk int
	dt, a, seed                                                int // the value regimes, the values' seed
	bounds                                                     []int
}

func (s fuzzSpec) bytes() []byte {
	b := []byte{byte(s.pair), byte(s.flags), byte(s.seqlen - 1), byte(s.heads), byte(s.groups), byte(s.headdim), byte(s.dstate),
		byte(s.chunk), byte(s.dt), byte(s.a), byte(s.seed), byte(len(s.bounds))}
	for _, x := range s.bounds {
		b = append(b, byte(x))
	}
	return b
}

// decodePrefill decodes data into a prefill for a kernel whose declared
// chunk sizes are chunks (empty: any), rounded to its input types. The
// sizes are bounded so that the float64 reference takes milliseconds.
func decodePrefill(data []byte, chunks []int) *mamba2.Problem {
	r := bridgetest.NewFuzzBytes(data)
	dt := pairs[r.Next()%len(pairs)]
	flags := r.Next()
	o := mamba2.Options{Batch: 2, Seqlen: 1 + r.Next()%96, DType: dt.in, StateDType: dt.state}
	o.Heads = r.Pick(fuzzHeads)
	o.Groups = r.Divisor(o.Heads)
	o.Headdim = r.Pick(fuzzHeaddims)
	o.Dstate = r.Pick(fuzzDstates)
	for o.Heads*o.Headdim*o.Dstate > 8192 && o.Headdim > 1 {
		o.Headdim /= 2 // a bounded reference: a model's dstate with a narrow head
	}
	if len(chunks) == 0 {
		chunks = fuzzChunks
	}
	o.Chunk = r.Pick(chunks)
	dtRegime, aRegime, seed := r.Next()%4, r.Next()%3, r.Next()
	o.D, o.Z, o.DtBias, o.Softplus = flags&fuzzFlagD != 0, flags&fuzzFlagZ != 0, flags&fuzzFlagBias != 0, flags&fuzzFlagSoftplus != 0
	o.InitialStates, o.DPerChannel = flags&fuzzFlagInit != 0, flags&fuzzFlagDPerChannel != 0
	if flags&fuzzFlagLimit != 0 || dtRegime == 3 {
		o.DtMin, o.DtMax = 0.004, 0.05
	}
	if nb := r.Next() % 6; flags&fuzzFlagPacked != 0 || nb > 0 {
		o.Batch, o.CuSeqlens = 1, r.CuSeqlens(nb, o.Seqlen)
	}
	p := mamba2.Generate(o, uint64(seed))
	lo, hi := p.Limits()
	for h := range p.A {
		switch aRegime {
		case 1: // large |A|: Δ·A of −10² to −10³, the decays' exponents at their extremes
			p.A[h] = -math.Exp(4 + float64((seed+h)%5))
		case 2: // |A| near 0: decays of almost 1, a state that remembers everything
			p.A[h] = -1e-6
		}
	}
	bias := func(h int) float64 {
		if p.DtBias == nil {
			return 0
		}
		return p.DtBias[h]
	}
	for i := range p.Dt {
		h := i % p.Heads
		switch dtRegime {
		case 1: // Δ near 0: softplus of −6 to −18 (2.5·10⁻³ to 1.5·10⁻⁸)
			if p.Softplus {
				p.Dt[i] = -6 - float64(i%13) - bias(h)
			} else {
				p.Dt[i] = 1e-7 - bias(h)
			}
		case 2: // Δ large
			p.Dt[i] = 3 + float64(i%5) - bias(h)
		case 3: // at the dt limit's edges, within 10⁻⁶ of each
			edge := lo
			if i%2 == 1 {
				edge = hi
			}
			v := edge * (1 + 1e-6*float64(i%3-1))
			if p.Softplus {
				v = math.Log(math.Expm1(v)) // softplus⁻¹
			}
			p.Dt[i] = v - bias(h)
		}
	}
	return p.Rounded()
}

// fuzzJudge runs k's prefill of p and judges it: ok false with the
// finding where the kernel fails (a crash, an exception on a declared
// problem, or a result beyond the error model), skip where it declares
// the problem unsupported.
func fuzzJudge(k *bridge.SSD, p *mamba2.Problem) (ok, skip bool, f report.Finding, ratio float64) {
	if why := k.Supports(p); why != "" {
		return true, true, report.Finding{}, 0
	}
	out, err := k.Prefill(p)
	var crash *bridge.CrashError
	switch {
	case errors.As(err, &crash):
		return false, false, report.Finding{Tag: "crash", Cause: crash.Cause, Where: p.Shape()}, math.Inf(1)
	case bridge.Unsupported(err):
		return true, true, report.Finding{}, 0
	case err != nil:
		return false, false, raised(err, p.Shape()), math.Inf(1)
	}
	want, sc := mamba2.Prefill(p)
	c, _, err := judge.CompareArrays(judge.PrefillArrays(p, out, want, sc))
	if err != nil {
		return false, false, report.Finding{Tag: "missing", Cause: err.Error()}, math.Inf(1)
	}
	if c.NonFinite == 0 && c.Worst.Ratio <= judge.Threshold(p.DType) {
		return true, false, report.Finding{}, c.Worst.Ratio
	}
	return false, false, diagnose.SSDPrefill(p, out, k.Prefill), c.Worst.Ratio
}

// declaredChunks is the prefill's declared chunk sizes (empty: any).
func declaredChunks(k *bridge.SSD) []int {
	c, _ := k.Cap(bridge.OpPrefill)
	return c.ChunkSizes
}

// FuzzMamba2Prefill judges the bridged kernel's prefill of the decoded
// problem against the reference, as TestMamba2Prefill does.
func FuzzMamba2Prefill(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.spec.bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		bridgetest.FuzzCheck(t, data, func(data []byte) string {
			p := decodePrefill(data, declaredChunks(kernel))
			if ok, _, fd, ratio := fuzzJudge(kernel, p); !ok {
				return fmt.Sprintf("prefill %s: ratio %.3g; diagnosis [%s] %s", p.Shape(), ratio, fd.Tag, fd)
			}
			return ""
		})
	})
}

// fuzzSeeds are the seed corpus: one problem per class of the chunked
// kernels' reported bugs, named for it (testdata/fuzz/FuzzMamba2Prefill/
// holds them as files too, and what fuzzing finds beside them).
var fuzzSeeds = []struct {
	name string
	spec fuzzSpec
}{
	{"plain", fuzzSpec{pair: 0, seqlen: 40, heads: 3, groups: 1, headdim: 2, dstate: 3, chunk: 2}},
	{"large-decay-exponent", fuzzSpec{pair: 0, flags: fuzzFlagD | fuzzFlagBias | fuzzFlagSoftplus, seqlen: 80, heads: 1, groups: 0, headdim: 3, dstate: 3, chunk: 3, dt: 2, a: 1}},
	{"dt-near-zero", fuzzSpec{pair: 1, flags: fuzzFlagBias | fuzzFlagSoftplus, seqlen: 50, heads: 2, headdim: 2, dstate: 2, chunk: 2, dt: 1}},
	{"dt-limit-edges", fuzzSpec{pair: 0, flags: fuzzFlagBias | fuzzFlagSoftplus | fuzzFlagLimit, seqlen: 50, heads: 1, headdim: 3, dstate: 3, chunk: 2, dt: 3}},
	{"boundary-at-chunk-edge", fuzzSpec{pair: 0, flags: fuzzFlagPacked | fuzzFlagInit, seqlen: 64, heads: 1, headdim: 2, dstate: 3, chunk: 3, bounds: []int{16, 17, 32, 47}}},
	{"one-token-sequences", fuzzSpec{pair: 1, flags: fuzzFlagPacked | fuzzFlagInit | fuzzFlagD, seqlen: 20, heads: 3, headdim: 2, dstate: 2, chunk: 2, bounds: []int{1, 2, 3, 9, 10}}},
	{"dstate-above-128", fuzzSpec{pair: 0, flags: fuzzFlagD | fuzzFlagZ, seqlen: 30, heads: 0, headdim: 2, dstate: 6, chunk: 3}},
	{"odd-chunk-and-headdim", fuzzSpec{pair: 0, flags: fuzzFlagD | fuzzFlagDPerChannel, seqlen: 47, heads: 2, groups: 1, headdim: 2, dstate: 3, chunk: 1}},
	{"no-decay-long-memory", fuzzSpec{pair: 0, flags: fuzzFlagInit, seqlen: 96, heads: 1, headdim: 3, dstate: 2, chunk: 4, a: 2}},
	{"all-options-bf16-state", fuzzSpec{pair: 2, flags: 0x3f, seqlen: 70, heads: 3, groups: 1, headdim: 3, dstate: 3, chunk: 3, dt: 0, seed: 7}},
}

// TestMamba2FuzzSeedsAreFiles keeps testdata/fuzz/FuzzMamba2Prefill's and
// FuzzMamba2Step's named entries equal to fuzzSeeds and stepSeeds (a missing or stale file is written
// with SSMK_WRITE_SEEDS=1), so that the corpus replays what this file
// says it holds.
func TestMamba2FuzzSeedsAreFiles(t *testing.T) {
	type seed struct {
		target, name string
		data         []byte
	}
	var seeds []seed
	for _, s := range fuzzSeeds {
		seeds = append(seeds, seed{"FuzzMamba2Prefill", s.name, s.spec.bytes()})
	}
	for _, s := range stepSeeds {
		seeds = append(seeds, seed{"FuzzMamba2Step", s.name, s.spec.bytes()})
	}
	for _, s := range seeds {
		dir := filepath.Join("testdata", "fuzz", s.target)
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s.data)
		path := filepath.Join(dir, s.name)
		got, err := os.ReadFile(path)
		if err == nil && string(got) == want {
			continue
		}
		if os.Getenv("SSMK_WRITE_SEEDS") == "1" {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s: missing or stale (SSMK_WRITE_SEEDS=1 go test ./verify/mamba2 -run FuzzSeedsAreFiles writes it)", path)
	}
}

// TestMamba2FuzzCorpusFindsSlips: replaying the seed corpus against the
// numpy path with each of its prefill slips planted fails on some entry,
// named by the diagnosis — the corpus stands for the classes it says.
func TestMamba2FuzzCorpusFindsSlips(t *testing.T) {
	track(t)
	for _, c := range []struct{ slip, tag string }{
		{"no-reset", "varlen:no-reset"}, {"seq-states-no-init", "varlen:seq-states-no-init"}, {"drop-init", "init-state:dropped"},
		{"no-dt-limit", "dt:no-limit"}, {"group-repeat", "groups:repeat"}, {"softplus-log-exp", "dt:softplus-log-exp"},
	} {
		t.Run(c.slip, func(t *testing.T) {
			k := slipKernel(t, c.slip)
			var found []string
			for _, s := range fuzzSeeds {
				p := decodePrefill(s.spec.bytes(), declaredChunks(k))
				if ok, _, f, _ := fuzzJudge(k, p); !ok {
					found = append(found, s.name+" ["+f.Tag+"]")
					if strings.Contains(f.Tag, c.tag) {
						t.Logf("slip %s: found by %s, diagnosed [%s]", c.slip, s.name, f.Tag)
						return
					}
				}
			}
			t.Errorf("slip %s: no seed finds it named %s (failing: %v)", c.slip, c.tag, found)
		})
	}
	// the decode step's seeds against its slips
	for _, c := range []struct{ slip, tag string }{
		{"no-bias-decode", "dt:no-bias"}, {"padding-written", "decode:padding-written"}, {"last-state-stale", "decode:state-not-written"},
	} {
		t.Run(c.slip, func(t *testing.T) {
			k := slipKernel(t, c.slip)
			var found []string
			for _, s := range stepSeeds {
				if ok, _, f, _ := stepJudge(k, decodeStep(s.spec.bytes())); !ok {
					found = append(found, s.name+" ["+f.Tag+"]")
					if strings.Contains(f.Tag, c.tag) {
						t.Logf("slip %s: found by %s, diagnosed [%s]", c.slip, s.name, f.Tag)
						return
					}
				}
			}
			t.Errorf("slip %s: no step seed finds it named %s (failing: %v)", c.slip, c.tag, found)
		})
	}
	// the backward target's seeds against the backward's slips
	for _, c := range []struct{ slip, tag string }{
		{"bwd-da-no-delta", "bwd:dA:lacks(Δ)"}, {"bwd-dx-no-skip", "bwd:dx:no-path:skip"}, {"bwd-dinit-undecayed", "bwd:dinitial_states:lacks(a₀)"},
	} {
		t.Run(c.slip, func(t *testing.T) {
			k := slipKernel(t, c.slip)
			for _, s := range fuzzSeeds {
				if msg := backwardCheck(k, s.spec.bytes()); strings.Contains(msg, c.tag) {
					t.Logf("slip %s: found by %s", c.slip, s.name)
					return
				}
			}
			t.Errorf("slip %s: no seed of FuzzMamba2Backward finds it named %s", c.slip, c.tag)
		})
	}
	// the isolation target's seeds against a path that lets a non-finite
	// input of one sequence reach the others
	t.Run("nonfinite-leak", func(t *testing.T) {
		k := slipKernel(t, "nonfinite-leak")
		for i, s := range fuzzSeeds {
			if msg := isolationCheck(k, s.spec.bytes(), uint8(i), uint16(i*257)); msg != "" {
				t.Logf("found by %s: %s", s.name, msg)
				return
			}
		}
		t.Error("no seed of FuzzMamba2Isolation finds a non-finite input leaking across sequences")
	})
}

// poisoned returns a copy of p with one input of one sequence (a packed
// row's) or one row set to a non-finite value, and the steps of each row
// that the poison may reach: the poisoned unit's. what picks the input
// (x, dt, B, C) and the value (NaN, +Inf, −Inf); where picks the unit and
// the position in it. ok is false for a problem of one unit.
func poisoned(p *mamba2.Problem, what uint8, where uint16) (q *mamba2.Problem, reach func(b, t int) bool, desc string, ok bool) {
	type unit struct{ b, t0, t1 int }
	var units []unit
	for b := 0; b < p.Batch; b++ {
		for _, sq := range p.Sequences() {
			units = append(units, unit{b, sq[0], sq[1]})
		}
	}
	if len(units) < 2 {
		return nil, nil, "", false
	}
	u := units[int(where)%len(units)]
	t := u.t0 + int(where>>8)%(u.t1-u.t0)
	c := *p
	c.X, c.Dt, c.B, c.C = append([]float64(nil), p.X...), append([]float64(nil), p.Dt...), append([]float64(nil), p.B...), append([]float64(nil), p.C...)
	c.NonFinite = true
	v := bridgetest.Poison(int(what / 4))
	L, H, P, G, N := p.Seqlen, p.Heads, p.Headdim, p.Groups, p.Dstate
	h := int(what) % H
	switch what % 4 {
	case 0:
		c.X[((u.b*L+t)*H+h)*P+int(where)%P] = v
	case 1:
		c.Dt[(u.b*L+t)*H+h] = v
	case 2:
		c.B[((u.b*L+t)*G+h%G)*N+int(where)%N] = v
	case 3:
		c.C[((u.b*L+t)*G+h%G)*N+int(where)%N] = v
	}
	desc = fmt.Sprintf("%g in %s at row %d, step %d, head %d (its sequence: steps %d–%d)", v, poisonedInput[what%4], u.b, t, h, u.t0, u.t1-1)
	return &c, func(b, t int) bool { return b == u.b && t >= u.t0 && t < u.t1 }, desc, true
}

// poisonedInput names poisoned's inputs by what % 4.
var poisonedInput = [4]string{"x", "dt", "B", "C"}

// FuzzMamba2Isolation: a non-finite input in one sequence of a packed row,
// or in one row, leaves every other sequence's and row's result — y at
// their steps, their per-sequence states, the other rows' final states —
// finite and within the error model of the clean run's (the bridged
// kernels' non-finite policy: what the poisoned sequence returns is not
// judged; the numpy path keeps every bit).
func FuzzMamba2Isolation(f *testing.F) {
	for i, s := range fuzzSeeds {
		f.Add(s.spec.bytes(), uint8(i), uint16(i*257))
	}
	f.Fuzz(func(t *testing.T, data []byte, what uint8, where uint16) {
		bridgetest.FuzzPoisonCheck(t, data, what, where, func(data []byte, what uint8, where uint16) string { return isolationCheck(kernel, data, what, where) })
	})
}

// isolationCheck runs k's prefill of the decoded problem clean and
// poisoned and says how the poison broke the isolation ("" where it did
// not, or where there is nothing to compare).
func isolationCheck(k *bridge.SSD, data []byte, what uint8, where uint16) string {
	p := decodePrefill(data, declaredChunks(k))
	q, reach, desc, ok := poisoned(p, what, where)
	if !ok || k.Supports(p) != "" {
		return ""
	}
	clean, err := k.Prefill(p)
	if err != nil {
		return "" // the clean problem's verdict is FuzzMamba2Prefill's
	}
	got, err := k.Prefill(q)
	var crash *bridge.CrashError
	switch {
	case errors.As(err, &crash):
		return fmt.Sprintf("prefill %s with a non-finite input: crash: %s", p.Shape(), crash.Cause)
	case err != nil:
		return "" // refusing a non-finite input is the kernel's right
	}
	if msg, into := isolationBreach(p, clean, got, reach); msg != "" {
		// tagged like a diagnosis, isolation:INPUT-to-SCOPE, so that a
		// campaign can count a breach it has written up as known
		return fmt.Sprintf("prefill %s: diagnosis [isolation:%s-to-%s] a non-finite input (%s) reached %s", p.Shape(), poisonedInput[what%4], into, desc, msg)
	}
	return ""
}

// isolationBreach names the first result of a unit the poison may not
// reach that leaked: not within the error model of the clean run's, or of
// another class where the clean run's is not finite ("" when none): a kernel's arithmetic may round differently from
// run to run, a leak does not stay within rounding. into says whether it
// is another sequence of the poisoned row or another row.
func isolationBreach(p *mamba2.Problem, clean, got *mamba2.Output, reach func(b, t int) bool) (msg, into string) {
	_, sc := mamba2.Prefill(p)
	_, ratios, err := judge.CompareArrays(judge.PrefillArrays(p, got, clean, sc))
	if err != nil {
		return err.Error(), "output"
	}
	scope := func(b int) string {
		for t := 0; t < p.Seqlen; t++ {
			if reach(b, t) {
				return "sequence" // the poisoned row
			}
		}
		return "row"
	}
	th := judge.Threshold(p.DType)
	L, HP := p.Seqlen, p.Heads*p.Headdim
	for i, r := range ratios["y"] {
		b, t := i/(L*HP), i/HP%L
		if !reach(b, t) && leaked(got.Y[i], clean.Y[i], r, th) {
			return fmt.Sprintf("y[%d %d …] (%g, clean %g)", b, t, got.Y[i], clean.Y[i]), scope(b)
		}
	}
	hs := p.HeadStateLen()
	states, gotS, cleanS := ratios["seq_states"], got.SeqStates, clean.SeqStates
	if p.CuSeqlens == nil {
		states, gotS, cleanS = ratios["final_states"], got.FinalStates, clean.FinalStates
	}
	for si, sq := range p.Sequences() {
		for b := 0; b < p.Batch; b++ {
			if reach(b, sq[0]) {
				continue
			}
			k := si
			if p.CuSeqlens == nil {
				k = b
			}
			for j := k * hs; j < (k+1)*hs; j++ {
				if leaked(gotS[j], cleanS[j], states[j], th) {
					return fmt.Sprintf("the state of sequence %d of row %d", si, b), scope(b)
				}
			}
		}
	}
	return "", ""
}

// leaked reports whether a result the poison may not reach, got, differs
// from the clean run's, clean, by more than rounding (r, its ratio to the
// clean value, beyond th). Where the clean run is itself not finite (its
// own arithmetic left the range: a growing state's ±Inf) the ratio is
// undefined: the element is a breach only if the poison changed its class
// (±Inf, NaN or finite), which is what a leak does.
func leaked(got, clean, r, th float64) bool {
	if judge.ClassOf(clean) == judge.Finite {
		return !(r <= th)
	}
	return judge.ClassOf(got) != judge.ClassOf(clean)
}

// FuzzMamba2Backward judges the bridged kernel's backward (ssd_bwd) of the
// decoded problem, with a cotangent of y and of the final states drawn
// from the problem's seed, as TestMamba2Backward does.
func FuzzMamba2Backward(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.spec.bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		bridgetest.FuzzCheck(t, data, func(data []byte) string { return backwardCheck(kernel, data) })
	})
}

// backwardCheck runs and judges k's backward of the decoded problem, at
// the chunk its backward declares; "" where it passes or is not declared.
func backwardCheck(k *bridge.SSD, data []byte) string {
	p := decodePrefill(data, declaredChunks(k))
	if c, ok := k.Cap(bridge.OpBackward); ok && c.Algorithm == "sequential" {
		p.Chunk = 0
	}
	if k.SupportsOp(bridge.OpBackward, p) != "" {
		return ""
	}
	ct := mamba2.GenerateCotangent(p, uint64(len(data)), true)
	ct.SeqStates = nil
	ct = ct.Rounded(p)
	out, g, err := k.Backward(p, ct)
	var crash *bridge.CrashError
	switch {
	case errors.As(err, &crash):
		return fmt.Sprintf("ssd_bwd %s: crash: %s", p.Shape(), crash.Cause)
	case bridge.Unsupported(err):
		return ""
	case err != nil:
		return fmt.Sprintf("ssd_bwd %s: diagnosis [raises] %v", p.Shape(), err)
	}
	v := judgedBackward(p, ct, out, g, prefillRunner(k, p), k.Backward)
	if v.passed {
		return ""
	}
	return fmt.Sprintf("ssd_bwd %s: ratio %.3g at %s; diagnosis [%s] %s", p.Shape(), v.ratio, v.worst, v.finding.Tag, v.finding)
}

// TestLeaked: the isolation targets' rule for one element. The H200
// campaign's first two FuzzMamba2StepIsolation findings were a clean step
// whose own state overflowed (−Inf in both runs: a negative Δ undamped,
// upstream's dt:no-limit), reported as a breach because ∞ − ∞ has no ratio.
func TestLeaked(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	th := 2.0
	for _, c := range []struct {
		got, clean, r float64
		want          bool
	}{
		{1, 1, 0, false},
		{1.5, 1, 40, true},       // beyond rounding
		{nan, 1, inf, true},      // a finite result poisoned
		{inf, 1, inf, true},      // likewise
		{-inf, -inf, nan, false}, // the clean run's own overflow, kept
		{nan, nan, nan, false},
		{nan, -inf, nan, true}, // the poison turned −Inf into NaN
		{inf, -inf, nan, true},
		{3, inf, inf, true},
	} {
		if got := leaked(c.got, c.clean, c.r, th); got != c.want {
			t.Errorf("leaked(got %v, clean %v, ratio %v) = %v, want %v", c.got, c.clean, c.r, got, c.want)
		}
	}
}

package mamba2

import (
	"fmt"
	"math"
	"slices"
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

// sequenceStart is the first token of the sequence of row b holding
// token t (0 for an unpacked row).
func sequenceStart(p *mamba2.Problem, t int) int {
	for _, sq := range p.Sequences() {
		if t >= sq[0] && t < sq[1] {
			return sq[0]
		}
	}
	return 0
}

// stateRatio judges a state against want with the prefix q's error
// model (ref and sc, mamba2.Prefill's of q) scaled by k (2: the sum of two
// runs' bounds): the worst ratio and where.
func stateRatio(q *mamba2.Problem, ref *mamba2.Output, sc *mamba2.Scale, state, want []float64, k float64) (float64, string) {
	scaled := *sc
	scaled.FinalStates = make([]float64, len(sc.FinalStates))
	for i, v := range sc.FinalStates {
		scaled.FinalStates[i] = k * v
	}
	got := &mamba2.Output{Y: ref.Y, FinalStates: state, SeqStates: state}
	against := &mamba2.Output{Y: ref.Y, FinalStates: want, SeqStates: want}
	for _, a := range judge.PrefillArrays(q, got, against, &scaled) {
		if a.Name != "final_states" {
			continue
		}
		c, _, err := judge.CompareArrays([]judge.Array{a})
		if err != nil {
			return math.Inf(1), err.Error()
		}
		if c.NonFinite > 0 {
			return math.Inf(1), fmt.Sprintf("%d non-finite elements", c.NonFinite)
		}
		return c.Worst.Ratio, c.Worst.String()
	}
	return math.Inf(1), "no final_states array"
}

// prefixOf is the prefix of row b a snapshot after the tokens before end
// stands for: from its sequence's start.
func prefixOf(p *mamba2.Problem, b, end int) *mamba2.Problem {
	return p.Row(b, sequenceStart(p, end-1), end)
}

// referenceRatio judges a state against the float64 state of the prefix
// of row b ending before end, with that prefix's error model.
func referenceRatio(p *mamba2.Problem, b, end int, state []float64) float64 {
	q := prefixOf(p, b, end)
	ref, sc := mamba2.Prefill(q)
	r, _ := stateRatio(q, ref, sc, state, ref.FinalStates, 1)
	return r
}

// wrongBoundary finds where a failing snapshot was taken: among the
// prefixes of the same row that end a token before or after end, at
// another chunk's end or at a sequence's, the one whose float64 state it
// is nearest (its ratio at least ten times below the ratio at end, which
// leaves the kernel's own arithmetic — TF32 products — out of it); 0
// where none is.
func wrongBoundary(p *mamba2.Problem, b, end int, state []float64, ends []int) int {
	at := referenceRatio(p, b, end, state)
	cands := append([]int{end - 1, end + 1}, ends...)
	for _, sq := range p.Sequences() {
		cands = append(cands, sq[0], sq[1])
	}
	best, bestR := 0, at/10
	for _, e := range cands {
		if e < 1 || e > p.Seqlen || e == end {
			continue
		}
		if r := referenceRatio(p, b, e, state); r < bestR {
			best, bestR = e, r
		}
	}
	return best
}

// TestMamba2ChunkStates: the state an engine's prefill returns after every
// chunk, for its prefix cache (vLLM's return_intermediate_states,
// Megatron's return_raw_states: bridge.FeatureChunkStates), equals the
// final state of the kernel's own prefill of the prefix it ends, within
// the sum of both runs' bounds (the prefix's error model twice: whatever
// the kernel's arithmetic, TF32 included, the two agree) — rows of one
// sequence and packed rows whose boundaries are drawn against the chunk
// (bridgetest.BoundaryRows), with and without initial states. A snapshot
// that fails is diagnosed by the boundary it was taken at, where it equals
// another prefix's state (the prefix cache's reported bug: a state taken at
// the wrong chunk boundary).
//
// Where the kernel under test is the suite's numpy path in its default
// layout, which returns no snapshots, the numpy path in the engines'
// layout (layout=varlen) is judged instead, so that CI judges the property
// and the engines' mapping (ssmbridge.engines) on the CPU.
func TestMamba2ChunkStates(t *testing.T) {
	track(t)
	k := engineKernel(t, "")
	if k == nil {
		return
	}
	chunkStates(t, k, true, []pair{pairs[0], pairs[1]}, 0)
}

// TestMamba2ChunkStatesCanFail: the numpy path whose snapshot is the
// chunk's entering state, not the state after it, fails, diagnosed
// cache:wrong-boundary.
func TestMamba2ChunkStatesCanFail(t *testing.T) {
	track(t)
	failures := chunkStates(t, engineKernel(t, "cache-entering"), false, []pair{pairs[0]}, 3)
	named := 0
	for _, f := range failures {
		if f.Tag == "cache:wrong-boundary" {
			named++
		}
	}
	if len(failures) == 0 || named == 0 {
		t.Errorf("the snapshot of a chunk's start: %d failures, %d named cache:wrong-boundary", len(failures), named)
	}
}

// engineKernel is the kernel under test where it declares chunk states,
// else (or with a slip) the numpy path in the engines' layout in a worker
// of its own; nil, with the test's cell unsupported, for another kernel
// that declares none.
func engineKernel(t *testing.T, slip string) *bridge.SSD {
	t.Helper()
	if c, ok := kernel.Cap(bridge.OpPrefill); slip == "" && ok && c.Has(bridge.FeatureChunkStates) {
		return kernel
	}
	if slip == "" && spec.Adapter != "numpy_ssd" {
		rep.KernelUnsupported(t.Name(), bridge.OpPrefill, ssm.F32, ssm.F32, "the adapter declares no "+bridge.FeatureChunkStates+" (an engine's prefix-cache snapshots)")
		t.Skip("not declared: " + bridge.FeatureChunkStates)
		return nil
	}
	args := []string{"layout=varlen"}
	if slip != "" {
		args = append(args, "slip="+slip)
	}
	w, err := bridge.Start(bridge.Spec{Python: spec.Python, Adapter: "numpy_ssd", Args: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return &bridge.SSD{W: w}
}

// chunkStates runs TestMamba2ChunkStates' cases against k, each a subtest
// recorded in the report, failing where strict, in the dtype pairs dts
// (the first n cases of each where n > 0); it returns the failures'
// diagnoses (a Finding each, its Where the subtest and the snapshot).
func chunkStates(t *testing.T, k *bridge.SSD, strict bool, dts []pair, n int) []report.Finding {
	rk := repFor(k)
	var failures []report.Finding
	q0 := max(chunk(), 16)
	rows, err := bridgetest.BoundaryRows(q0, 3*q0)
	if err != nil {
		t.Fatal(err)
	}
	type tc struct {
		name string
		cu   []int
	}
	cases := []tc{{"rows", nil}}
	for _, r := range rows {
		cases = append(cases, tc{"packed/" + r.Name, r.CuSeqlens})
	}
	if n > 0 {
		cases = cases[:min(n, len(cases))]
	}
	for _, dt := range dts {
		for _, c := range cases {
			for _, init := range []bool{false, true} {
				name := fmt.Sprintf("%v/%s/init=%v", dt, c.name, init)
				t.Run(name, func(t *testing.T) {
					track(t)
					chunkQ := max(chunk(), 16)
					if c, ok := k.Cap(bridge.OpPrefill); ok && c.Algorithm == "sequential" {
						chunkQ = 0
					}
					o := base(dt)
					o.Seqlen, o.Heads, o.Headdim, o.Dstate = 3*q0, 2, 8, 8
					o.D, o.DtBias, o.Softplus, o.InitialStates = true, true, true, init
					if c.cu != nil {
						o.Batch, o.CuSeqlens = 1, c.cu
					}
					o.Chunk = chunkQ
					p := mamba2.Generate(o, 61).Rounded()
					if why := k.Supports(p); why != "" {
						rk.KernelUnsupported(t.Name(), bridge.OpPrefill, p.DType, p.StateDType, why)
						return
					}
					_, snaps, err := k.PrefillChunkStates(p)
					skipRefused(t, rk, bridge.OpPrefill, p.DType, p.StateDType, err)
					if err != nil {
						rk.AddKernelDiagnosis(t.Name(), bridge.OpPrefill, p.DType, p.StateDType, report.Finding{Tag: "raises", Cause: err.Error(), Where: p.Shape()})
						t.Fatalf("prefill with %s: %v", bridge.FeatureChunkStates, err)
					}
					// every chunk of the engine's grid: one per chunk of each sequence
					want := 0
					for range p.Batch {
						for _, sq := range p.Sequences() {
							want += (sq[1] - sq[0] + p.Chunk - 1) / p.Chunk
						}
					}
					if p.Chunk > 0 && len(snaps) != want {
						t.Errorf("%d chunk states, want %d (a chunk of %d tokens from each sequence's start)", len(snaps), want, p.Chunk)
					}
					worst := 0.0
					var ends []int
					for _, s := range snaps {
						ends = append(ends, s.End)
					}
					for _, s := range snaps {
						q := prefixOf(p, s.Row, s.End)
						rerun, err := k.Prefill(q)
						if err != nil {
							t.Fatalf("the prefix of row %d before token %d: %v", s.Row, s.End, err)
						}
						ref, sc := mamba2.Prefill(q)
						r, where := stateRatio(q, ref, sc, s.State, rerun.FinalStates, 2)
						worst = math.Max(worst, r)
						if r <= judge.Threshold(p.DType) {
							continue
						}
						f := report.Finding{Tag: "cache:wrong-state", Cause: "the state after the chunk is not its prefix's", Where: fmt.Sprintf("row %d, after token %d: %s", s.Row, s.End-1, where)}
						if e := wrongBoundary(p, s.Row, s.End, s.State, ends); e > 0 {
							f = report.Finding{Tag: "cache:wrong-boundary", Cause: fmt.Sprintf("the state after the chunk ending at token %d is the prefix's ending at token %d (%+d tokens): taken at the wrong boundary", s.End-1, e-1, e-s.End), Where: fmt.Sprintf("row %d", s.Row)}
						}
						rk.AddKernelDiagnosis(t.Name(), bridge.OpPrefill, p.DType, p.StateDType, f)
						report := t.Logf
						if strict {
							report = t.Errorf
						}
						report("chunk state of row %d after token %d: ratio %.3g > %g (%s); diagnosis [%s] %s", s.Row, s.End-1, r, judge.Threshold(p.DType), where, f.Tag, f)
						f.Where = t.Name() + ": " + f.Where
						failures = append(failures, f)
					}
					rk.AddKernel(t.Name(), bridge.OpPrefill, p.DType, p.StateDType, worst, worst <= judge.Threshold(p.DType), "chunk states")
				})
			}
		}
	}
	return failures
}

// speculative draws a multi-token decode of rows rows (the last a padding
// row) through tokens tokens, each row's start slot read from reads
// slots, the states written to slots of their own after them.
func speculative(dt pair, rows, tokens int, seed uint64) *mamba2.Steps {
	o := mamba2.Options{Batch: rows, Seqlen: tokens, Heads: 4, Headdim: 8, Groups: 2, Dstate: 16, Chunk: 0, D: true, Z: true, DtBias: true,
		Softplus: true, DType: dt.in, StateDType: dt.state}
	p := mamba2.Generate(o, seed)
	n := p.Heads * p.Headdim * p.Dstate
	s := &mamba2.Steps{Batch: rows, Tokens: tokens, Reads: 1, Heads: p.Heads, Headdim: p.Headdim, Groups: p.Groups, Dstate: p.Dstate,
		X: p.X, Dt: p.Dt, A: p.A, B: p.B, C: p.C, D: p.D, Z: p.Z, DtBias: p.DtBias, Softplus: true, DType: dt.in, StateDType: dt.state}
	// slots: the rows' starts 0..rows−1, then tokens a row, then two spare
	s.Slots = rows + rows*tokens + 2
	s.State = make([]float64, s.Slots*n)
	for i := range s.State {
		s.State[i] = dt.state.Round(math.Sin(float64(i)*0.37) * 0.8)
	}
	for b := 0; b < rows; b++ {
		s.ReadSlots = append(s.ReadSlots, b)
		for i := 0; i < tokens; i++ {
			s.WriteSlots = append(s.WriteSlots, rows+b*tokens+i)
		}
	}
	s.ReadSlots[rows-1] = -1 // padding
	for i := 0; i < tokens; i++ {
		s.WriteSlots[(rows-1)*tokens+i] = -1
	}
	return s
}

// stepsRounded rounds s's inputs to their types (Step.Rounded's).
func stepsRounded(s *mamba2.Steps) *mamba2.Steps {
	q := *s
	in, w := s.DType, s.DType.Weight()
	q.X, q.Dt, q.B, q.C, q.Z = in.RoundAll(s.X), in.RoundAll(s.Dt), in.RoundAll(s.B), in.RoundAll(s.C), in.RoundAll(s.Z)
	q.A, q.D, q.DtBias = w.RoundAll(s.A), w.RoundAll(s.D), w.RoundAll(s.DtBias)
	q.State = s.StateDType.RoundAll(s.State)
	return &q
}

// judgeSteps judges a multi-token decode's result: each row's outputs and
// the state after each token it wrote, against the sequential reference of
// its tokens from its start slot (mamba2.Steps.Chain); every slot no row
// writes bit for bit unchanged. It returns the failures' words.
func judgeSteps(s *mamba2.Steps, out *mamba2.StepOutput) []string {
	var bad []string
	H, P, N, T := s.Heads, s.Headdim, s.Dstate, s.Tokens
	n := H * P * N
	written := map[int]bool{}
	for b := 0; b < s.Batch; b++ {
		q := s.Chain(b)
		if q == nil {
			for i := b * T * H * P; i < (b+1)*T*H*P; i++ {
				if out.Y[i] != 0 {
					bad = append(bad, fmt.Sprintf("row %d (padding): y nonzero", b))
					break
				}
			}
			continue
		}
		for k := 1; k <= T; k++ {
			w := s.WriteSlots[b*T+k-1]
			if w < 0 {
				continue
			}
			written[w] = true
			head := q.Slice(0, k, q.InitialStates)
			want, sc := mamba2.Prefill(head)
			got := &mamba2.Output{Y: out.Y[b*T*H*P : (b*T+k)*H*P], FinalStates: out.State[w*n : (w+1)*n]}
			got.SeqStates = got.FinalStates
			c, _, err := judge.CompareArrays(judge.PrefillArrays(head, got, want, sc))
			if err != nil || c.NonFinite > 0 || c.Worst.Ratio > judge.Threshold(s.DType) {
				bad = append(bad, fmt.Sprintf("row %d, after %d of %d tokens (slot %d): %s", b, k, T, w, c.Worst))
			}
		}
	}
	for slot := 0; slot < s.Slots; slot++ {
		if written[slot] {
			continue
		}
		for i := slot * n; i < (slot+1)*n; i++ {
			if math.Float64bits(out.State[i]) != math.Float64bits(s.State[i]) {
				bad = append(bad, fmt.Sprintf("slot %d, which no row writes, changed", slot))
				break
			}
		}
	}
	return bad
}

// stepsCause diagnoses row b of a multi-token decode that failed (bad,
// judgeSteps' words, names the row) by the kernel's own decode step: the
// row's tokens one step at a time (bridge.OpStep), each judged against the
// float64 step from the kernel's previous state. The first wrong step's
// diagnosis (diagnose.SSDStep) is then the cause, shared by both paths;
// where every single step passes, the fault is the multi-token path's own
// (steps:multi-token-only). false where row b did not fail or k has no
// single decode step to compare with.
func stepsCause(k *bridge.SSD, s *mamba2.Steps, b int, bad []string) (report.Finding, bool) {
	failed := false
	for _, w := range bad {
		failed = failed || strings.HasPrefix(w, fmt.Sprintf("row %d, after", b))
	}
	q := s.Chain(b)
	if !failed || q == nil {
		return report.Finding{}, false
	}
	state := q.InitialStates
	for i := 0; i < s.Tokens; i++ {
		st := mamba2.StepAt(q, i, state)
		if k.SupportsStep(st) != "" {
			return report.Finding{}, false
		}
		out, err := k.Step(st)
		if err != nil {
			return report.Finding{Tag: "raises", Cause: "the single decode step: " + err.Error(), Where: fmt.Sprintf("row %d, token %d", b, i)}, true
		}
		want, sc := mamba2.Decode(st)
		if c, _, err := judge.CompareArrays(judge.StepArrays(st, out, want, sc)); err != nil || c.NonFinite > 0 || c.Worst.Ratio > judge.Threshold(st.DType) {
			f := diagnose.SSDStep(st, out)
			f.Cause = fmt.Sprintf("the kernel's own decode step errs too, from token %d of the row: %s", i, f.Cause)
			f.Where = fmt.Sprintf("row %d, token %d, one step at a time; %s", b, i, f.Where)
			return f, true
		}
		state = out.State
	}
	return report.Finding{Tag: "steps:multi-token-only", Cause: "the multi-token decode fails where the same tokens decoded one step at a time by this kernel pass: a fault of the multi-token path",
		Where: fmt.Sprintf("row %d, %d tokens", b, s.Tokens)}, true
}

// speculativeDecode runs TestMamba2SpeculativeDecode's checks against k:
// a verification of 4 draft tokens per row, then, for each k of them
// accepted, the next call starting from the state after the k-th (vLLM's
// num_accepted_tokens), which must equal k + 1 decode steps. It returns
// the failures' words, each with its subtest, failing those where strict.
func speculativeDecode(t *testing.T, k *bridge.SSD, dts []pair, strict bool) []string {
	rk := repFor(k)
	var all []string
	const rows, tokens = 3, 4
	for _, dt := range dts {
		t.Run(dt.String(), func(t *testing.T) {
			track(t)
			s := stepsRounded(speculative(dt, rows, tokens, 91))
			if why := k.SupportsSteps(s); why != "" {
				rk.KernelUnsupported(t.Name(), bridge.OpSteps, s.DType, s.StateDType, why)
				t.Skip(why)
			}
			out, err := k.Steps(s)
			skipRefused(t, rk, bridge.OpSteps, s.DType, s.StateDType, err)
			if err != nil {
				t.Fatalf("%s: %v", bridge.OpSteps, err)
			}
			bad := judgeSteps(s, out)
			for b := 0; b < rows && len(bad) > 0; b++ {
				if f, ok := stepsCause(k, s, b, bad); ok {
					rk.AddKernelDiagnosis(t.Name(), bridge.OpSteps, s.DType, s.StateDType, f)
					bad = append(bad, fmt.Sprintf("row %d: diagnosis [%s] %s", b, f.Tag, f))
					break
				}
			}
			for acc := 1; acc <= tokens; acc++ {
				// the next verification: one more token, from the k-th accepted
				next := stepsRounded(speculative(dt, rows, 1, 92))
				next.Slots, next.State = s.Slots, out.State
				next.A, next.D, next.DtBias = s.A, s.D, s.DtBias // the layer's weights, the same in both calls
				next.Reads, next.ReadSlots, next.Accepted = tokens, append([]int(nil), s.WriteSlots...), make([]int, rows)
				for b := range next.Accepted {
					next.Accepted[b] = acc
				}
				next.WriteSlots = []int{rows*tokens + rows, rows*tokens + rows + 1, -1}
				got, err := k.Steps(next)
				if err != nil {
					t.Fatalf("%s with %d accepted: %v", bridge.OpSteps, acc, err)
				}
				// its reference: the first acc tokens of the verification, then the new one
				for b := 0; b < rows-1; b++ {
					chain := s.Chain(b).Slice(0, acc, s.Chain(b).InitialStates)
					nq := next.Chain(b)
					joined := mamba2.Concat(chain, nq)
					want, sc := mamba2.Prefill(joined)
					H, P, N := s.Heads, s.Headdim, s.Dstate
					w := next.WriteSlots[b]
					g := &mamba2.Output{Y: append(append([]float64(nil), out.Y[b*tokens*H*P:(b*tokens+acc)*H*P]...), got.Y[b*H*P:(b+1)*H*P]...),
						FinalStates: got.State[w*H*P*N : (w+1)*H*P*N]}
					g.SeqStates = g.FinalStates
					c, _, err := judge.CompareArrays(judge.PrefillArrays(joined, g, want, sc))
					if err != nil || c.NonFinite > 0 || c.Worst.Ratio > judge.Threshold(s.DType) {
						bad = append(bad, fmt.Sprintf("row %d, %d of %d accepted, then a token: %s", b, acc, tokens, c.Worst))
					}
				}
			}
			worst := "every row's outputs and states within the sequential model"
			if len(bad) > 0 {
				worst = bad[0]
			}
			rk.AddKernel(t.Name(), bridge.OpSteps, s.DType, s.StateDType, 0, len(bad) == 0, worst)
			for _, b := range bad {
				all = append(all, t.Name()+": "+b)
				if strict {
					t.Error(b)
				}
			}
		})
	}
	return all
}

// TestMamba2SpeculativeDecode: a multi-token decode (bridge.OpSteps:
// speculative decoding's verification) writes after each draft token the
// state k decode steps give, for each k, and its outputs are theirs; a
// padding row's outputs are zero and every slot no row writes keeps its
// bits; the next verification, started from the state after the k-th
// accepted token (num_accepted_tokens = k), equals k + 1 decode steps,
// for each k. Judged against the sequential float64 reference (each step's
// state kept in its type). Where the kernel under test is the default
// numpy path the check runs as well (its ssd_steps).
func TestMamba2SpeculativeDecode(t *testing.T) {
	track(t)
	speculativeDecode(t, kernel, []pair{pairs[0], pairs[1], pairs[2]}, true)
}

// TestMamba2SpeculativeDecodeCanFail: the numpy path that starts the next
// verification from the state after the first rejected token fails; one
// whose every decode step has a slip is named by the single step's
// diagnosis, one whose multi-token path alone drops D is said to be that
// path's.
func TestMamba2SpeculativeDecodeCanFail(t *testing.T) {
	track(t)
	if bad := speculativeDecode(t, slipKernel(t, "spec-accepted-off-by-one"), []pair{pairs[0]}, false); len(bad) == 0 {
		t.Error("a verification started one accepted token late passed")
	}
	// a slip of every decode step (softplus without log1p) shows in the
	// multi-token decode and is named by the single step's diagnosis
	bad := speculativeDecode(t, slipKernel(t, "softplus-log-exp"), []pair{pairs[0]}, false)
	if !slices.ContainsFunc(bad, func(w string) bool { return strings.Contains(w, "diagnosis [dt:softplus-log-exp]") }) {
		t.Errorf("a decode step with softplus without log1p: %q, want a row diagnosed [dt:softplus-log-exp]", bad)
	}
	// a slip of the multi-token path alone (D dropped there, not in the
	// single step) is said to be that path's
	bad = speculativeDecode(t, slipKernel(t, "steps-no-D"), []pair{pairs[0]}, false)
	if !slices.ContainsFunc(bad, func(w string) bool { return strings.Contains(w, "diagnosis [steps:multi-token-only]") }) {
		t.Errorf("a multi-token decode without D: %q, want a row diagnosed [steps:multi-token-only]", bad)
	}
}

// chainRows cuts tokens [from, to) out of y laid out as rows of seqlen
// tokens of hp elements each ([b][t][h][p]).
func chainRows(y []float64, batch, seqlen, hp, from, to int) []float64 {
	var out []float64
	for b := 0; b < batch; b++ {
		out = append(out, y[(b*seqlen+from)*hp:(b*seqlen+to)*hp]...)
	}
	return out
}

// chainVerdict judges a decode chain's y (OpDecodeChain of p, its first k
// tokens prefilled): the prefill's part against the reference of those
// tokens, the decoded part against the continuation of the reference
// from the float64 state after token k, its error model the larger of
// the sequential one and the chunked one (a copy may replay its chunks in
// decode), carrying the prefill's error. It returns the worst ratio of
// each part and where.
func chainVerdict(p *mamba2.Problem, k int, y []float64) (pre, dec judge.Worst, err error) {
	hp := p.Heads * p.Headdim
	head := p.Slice(0, k, nil)
	refHead, hsc := mamba2.Prefill(head)
	cp, _, err := judge.CompareArrays(judge.PrefillArrays(head, &mamba2.Output{Y: chainRows(y, p.Batch, p.Seqlen, hp, 0, k)}, refHead, hsc)[:1])
	if err != nil {
		return pre, dec, err
	}
	q, want, sc := continuation(p, k, 0, hsc)
	qc := *q
	qc.Chunk = p.Chunk
	_, scChunked := continuationOf(&qc, hsc)
	for i := range sc.Y {
		sc.Y[i], sc.TinyY[i] = math.Max(sc.Y[i], scChunked.Y[i]), math.Max(sc.TinyY[i], scChunked.TinyY[i])
	}
	cd, _, err := judge.CompareArrays(judge.PrefillArrays(q, &mamba2.Output{Y: chainRows(y, p.Batch, p.Seqlen, hp, k, p.Seqlen)}, want, sc)[:1])
	if err != nil {
		return pre, dec, err
	}
	pre, dec = cp.Worst, cd.Worst
	if cp.NonFinite > 0 {
		pre.Ratio = math.Inf(1)
	}
	if cd.NonFinite > 0 {
		dec.Ratio = math.Inf(1)
	}
	return pre, dec, nil
}

// chainCause names why a decode chain's decoded part fails: the state it
// continues from, fitted — the tokens after the k-th decoded from the
// float64 state after j < k tokens (the prefill's tokens j..k−1 never
// entered it; j the last chunk boundary is a replaying decode that lost
// its chunk's tail) where that fits within the model and ten times better
// than the right start; else the first wrong token, by its place in a chunk.
func chainCause(p *mamba2.Problem, k int, y []float64, dec judge.Worst) report.Finding {
	hp := p.Heads * p.Headdim
	got := &mamba2.Output{Y: chainRows(y, p.Batch, p.Seqlen, hp, k, p.Seqlen)}
	best, bestJ := math.Inf(1), -1
	for j := 0; j < k; j++ {
		var init []float64
		if j > 0 {
			r, _ := mamba2.Prefill(p.Slice(0, j, nil))
			init = r.FinalStates
		} else if p.InitialStates != nil {
			init = p.InitialStates
		}
		q := p.Slice(k, p.Seqlen, init)
		if init == nil {
			q.InitialStates = make([]float64, p.StateLen())
		}
		want, sc := mamba2.Prefill(q)
		c, _, err := judge.CompareArrays(judge.PrefillArrays(q, got, want, sc)[:1])
		if err == nil && c.NonFinite == 0 && c.Worst.Ratio < best {
			best, bestJ = c.Worst.Ratio, j
		}
	}
	Q := max(p.Chunk, 1)
	if bestJ >= 0 && best <= judge.Threshold(p.DType) && best*10 <= dec.Ratio {
		f := report.Finding{Tag: fmt.Sprintf("chain:state-from(%d)", bestJ),
			Cause: fmt.Sprintf("the decode continues from the state after the first %d tokens, not %d: the prefill's tokens %d..%d never entered it", bestJ, k, bestJ, k-1),
			Where: fmt.Sprintf("decoded tokens %d..%d; fitted ratio %.3g against %.3g", k, p.Seqlen-1, best, dec.Ratio)}
		if bestJ == k/Q*Q {
			f.Cause += fmt.Sprintf(" (%d is the last chunk boundary: the unfinished chunk's tokens were not replayed)", bestJ)
		}
		return f
	}
	first := -1
	if len(dec.Index) > 1 {
		first = k + dec.Index[1]
	}
	return report.Finding{Tag: "chain:decoded", Cause: "the decoded tokens are wrong and no start state fits",
		Where: fmt.Sprintf("worst at token %d (position %d of its chunk), prefill of %d tokens: %s", first, first%Q, k, dec)}
}

// decodeChain runs TestMamba2DecodeChain's checks against k and returns
// the failures' words, failing the subtests where strict; only, where
// given, keeps those prefill lengths alone.
func decodeChain(t *testing.T, k *bridge.SSD, dts []pair, strict bool, only ...int) []string {
	rk := repFor(k)
	var all []string
	for _, dt := range dts {
		for _, init := range []bool{false, true} {
			o := base(dt)
			o.Seqlen, o.D, o.Z, o.DtBias, o.Softplus, o.InitialStates = 160, true, true, true, true, init
			o.Chunk = chunkOf(k)
			p := mamba2.Generate(o, 43).Rounded()
			q0 := max(p.Chunk, 1)
			ks := append([]int{1, q0 - 1}, bridgetest.SplitPoints(p.Chunk, p.Seqlen)...)
			ks = append(ks, p.Seqlen-1)
			slices.Sort(ks)
			for _, at := range slices.Compact(ks) {
				if at <= 0 || at >= p.Seqlen || (len(only) > 0 && !slices.Contains(only, at)) {
					continue
				}
				t.Run(fmt.Sprintf("%v/init=%v/k=%d", dt, init, at), func(t *testing.T) {
					track(t)
					fail := t.Logf
					if strict {
						fail = t.Errorf
					}
					if why := k.SupportsDecodeChain(p); why != "" {
						rk.KernelUnsupported(t.Name(), bridge.OpDecodeChain, p.DType, p.StateDType, why)
						t.Skip(why)
					}
					out, err := k.DecodeChain(p, at)
					skipRefused(t, rk, bridge.OpDecodeChain, p.DType, p.StateDType, err)
					if err != nil {
						t.Fatalf("%s: %v", bridge.OpDecodeChain, err)
					}
					pre, dec, err := chainVerdict(p, at, out.Y)
					if err != nil {
						t.Fatal(err)
					}
					th := judge.Threshold(p.DType)
					ok := pre.Ratio <= th && dec.Ratio <= th
					var bad []string
					if !ok {
						f := chainCause(p, at, out.Y, dec)
						if pre.Ratio > th {
							f = report.Finding{Tag: "chain:prefill", Cause: "the chain's prefill part is wrong (TestMamba2Prefill diagnoses the prefill)", Where: pre.String()}
						}
						rk.AddKernelDiagnosis(t.Name(), bridge.OpDecodeChain, p.DType, p.StateDType, f)
						bad = append(bad, fmt.Sprintf("prefill of %d, then decode: prefill part %s; decoded part %s; diagnosis [%s] %s", at, pre, dec, f.Tag, f))
					}
					if c, _ := k.Cap(bridge.OpDecodeChain); c.Has(bridge.FeatureBitwisePrefill) {
						if w := bitwiseAgainstPrefill(k, p, out.Y); w != "" {
							f := report.Finding{Tag: "chain:not-bitwise", Cause: "the copy declares its decode equal to its prefill bit for bit, and it is not", Where: w}
							rk.AddKernelDiagnosis(t.Name(), bridge.OpDecodeChain, p.DType, p.StateDType, f)
							bad = append(bad, fmt.Sprintf("prefill of %d, then decode: diagnosis [%s] %s: %s", at, f.Tag, f.Cause, w))
						}
					}
					rk.AddKernel(t.Name(), bridge.OpDecodeChain, p.DType, p.StateDType, math.Max(pre.Ratio, dec.Ratio), len(bad) == 0,
						fmt.Sprintf("prefill of %d, decode to %d: prefill part %s; decoded part %s", at, p.Seqlen, pre, dec))
					for _, b := range bad {
						all = append(all, t.Name()+": "+b)
						fail("%s", b)
					}
				})
			}
		}
	}
	return all
}

// bitwiseAgainstPrefill compares a chain's y with the kernel's own
// one-pass prefill of the whole rows, bit for bit: "" where equal, else
// how many elements differ and the first, by token and place in a chunk.
func bitwiseAgainstPrefill(k *bridge.SSD, p *mamba2.Problem, y []float64) string {
	own, err := k.Prefill(p)
	if err != nil {
		return "its own prefill: " + err.Error()
	}
	hp, Q := p.Heads*p.Headdim, max(p.Chunk, 1)
	n, first := 0, -1
	for i := range y {
		if math.Float64bits(y[i]) != math.Float64bits(own.Y[i]) {
			if first < 0 {
				first = i
			}
			n++
		}
	}
	if n == 0 {
		return ""
	}
	tok := first / hp % p.Seqlen
	return fmt.Sprintf("%d of %d elements of y differ from its own prefill's, the first at row %d, token %d (position %d of its chunk): %.9g against %.9g",
		n, len(y), first/hp/p.Seqlen, tok, tok%Q, y[first], own.Y[first])
}

// TestMamba2DecodeChain: a request served as an engine serves it
// (bridge.OpDecodeChain: its first k tokens prefilled, every later token
// one decode step of all rows), for k at the first tokens, around the
// first chunk boundary and at the last token, with and without initial
// states, equals the longer prefill: within the error model, and bit for
// bit the copy's own one-pass prefill where it declares so
// (FeatureBitwisePrefill: Megatron-LM's batch-invariant decode). A wrong
// decoded part is diagnosed by the state it continues from.
func TestMamba2DecodeChain(t *testing.T) {
	track(t)
	decodeChain(t, kernel, []pair{pairs[0], pairs[1]}, true)
}

// TestMamba2DecodeChainCanFail: the numpy path whose decode starts from
// the last chunk boundary's state without the chunk's tail fails, named
// chain:state-from(boundary); the numpy path that claims bitwise equality
// with its chunked prefill while it decodes step by step fails that claim.
func TestMamba2DecodeChainCanFail(t *testing.T) {
	track(t)
	bad := decodeChain(t, slipKernel(t, "chain-no-tail"), []pair{pairs[0]}, false, 64, 65, 127)
	if !slices.ContainsFunc(bad, func(w string) bool { return strings.Contains(w, "[chain:state-from(64)]") }) {
		t.Errorf("a decode that drops the chunk's tail: %q, want a chain diagnosed [chain:state-from(64)]", bad)
	}
	w, err := bridge.Start(bridge.Spec{Python: spec.Python, Adapter: "numpy_ssd", Args: []string{"claim=bitwise_prefill"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	bad = decodeChain(t, &bridge.SSD{W: w}, []pair{pairs[0]}, false, 96)
	if !slices.ContainsFunc(bad, func(w string) bool { return strings.Contains(w, "[chain:not-bitwise]") }) {
		t.Errorf("a claim of bitwise equality the numpy path does not keep: %q, want [chain:not-bitwise]", bad)
	}
}

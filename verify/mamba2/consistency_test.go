package mamba2

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"ssmverify/bridge"
	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/mamba2"
	"ssmverify/verify/bridgetest"
)

// propagated is the bound on what an error of the handed-over state —
// stateScale in units of u, within the threshold — contributes to the
// outputs of the continuation q: Σ_n |C|·e^{cum}·θ·S_state, and to its
// final states, e^{cum}·θ·S_state (the continuation with x = 0, C = |C|,
// the state's scale as its initial state), times |z·σ(z)| with the gate.
func propagated(q *mamba2.Problem, stateScale []float64) (y, final []float64) {
	a := *q
	a.X = make([]float64, len(q.X))
	a.C = make([]float64, len(q.C))
	for i, c := range q.C {
		a.C[i] = math.Abs(c)
	}
	a.D, a.Z, a.CuSeqlens = nil, nil, nil
	a.InitialStates = make([]float64, len(stateScale))
	for i, s := range stateScale {
		a.InitialStates[i] = judge.Threshold(q.DType) * s
	}
	o, _ := mamba2.Prefill(&a)
	if q.Z != nil {
		for i, z := range q.Z {
			o.Y[i] *= math.Abs(z / (1 + math.Exp(-z)))
		}
	}
	return o.Y, o.FinalStates
}

// continuation is the judge of the second part of a split run, q = p's
// steps [k, L) from the state a kernel handed over: against p's exact
// reference from step k, with q's own error scale (its algorithm given by
// chunk) plus what the handed state's error propagates.
func continuation(p *mamba2.Problem, k, chunk int, head *mamba2.Scale) (*mamba2.Problem, *mamba2.Output, *mamba2.Scale) {
	refHead, _ := mamba2.Prefill(p.Slice(0, k, nil))
	q := p.Slice(k, p.Seqlen, refHead.FinalStates)
	q.Chunk = chunk
	want, sc := continuationOf(q, head)
	return q, want, sc
}

// continuationOf is q's reference and error scale as continuation judges
// it: q's own scale plus what the handed state's error (head's final
// states) propagates.
func continuationOf(q *mamba2.Problem, head *mamba2.Scale) (*mamba2.Output, *mamba2.Scale) {
	want, sc := mamba2.Prefill(q)
	py, pf := propagated(q, head.FinalStates)
	for i := range sc.Y {
		sc.Y[i] += py[i]
	}
	for i := range sc.FinalStates {
		sc.FinalStates[i] += pf[i]
	}
	return want, sc
}

func compare(t *testing.T, what string, q *mamba2.Problem, arrays []judge.Array, op string) bool {
	t.Helper()
	c, _, err := judge.CompareArrays(arrays)
	if err != nil {
		t.Fatal(err)
	}
	passed := c.NonFinite == 0 && c.Worst.Ratio <= judge.Threshold(q.DType)
	rep.AddKernel(t.Name(), op, q.DType, q.StateDType, c.Worst.Ratio, passed, what+": "+c.Worst.String())
	if !passed {
		t.Errorf("%s (%s): ratio %.3g > %g at %s", what, q.Shape(), c.Worst.Ratio, judge.Threshold(q.DType), c.Worst)
	}
	return passed
}

// TestMamba2SplitResume: a prefill split at k and resumed from its own
// final state equals one pass, for splits after the first step, at each
// position of the second chunk (bridgetest.SplitPoints: its first,
// second, middle, second-to-last and last token), in the middle and one
// step before the end.
func TestMamba2SplitResume(t *testing.T) {
	track(t)
	for _, dt := range []pair{pairs[0], pairs[1], pairs[2]} {
		o := base(dt)
		o.D, o.Z, o.DtBias, o.Softplus, o.InitialStates = true, true, true, true, true
		p := mamba2.Generate(o, 31).Rounded()
		q0 := max(chunk(), 1)
		ks := append([]int{1, q0 - 1}, bridgetest.SplitPoints(chunk(), p.Seqlen)...)
		ks = append(ks, 150, p.Seqlen-1)
		slices.Sort(ks)
		for _, k := range slices.Compact(ks) {
			if k <= 0 || k >= p.Seqlen {
				continue
			}
			t.Run(fmt.Sprintf("%v/k=%d", dt, k), func(t *testing.T) {
				track(t)
				head := p.Slice(0, k, nil)
				h, ok := runPrefill(t, head)
				if !ok {
					return
				}
				_, hsc := mamba2.Prefill(head)
				q, want, sc := continuation(p, k, p.Chunk, hsc)
				resumed := p.Slice(k, p.Seqlen, h.FinalStates)
				got, ok := runPrefill(t, resumed)
				if !ok {
					return
				}
				if !compare(t, fmt.Sprintf("resumed at %d", k), q, judge.PrefillArrays(q, got, want, sc), bridge.OpPrefill) {
					f := diagnose.SSDPrefill(resumed, got, func(q *mamba2.Problem) (*mamba2.Output, error) { return kernel.Prefill(q) })
					rep.AddKernelDiagnosis(t.Name(), bridge.OpPrefill, p.DType, p.StateDType, f)
					t.Logf("diagnosis of the resumed part against its own reference: [%s] %s", f.Tag, f)
				}
			})
		}
	}
}

// TestMamba2DecodeAfterPrefill: decode steps from a prefill's final state
// equal the prefill of the longer sequence, judged with the error model of
// a sequential evaluation (one decode step per token, the state stored in
// its type after each).
func TestMamba2DecodeAfterPrefill(t *testing.T) {
	track(t)
	for _, dt := range []pair{pairs[0], pairs[1], pairs[2]} {
		for _, c := range []struct {
			name string
			mod  func(o *mamba2.Options)
		}{
			{"all", func(o *mamba2.Options) {
				o.D, o.Z, o.DtBias, o.Softplus, o.InitialStates = true, true, true, true, true
			}},
			// without softplus a Δ below 0 is clamped to 0 in the prefill
			{"negative_dt", func(o *mamba2.Options) { o.DtBias, o.D = true, true }},
		} {
			t.Run(dt.String()+"/"+c.name, func(t *testing.T) {
				track(t)
				o := base(dt)
				o.Seqlen = 150
				c.mod(&o)
				p := mamba2.Generate(o, 41)
				if c.name == "negative_dt" {
					for h := range p.DtBias {
						p.DtBias[h] = -0.02
					}
				}
				p = p.Rounded()
				k := 130
				head := p.Slice(0, k, nil)
				h, ok := runPrefill(t, head)
				if !ok {
					return
				}
				_, hsc := mamba2.Prefill(head)
				q, want, sc := continuation(p, k, 0, hsc)
				state := h.FinalStates
				y := make([]float64, 0, len(want.Y))
				for step := k; step < p.Seqlen; step++ {
					s := mamba2.StepAt(p, step, state)
					if why := kernel.SupportsStep(s); why != "" {
						rep.KernelUnsupported(t.Name(), bridge.OpStep, s.DType, s.StateDType, why)
						return
					}
					out, ok := runStep(t, s)
					if !ok {
						return
					}
					y = append(y, out.Y...)
					state = out.State
				}
				// y was gathered step-major: [step][batch][h][p]; q's is [batch][step][h][p]
				hp := p.Heads * p.Headdim
				got := &mamba2.Output{Y: make([]float64, len(y)), FinalStates: state, SeqStates: state}
				n := p.Seqlen - k
				for i := 0; i < n; i++ {
					for b := 0; b < p.Batch; b++ {
						copy(got.Y[(b*n+i)*hp:(b*n+i+1)*hp], y[(i*p.Batch+b)*hp:(i*p.Batch+b+1)*hp])
					}
				}
				if !compare(t, fmt.Sprintf("%d decode steps after a prefill of %d", n, k), q, judge.PrefillArrays(q, got, want, sc), bridge.OpStep) {
					// the first failing step, diagnosed as a decode step
					for step, st := k, h.FinalStates; step < p.Seqlen; step++ {
						s := mamba2.StepAt(p, step, st)
						out, err := kernel.Step(s)
						if err != nil {
							break
						}
						w, ssc := mamba2.Decode(s)
						if c, _, _ := judge.CompareArrays(judge.StepArrays(s, out, w, ssc)); c.Worst.Ratio > judge.Threshold(s.DType) {
							f := diagnose.SSDStep(s, out)
							f.Where = fmt.Sprintf("decode step %d after a prefill of %d; %s", step-k, k, f.Where)
							rep.AddKernelDiagnosis(t.Name(), bridge.OpStep, s.DType, s.StateDType, f)
							t.Errorf("the first wrong decode step (%d): [%s] %s", step-k, f.Tag, f)
							break
						}
						st = out.State
					}
				}
			})
		}
	}
}

// TestMamba2PackedEqualsAlone: a packed row equals each of its sequences
// run alone, within the sum of both runs' error bounds.
func TestMamba2PackedEqualsAlone(t *testing.T) {
	track(t)
	for _, dt := range []pair{pairs[0], pairs[1]} {
		t.Run(dt.String(), func(t *testing.T) {
			track(t)
			o := base(dt)
			o.Batch, o.CuSeqlens, o.InitialStates, o.D, o.DtBias, o.Softplus = 1, []int{0, 50, 51, 180, 300}, true, true, true, true
			p := mamba2.Generate(o, 51).Rounded()
			packed, ok := runPrefill(t, p)
			if !ok {
				return
			}
			_, psc := mamba2.Prefill(p)
			hp, hpn := p.Heads*p.Headdim, p.HeadStateLen()
			for i, q := range p.Unpack() {
				alone, ok := runPrefill(t, q)
				if !ok {
					return
				}
				_, qsc := mamba2.Prefill(q)
				sq := p.Sequences()[i]
				// judge alone against packed, the scale the sum of both
				sc := &mamba2.Scale{Y: make([]float64, len(qsc.Y)), TinyY: qsc.TinyY, FinalStates: make([]float64, len(qsc.FinalStates)), TinyFinal: qsc.TinyFinal}
				for j := range sc.Y {
					sc.Y[j] = qsc.Y[j] + psc.Y[sq[0]*hp+j]
				}
				for j := range sc.FinalStates {
					sc.FinalStates[j] = qsc.FinalStates[j] + psc.SeqStates[i*hpn+j]
				}
				ref := &mamba2.Output{Y: packed.Y[sq[0]*hp : sq[1]*hp], FinalStates: packed.SeqStates[i*hpn : (i+1)*hpn]}
				compare(t, fmt.Sprintf("sequence %d [%d, %d) alone against packed", i, sq[0], sq[1]), q, judge.PrefillArrays(q, alone, ref, sc), bridge.OpPrefill)
			}
		})
	}
}

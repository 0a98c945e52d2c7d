package verify

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// resumeCuts are the ways a sequence of L steps is cut into pieces: at
// random points, token by token (generation feeds one step at a time), a
// long prefill followed by 256 single tokens, and around every
// boundary a kernel may have inside the sequence: its tiles' and chunks'
// powers of two, Mamba's 2048-step chunk, and the first and last step.
func resumeCuts(L int, r *rand.Rand) map[string][]int {
	cuts := map[string][]int{}
	random := []int{0, L}
	for len(random) < 5 {
		if c := 1 + r.IntN(L-1); !slices.Contains(random, c) {
			random = append(random, c)
		}
	}
	slices.Sort(random)
	cuts["random"] = random
	if L <= 64 {
		var each []int
		for t := 0; t <= L; t++ {
			each = append(each, t)
		}
		cuts["token by token"] = each
	}
	bounds := []int{0, 1}
	for _, b := range []int{31, 32, 33, 255, 256, 257, 2047, 2048, 2049, 4096, L - 1} {
		if b > 1 && b < L && !slices.Contains(bounds, b) {
			bounds = append(bounds, b)
		}
	}
	slices.Sort(bounds)
	cuts["boundaries"] = append(bounds, L)
	if L > 256 {
		// A long prefill, then 256 steps one token at a time: the state is
		// carried across 256 calls after thousands of steps in one.
		tokens := []int{0}
		for t := L - 256; t <= L; t++ {
			tokens = append(tokens, t)
		}
		cuts["prefill then 256 tokens"] = tokens
	}
	return cuts
}

// scanInPieces scans p cut at cuts with the library, each piece from the
// last state the kernel returned for the one before (ssm.Problem.InPieces).
func scanInPieces(p *ssm.Problem, dt ssm.DType, cuts []int) (*ssm.Output, error) {
	return p.InPieces(cuts, func(q *ssm.Problem) (*ssm.Output, error) { return lib.Scan(q, dt) })
}

// TestResumption: a scan in pieces, each from the last state of the one
// before (ssmk_scan_fwd_state), is the scan in one call: every piece's
// output and the final state are judged against the float64 reference of
// the whole sequence with its error model. Not bitwise: the kernel's
// association may differ with the cut, and the state is rounded to the
// dtype at each cut, as it is at every step of a sequential kernel. Cut at
// random, token by token, a long prefill then 256 single tokens, and
// around every boundary a kernel may have; the first piece starts from a
// random initial state; the long sequence has Δ as trained models feed it
// (mamba1.TrainedDeltas: pre-activations over [−20, 20], softplus on). Every
// dtype, the 16-bit input types too. A library that does not declare
// SSMK_CAP_INITIAL_STATE is reported, not failed.
func TestResumption(t *testing.T) {
	track(t)
	specs := []mamba1.Spec{
		{Batch: 2, Dim: 3, Seqlen: 40, Dstate: 4, Groups: 3, VariableB: true, VariableC: true, Softplus: true,
			HasD: true, HasZ: true, HasBias: true, Dist: mamba1.Realistic},
		{Batch: 1, Dim: 2, Seqlen: 4100, Dstate: 2, Groups: 1, VariableB: true, VariableC: true, Softplus: true,
			HasBias: true, Dist: mamba1.Realistic},
	}
	for _, m := range ssm.Methods() {
		for _, dt := range ssm.AllDTypes() {
			for _, isComplex := range []bool{false, true} {
				if (isComplex && fallback(m, dt)) || !judged(t.Name(), "resumption of", m, dt, isComplex, false) {
					continue
				}
				if !lib.Capabilities(m, dt, isComplex).InitialState() || !lib.HasInitialState() {
					rep.Unsupported(t.Name(), fmt.Sprintf("resumption of %v %v %s (declared without SSMK_CAP_INITIAL_STATE)", m, dt, ssm.AKind(isComplex)))
					continue
				}
				for si, s := range specs {
					s.Method, s.Complex = m, isComplex
					p := mamba1.Generate(within(s, dt), uint64(40+si))
					mamba1.SetInitialState(p, uint64(50+si))
					if si == 1 {
						mamba1.TrainedDeltas(p, uint64(60+si)) // Δ as trained models feed it
					}
					p, err := fitProblem(t.Name(), p, dt)
					if err != nil {
						continue
					}
					if dt != ssm.F64 {
						// What the kernel reads: fp32, or the 16-bit input
						// type with float32 weights and state (the state
						// handed from piece to piece stays float32).
						p.RoundTo(dt)
					}
					r := rand.New(rand.NewPCG(uint64(si), uint64(m)))
					for name, cuts := range resumeCuts(s.Seqlen, r) {
						got, err := scanInPieces(p, dt, cuts)
						if err != nil {
							t.Errorf("%v %v %s %s, cut %s: declared supported, but %v", m, dt, ssm.AKind(isComplex), s, name, err)
							continue
						}
						cmp, err := judge.CompareScan(p, got, dt, nil, nil)
						if err != nil {
							t.Fatal(err)
						}
						rep.Add(t.Name(), m, dt, isComplex, cmp.Worst.Ratio, cmp.Worst.ULP, cmp.Passed(dt), name+": "+cmp.Worst.String())
						if !cmp.Passed(dt) {
							t.Errorf("%v %v %s %s, cut %s at %v: worst %s; threshold %g%s%s", m, dt, ssm.AKind(isComplex), s, name, shortCuts(cuts),
								cmp.Worst, judge.Threshold(dt), whereInPiece(cmp.Worst, cuts), resumeDiagnosis(t.Name(), p, got, dt, cuts))
						}
					}
				}
			}
		}
	}
}

// shortCuts prints the cut points, eliding a long run.
func shortCuts(cuts []int) string {
	if len(cuts) <= 12 {
		return fmt.Sprint(cuts)
	}
	return fmt.Sprintf("%v … %v (%d pieces)", cuts[:4], cuts[len(cuts)-2:], len(cuts)-1)
}

// whereInPiece says where the worst output element lies relative to the
// pieces: at a piece's first step (the initial state's handling), or inside.
func whereInPiece(w judge.Worst, cuts []int) string {
	if w.Array != "out" || len(w.Index) != 3 {
		return ""
	}
	t := w.Index[2]
	for k := 0; k+1 < len(cuts); k++ {
		if t >= cuts[k] && t < cuts[k+1] {
			if t == cuts[k] && k > 0 {
				return fmt.Sprintf("\nwhere: step %d, the first of a piece: the state passed in is mishandled", t)
			}
			return fmt.Sprintf("\nwhere: step %d, %d steps into the piece that starts at %d", t, t-cuts[k], cuts[k])
		}
	}
	return ""
}

// resumeDiagnosis names the mistake in taking the initial state that the
// failing pieces match (diagnose.Resumption), or, where the scan from h = 0
// in one call fails as well, the scan's diagnosis; once per test and cell, recorded;
// "" when the cell has one already.
func resumeDiagnosis(test string, p *ssm.Problem, got *ssm.Output, dt ssm.DType, cuts []int) string {
	if !rep.WantDiagnosis(test, p.Method, dt, p.Complex) {
		return ""
	}
	// A kernel whose scan from h = 0 in one call fails too is wrong apart
	// from the state it is given: the scan's own diagnosis says how.
	q := p.Clone()
	q.InitialState = nil
	if whole, err := lib.Scan(q, dt); err != nil {
		return diagnosis(test, q, dt)
	} else if c, err := judge.CompareScan(q, whole, dt, nil, nil); err != nil || !c.Passed(dt) {
		return diagnosis(test, q, dt)
	}
	f := diagnose.Resumption(p, got, dt, cuts)
	rep.AddDiagnosis(test, p.Method, dt, p.Complex, f)
	return "\ndiagnosis [" + f.Tag + "]: " + f.String()
}

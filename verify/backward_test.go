package verify

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// backwardCombos lists every method × dtype of dts × real/complex A whose
// backward the library declares (ssm.Caps.Backward), recording the others
// under test as not supported; nil when the library exports no backward.
func backwardCombos(test string, dts []ssm.DType) []combo {
	var out []combo
	for _, m := range ssm.Methods() {
		for _, dt := range dts {
			for _, isComplex := range []bool{false, true} {
				c := lib.Capabilities(m, dt, isComplex)
				if c.Backward() && lib.HasBackward() && !(isComplex && c.ComplexZOHFallback()) {
					out = append(out, combo{m, dt, isComplex})
					continue
				}
				rep.Unsupported(test, fmt.Sprintf("the backward of %v %v %s (declared unsupported)", m, dt, ssm.AKind(isComplex)))
			}
		}
	}
	return out
}

// stateGrads reports whether cb's backward takes a gradient of the last
// state, computes one of the initial state and starts from a given state
// (not so for a library that declares SSMK_CAP_BWD_OUTPUTS_ONLY, as
// Mamba's backward, or no initial state for the forward): the tests ask
// for them only then.
func stateGrads(cb combo) bool {
	c := lib.Capabilities(cb.m, cb.dt, cb.isComplex)
	return c.BackwardStateGrads() && c.InitialState() && lib.HasInitialState()
}

// backwardChecked runs the library's backward pass of p for ct in dt
// (rounding p and ct first to the types the kernel reads them in, so that
// kernel and reference see the same numbers: ssm.Problem.RoundTo,
// ssm.Cotangent.RoundTo), compares every gradient with the reference under
// the backward's error model and records the comparison under test.
// It returns the comparison and the (rounded) problem and cotangent.
func backwardChecked(test string, p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType, withInitial bool) (judge.GradComparison, *ssm.Problem, *ssm.Cotangent, error) {
	c, _, p, ct, err := backwardJudged(test, p, ct, dt, withInitial)
	return c, p, ct, err
}

// backwardJudged is backwardChecked that also returns the kernel's
// gradients. A problem outside the library's declared features is fitted
// to them first, as the forward's are (fitProblem: the backward of a
// combination takes what its scan takes), or, when it cannot be, returned
// with an errNotTaken error, recorded as not supported.
func backwardJudged(test string, p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType, withInitial bool) (judge.GradComparison, *ssm.Grads, *ssm.Problem, *ssm.Cotangent, error) {
	q, err := fitProblem(test, p, dt)
	if err != nil {
		return judge.GradComparison{}, nil, p, ct, err
	}
	p, ct = roundedFor(q, ct, dt)
	got, err := lib.Backward(p, ct, dt, withInitial)
	if err != nil {
		rep.Add(test, p.Method, dt, p.Complex, math.Inf(1), math.Inf(1), false, "backward refused: "+err.Error())
		// a memory fault or a refusal needs no probe to be named: every
		// test that meets one records it
		if rep.WantDiagnosis(test, p.Method, dt, p.Complex) {
			rep.AddBackwardDiagnosis(test, p.Method, dt, p.Complex, diagnose.BackwardError(err))
		}
		return judge.GradComparison{}, nil, p, ct, err
	}
	want, err := mamba1.ScanGrad(p, ct, withInitial)
	if err != nil {
		return judge.GradComparison{}, got, p, ct, err
	}
	sc, err := mamba1.GradErrorScale(p, ct, withInitial, dt.Precision())
	if err != nil {
		return judge.GradComparison{}, got, p, ct, err
	}
	c := judge.CompareGrads(p, got, dt, want, sc)
	rep.AddBackward(test, p.Method, dt, p.Complex, c)
	return c, got, p, ct, nil
}

// backwardDiagnosis diagnoses a failing backward (diagnose.Backward) once
// per test and cell, records it and returns the line for the log.
func backwardDiagnosis(test string, p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType) string {
	if !rep.WantDiagnosis(test, p.Method, dt, p.Complex) {
		return ""
	}
	f := diagnose.Backward(lib, p, ct, dt)
	rep.AddBackwardDiagnosis(test, p.Method, dt, p.Complex, f)
	return "\ndiagnosis [" + f.Tag + "]: " + f.String()
}

// roundedFor returns copies of p and ct rounded to the types a backward of
// dt reads them in (p and ct themselves for F64).
func roundedFor(p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType) (*ssm.Problem, *ssm.Cotangent) {
	if dt == ssm.F64 {
		return p, ct
	}
	p, ct = p.Clone(), ct.Clone()
	p.RoundTo(dt)
	ct.RoundTo(dt)
	return p, ct
}

// gradFailure describes a failing comparison: the failing gradients,
// worst first.
func gradFailure(c judge.GradComparison, dt ssm.DType) string {
	s := fmt.Sprintf("threshold %g", judge.Threshold(dt))
	for _, g := range c.Failing(dt) {
		s += "\n  " + g.String()
	}
	if c.NonFinite > 0 {
		w := c.FirstNonFinite
		s += fmt.Sprintf("\n  %d non-finite gradients where the reference is finite, the first %s[%d]: kernel %.9g, reference %.17g",
			c.NonFinite, w.Name, w.Index, w.Got, w.Want)
	}
	if len(c.Missing) > 0 {
		s += fmt.Sprintf("\n  missing: %v", c.Missing)
	}
	if len(c.Unscaled) > 0 {
		s += fmt.Sprintf("\n  not judged (internal error of ssmverify: the error scale does not fit the reference): %v", c.Unscaled)
	}
	if c.Internal != nil {
		s += "\n  " + c.Internal.Error()
	}
	return s
}

// TestBackwardAccuracy: every gradient of the backward pass against the
// float64 reference gradients (mamba1.ScanGrad) under the reverse
// scan's error model (mamba1.GradErrorScale), on random shapes (seqlen
// up to 200, across the tiles of a kernel; TestBackwardChunkBoundaries
// takes rows across longer chunks), every
// option, from h = 0 or an initial state, with or without a gradient of
// the last state, in realistic and stress inputs.
func TestBackwardAccuracy(t *testing.T) {
	track(t)
	backwardAccuracy(t, "TestBackwardAccuracy", backwardCombos("TestBackwardAccuracy", ssm.DTypes()))
}

// backwardAccuracy is the property of TestBackwardAccuracy over combos,
// recorded under test.
func backwardAccuracy(t *testing.T, test string, combos []combo) {
	if len(combos) == 0 {
		t.Skip("the library declares no backward pass here")
	}
	for _, d := range []mamba1.Dist{mamba1.Realistic, mamba1.Stress} {
		t.Run(d.String(), func(t *testing.T) {
			// rapid replays the shrunk case last and ends the test with
			// t.Fatalf: its diagnosis runs deferred, as the forward's does.
			var failing struct {
				p  *ssm.Problem
				ct *ssm.Cotangent
				dt ssm.DType
			}
			defer func() {
				if t.Failed() && failing.p != nil {
					t.Log(backwardDiagnosis(test+"/"+d.String(), failing.p, failing.ct, failing.dt))
				}
			}()
			rapid.Check(t, func(rt *rapid.T) {
				cb := rapid.SampledFrom(combos).Draw(rt, "combination")
				l := mamba1.Limits{MaxBatch: 2, MaxDim: 8, MaxSeqlen: 200, MaxDstate: 16, Dists: []mamba1.Dist{d},
					Methods: []ssm.Method{cb.m}, Complex: map[bool]int{false: 1, true: 2}[cb.isComplex]}
				c := mamba1.Problems(l).Draw(rt, "case")
				p := c.Problem
				if w := within(c.Spec, cb.dt); w != c.Spec {
					c.Spec, p = w, mamba1.Generate(w, c.Seed)
				}
				states := stateGrads(cb)
				if rapid.Bool().Draw(rt, "initial state") && states {
					mamba1.SetInitialState(p, c.Seed)
				}
				withInitial := rapid.Bool().Draw(rt, "dinitial_state") && states
				ct := mamba1.NewCotangent(p, c.Seed, rapid.Bool().Draw(rt, "dlast_state") && states)
				cmp, pr, ctr, err := backwardChecked(test+"/"+d.String(), p, ct, cb.dt, withInitial)
				if errors.Is(err, errNotTaken) {
					rt.Skip(err)
				}
				if err != nil {
					rt.Fatalf("%v %v: declared supported, but %v", c, cb.dt, err)
				}
				if !cmp.Passed(cb.dt) {
					failing.p, failing.ct, failing.dt = pr, ctr, cb.dt
					rt.Fatalf("%v %v initial_state=%t dlast_state=%t: %s", c, cb.dt, p.InitialState != nil, ct.LastState != nil,
						gradFailure(cmp, cb.dt))
				}
			})
		})
	}
}

// TestBackwardEveryCombination runs fixed cases of every declared method ×
// dtype × real/complex A, so that none depends on what rapid draws: a
// Mamba block across chunk boundaries (seqlen 100) with an initial state
// and a gradient of the last state; the bare scan (no D, z, bias or
// softplus; constant B and C); a wide block of two groups of 16 channels
// (where a GPU kernel sums a group's dB and dC within a thread block); and
// dstate 40 (more states than a warp has lanes).
func TestBackwardEveryCombination(t *testing.T) {
	track(t)
	backwardEveryCombination(t, "TestBackwardEveryCombination", backwardCombos("TestBackwardEveryCombination", ssm.DTypes()))
}

// backwardEveryCombination runs TestBackwardEveryCombination's cases for
// combos, recorded under test.
func backwardEveryCombination(t *testing.T, test string, combos []combo) {
	for _, cb := range combos {
		wide := mamba1.MambaBlock(cb.m, 2, 32, 70, 16)
		wide.Groups = 2
		for k, s := range []mamba1.Spec{mamba1.MambaBlock(cb.m, 2, 4, 100, 5),
			{Batch: 1, Dim: 3, Seqlen: 70, Dstate: 4, Groups: 1, Method: cb.m}, wide,
			mamba1.MambaBlock(cb.m, 1, 2, 40, 40)} {
			s.Complex = cb.isComplex
			name := fmt.Sprintf("%v/%v/%s/%d", cb.m, cb.dt, ssm.AKind(cb.isComplex), k)
			backwardCase(t, test, name, cb, mamba1.Generate(within(s, cb.dt), uint64(k+1)), 3)
		}
	}
}

// backwardCase judges the backward of p for cb, from an initial state and
// with a gradient of the last state (drawn from seed) where the library
// takes them, and fails t under name with the failing gradients and a
// diagnosis.
func backwardCase(t *testing.T, test, name string, cb combo, p *ssm.Problem, seed uint64) {
	t.Helper()
	states := stateGrads(cb)
	if states {
		mamba1.SetInitialState(p, seed)
	}
	ct := mamba1.NewCotangent(p, seed, states)
	c, pr, ctr, err := backwardChecked(test, p, ct, cb.dt, states)
	if errors.Is(err, errNotTaken) {
		return
	}
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	if !c.Passed(cb.dt) {
		t.Errorf("%s: %s%s", name, gradFailure(c, cb.dt), backwardDiagnosis(test, pr, ctr, cb.dt))
	}
}

// TestBackwardOptionSweep: every declared combination over the options
// that decide where a kernel reads and writes the gradients of B and C:
// one or two groups, B and C each variable or constant, with and without
// the gate, in batches of two (seqlen 70, dstate 4, 8 channels). Mamba's
// complex backward, which offsets variable dB and dC by twice their
// group's stride, fails exactly in the cases with two groups and a
// variable B or C (docs/journal/findings-mamba-backward-2026-11-27.md). Cases
// outside the library's declared features are recorded as not supported.
func TestBackwardOptionSweep(t *testing.T) {
	track(t)
	for _, cb := range backwardCombos("TestBackwardOptionSweep", ssm.DTypes()) {
		var failed []string
		judgedCases := 0
		for _, groups := range []int{1, 2} {
			for _, vb := range []bool{false, true} {
				for _, vc := range []bool{false, true} {
					for _, z := range []bool{false, true} {
						s := mamba1.Spec{Batch: 2, Dim: 8, Seqlen: 70, Dstate: 4, Groups: groups, Method: cb.m, Complex: cb.isComplex,
							VariableB: vb, VariableC: vc, Softplus: true, HasD: true, HasZ: z, HasBias: true}
						name := fmt.Sprintf("groups=%d varB=%t varC=%t z=%t", groups, vb, vc, z)
						p := mamba1.Generate(s, 13)
						c, _, _, err := backwardChecked("TestBackwardOptionSweep", p, mamba1.NewCotangent(p, 13, false), cb.dt, false)
						if errors.Is(err, errNotTaken) {
							continue
						}
						judgedCases++
						switch {
						case err != nil:
							failed = append(failed, name+": "+err.Error())
						case !c.Passed(cb.dt):
							w := c.Failing(cb.dt)
							failed = append(failed, fmt.Sprintf("%s: %d gradients fail, worst %s", name, len(w), c.Worst()))
						}
					}
				}
			}
		}
		if len(failed) > 0 {
			t.Errorf("%v %v %s: %d of %d cases fail:\n  %s", cb.m, cb.dt, ssm.AKind(cb.isComplex), len(failed), judgedCases, strings.Join(failed, "\n  "))
		}
	}
}

// backwardChunkSeqlens cross the chunks of a GPU backward, which splits a
// long row into chunks whose starting states it recomputes (or reads) and
// carries the adjoint from one chunk back to the one before: 1100 steps
// cross 512-step chunks twice and 1024-step ones once (this project's CUDA
// build in fp64 or complex, and in fp32), 2049 Mamba's 2048-step chunks,
// each ending in a partial chunk. Two lengths, not chunkSeqlens' five: the
// planted-bug runs repeat the suite some thirty times on CI.
var backwardChunkSeqlens = []int{1100, 2049}

// TestBackwardChunkBoundaries: the backward of long rows
// (backwardChunkSeqlens), every declared combination, all options, from an
// initial state with a gradient of the last state where the library takes
// them. The other backward tests stay below 256 steps, inside one chunk.
func TestBackwardChunkBoundaries(t *testing.T) {
	track(t)
	combos := backwardCombos(t.Name(), ssm.DTypes())
	if len(combos) == 0 {
		t.Skip("the library declares no backward pass")
	}
	for _, L := range backwardChunkSeqlens {
		t.Run(strconv.Itoa(L), func(t *testing.T) {
			for _, cb := range combos {
				s := mamba1.MambaBlock(cb.m, 1, 2, L, 3)
				s.Complex = cb.isComplex
				name := fmt.Sprintf("%v %v %s", cb.m, cb.dt, ssm.AKind(cb.isComplex))
				backwardCase(t, t.Name(), name, cb, mamba1.Generate(within(s, cb.dt), uint64(L)), uint64(L))
			}
		})
	}
}

// TestBackwardGradcheck checks a library's float64 backward against its own
// float64 forward, as PyTorch's gradcheck does: for each input array, the
// gradient's inner product with a random direction against the derivative
// of the loss along it by Richardson-extrapolated central differences of
// the library's scans. It needs no reference, so it holds a library to its
// own forward for any method it computes.
func TestBackwardGradcheck(t *testing.T) {
	track(t)
	for _, cb := range backwardCombos("TestBackwardGradcheck", ssm.DTypes()) {
		if cb.dt != ssm.F64 {
			continue
		}
		s := mamba1.MambaBlock(cb.m, 1, 2, 80, 3)
		s.Complex, s.Groups = cb.isComplex, 2
		p, err := fitProblem(t.Name(), mamba1.Generate(within(s, cb.dt), 7), cb.dt)
		if err != nil {
			continue
		}
		states := stateGrads(cb)
		if states {
			mamba1.SetInitialState(p, 7)
		}
		ct := mamba1.NewCotangent(p, 7, states)
		g, err := lib.Backward(p, ct, ssm.F64, states)
		if err != nil {
			if rep.WantDiagnosis(t.Name(), p.Method, ssm.F64, p.Complex) {
				rep.AddBackwardDiagnosis(t.Name(), p.Method, ssm.F64, p.Complex, diagnose.BackwardError(err))
			}
			t.Errorf("%v %s: %v", cb.m, ssm.AKind(cb.isComplex), err)
			continue
		}
		if msg := gradcheck(p, ct, g, 7); msg != "" {
			diag := ""
			if rep.WantDiagnosis(t.Name(), p.Method, ssm.F64, p.Complex) {
				f := diagnose.BackwardInitial(lib, p, ct, ssm.F64, states)
				if f.Tag == "" {
					// the gradients are the reference's: the forward they
					// were checked against is what is wrong
					f = diagnoseSmall(p, ssm.F64)
					f.Cause = "the backward agrees with the reference and the library's forward does not: " + f.Cause
				}
				rep.AddBackwardDiagnosis(t.Name(), p.Method, ssm.F64, p.Complex, f)
				diag = "\ndiagnosis [" + f.Tag + "]: " + f.String()
			}
			t.Errorf("%v fp64 %s: the backward disagrees with the library's own forward: %s%s", cb.m, ssm.AKind(cb.isComplex), msg, diag)
		}
	}
}

// gradcheck compares ⟨g, v⟩ with the derivative of the library's forward
// loss along v, one input array at a time; "" when all agree to 1e-6 of
// Σ|gᵢvᵢ| (the differences' truncation and rounding are below 1e-9 of it
// on these problems).
func gradcheck(p *ssm.Problem, ct *ssm.Cotangent, g *ssm.Grads, seed uint64) string {
	r := rand.New(rand.NewPCG(seed, 29))
	fields := map[string]func(*ssm.Problem) []float64{"U": func(q *ssm.Problem) []float64 { return q.U },
		"Delta": func(q *ssm.Problem) []float64 { return q.Delta }, "A": func(q *ssm.Problem) []float64 { return q.A },
		"B": func(q *ssm.Problem) []float64 { return q.B }, "C": func(q *ssm.Problem) []float64 { return q.C },
		"D": func(q *ssm.Problem) []float64 { return q.D }, "Z": func(q *ssm.Problem) []float64 { return q.Z },
		"DeltaBias":    func(q *ssm.Problem) []float64 { return q.DeltaBias },
		"InitialState": func(q *ssm.Problem) []float64 { return q.InitialState }}
	for _, f := range g.Fields() {
		v := make([]float64, len(f.Values))
		var want, mag float64
		for i := range v {
			v[i] = r.NormFloat64()
			want += f.Values[i] * v[i]
			mag += math.Abs(f.Values[i] * v[i])
		}
		var failed error
		at := func(eps float64) float64 {
			q := p.Clone()
			s := fields[f.Input](q)
			for i := range s {
				s[i] += eps * v[i]
			}
			o, err := lib.Scan(q, ssm.F64)
			if err != nil {
				failed = err
				return 0
			}
			var l float64
			for i, y := range o.Out {
				l += ct.Out[i] * y
			}
			for i, c := range ct.LastState {
				l += c * o.LastState[i]
			}
			return l
		}
		d := func(h float64) float64 { return (-at(2*h) + 8*at(h) - 8*at(-h) + at(-2*h)) / (12 * h) }
		const h = 1e-3
		got := (16*d(h/2) - d(h)) / 15
		if failed != nil {
			return "the forward refused: " + failed.Error()
		}
		if math.Abs(got-want) > 1e-6*mag {
			return fmt.Sprintf("%s: ⟨grad, v⟩ = %.12g, the forward's differences %.12g (Σ|gᵢvᵢ| = %.3g)", f.Name, want, got, mag)
		}
	}
	return ""
}

// TestBackwardDeterministic: the same call twice gives bitwise equal
// gradients, unless the library declares that its backward reduces with
// atomics (SSMK_CAP_BWD_ATOMIC); then the two calls must each pass the
// error model, which bounds their spread.
func TestBackwardDeterministic(t *testing.T) {
	track(t)
	for _, cb := range backwardCombos("TestBackwardDeterministic", ssm.DTypes()) {
		s := mamba1.MambaBlock(cb.m, 2, 8, 150, 4)
		s.Complex, s.Groups = cb.isComplex, 2
		p, err := fitProblem(t.Name(), mamba1.Generate(within(s, cb.dt), 11), cb.dt)
		if err != nil {
			continue
		}
		p, ct := roundedFor(p, mamba1.NewCotangent(p, 11, stateGrads(cb)), cb.dt)
		first, err1 := lib.Backward(p, ct, cb.dt, false)
		second, err2 := lib.Backward(p, ct, cb.dt, false)
		if err1 != nil || err2 != nil {
			t.Errorf("%v %v %s: %v, %v", cb.m, cb.dt, ssm.AKind(cb.isComplex), err1, err2)
			continue
		}
		if lib.Capabilities(cb.m, cb.dt, cb.isComplex).BackwardAtomic() {
			for _, g := range []*ssm.Grads{first, second} {
				want, _ := mamba1.ScanGrad(p, ct, false)
				sc, _ := mamba1.GradErrorScale(p, ct, false, cb.dt.Precision())
				if c := judge.CompareGrads(p, g, cb.dt, want, sc); !c.Passed(cb.dt) {
					t.Errorf("%v %v %s (atomics declared): %s", cb.m, cb.dt, ssm.AKind(cb.isComplex), gradFailure(c, cb.dt))
				}
			}
			continue
		}
		for _, d := range bitDiffs(first, second) {
			t.Errorf("%v %v %s: %s[%d] is %.17g, then %.17g: not deterministic, and SSMK_CAP_BWD_ATOMIC is not declared",
				cb.m, cb.dt, ssm.AKind(cb.isComplex), d.name, d.i, d.a, d.b)
		}
	}
}

// gradBitDiff is the first element of one gradient where two sets differ
// in their bits: its name and index, a's value and b's.
type gradBitDiff struct {
	name string
	i    int
	a, b float64
}

// bitDiffs lists, for each gradient whose bits differ between a and b,
// its first differing element (none: bitwise equal).
func bitDiffs(a, b *ssm.Grads) []gradBitDiff {
	var out []gradBitDiff
	bf := b.Fields()
	for k, f := range a.Fields() {
		for i, v := range f.Values {
			if w := bf[k].Values[i]; math.Float64bits(v) != math.Float64bits(w) {
				out = append(out, gradBitDiff{f.Name, i, v, w})
				break
			}
		}
	}
	return out
}

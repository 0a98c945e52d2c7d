package verify

import (
	"errors"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// accuracyLimits are the shapes of the accuracy properties: batch 1–3, dim
// 1–64 with groups dividing it, seqlen 1–300 (any length, not only
// multiples of a chunk), dstate 1–64 and, now and then, the library's
// maximum.
func accuracyLimits(d mamba1.Dist) mamba1.Limits {
	return mamba1.Limits{MaxBatch: 3, MaxDim: 64, MaxSeqlen: 300, MaxDstate: 64,
		ExtraDstate: []int{lib.MaxDstate()}, Dists: []mamba1.Dist{d}}
}

// TestAccuracy: random shapes, feature toggles, every method, real and
// complex A, fp32 and fp64, against the float64 reference. Each case's worst
// scaled error ratio must stay within the dtype's threshold; a failure
// prints the shrunk case (its Spec and seed reproduce it with mamba1.Generate), the
// worst element's indices and values, the ratio and the threshold.
func TestAccuracy(t *testing.T) {
	track(t)
	for _, d := range []mamba1.Dist{mamba1.Realistic, mamba1.Stress} {
		t.Run(d.String(), func(t *testing.T) {
			test := "TestAccuracy/" + d.String()
			// Draw among the combinations the library declares, so that a
			// library of one (ggml: zoh, fp32, real A) is judged as often as
			// one of all 24.
			accuracyProperty(t, test, d, declaredCombos(test, ssm.DTypes()))
		})
	}
}

// declaredCombos lists the scans of every method × dtype of dtypes ×
// real/complex A that the library declares, for test (the others are
// recorded as not supported; complex fallbacks are TestComplexFallback's).
func declaredCombos(test string, dtypes []ssm.DType) []combo {
	var out []combo
	for _, m := range ssm.Methods() {
		for _, dt := range dtypes {
			for _, isComplex := range []bool{false, true} {
				if !(isComplex && fallback(m, dt)) && judged(test, "scans of", m, dt, isComplex, false) {
					out = append(out, combo{m, dt, isComplex})
				}
			}
		}
	}
	return out
}

// accuracyProperty is the accuracy property of test over the combinations
// combos (those the library declares): a rapid draw of one, a shape, its
// options and inputs in distribution d, scanned and judged; the shrunk
// failing case is diagnosed.
func accuracyProperty(t *testing.T, test string, d mamba1.Dist, combos []combo) {
	if len(combos) == 0 {
		t.Skip("no combination declared")
	}
	// rapid replays the shrunk case last: the failure to diagnose.
	var failing *ssm.Problem
	var failingDT ssm.DType
	// rapid ends a failing test with t.Fatalf (runtime.Goexit): the
	// diagnosis of the shrunk case runs deferred.
	defer func() {
		if t.Failed() && failing != nil {
			t.Log(diagnosis(test, failing, failingDT))
		}
	}()
	rapid.Check(t, func(rt *rapid.T) {
		cb := rapid.SampledFrom(combos).Draw(rt, "combination")
		limits := accuracyLimits(d)
		limits.Methods, limits.Complex = []ssm.Method{cb.m}, map[bool]int{false: 1, true: 2}[cb.isComplex]
		c := mamba1.Problems(limits).Draw(rt, "case")
		dt := cb.dt
		p := c.Problem
		if w := within(c.Spec, dt); w != c.Spec {
			c.Spec, p = w, mamba1.Generate(w, c.Seed)
		}
		cmp, p, err := scanChecked(test, p, dt)
		if errors.Is(err, errNotTaken) {
			rt.Skip(err)
		}
		if err != nil {
			rt.Fatalf("%v %v: declared supported, but %v", c, dt, err)
		}
		if !cmp.Passed(dt) {
			failing, failingDT = p, dt
			round := ""
			if dt != ssm.F64 {
				round = fmt.Sprintf(", then RoundTo(%v)", dt)
			}
			rt.Fatalf("%v %v: worst %s; threshold %g (%d non-finite)\nreproduce: mamba1.Generate(%#v, %d)%s%s",
				c, dt, cmp.Worst, judge.Threshold(dt), cmp.NonFinite, c.Spec, c.Seed, round, fittedNote(c.Problem, p))
		}
	})
}

// TestAccuracyEveryCombination runs one small fixed case of every method ×
// dtype × real/complex × feature set, so that no combination depends on
// what rapid happens to draw.
func TestAccuracyEveryCombination(t *testing.T) {
	track(t)
	type feat struct{ varB, varC, softplus, D, z, bias bool }
	feats := []feat{{}, {true, true, true, true, true, true}, {varB: true}, {varC: true}, {softplus: true, bias: true}, {D: true, z: true}}
	for _, m := range ssm.Methods() {
		for _, dt := range ssm.DTypes() {
			for _, isComplex := range []bool{false, true} {
				if isComplex && fallback(m, dt) {
					continue
				}
				for fi, f := range feats {
					for _, d := range []mamba1.Dist{mamba1.Realistic, mamba1.Stress} {
						s := mamba1.Spec{Batch: 2, Dim: 6, Seqlen: 45, Dstate: 7, Groups: 3, Method: m, Complex: isComplex,
							VariableB: f.varB, VariableC: f.varC, Softplus: f.softplus, HasD: f.D, HasZ: f.z, HasBias: f.bias, Dist: d}
						if !judged(t.Name(), "scans of", m, dt, isComplex, false) {
							continue
						}
						cmp, p, err := scanChecked(t.Name(), mamba1.Generate(within(s, dt), uint64(fi+1)), dt)
						if errors.Is(err, errNotTaken) {
							continue
						}
						if err != nil {
							t.Errorf("%v %v: declared supported, but %v", s, dt, err)
							continue
						}
						if !cmp.Passed(dt) {
							t.Errorf("%v %v seed %d: worst %s; threshold %g%s", s, dt, fi+1, cmp.Worst, judge.Threshold(dt),
								diagnosis(t.Name(), p, dt))
						}
					}
				}
			}
		}
	}
}

// fittedNote says, where the problem scanned is not mamba1.Generate's, that it was
// fitted to what the library declares.
func fittedNote(drawn, scanned *ssm.Problem) string {
	if drawn.Shape() == scanned.Shape() {
		return ""
	}
	return "\nthen fitted to the library's declared features (ssm.Features.Fit): " + scanned.Shape()
}

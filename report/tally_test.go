package report

import (
	"fmt"
	"math"
	"testing"

	"pgregory.net/rapid"
)

type comparison struct {
	test   string
	ratio  float64
	passed bool
}

func comparisons(t *rapid.T, label string) []comparison {
	n := rapid.IntRange(0, 12).Draw(t, label+"-n")
	cs := make([]comparison, n)
	for i := range cs {
		r := rapid.SampledFrom([]float64{0, 0.5, 1, 3, 7, 1e6, math.Inf(1), math.NaN()}).Draw(t, label+"-ratio")
		cs[i] = comparison{test: rapid.SampledFrom([]string{"TestA", "TestB", "TestC"}).Draw(t, label+"-test"), ratio: r, passed: rapid.Bool().Draw(t, label+"-passed")}
	}
	return cs
}

// worstOf is the ranking Tally documents, computed directly: failures
// first, then the largest ratio, NaN the largest; the first of equals.
func worstOf(cs []comparison) (comparison, bool) {
	var w comparison
	for i, c := range cs {
		if i == 0 || outranks(!c.passed, c.ratio, !w.passed, w.ratio) {
			w = c
		}
	}
	return w, len(cs) > 0
}

func message(c comparison) string { return fmt.Sprintf("%s ratio %v", c.test, c.ratio) }

func tallied(cs []comparison) Tally {
	var t Tally
	for _, c := range cs {
		t.add(c.test, c.ratio, c.passed, message(c))
	}
	return t
}

func sameRatio(a, b float64) bool { return a == b || (math.IsNaN(a) && math.IsNaN(b)) }

// TestTally: a cell's counts are its comparisons'; its worst is a failure
// wherever one failed, else the largest ratio; and the merge of a cell's
// tallies from two reports is the tally of all their comparisons (the
// Slurm merge, the bridged parts), whatever the split.
func TestTally(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a, b := comparisons(t, "a"), comparisons(t, "b")
		all := append(append([]comparison(nil), a...), b...)
		whole := tallied(all)
		failures := 0
		for _, c := range all {
			if !c.passed {
				failures++
			}
		}
		if whole.Checks != len(all) || whole.Failures != failures {
			t.Fatalf("checks %d failures %d, want %d %d", whole.Checks, whole.Failures, len(all), failures)
		}
		if w, ok := worstOf(all); ok {
			if !sameRatio(float64(whole.MaxRatio), w.ratio) || (failures > 0 && w.passed) {
				t.Fatalf("worst %v %q, want %v (a failure: %v)", whole.MaxRatio, whole.Worst, w.ratio, failures > 0)
			}
		}
		merged := tallied(a)
		merged.merge(tallied(b))
		if merged.Checks != whole.Checks || merged.Failures != whole.Failures || !sameRatio(float64(merged.MaxRatio), float64(whole.MaxRatio)) || len(merged.FailedBy) != len(whole.FailedBy) {
			t.Fatalf("merged %+v, the whole %+v", merged, whole)
		}
	})
}

// TestTallyRanksFailuresFirst: the cases the ranking exists for.
func TestTallyRanksFailuresFirst(t *testing.T) {
	for _, c := range []struct {
		name  string
		cs    []comparison
		worst string
	}{
		{"a failure below a passed ratio", []comparison{{"TestA", 5, true}, {"TestB", 3, false}, {"TestC", 4, true}}, "TestB ratio 3"},
		{"the larger of two failures", []comparison{{"TestA", 3, false}, {"TestB", 9, false}, {"TestC", 99, true}}, "TestB ratio 9"},
		{"NaN above every ratio", []comparison{{"TestA", math.Inf(1), true}, {"TestB", math.NaN(), true}}, "TestB ratio NaN"},
		{"an exact first check", []comparison{{"TestA", 0, true}}, "TestA ratio 0"},
	} {
		if got := tallied(c.cs).Worst; got != c.worst {
			t.Errorf("%s: worst %q, want %q", c.name, got, c.worst)
		}
	}
}

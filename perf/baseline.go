package perf

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"time"

	"ssmverify/report"

	"golang.org/x/perf/benchmath"
)

// BaselineSchema names the version of baseline files.
const BaselineSchema = "ssmverify.gate-baseline/v1"

// Baseline is a stored set of Check7 samples (make baseline): the forward's
// by method and, where the library has them, the backward's and the
// backward's on saved states (absent from a baseline written before the
// gate compared them, or of a library without them).
type Baseline struct {
	Schema               string               `json:"schema"`
	Created              string               `json:"created"`
	Library              report.LibraryInfo   `json:"library"`
	Config               string               `json:"config"` // Check7's problem, dtype, trials
	Samples              map[string][]float64 `json:"samples_us"`
	BackwardSamples      map[string][]float64 `json:"backward_samples_us,omitempty"`
	BackwardSavedSamples map[string][]float64 `json:"backward_saved_samples_us,omitempty"`
}

// WriteBaseline stores Check7's samples with the library's identity.
func WriteBaseline(path string, c7 *report.Check7, lib report.LibraryInfo) error {
	b := Baseline{Schema: BaselineSchema, Created: time.Now().UTC().Format(time.RFC3339), Library: lib, Config: c7.Config,
		Samples: c7.Samples, BackwardSamples: c7.BackwardSamples, BackwardSavedSamples: c7.BackwardSavedSamples}
	js, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(js, '\n'), 0o644)
}

// LoadBaseline reads a baseline file and checks its schema.
func LoadBaseline(path string) (*Baseline, error) {
	js, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("baseline: %w (make baseline writes one)", err)
	}
	var b Baseline
	if err := json.Unmarshal(js, &b); err != nil {
		return nil, fmt.Errorf("baseline %s: %w", path, err)
	}
	if b.Schema != BaselineSchema {
		return nil, fmt.Errorf("baseline %s: schema %q, want %q", path, b.Schema, BaselineSchema)
	}
	return &b, nil
}

// MinEffect is the smallest speed-up reported as an improvement: the H200's
// 100-sample medians resolve 0.1% shifts between runs of one build (p < 0.01
// at −0.2% measured), which are drift, not news.
const MinEffect = 0.01

// ComparePerformance summarises this run's Check7 samples per method and,
// with a baseline file, compares each method with it (see the package
// documentation): the forward's under the method's name, the backward's
// as "METHOD backward" and the backward's on saved states as "METHOD
// backward, saved states", each against the baseline's samples of its kind
// (measured only where the baseline has none of that kind: a baseline
// written before the gate compared backwards). A different Check7
// configuration in the baseline is an error: the numbers would not be
// comparable.
func ComparePerformance(c7 *report.Check7, baselinePath string, maxRegression float64) ([]report.Perf, error) {
	var base *Baseline
	if baselinePath != "" {
		var err error
		if base, err = LoadBaseline(baselinePath); err != nil {
			return nil, err
		}
		if base.Config != c7.Config {
			return nil, fmt.Errorf("baseline %s was measured on %q, this run on %q: not comparable (make baseline with the same flags)", baselinePath, base.Config, c7.Config)
		}
	}
	var out []report.Perf
	kinds := []struct {
		suffix    string
		cur, prev map[string][]float64
	}{{"", c7.Samples, nil}, {" backward", c7.BackwardSamples, nil}, {" backward, saved states", c7.BackwardSavedSamples, nil}}
	if base != nil {
		kinds[0].prev, kinds[1].prev, kinds[2].prev = base.Samples, base.BackwardSamples, base.BackwardSavedSamples
	}
	for i, k := range kinds {
		methods := make([]string, 0, len(k.cur))
		for m := range k.cur {
			methods = append(methods, m)
		}
		sort.Strings(methods)
		for _, m := range methods {
			name, old := m+k.suffix, []float64(nil)
			// the forward's samples are always in a baseline; a kind of
			// backward may predate it
			if base != nil && (i == 0 || k.prev != nil) {
				var ok bool
				if old, ok = k.prev[m]; !ok {
					out = append(out, summarise(name, k.cur[m], report.VerdictUndecided, "the baseline has no samples for "+name))
					continue
				}
			}
			out = append(out, CompareSamples(name, old, k.cur[m], maxRegression))
		}
	}
	return out, nil
}

func summarise(method string, s []float64, verdict, reason string) report.Perf {
	sum := benchmath.AssumeNothing.Summary(benchmath.NewSample(s, &benchmath.DefaultThresholds), 0.95)
	return report.Perf{Method: method, Unit: "µs per launch", N: len(s), Median: sum.Center, Lo: sum.Lo, Hi: sum.Hi, Verdict: verdict, Reason: reason}
}

// CompareSamples compares one method's samples with its baseline (nil: no
// baseline, a summary only).
func CompareSamples(method string, old, cur []float64, maxRegression float64) report.Perf {
	th := benchmath.DefaultThresholds
	p := summarise(method, cur, report.NoChange, "")
	if old == nil {
		p.Verdict, p.Reason = report.VerdictPass, "no baseline: measured only"
		return p
	}
	so, sc := benchmath.NewSample(old, &th), benchmath.NewSample(cur, &th)
	bs := benchmath.AssumeNothing.Summary(so, 0.95)
	p.BaseN, p.BaseMedian, p.BaseLo, p.BaseHi = len(old), bs.Center, bs.Lo, bs.Hi
	cmp := benchmath.AssumeNothing.Compare(so, sc)
	p.P, p.Alpha = cmp.P, cmp.Alpha
	if bs.Center > 0 {
		p.DeltaPct = (p.Median - bs.Center) / bs.Center * 100
	}
	// Could the test decide at all? The Mann–Whitney U test's smallest
	// possible p for samples of n1 and n2 is 2/C(n1+n2, n1).
	if minP := 2 / binom(len(old)+len(cur), len(old)); minP >= th.CompareAlpha {
		p.Verdict = report.VerdictUndecided
		p.Reason = fmt.Sprintf("too few samples (%d and %d): the U test cannot reach p < %.2f; run more trials", len(old), len(cur), th.CompareAlpha)
		return p
	}
	spread := func(lo, hi, c float64) float64 { return math.Max(c-lo, hi-c) / c }
	if s := math.Max(spread(bs.Lo, bs.Hi, bs.Center), spread(p.Lo, p.Hi, p.Median)); s > maxRegression {
		p.Verdict = report.VerdictUndecided
		p.Reason = fmt.Sprintf("spread too wide: a 95%% interval reaches ±%.1f%% of its median, more than the %.0f%% regression to detect; run more trials on a quieter machine", 100*s, 100*maxRegression)
		if cmp.P < cmp.Alpha && p.DeltaPct > 100*maxRegression && spread(bs.Lo, bs.Hi, bs.Center)*100 < p.DeltaPct && spread(p.Lo, p.Hi, p.Median)*100 < p.DeltaPct {
			// The slowdown is larger than either interval: decided anyway.
			p.Verdict = report.Regression
			p.Reason = fmt.Sprintf("%+.1f%% (p = %.3g), beyond the allowed %.0f%% and beyond the noise", p.DeltaPct, cmp.P, 100*maxRegression)
		}
		return p
	}
	switch {
	case cmp.P >= cmp.Alpha:
		p.Verdict, p.Reason = report.NoChange, fmt.Sprintf("%+.1f%%, p = %.3g ≥ α = %.2f", p.DeltaPct, cmp.P, cmp.Alpha)
	case p.DeltaPct > 100*maxRegression:
		p.Verdict, p.Reason = report.Regression, fmt.Sprintf("%+.1f%% slower (p = %.3g), beyond the allowed %.0f%%", p.DeltaPct, cmp.P, 100*maxRegression)
	case p.DeltaPct <= -100*MinEffect:
		p.Verdict, p.Reason = report.Improvement, fmt.Sprintf("%+.1f%% (p = %.3g)", p.DeltaPct, cmp.P)
	case p.DeltaPct < 0:
		p.Verdict, p.Reason = report.NoChange, fmt.Sprintf("%+.1f%% (p = %.3g): significant but below the %.0f%% worth reporting", p.DeltaPct, cmp.P, 100*MinEffect)
	default:
		p.Verdict, p.Reason = report.NoChange, fmt.Sprintf("%+.1f%% (p = %.3g): significant but within the allowed %.0f%%", p.DeltaPct, cmp.P, 100*maxRegression)
	}
	return p
}

// binom is C(n, k) as a float.
func binom(n, k int) float64 {
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return r
}

package perf

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"ssmverify/report"
)

func noisy(r *rand.Rand, n int, center, rel float64) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = center * (1 + rel*(2*r.Float64()-1))
	}
	return s
}

// TestCompareSamples: benchstat's decision on synthetic samples, one case
// per verdict, including both reasons for "could not decide".
func TestCompareSamples(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name     string
		old, cur []float64
		want     string
		reason   string
	}{
		{"same", noisy(r, 30, 100, 0.01), noisy(r, 30, 100, 0.01), report.NoChange, "p ="},
		{"10% slower", noisy(r, 30, 100, 0.01), noisy(r, 30, 110, 0.01), report.Regression, "slower"},
		{"3% slower: significant but allowed", noisy(r, 30, 100, 0.005), noisy(r, 30, 103, 0.005), report.NoChange, "within the allowed 5%"},
		{"10% faster", noisy(r, 30, 100, 0.01), noisy(r, 30, 90, 0.01), report.Improvement, "-10"},
		{"0.3% faster: drift", noisy(r, 100, 100, 0.001), noisy(r, 100, 99.7, 0.001), report.NoChange, "below the 1%"},
		{"too few samples", []float64{100, 101, 99}, []float64{120, 121, 119}, report.VerdictUndecided, "too few samples"},
		{"too noisy", noisy(r, 30, 100, 0.4), noisy(r, 30, 104, 0.4), report.VerdictUndecided, "spread too wide"},
		{"noisy but far slower", noisy(r, 30, 100, 0.5), noisy(r, 30, 300, 0.5), report.Regression, "beyond the noise"},
		{"no baseline", nil, noisy(r, 10, 100, 0.01), report.VerdictPass, "no baseline"},
	} {
		p := CompareSamples("zoh", tc.old, tc.cur, 0.05)
		if p.Verdict != tc.want || !strings.Contains(p.Reason, tc.reason) {
			t.Errorf("%s: %s (%s), want %s with a reason containing %q", tc.name, p.Verdict, p.Reason, tc.want, tc.reason)
		}
	}
}

// TestComparePerformanceConfigMismatch: a baseline measured on another
// problem is refused, not compared.
func TestComparePerformanceConfigMismatch(t *testing.T) {
	dir := t.TempDir()
	c7 := &report.Check7{Config: "8×512×1024×16 fp32", Samples: map[string][]float64{"zoh": {1, 2, 3}}}
	path := filepath.Join(dir, "b.json")
	if err := WriteBaseline(path, &report.Check7{Config: "2×64×256×16 fp32", Samples: c7.Samples}, report.LibraryInfo{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ComparePerformance(c7, path, 0.05); err == nil || !strings.Contains(err.Error(), "not comparable") {
		t.Fatalf("err = %v, want a refusal naming both configurations", err)
	}
}

// TestComparePerformanceBackward: the backward's samples, and those on saved
// states, are compared with the baseline's of their kind, so that a change
// that slows the backward alone fails the gate; a baseline without
// backward samples (written before the gate compared them) leaves them
// measured only.
func TestComparePerformanceBackward(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	dir := t.TempDir()
	const config = "2×64×256×16 fp32"
	before := &report.Check7{Config: config, Samples: map[string][]float64{"zoh": noisy(r, 30, 100, 0.01)},
		BackwardSamples:      map[string][]float64{"zoh": noisy(r, 30, 400, 0.01)},
		BackwardSavedSamples: map[string][]float64{"zoh": noisy(r, 30, 300, 0.01)}}
	full, old := filepath.Join(dir, "full.json"), filepath.Join(dir, "old.json")
	if err := WriteBaseline(full, before, report.LibraryInfo{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteBaseline(old, &report.Check7{Config: config, Samples: before.Samples}, report.LibraryInfo{}); err != nil {
		t.Fatal(err)
	}
	// the forward as before, the backward 10% slower, the saved one as before
	now := &report.Check7{Config: config, Samples: map[string][]float64{"zoh": noisy(r, 30, 100, 0.01)},
		BackwardSamples:      map[string][]float64{"zoh": noisy(r, 30, 440, 0.01)},
		BackwardSavedSamples: map[string][]float64{"zoh": noisy(r, 30, 300, 0.01)}}
	for _, tc := range []struct {
		baseline string
		want     map[string]string
	}{
		{full, map[string]string{"zoh": report.NoChange, "zoh backward": report.Regression, "zoh backward, saved states": report.NoChange}},
		{old, map[string]string{"zoh": report.NoChange, "zoh backward": report.VerdictPass, "zoh backward, saved states": report.VerdictPass}},
	} {
		ps, err := ComparePerformance(now, tc.baseline, 0.05)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, p := range ps {
			got[p.Method] = p.Verdict
		}
		if len(got) != len(tc.want) {
			t.Errorf("%s: verdicts %v, want %v", filepath.Base(tc.baseline), got, tc.want)
		}
		for m, v := range tc.want {
			if got[m] != v {
				t.Errorf("%s: %s is %q, want %q", filepath.Base(tc.baseline), m, got[m], v)
			}
		}
	}
}

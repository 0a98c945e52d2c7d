package report

import "math"

// Tally is what every cell of a report counts, whatever it judges (a
// method × dtype × real/complex of the ABI's scan, its backward pass, an
// operation of a bridged kernel): its comparisons, the failed ones, the
// tests that failed, and its worst comparison.
//
// The worst comparison is a failure wherever the cell failed: a failed
// comparison outranks every passed one, and among comparisons of the same
// outcome the larger ratio (NaN the largest) ranks first. MaxRatio and
// Worst are that comparison's ratio and message; the ratios' distribution
// is kept elsewhere (Cell.Ratios).
type Tally struct {
	Checks   int      `json:"checks"`
	Failures int      `json:"failures"`
	MaxRatio Num      `json:"max_ratio"`
	Worst    string   `json:"worst,omitempty"`
	FailedBy []string `json:"failed_by,omitempty"`
}

// add counts one comparison made by test.
func (t *Tally) add(test string, ratio float64, passed bool, worst string) {
	if t.Checks == 0 || outranks(!passed, ratio, t.Failures > 0, float64(t.MaxRatio)) {
		t.MaxRatio, t.Worst = Num(ratio), worst
	}
	t.Checks++
	if !passed {
		t.Failures++
		if !contains(t.FailedBy, test) {
			t.FailedBy = append(t.FailedBy, test)
		}
	}
}

// merge adds o, the same cell's tally in another report, to t.
func (t *Tally) merge(o Tally) {
	if o.Checks == 0 {
		return
	}
	if t.Checks == 0 || outranks(o.Failures > 0, float64(o.MaxRatio), t.Failures > 0, float64(t.MaxRatio)) {
		t.MaxRatio, t.Worst = o.MaxRatio, o.Worst
	}
	t.Checks += o.Checks
	t.Failures += o.Failures
	for _, f := range o.FailedBy {
		if !contains(t.FailedBy, f) {
			t.FailedBy = append(t.FailedBy, f)
		}
	}
}

// outranks reports whether a comparison (failed, ratio) is worse than the
// worst kept so far (keptFailed, kept).
func outranks(failed bool, ratio float64, keptFailed bool, kept float64) bool {
	if failed != keptFailed {
		return failed
	}
	return ratio > kept || (math.IsNaN(ratio) && !math.IsNaN(kept))
}

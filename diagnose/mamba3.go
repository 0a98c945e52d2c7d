package diagnose

import (
	"strings"

	"ssmverify/judge"
	"ssmverify/mamba3"
	"ssmverify/report"
)

// Mamba3 diagnoses a failing forward (or step) of Mamba-3's SISO layer:
// the slip of mamba3.Slips() whose reference the kernel's y and states
// match within the error model, else "none" with where it fails.
func Mamba3(p *mamba3.Problem, y []float64, st *mamba3.State) report.Finding {
	want, wst := mamba3.Forward(p)
	sc := mamba3.ErrorScale(p)
	arrays := judge.Mamba3Arrays(p, y, want, st, wst, sc)
	ok, ratios := ssdJudged(arrays)
	if ok {
		return report.Finding{Cause: "the failure did not reproduce on this problem"}
	}
	f := report.Finding{Where: strings.Join(failingCounts(ratios, judge.Threshold(arrays[0].Computed), "y", "angle_state", "ssm_state", "k_state", "v_state"), "; ")}
	for _, s := range mamba3.Slips() {
		ay, ast := mamba3.ForwardVariant(p, s.Variant)
		if ssdPasses(judge.Mamba3Arrays(p, y, ay, st, ast, sc)) {
			if f.Tag == "" {
				f.Tag, f.Cause = s.Tag, s.Cause
			} else {
				f.Also = append(f.Also, s.Tag)
			}
		}
	}
	if f.Tag == "" {
		f.Tag, f.Cause = "none", "no known slip of Mamba-3's exponential-trapezoidal layer fits"
	}
	return f
}

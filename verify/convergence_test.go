package verify

import (
	"testing"

	"ssmverify/judge"
	"ssmverify/ssm"
)

// TestConvergenceOrder: each method's global order, fitted from the
// library's fp64 scan of h' = −h + 1 (MeasureConvergence), judged by
// judge.JudgeOrder. The measurement goes into the report, where the gate plots it.
func TestConvergenceOrder(t *testing.T) {
	track(t)
	c, err := MeasureConvergence(lib)
	if err != nil {
		t.Fatal(err)
	}
	rep.SetConvergence(c)
	for _, m := range ssm.Methods() {
		if !judged(t.Name(), "the convergence order (fp64) of", m, ssm.F64, false, false) {
			continue
		}
		t.Run(m.String(), func(t *testing.T) {
			if err := judge.JudgeOrder(m, c.Deltas, c.Errors[m.String()]); err != nil {
				t.Error(err)
			}
		})
	}
}

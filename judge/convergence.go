package judge

import (
	"fmt"
	"math"

	"ssmverify/ssm"
)

// ConvergenceTolerance is how far a fitted order may sit from the method's
// order: the fit over Δ = 1/2 … 1/2048 sees the asymptotic slope plus the
// higher-order terms at the largest steps.
const ConvergenceTolerance = 0.3

// RoundingLevel is the largest global error that is rounding alone: L ≤ 4096
// steps of float64 rounding at about 1e-16 each stay below it. An exact method
// (Order 0) must stay under it at every Δ, and the fit of an order ignores
// the points under it.
const RoundingLevel = 1e-12

// JudgeOrder decides one method's convergence: the fitted slope within
// ConvergenceTolerance of its order and, for an exact method, whose slope
// says nothing (a constant error fits slope 0 as well as rounding does), every
// error at rounding level.
func JudgeOrder(m ssm.Method, deltas, errs []float64) error {
	want := float64(m.Order())
	if want == 0 {
		for i, e := range errs {
			if !(e <= RoundingLevel) {
				return fmt.Errorf("%v: error %.3g at Δ = %g, want rounding only (≤ %g) for an exact method", m, e, deltas[i], RoundingLevel)
			}
		}
		return nil
	}
	if got := FitSlope(deltas, errs); !(math.Abs(got-want) <= ConvergenceTolerance) {
		return fmt.Errorf("%v: global order %.2f, want %.0f ± %g (errors %v at Δ = %v)", m, got, want, ConvergenceTolerance, errs, deltas)
	}
	return nil
}

// FitSlope is the least-squares slope of log error against log Δ over the
// points whose error is above RoundingLevel; 0 when fewer than three are.
func FitSlope(x, y []float64) float64 {
	var sx, sy, sxx, sxy, n float64
	for i := range x {
		if !(y[i] > RoundingLevel) {
			continue
		}
		lx, ly := math.Log(x[i]), math.Log(y[i])
		sx, sy, sxx, sxy, n = sx+lx, sy+ly, sxx+lx*lx, sxy+lx*ly, n+1
	}
	if n < 3 {
		return 0 // at rounding everywhere: foh, or a method exact for this input
	}
	return (n*sxy - sx*sy) / (n*sxx - sx*sx)
}

package report

// Convergence is the global error of each method's scan against the exact
// solution of the continuous system as the step Δ shrinks: the picture in
// which a method's order (ssm.Method.Order) is the slope of log error
// against log Δ. verify's TestConvergenceOrder measures it (its
// documentation gives the problem) and the gate plots it.
type Convergence struct {
	Deltas []float64            `json:"deltas"`
	Errors map[string][]float64 `json:"errors"` // by method name, one per Δ
	Slopes map[string]float64   `json:"slopes"` // fitted where the error is above rounding
}

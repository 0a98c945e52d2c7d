package gate

import (
	"fmt"
	"math"

	"ssmverify/cudalib"
	"ssmverify/reference"
)

// ConvergenceData is the global error of each method's scan against the
// exact solution of the continuous system, as the step Δ shrinks: the
// picture in which a method's order is its slope.
//
// The problem is h' = a·h + u with a = −1, u = 1, h(0) = 0, integrated to
// T = 2 with L = T/Δ steps of the library's own scan (float64, one state,
// C = 1), so out[L−1] = h(T) and the exact value is (e^{aT} − 1)/a. For a
// constant input the discretizations have global orders zoh 1, highorder
// 2, bilinear 2, poly 3, rk4 4, and foh is exact (its error is rounding).
type ConvergenceData struct {
	Deltas []float64
	Errors map[reference.Method][]float64
	Slopes map[reference.Method]float64 // fitted where the error is above rounding
	Err    error
}

// ExpectedOrder is each method's global order for a constant input (0 for
// foh: exact, only rounding remains).
var ExpectedOrder = map[reference.Method]float64{
	reference.ZOH: 1, reference.FOH: 0, reference.Bilinear: 2, reference.Poly: 3, reference.HighOrder: 2, reference.RK4: 4,
}

// Convergence measures ConvergenceData with the library's scan.
func Convergence(lib *cudalib.Library) ConvergenceData {
	const a, T = -1.0, 2.0
	exact := (math.Exp(a*T) - 1) / a
	c := ConvergenceData{Errors: map[reference.Method][]float64{}, Slopes: map[reference.Method]float64{}}
	for k := 1; k <= 11; k++ {
		c.Deltas = append(c.Deltas, math.Ldexp(1, -k)) // 1/2 … 1/2048
	}
	for _, m := range reference.Methods() {
		for _, d := range c.Deltas {
			L := int(math.Round(T / d))
			p := &reference.Problem{Batch: 1, Dim: 1, Seqlen: L, Dstate: 1, Groups: 1, Method: m,
				U: fill(L, 1), Delta: fill(L, d), A: []float64{a}, B: []float64{1}, C: []float64{1}}
			out, err := lib.Scan(p, cudalib.F64)
			if err != nil {
				c.Err = fmt.Errorf("convergence scan of %v at Δ = %g: %w", m, d, err)
				return c
			}
			c.Errors[m] = append(c.Errors[m], math.Abs(out.Out[L-1]-exact))
		}
		c.Slopes[m] = fitSlope(c.Deltas, c.Errors[m])
	}
	return c
}

func fill(n int, v float64) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// fitSlope is the least-squares slope of log error against log Δ over the
// points whose error is well above float64 rounding (1e-12 here: L ≤ 4096
// steps of rounding at 1e-16 each stay below 1e-12).
func fitSlope(x, y []float64) float64 {
	var sx, sy, sxx, sxy, n float64
	for i := range x {
		if !(y[i] > 1e-12) {
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

// Tests turns the fitted orders into gate tests: each within 0.3 of the
// expected order (the fit over 1/2 … 1/2048 sees the asymptotic slope
// plus higher-order terms at the largest steps; 0.3 is the tolerance the
// reference's own convergence tests use).
func (c ConvergenceData) Tests(task string) []Test {
	if c.Err != nil {
		return []Test{{Package: "gate", Name: "TestConvergenceOrder", Result: Fail, Task: task, Output: []string{c.Err.Error()},
			Reproduce: "go run ./cmd/gate -pkgs '' (runs only the gate's own convergence test)"}}
	}
	var out []Test
	for _, m := range reference.Methods() {
		t := Test{Package: "gate", Name: "TestConvergenceOrder/" + m.String(), Result: Pass, Task: task}
		want, got := ExpectedOrder[m], c.Slopes[m]
		if math.Abs(got-want) > 0.3 {
			t.Result = Fail
			t.Output = []string{fmt.Sprintf("%v: global order %.2f, want %.0f ± 0.3 (errors %v at Δ = %v)", m, got, want, c.Errors[m], c.Deltas)}
			t.Reproduce = "go run ./cmd/gate -pkgs '' -out out/convergence (the gate's convergence test alone; see convergence.png)"
		}
		out = append(out, t)
	}
	return out
}

// Figures lists the fitted orders.
func (c ConvergenceData) Figures(task string) []Figure {
	var out []Figure
	for _, m := range reference.Methods() {
		if s, ok := c.Slopes[m]; ok {
			out = append(out, Figure{Name: "global convergence order", Value: s, Unit: "slope of log error vs log Δ", Method: m.String(), DType: "fp64", Task: task})
		}
	}
	return out
}

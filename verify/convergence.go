package verify

import (
	"fmt"
	"math"

	"ssmverify/cudalib"
	"ssmverify/judge"
	"ssmverify/report"
	"ssmverify/ssm"
)

// The convergence problem: h' = a·h + u with a = −1, u = 1, h(0) = 0,
// integrated to T = 2 with L = T/Δ steps of the library's own scan (float64,
// one state, C = 1), so that out[L−1] = h(T), whose exact value is
// (e^{aT} − 1)/a. For a constant input each method's global error shrinks
// as Δ^p, p = ssm.Method.Order (foh is exact: rounding only).
const (
	convergenceA = -1.0
	convergenceT = 2.0
)

// MeasureConvergence scans the convergence problem with the library at
// Δ = 2⁻¹ … 2⁻¹¹ for every method the library declares in fp64 and fits
// each method's order. The problem is posed within the library's declared
// features (ssmk_scan_features): variable B and C where it takes no
// constant ones, and where it takes no single channel or state, the
// nearest sizes it does with every channel and state the same equation and
// C = 1/dstate, so that out[L−1] is still h(T).
func MeasureConvergence(lib *cudalib.Library) (*report.Convergence, error) {
	exact := (math.Exp(convergenceA*convergenceT) - 1) / convergenceA
	c := &report.Convergence{Errors: map[string][]float64{}, Slopes: map[string]float64{}}
	for k := 1; k <= 11; k++ {
		c.Deltas = append(c.Deltas, math.Ldexp(1, -k))
	}
	for _, m := range ssm.Methods() {
		if !lib.Capabilities(m, ssm.F64, false).Supported() {
			continue
		}
		f, err := lib.Features(m, ssm.F64, false)
		if err != nil {
			return c, err
		}
		for _, d := range c.Deltas {
			p, _, err := f.Fit(convergenceProblem(m, d, f))
			if err != nil {
				return c, fmt.Errorf("the convergence problem of %v is outside the library's declared features: %w", m, err)
			}
			out, err := lib.Scan(p, ssm.F64)
			if err != nil {
				return c, fmt.Errorf("convergence scan of %v at Δ = %g: %w", m, d, err)
			}
			c.Errors[m.String()] = append(c.Errors[m.String()], math.Abs(out.Out[p.Seqlen-1]-exact))
		}
		c.Slopes[m.String()] = judge.FitSlope(c.Deltas, c.Errors[m.String()])
	}
	return c, nil
}

// convergenceProblem is the convergence problem at step d for method m, at
// the sizes and B/C forms that f takes.
func convergenceProblem(m ssm.Method, d float64, f ssm.Features) *ssm.Problem {
	L := int(math.Round(convergenceT / d))
	dim, n, _ := f.Sizes(1, 1, 1)
	p := &ssm.Problem{Batch: 1, Dim: dim, Seqlen: L, Dstate: n, Groups: 1, Method: m,
		U: fill(dim*L, 1), Delta: fill(dim*L, d), A: fill(dim*n, convergenceA), B: fill(dim*n, 1), C: fill(dim*n, 1/float64(n))}
	if f.Options&ssm.OptConstantBC == 0 {
		p.VariableB, p.VariableC = true, true
		p.B, p.C = fill(n*L, 1), fill(n*L, 1/float64(n))
	}
	return p
}

func fill(n int, v float64) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = v
	}
	return s
}

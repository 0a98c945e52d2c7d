package diagnose

import (
	"fmt"
	"math"

	"ssmverify/ssm"
)

// The element-wise parts of the scan besides the discretization: softplus
// of the step and the SiLU gate, probed through the scan with a = 0 (then
// Ā = 1 and g = 1 for every method, so the output of one step is Δ·u·C·B).

var softplusXs = []float64{-15, -8, -4, -2, -1, -0.5, -0.1, 0, 0.1, 0.5, 1, 2, 4, 8, 15, 19.5}
var gateZs = []float64{-12, -6, -3, -1, -0.3, 0.3, 1, 3, 6, 12}

// probeElementwise returns the kernel's softplus(δ) at softplusXs and its
// gate z·σ(z) at gateZs.
func probeElementwise(s Scanner, m ssm.Method, dt ssm.DType) (sp, gate []float64, err error) {
	run := func(deltas, zs []float64, softplusOn bool) ([]float64, error) {
		n := len(deltas)
		p := &ssm.Problem{Batch: 1, Dim: n, Seqlen: 1, Dstate: 1, Groups: 1, Method: m, Softplus: softplusOn,
			U: fill(n, 1), Delta: deltas, A: make([]float64, n), B: fill(n, 1), C: fill(n, 1)}
		if zs != nil {
			p.Z = zs
		}
		o, err := s.Scan(p, dt)
		if err != nil {
			return nil, err
		}
		return o.Out, nil
	}
	if sp, err = run(append([]float64(nil), softplusXs...), nil, true); err != nil {
		return nil, nil, fmt.Errorf("softplus probe: %w", err)
	}
	if gate, err = run(fill(len(gateZs), 1), append([]float64(nil), gateZs...), false); err != nil {
		return nil, nil, fmt.Errorf("gate probe: %w", err)
	}
	return sp, gate, nil
}

func fill(n int, v float64) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// explainElementwise names a slip in softplus or the gate: an exponential
// scaled by a constant (fitted), softplus not applied, or a gate without
// its z factor.
func explainElementwise(dt ssm.DType, sp, gate []float64) (tag, cause string, ok bool) {
	u := unit(dt)
	near := func(got, want, cond float64) bool {
		return math.Abs(got-want) <= 8*u*(4+cond)*math.Max(math.Abs(want), 1e-30)
	}
	spOK, gateOK := true, true
	for i, x := range softplusXs {
		if !near(sp[i], ssm.Softplus(x), math.Abs(x)) {
			spOK = false
		}
	}
	for i, z := range gateZs {
		if !near(gate[i], z/(1+math.Exp(-z)), math.Abs(z)) {
			gateOK = false
		}
	}
	if spOK && gateOK {
		return "", "", false
	}
	// e^{c·x}: fit c from softplus at x ≤ −4 (softplus ≈ e^x there) or
	// from the gate at z ≤ −3 (z·σ(z) ≈ z·e^z).
	var cs []float64
	for i, x := range softplusXs {
		if x <= -4 && sp[i] > 0 {
			cs = append(cs, math.Log(math.Expm1(sp[i]))/x)
		}
	}
	for i, z := range gateZs {
		if z <= -3 && gate[i] != 0 {
			cs = append(cs, -math.Log(z/gate[i]-1)/-z)
		}
	}
	c := median(cs)
	scaled := true
	for i, x := range softplusXs {
		if !near(sp[i], math.Log1p(math.Exp(c*x)), math.Abs(x)) {
			scaled = false
		}
	}
	for i, z := range gateZs {
		if !near(gate[i], z/(1+math.Exp(-c*z)), math.Abs(z)) {
			scaled = false
		}
	}
	switch {
	case scaled && math.Abs(c-1) > 0:
		return "exp-scaled", fmt.Sprintf("the exponential in softplus and the gate is e^{c·x} with c = %.9g: scaled by a constant (a wrong log2(e) in exp2(x·log2e)?)", c), true
	case !spOK && sp[0] < 0:
		return "no-softplus", "softplus is not applied to the step (Δ = δ)", true
	case !gateOK:
		return "gate-unknown", "the gate differs from z·σ(z) at one step", true
	}
	return "softplus-unknown", "softplus(δ) differs from log1p(e^δ)", true
}

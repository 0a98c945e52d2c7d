package diagnose

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"ssmverify/judge"
	"ssmverify/mamba2"
)

// factorVariable is the one per-element quantity u a gradient's own factor
// is a function of, and that factor h₀(u) in the reference: the gate's
// input z for dz (the gate's derivative g′(z) = σ(z)·(1 + z·(1 − σ(z)))),
// Δ's input v = dt + bias for ddt (the softplus' derivative σ(v), 1
// without softplus). "" where the gradient has none (dB's and dC's are
// sums over heads, dA's and dD's over steps).
func factorVariable(p *mamba2.Problem, name string) (what string, u, h0 []float64) {
	sigmoid := func(v float64) float64 { return 1 / (1 + math.Exp(-v)) }
	switch {
	case name == "dz" && p.Z != nil:
		u, h0 = p.Z, make([]float64, len(p.Z))
		for i, z := range p.Z {
			s := sigmoid(z)
			h0[i] = s * (1 + z*(1-s))
		}
		return "z", u, h0
	case name == "ddt":
		u, h0 = make([]float64, len(p.Dt)), make([]float64, len(p.Dt))
		for i, v := range p.Dt {
			if p.DtBias != nil {
				v += p.DtBias[i%p.Heads]
			}
			u[i], h0[i] = v, 1
			if p.Softplus {
				h0[i] = sigmoid(v)
			}
		}
		return "dt + dt_bias", u, h0
	}
	return "", nil, nil
}

// factorOf reports whether the gradient a is the reference's with its
// own factor h₀(u) replaced by another function h(u) of the same u: the
// formula of a factor of the element's own step wrong (dz's gate
// derivative with a sign, a division or a constant changed; ddt's σ
// divided for multiplied), which no fixed relation states. The implied
// factor h = h₀·got/want is taken where the error model fixes it (its
// allowance th·u·scale/|want| below 5%); sorted by u, 99% of them must lie
// on the line through their neighbours within their allowances or within
// a fiftieth of their distance from h₀ — a function of u, not noise (the
// line's own error, curvature·Δu²/8, is far above a float32 allowance
// where u is sampled a few hundred times) — with at least 32 elements
// and a quarter of them away from h₀ beyond their allowance (a few wrong
// elements among right ones are not a function of u). The cause quotes h
// against h₀ at u's quartiles.
func factorOf(a judge.Array, what string, u, h0 []float64, th float64) (Candidate, bool) {
	if what == "" || len(u) != len(a.Got) || len(h0) != len(a.Got) || len(a.Want) != len(a.Got) || len(a.Scale) != len(a.Got) {
		return Candidate{}, false
	}
	unit := a.Computed.Precision().UnitRoundoff()
	type pt struct{ u, r, e, r0 float64 } // u, h(u) implied, its allowance, h₀(u)
	var pts []pt
	away := 0
	for i, w := range a.Want {
		g := a.Got[i]
		if w == 0 || math.IsNaN(g) || math.IsInf(g, 0) {
			continue
		}
		tiny := 0.0
		if len(a.Tiny) == len(a.Got) {
			tiny = a.Tiny[i]
		}
		e := th * unit * (a.Scale[i] + tiny) / math.Abs(w)
		if !(e < 0.05) {
			continue
		}
		r := g / w
		pts = append(pts, pt{u[i], r * h0[i], e * math.Abs(h0[i]), h0[i]})
		if math.Abs(r-1) > e {
			away++
		}
	}
	if len(pts) < 32 || 4*away < len(pts) {
		return Candidate{}, false
	}
	slices.SortFunc(pts, func(x, y pt) int { return cmp.Compare(x.u, y.u) })
	bad := 0
	for i := 1; i+1 < len(pts); i++ {
		l, m, r := pts[i-1], pts[i], pts[i+1]
		var line float64
		if r.u == l.u {
			line = (l.r + r.r) / 2
		} else {
			line = l.r + (r.r-l.r)*(m.u-l.u)/(r.u-l.u)
		}
		// within the allowances, or far nearer the line than h₀ (the
		// line's own error, curvature·Δu²/8, is not the model's)
		if math.Abs(m.r-line) > m.e+(l.e+r.e)/2+math.Abs(m.r-m.r0)/50 {
			bad++
		}
	}
	if 100*bad > len(pts) {
		return Candidate{}, false
	}
	q := func(f float64) pt { return pts[int(f*float64(len(pts)-1))] }
	lo, mid, hi := q(0.25), q(0.5), q(0.75)
	return Candidate{Tag: "factor-of(" + what + ")",
		Cause: fmt.Sprintf("has its own factor, a function of %s, with another formula: %.4g for %.4g at %s = %.3g, %.4g for %.4g at %.3g, %.4g for %.4g at %.3g",
			what, lo.r, lo.r0, what, lo.u, mid.r, mid.r0, mid.u, hi.r, hi.r0, hi.u)}, true
}

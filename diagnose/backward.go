package diagnose

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"ssmverify/cudalib"
	"ssmverify/judge"
	"ssmverify/reference"
	"ssmverify/ssm"
)

// Backward diagnoses a failing backward pass of p for the cotangent ct in
// dtype dt: it re-runs the library and tests, in order, the slips a
// backward kernel makes, each against a reference built for it:
//
//   - bwd-method:X: every gradient equals method X's (a backward that
//     differentiates another method's Ā and g, as the fork that ran zoh's
//     backward for every method did);
//   - bwd-no-softplus: only ddelta and ddelta_bias fail, and they are the
//     reference's divided by softplus' σ(v);
//   - bwd-delta-chain: only ddelta and ddelta_bias fail otherwise (a term
//     of the chain through Δ, in Ā or in g, is missing or wrong);
//   - bwd-dlast: the gradients are right without a gradient of the last
//     state (it enters the sweep at the wrong step: a padded tail or a
//     chunk boundary);
//   - bwd-factor:NAME: one gradient is the reference's times a constant.
//
// "none" when no slip fits; "" when the failure does not reproduce.
func Backward(l *cudalib.Library, p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType) Finding {
	compare := func(q *ssm.Problem, c *ssm.Cotangent, got *ssm.Grads) (judge.GradComparison, error) {
		want, err := reference.ScanGrad(q, c, false)
		if err != nil {
			return judge.GradComparison{}, err
		}
		sc, err := reference.GradErrorScale(q, c, false, dt.Precision())
		if err != nil {
			return judge.GradComparison{}, err
		}
		return judge.CompareGrads(q, got, dt, want, sc), nil
	}
	got, err := l.Backward(p, ct, dt, false)
	if err != nil {
		return Finding{Tag: "refused", Cause: "the backward refused: " + err.Error()}
	}
	base, err := compare(p, ct, got)
	if err != nil {
		return Finding{Tag: "none", Cause: err.Error()}
	}
	if base.Passed(dt) {
		return Finding{}
	}
	failing := base.Failing(dt)
	where := make([]string, len(failing))
	for i, g := range failing {
		where[i] = g.Name
	}
	f := Finding{Where: "gradients " + strings.Join(where, ", "), Evidence: []string{"worst: " + failing[0].String()}}
	for _, m := range ssm.Methods() {
		if m == p.Method {
			continue
		}
		q := p.Clone()
		q.Method = m
		if c, err := compare(q, ct, got); err == nil && c.Passed(dt) {
			f.Tag, f.Cause = "bwd-method:"+m.String(), fmt.Sprintf("the gradients are %v's, not %v's: the backward differentiates another method", m, p.Method)
			return f
		}
	}
	onlyDelta := true
	for _, g := range failing {
		onlyDelta = onlyDelta && (g.Name == "ddelta" || g.Name == "ddelta_bias")
	}
	if onlyDelta {
		if p.Softplus {
			scaled := *got
			scaled.Delta = append([]float64(nil), got.Delta...)
			for i := range scaled.Delta {
				if v := p.Delta[i] + biasAt(p, i); v <= 20 {
					scaled.Delta[i] *= 1 / (1 + math.Exp(-v))
				}
			}
			if c, err := compare(p, ct, &scaled); err == nil && !contains(c.Failing(dt), "ddelta") {
				f.Tag, f.Cause = "bwd-no-softplus", "ddelta lacks softplus' derivative σ(v): times σ(v) it is the reference's"
				return f
			}
		}
		f.Tag, f.Cause = "bwd-delta-chain", "only ddelta (and ddelta_bias) are wrong: a term of the chain through Δ, in Ā(Δ·a) or in Δ·g(Δ·a), is missing or wrong"
		return f
	}
	if ct.LastState != nil {
		c0 := &ssm.Cotangent{Out: ct.Out}
		if g0, err := l.Backward(p, c0, dt, false); err == nil {
			if c, err := compare(p, c0, g0); err == nil && c.Passed(dt) {
				f.Tag, f.Cause = "bwd-dlast", fmt.Sprintf("right without a gradient of the last state, wrong with one: dlast_state enters the sweep at the wrong step (seqlen %d: a padded tail or a chunk boundary)", p.Seqlen)
				return f
			}
		}
	}
	want, _ := reference.ScanGrad(p, ct, false)
	wf := want.Fields()
	for k, g := range got.Fields() {
		if !contains(failing, g.Name) {
			continue
		}
		if r, ok := constantRatio(g.Values, wf[k].Values); ok {
			f.Tag, f.Cause = "bwd-factor:"+g.Name, fmt.Sprintf("%s is the reference's times %.6g", g.Name, r)
			return f
		}
	}
	f.Tag, f.Cause = "none", "no single slip of the backward explains the gradients"
	return f
}

func biasAt(p *ssm.Problem, i int) float64 {
	if p.DeltaBias == nil {
		return 0
	}
	return p.DeltaBias[i/p.Seqlen%p.Dim]
}

func contains(gs []judge.GradWorst, name string) bool {
	for _, g := range gs {
		if g.Name == name {
			return true
		}
	}
	return false
}

// constantRatio reports whether got is want times one constant (to 1e-3,
// over the elements whose reference is not negligible), and the constant.
func constantRatio(got, want []float64) (float64, bool) {
	var big float64
	for _, w := range want {
		big = math.Max(big, math.Abs(w))
	}
	var rs []float64
	for i, w := range want {
		if math.Abs(w) > 1e-3*big {
			rs = append(rs, got[i]/w)
		}
	}
	if len(rs) < 2 {
		return 0, false
	}
	sort.Float64s(rs)
	r := rs[len(rs)/2]
	for _, x := range rs {
		if math.Abs(x-r) > 1e-3*math.Abs(r) {
			return 0, false
		}
	}
	return r, r != 1
}

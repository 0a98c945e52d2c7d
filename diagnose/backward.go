package diagnose

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// Backward diagnoses a failing backward pass of p for the cotangent ct in
// dtype dt: it re-runs the library and tests, in order, the slips a
// backward kernel makes, each against a reference built for it:
//
//   - bwd-method:X: every gradient equals method X's (a backward that
//     differentiates another method's Ā and g, as the fork that ran zoh's
//     backward for every method did), or every one but dz, where dz is
//     formed from the library's own forward output (a kernel such as
//     Mamba's takes y from its forward rather than recomputing it);
//   - bwd-dz-forward: only dz fails, and it is formed from the library's
//     own forward output, which is then what is wrong (the forward's tests
//     say how);
//   - bwd-state-recovered: the gradients are within the error model of a
//     backward that recovers Ā·h_{t−1} as h_t − β_t
//     (mamba1.GradErrorScaleRecovered; Mamba's x − Δ·u·B cancels);
//   - bwd-no-softplus: only ddelta and ddelta_bias fail, and they are the
//     reference's divided by softplus' σ(v);
//   - bwd-delta-chain: only ddelta and ddelta_bias fail otherwise (a term
//     of the chain through Δ, in Ā or in g, is missing or wrong);
//   - bwd-padded-tail: the rows extended by identity steps to a multiple
//     of 2048 (a whole number of any kernel's chunks) pass, and so does p
//     with delta_bias folded into Δ and softplus applied ahead (a padded
//     step's Δ then 0): the padded steps of a partial last chunk are
//     swept as input (Mamba's backward, where A > 0 makes their products
//     overflow);
//   - bwd-dlast: the gradients are right without a gradient of the last
//     state (it enters the sweep at the wrong step: a padded tail or a
//     chunk boundary);
//   - bwd-chunk: the gradients of the steps (du, ddelta, dz, variable dB
//     and dC) are wrong only before some step T, or only from T on, and
//     right on the other side, T a multiple of 32: the adjoint carried
//     back into the steps before T, or the state carried forward into T,
//     is lost or wrong — a chunk boundary at T (dz left out where it is
//     formed from the forward's output; the failures may fade before the
//     row's end);
//   - bwd-factor:NAME: one gradient is the reference's times a constant
//     (not within 1% of 1);
//   - for a 16-bit dtype first, the slips of its storage: bwd-weights-16bit,
//     bwd-truncated, bwd-16bit-sum, bwd-y-16bit (narrowBackward);
//   - bwd-zero:NAME, bwd-shift:NAME, bwd-wrong-slot:NAME: a gradient's
//     relation to the reference's (gradientRelation), before which
//     gradients fail (gradientSet: bwd-derivative, bwd-only:NAME);
//   - bwd-gradients:NAMES: placed, not explained — the library's forward
//     is right on the same problem and these gradients are wrong, at the
//     steps said (placedInBackward).
//
// "none" when no slip fits and the forward is wrong too; "" when the
// failure does not reproduce.
func Backward(l Differentiator, p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType) Finding {
	return BackwardInitial(l, p, ct, dt, false)
}

// BackwardInitial is Backward of a call that asks (withInitial) for the
// gradient of the initial state too, as TestBackwardGradcheck's does: a
// fault in reading the initial state may show only then. The judgement,
// the relations and the placing use that call; the probes that compare
// with another method's reference or re-run the kernel on other problems
// leave the initial state's gradient out.
func BackwardInitial(l Differentiator, p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType, withInitial bool) (f Finding) {
	defer contained(&f, "diagnose.BackwardInitial", func() string { return p.Shape() + " " + dt.String() })
	return diagnoseBackward(l, p, ct, dt, withInitial)
}

func diagnoseBackward(l Differentiator, p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType, withInitial bool) Finding {
	l = checkedKernel{l}
	got, err := l.Backward(p, ct, dt, withInitial)
	if e := (*ShapeError)(nil); errors.As(err, &e) {
		return shapeFinding(e)
	}
	if err != nil {
		return BackwardError(err)
	}
	want, err := mamba1.ScanGrad(p, ct, withInitial)
	if err != nil {
		return Finding{Tag: "none", Cause: err.Error()}
	}
	sc, err := mamba1.GradErrorScale(p, ct, withInitial, dt.Precision())
	if err != nil {
		return Finding{Tag: "none", Cause: err.Error()}
	}
	base := judge.CompareGrads(p, got, dt, want, sc)
	if base.Passed(dt) {
		return Finding{}
	}
	failing := base.Failing(dt)
	var where, evidence []string
	for _, g := range failing {
		where = append(where, g.Name)
	}
	if len(failing) > 0 {
		evidence = append(evidence, "worst: "+failing[0].String())
	}
	if w := base.FirstNonFinite; base.NonFinite > 0 {
		// NaN and ±Inf gradients have no ratio: Failing leaves them out.
		if !slices.Contains(where, w.Name) {
			where = append(where, w.Name)
		}
		evidence = append(evidence, fmt.Sprintf("%d non-finite gradients where the reference is finite, the first %s[%d]: kernel %g, reference %.17g",
			base.NonFinite, w.Name, w.Index, w.Got, w.Want))
	}
	f := Finding{Where: "gradients " + strings.Join(where, ", "), Evidence: evidence}
	if tag, cause, ok := narrowBackward(l, p, ct, got, want, sc, dt, failing); ok {
		f.Tag, f.Cause = tag, cause
		return f
	}
	dzForward := p.Z != nil && got.Z != nil && dzFromForward(l, p, ct, dt, got.Z)
	if dzForward {
		f.Evidence = append(f.Evidence, "dz is the derivative of the gate at the library's own forward output, dz·silu(z) = dout·out·σ(z)·(1 + z·(1 − σ(z)))")
	}
	partial := ssm.Method(-1)
	for _, m := range ssm.Methods() {
		if m == p.Method {
			continue
		}
		q := p.Clone()
		q.Method = m
		c, err := compareGrads(q, ct, got, dt, withInitial)
		if err != nil {
			continue
		}
		if c.Passed(dt) {
			f.Tag, f.Cause = "bwd-method:"+m.String(), fmt.Sprintf("the gradients are %v's, not %v's: the backward differentiates another method", m, p.Method)
			return f
		}
		if fails := c.Failing(dt); dzForward && partial < 0 && len(fails) == 1 && fails[0].Name == "dz" {
			partial = m
		}
	}
	if partial >= 0 {
		f.Tag, f.Cause = "bwd-method:"+partial.String(), fmt.Sprintf("every gradient but dz is %v's, not %v's: the backward differentiates another method; "+
			"dz is formed from the forward's output, which the forward computed", partial, p.Method)
		return f
	}
	if dzForward && len(failing) == 1 && failing[0].Name == "dz" {
		f.Tag, f.Cause = "bwd-dz-forward", "only dz is wrong, and it is formed from the library's own forward output: the backward is right and the forward's output, which it takes, is not"
		return f
	}
	if rs, err := mamba1.GradErrorScaleRecovered(p, ct, withInitial, dt.Precision()); err == nil {
		if c := judge.CompareGrads(p, got, dt, want, rs); c.Passed(dt) {
			f.Tag, f.Cause = "bwd-state-recovered", "within the error model once each use of Ā·h_{t−1} may carry the error of h_t − Δ·g·B·u "+
				"(mamba1.GradErrorScaleRecovered): the backward recovers Ā·h_{t−1} from the state it scanned by a subtraction "+
				"(Mamba's x − Δ·u·B), which cancels where the step's input dominates the state"
			return f
		}
	}
	// (NaN gradients are not in failing: with any, which gradients fail is
	// not known.)
	onlyDelta := base.NonFinite == 0
	for _, g := range failing {
		onlyDelta = onlyDelta && (g.Name == "ddelta" || g.Name == "ddelta_bias")
	}
	if onlyDelta && p.Softplus {
		scaled := *got
		scaled.Delta = append([]float64(nil), got.Delta...)
		for i := range scaled.Delta {
			if v := p.Delta[i] + biasAt(p, i); v <= 20 {
				scaled.Delta[i] *= 1 / (1 + math.Exp(-v))
			}
		}
		if c := judge.CompareGrads(p, &scaled, dt, want, sc); !contains(c.Failing(dt), "ddelta") {
			f.Tag, f.Cause = "bwd-no-softplus", "ddelta lacks softplus' derivative σ(v): times σ(v) it is the reference's"
			return f
		}
	}
	// Before the chain's pattern: the padded steps too can show in
	// ddelta_bias alone (with dlast_state they reach it through their
	// Δ = bias), and their probes are evidence where the pattern is not.
	if cause, ok := paddedTail(l, p, ct, dt); ok {
		f.Tag, f.Cause = "bwd-padded-tail", cause
		return f
	}
	if onlyDelta {
		f.Tag, f.Cause = "bwd-delta-chain", "only ddelta (and ddelta_bias) are wrong: a term of the chain through Δ, in Ā(Δ·a) or in Δ·g(Δ·a), is missing or wrong"
		return f
	}
	if ct.LastState != nil {
		c0 := &ssm.Cotangent{Out: ct.Out}
		if g0, err := l.Backward(p, c0, dt, false); err == nil {
			if c, err := compareGrads(p, c0, g0, dt, false); err == nil && c.Passed(dt) {
				f.Tag, f.Cause = "bwd-dlast", fmt.Sprintf("right without a gradient of the last state, wrong with one: dlast_state enters the sweep at the wrong step (seqlen %d: a padded tail or a chunk boundary)", p.Seqlen)
				return f
			}
		}
	}
	if lo, hi, worst, ok := stepsWrong(p, got, want, sc, dt, dzForward); ok {
		// A boundary T is a multiple of 32 (the chunks of known kernels are
		// 64 to 2048 steps) inside the row, with every failing step on one
		// side of it; the error fades away from T (a lost adjoint decays
		// backward, a wrong state forward), so the failures need not reach
		// the row's end, and where both ends qualify the worst step says
		// which side T is on.
		before, after := hi+1 < p.Seqlen && (hi+1)%32 == 0, lo > 0 && lo%32 == 0
		if before && after {
			before, after = hi-worst <= worst-lo, hi-worst > worst-lo
		}
		switch {
		case before:
			f.Tag, f.Cause = "bwd-chunk", fmt.Sprintf("the gradients of the steps are wrong only before step %d (right from it on): "+
				"the adjoint carried back into the steps before it is lost or wrong — wrong only across a chunk boundary", hi+1)
			return f
		case after:
			f.Tag, f.Cause = "bwd-chunk", fmt.Sprintf("the gradients of the steps are wrong only from step %d on (right before it): "+
				"the state carried into it is wrong — wrong only across a chunk boundary", lo)
			return f
		}
	}
	wantBy := want.ByName()
	for _, g := range got.Fields() {
		w := wantBy[g.Name]
		if !contains(failing, g.Name) || len(w) != len(g.Values) {
			continue
		}
		// A factor within 1% of 1 is rounding's size, not a slip's (an
		// fp16 gradient's errors are within 2⁻¹¹ of it).
		if r, ok := constantRatio(g.Values, w); ok && math.Abs(r-1) > 1e-2 && r != 0 { // zero: gradientRelation
			f.Tag, f.Cause = "bwd-factor:"+g.Name, fmt.Sprintf("%s is the reference's times %.6g", g.Name, r)
			return f
		}
	}
	if tag, cause, ok := gradientRelation(p, got, want, sc, dt, failing); ok {
		f.Tag, f.Cause = tag, cause
		return f
	}
	if tag, cause, ok := gradientSet(failing, base.NonFinite); ok {
		f.Tag, f.Cause = tag, cause
		return f
	}
	if tag, cause, ok := placedInBackward(l, p, got, want, sc, dt, where, base.NonFinite); ok {
		f.Tag, f.Cause = tag, cause
		return f
	}
	f.Tag, f.Cause = "none", "no single slip of the backward explains the gradients, and the library's forward is wrong on the same problem too"
	return f
}

// gradientSet reads the structure of a backward failure that no slip
// explains from which gradients are wrong, each of which depends on its
// own part of the backward: only those through x = Δ·a (ddelta and dA
// both, ddelta_bias with them), with du, dB, dC, dz and dD right, mean the
// coefficients' values are right and a derivative of Ā or g with respect
// to x is not;
// one gradient alone wrong, everything else right, means its own formula,
// or the sum that forms it (over the wrong axis, into the wrong slot).
// NaN gradients leave the set unknown.
func gradientSet(failing []judge.GradWorst, nonFinite int) (tag, cause string, ok bool) {
	if nonFinite > 0 || len(failing) == 0 {
		return "", "", false
	}
	var names []string
	throughX := true
	for _, g := range failing {
		names = append(names, g.Name)
		throughX = throughX && (g.Name == "ddelta" || g.Name == "dA" || g.Name == "ddelta_bias")
	}
	switch {
	case throughX && slices.Contains(names, "dA") && slices.Contains(names, "ddelta"):
		// Both take dL/dx (dA times Δ, ddelta times a): a wrong
		// derivative of the coefficients spoils both.
		return "bwd-derivative", "only the gradients through x = Δ·a are wrong (" + strings.Join(names, ", ") + "), du, dB, dC, dz and dD right: " +
			"the discretization's values are right and a derivative of Ā or g with respect to x is not", true
	case len(names) == 1:
		return "bwd-only:" + names[0], "only " + names[0] + " is wrong, every other gradient right: its own formula, or the sum that forms it " +
			"(over the wrong axis, into the wrong slot), is wrong", true
	}
	return "", "", false
}

// paddedTail reports whether p fails for its padded steps: the steps past
// seqlen of a partial last chunk, which a kernel's forward makes identity
// maps and a backward may sweep as input with Δ = softplus(delta_bias).
// Two probes must both pass: the rows extended by identity steps (u = 0,
// dout = 0, Δ = 0 after the bias and softplus) to a multiple of 2048
// steps, a whole number of the chunks of every kernel known (Mamba's are
// up to 2048), so that no step is padded; and p at its own length with
// delta_bias folded into Δ and softplus applied ahead (the same steps),
// where a padded step's Δ is 0 and its Ā 1. A wrong formula fails both; a
// last chunk computed otherwise (another instantiation, other roundings)
// fails the second.
func paddedTail(l Differentiator, p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType) (string, bool) {
	const whole = 2048
	if p.Seqlen%whole == 0 || (p.DeltaBias == nil && !p.Softplus) {
		return "", false
	}
	// The folded problem first: it has p's length, the extension up to
	// 2048 steps a row.
	if !passes(l, folded(p), ct, dt) {
		return "", false
	}
	L := (p.Seqlen + whole - 1) / whole * whole
	if q, cq := extended(p, ct, L); !passes(l, q, cq, dt) {
		return "", false
	}
	return fmt.Sprintf("wrong at seqlen %d, right with its rows extended by identity steps to %d (a whole number of any kernel's "+
		"chunks) and right at seqlen %d with delta_bias folded into Δ and softplus applied ahead (a padded step's Δ 0): the steps past "+
		"seqlen of a partial last chunk are swept as input with Δ from delta_bias and softplus (where A > 0 their products "+
		"overflow, and ∞·0 = NaN)", p.Seqlen, L, p.Seqlen), true
}

// compareGrads judges got, a backward of p for ct in dt (with the initial
// state's gradient where withInitial), against the reference's gradients
// under the backward's error model.
func compareGrads(p *ssm.Problem, ct *ssm.Cotangent, got *ssm.Grads, dt ssm.DType, withInitial bool) (judge.GradComparison, error) {
	want, err := mamba1.ScanGrad(p, ct, withInitial)
	if err != nil {
		return judge.GradComparison{}, err
	}
	sc, err := mamba1.GradErrorScale(p, ct, withInitial, dt.Precision())
	if err != nil {
		return judge.GradComparison{}, err
	}
	return judge.CompareGrads(p, got, dt, want, sc), nil
}

// passes reports whether the library's backward of p for ct in dt passes
// the reference.
func passes(l Differentiator, p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType) bool {
	p = p.Clone()
	p.RoundTo(dt)
	g, err := l.Backward(p, ct, dt, false)
	if err != nil {
		return false
	}
	c, err := compareGrads(p, ct, g, dt, false)
	return err == nil && c.Passed(dt)
}

// folded is p with softplus applied ahead and delta_bias folded into Δ
// (noSoftplus, noBias): the same steps, taken as given.
func folded(p *ssm.Problem) *ssm.Problem {
	if p.Softplus {
		p = noSoftplus(p)
	}
	if p.DeltaBias != nil {
		p = noBias(p)
	}
	return p
}

// extended returns p and ct with every row continued to L steps by identity
// steps: u = 0, dout = 0, Δ such that Δ + bias is 0 (softplus off) or −100
// (softplus on: Δ = e^{−100}), B and C 0 where variable, z 0.
func extended(p *ssm.Problem, ct *ssm.Cotangent, L int) (*ssm.Problem, *ssm.Cotangent) {
	q, cq := p.Clone(), &ssm.Cotangent{LastState: ct.LastState}
	q.Seqlen = L
	seq := func(s []float64, words int, pad func(row int) float64) []float64 {
		return restep(s, p.Seqlen, L, words, pad)
	}
	zero := func(int) float64 { return 0 }
	q.U, q.Z, cq.Out = seq(p.U, 1, zero), seq(p.Z, 1, zero), seq(ct.Out, 1, zero)
	q.Delta = seq(p.Delta, 1, func(row int) float64 {
		v := -biasAt(p, row*p.Seqlen)
		if p.Softplus {
			v -= 100
		}
		return v
	})
	if p.VariableB {
		q.B = seq(p.B, p.ElemWords(), zero)
	}
	if p.VariableC {
		q.C = seq(p.C, p.ElemWords(), zero)
	}
	return q, cq
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

// Differentiator is what Backward re-runs: the library's backward, and its
// forward for the output a backward may take dz from (cudalib.Library).
type Differentiator interface {
	Backward(p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType, withInitial bool) (*ssm.Grads, error)
	Scan(p *ssm.Problem, dt ssm.DType) (*ssm.Output, error)
}

// dzFromForward reports whether dz is the gate's derivative at the
// library's own forward output out = y·silu(z): dz·silu(z) =
// dout·out·σ(z)·(1 + z·(1 − σ(z))) at every element, within 1e-4 of the
// terms' magnitude, |dout·out·σ(z)|·(1 + |z·(1 − σ(z))|): a kernel's
// float32 σ (and fast-math exponentials) err by a few 1e-7, and
// 1 + z·(1 − σ(z)) cancels near z = −1.28, so its error is relative to
// its terms, not to its value. Both sides are products, so the test needs
// no division by silu(z), which vanishes at z = 0.
func dzFromForward(l Differentiator, p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType, dz []float64) bool {
	fwd, err := l.Scan(p, dt)
	if err != nil || len(fwd.Out) != len(dz) || len(ct.Out) != len(dz) {
		return false
	}
	for i, z := range p.Z {
		sig := 1 / (1 + math.Exp(-z))
		lhs, rhs := dz[i]*z*sig, ct.Out[i]*fwd.Out[i]*sig*(1+z*(1-sig))
		mag := math.Abs(ct.Out[i]*fwd.Out[i]*sig) * (1 + math.Abs(z*(1-sig)))
		if !(math.Abs(lhs-rhs) <= 1e-4*math.Max(math.Abs(lhs), mag)) && lhs != rhs {
			return false
		}
	}
	return true
}

// stepsWrong returns the first and last step t at which a per-step gradient
// (du, ddelta, dz, and dB and dC where variable) fails the threshold, and
// the step of the largest ratio, dz left out where skipDz (it follows the
// forward's output, not the sweep); ok is false when none fails.
func stepsWrong(p *ssm.Problem, got, want *ssm.Grads, sc *mamba1.GradScale, dt ssm.DType, skipDz bool) (lo, hi, worst int, ok bool) {
	perStep := map[string]bool{"du": true, "ddelta": true, "dz": !skipDz, "dB": p.VariableB, "dC": p.VariableC}
	lo, hi = p.Seqlen, -1
	worstRatio := 0.0
	judge.EachGradRatio(p, got, dt, want, sc, func(name string, e int, r float64) {
		if !perStep[name] || !(r > judge.Threshold(dt) || math.IsNaN(r)) {
			return
		}
		t := e % p.Seqlen
		lo, hi = min(lo, t), max(hi, t)
		if !(r <= worstRatio) {
			worst, worstRatio = t, r
		}
	})
	return lo, hi, worst, hi >= 0
}

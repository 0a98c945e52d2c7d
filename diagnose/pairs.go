package diagnose

import (
	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// pairMatches compares the kernel's result with two slips made together:
// both problem transforms applied in turn; both edits merged into one
// scan; or a transform's problem scanned with the other's edit. It
// reports false where the two cannot be made together (a slip of the
// kernel's dtype, transformIn, pairs with nothing; two edits that set the
// same flag are the same slip).
func pairMatches(p *ssm.Problem, got *ssm.Output, dt ssm.DType, a, b mamba1.Slip) bool {
	if a.TransformIn != nil || b.TransformIn != nil {
		return false
	}
	switch {
	case a.Transform != nil && b.Transform != nil:
		q := b.Transform(a.Transform(p))
		c, err := judge.CompareScan(q, got, dt, nil, nil)
		return err == nil && c.Passed(dt)
	case a.Transform == nil && b.Transform == nil:
		e, ok := mergeEdits(a.Edit, b.Edit)
		if !ok {
			return false
		}
		return editMatches(p, got, dt, e, a, b)
	case a.Transform != nil:
		return editMatches(a.Transform(p), got, dt, b.Edit, b)
	default:
		return editMatches(b.Transform(p), got, dt, a.Edit, a)
	}
}

// editMatches scans q with the edit e and judges got against it with q's
// error scale, adapted to the magnitudes of the slips whose edits e holds.
func editMatches(q *ssm.Problem, got *ssm.Output, dt ssm.DType, e mamba1.Edit, from ...mamba1.Slip) bool {
	sc, err := mamba1.ErrorScaleIn(q, dt.Precision())
	if err != nil {
		return false
	}
	for _, s := range from {
		if s.Rescale != nil {
			s.Rescale(q, sc)
		}
	}
	c, err := judge.CompareScan(q, got, dt, mamba1.EditedScan(q, e), sc)
	return err == nil && c.Passed(dt)
}

// mergeEdits is the edit that makes both a's and b's mistakes; false when
// they overlap (the same flag, or both replace a coefficient).
func mergeEdits(a, b mamba1.Edit) (mamba1.Edit, bool) {
	if (a.OutBeforeUpdate && b.OutBeforeUpdate) || (a.GateNoZ && b.GateNoZ) || (a.NoFactor2 && b.NoFactor2) || (a.StateWithoutB && b.StateWithoutB) ||
		(a.Coef != nil && b.Coef != nil) || (a.BCoef != nil && b.BCoef != nil) || (a.Extra != nil && b.Extra != nil) {
		return mamba1.Edit{}, false
	}
	m := a
	m.OutBeforeUpdate = a.OutBeforeUpdate || b.OutBeforeUpdate
	m.GateNoZ = a.GateNoZ || b.GateNoZ
	m.NoFactor2 = a.NoFactor2 || b.NoFactor2
	m.StateWithoutB = a.StateWithoutB || b.StateWithoutB
	if b.Coef != nil {
		m.Coef = b.Coef
	}
	if b.BCoef != nil {
		m.BCoef = b.BCoef
	}
	if b.Extra != nil {
		m.Extra = b.Extra
	}
	return m, true
}

// featured is a problem of p's combination (method, complex A, shape of
// B and C) with every feature on: D, z, delta_bias and softplus, variable
// B and C in two groups, two batch rows, 40 steps; in dt's input type.
func featured(p *ssm.Problem, dt ssm.DType) *ssm.Problem {
	q := mamba1.Generate(mamba1.Spec{Batch: 2, Dim: 4, Seqlen: 40, Dstate: 4, Groups: 2, Method: p.Method, Complex: p.Complex,
		VariableB: true, VariableC: true, Softplus: true, HasD: true, HasZ: true, HasBias: true, Dist: mamba1.Realistic}, 17)
	if dt != ssm.F64 {
		q.RoundTo(dt)
	}
	return q
}

// wholeFailure checks a slip named on a failing problem against a
// featured one: if the kernel there matches the slip, the slip explains
// the whole failure (ev says so, ok false: the name stands); if it
// matches the slip with a second one, ok and the pair's tag and cause;
// otherwise ev says a second fault remains. A kernel that refuses the
// featured problem leaves the name as it is, with ev saying why.
func wholeFailure(s Scanner, p *ssm.Problem, dt ssm.DType, tag string) (pair, cause, ev string, ok bool) {
	var first mamba1.Slip
	for _, sl := range mamba1.Slips(p.Method) {
		if sl.Tag == tag {
			first = sl
		}
	}
	if first.Tag == "" {
		return "", "", "", false
	}
	q := featured(p, dt)
	got, err := s.Scan(q, dt)
	if err != nil {
		return "", "", "the whole failure not checked on a problem with every feature: " + err.Error(), false
	}
	sc, err := mamba1.ErrorScaleIn(q, dt.Precision())
	if err != nil {
		return "", "", "", false
	}
	if !first.Applies(q) {
		return "", "", "", false
	}
	if _, match := slipMatches(q, got, dt, first, sc); match {
		return "", "", "it explains every failing element of a problem with every feature on too (2×4×40×4, two groups, D, z, delta_bias, softplus)", false
	}
	seen := false // whether first comes before sl in the catalogue: a pair is named in its order
	for _, sl := range mamba1.Slips(p.Method) {
		if sl.Tag == first.Tag {
			seen = true
			continue
		}
		if !sl.Applies(q) || !pairMatches(q, got, dt, first, sl) {
			continue
		}
		a, b := sl, first
		if seen {
			a, b = first, sl
		}
		return a.Tag + "+" + b.Tag, a.Cause + "; and " + b.Cause,
			first.Tag + " explains the failing problem; on a problem with every feature on, " + sl.Tag + " is needed beside it", true
	}
	return "", "", "on a problem with every feature on the kernel does not match " + first.Tag + " alone, nor with one other slip: a second fault remains", false
}

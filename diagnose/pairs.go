package diagnose

import (
	"ssmverify/gen"
	"ssmverify/judge"
	"ssmverify/reference"
	"ssmverify/ssm"
)

// pairMatches compares the kernel's result with two slips made together:
// both problem transforms applied in turn; both edits merged into one
// scan; or a transform's problem scanned with the other's edit. It
// reports false where the two cannot be made together (a slip of the
// kernel's dtype, transformIn, pairs with nothing; two edits that set the
// same flag are the same slip).
func pairMatches(p *ssm.Problem, got *ssm.Output, dt ssm.DType, a, b slip) bool {
	if a.transformIn != nil || b.transformIn != nil {
		return false
	}
	switch {
	case a.transform != nil && b.transform != nil:
		q := b.transform(a.transform(p))
		c, err := judge.CompareScan(q, got, dt, nil, nil)
		return err == nil && c.Passed(dt)
	case a.transform == nil && b.transform == nil:
		e, ok := mergeEdits(a.edit, b.edit)
		if !ok {
			return false
		}
		return editMatches(p, got, dt, e, a, b)
	case a.transform != nil:
		return editMatches(a.transform(p), got, dt, b.edit, b)
	default:
		return editMatches(b.transform(p), got, dt, a.edit, a)
	}
}

// editMatches scans q with the edit e and judges got against it with q's
// error scale, adapted to the magnitudes of the slips whose edits e holds.
func editMatches(q *ssm.Problem, got *ssm.Output, dt ssm.DType, e slipEdit, from ...slip) bool {
	sc, err := reference.ErrorScaleIn(q, dt.Precision())
	if err != nil {
		return false
	}
	for _, s := range from {
		if s.rescale != nil {
			s.rescale(q, sc)
		}
	}
	c, err := judge.CompareScan(q, got, dt, slipScan(q, e), sc)
	return err == nil && c.Passed(dt)
}

// mergeEdits is the edit that makes both a's and b's mistakes; false when
// they overlap (the same flag, or both replace a coefficient).
func mergeEdits(a, b slipEdit) (slipEdit, bool) {
	if (a.outBeforeUpdate && b.outBeforeUpdate) || (a.gateNoZ && b.gateNoZ) || (a.noFactor2 && b.noFactor2) || (a.stateWithoutB && b.stateWithoutB) ||
		(a.coef != nil && b.coef != nil) || (a.bcoef != nil && b.bcoef != nil) || (a.extra != nil && b.extra != nil) {
		return slipEdit{}, false
	}
	m := a
	m.outBeforeUpdate = a.outBeforeUpdate || b.outBeforeUpdate
	m.gateNoZ = a.gateNoZ || b.gateNoZ
	m.noFactor2 = a.noFactor2 || b.noFactor2
	m.stateWithoutB = a.stateWithoutB || b.stateWithoutB
	if b.coef != nil {
		m.coef = b.coef
	}
	if b.bcoef != nil {
		m.bcoef = b.bcoef
	}
	if b.extra != nil {
		m.extra = b.extra
	}
	return m, true
}

// featured is a problem of p's combination (method, complex A, shape of
// B and C) with every feature on: D, z, delta_bias and softplus, variable
// B and C in two groups, two batch rows, 40 steps; in dt's input type.
func featured(p *ssm.Problem, dt ssm.DType) *ssm.Problem {
	q := gen.New(gen.Spec{Batch: 2, Dim: 4, Seqlen: 40, Dstate: 4, Groups: 2, Method: p.Method, Complex: p.Complex,
		VariableB: true, VariableC: true, Softplus: true, HasD: true, HasZ: true, HasBias: true, Dist: gen.Realistic}, 17)
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
	var first slip
	for _, sl := range slips(p.Method) {
		if sl.tag == tag {
			first = sl
		}
	}
	if first.tag == "" {
		return "", "", "", false
	}
	q := featured(p, dt)
	got, err := s.Scan(q, dt)
	if err != nil {
		return "", "", "the whole failure not checked on a problem with every feature: " + err.Error(), false
	}
	sc, err := reference.ErrorScaleIn(q, dt.Precision())
	if err != nil {
		return "", "", "", false
	}
	if !first.applies(q) {
		return "", "", "", false
	}
	if _, match := slipMatches(q, got, dt, first, sc); match {
		return "", "", "it explains every failing element of a problem with every feature on too (2×4×40×4, two groups, D, z, delta_bias, softplus)", false
	}
	seen := false // whether first comes before sl in the catalogue: a pair is named in its order
	for _, sl := range slips(p.Method) {
		if sl.tag == first.tag {
			seen = true
			continue
		}
		if !sl.applies(q) || !pairMatches(q, got, dt, first, sl) {
			continue
		}
		a, b := sl, first
		if seen {
			a, b = first, sl
		}
		return a.tag + "+" + b.tag, a.cause + "; and " + b.cause,
			first.tag + " explains the failing problem; on a problem with every feature on, " + sl.tag + " is needed beside it", true
	}
	return "", "", "on a problem with every feature on the kernel does not match " + first.tag + " alone, nor with one other slip: a second fault remains", false
}

package diagnose

import (
	"fmt"
	"math"

	"ssmverify/judge"
)

// A normwise error model bounds an error by the magnitudes of the terms
// that make a value (Σ|terms|·u), and where the terms cancel — a sum of
// products of random sign, a reverse cumulative sum of differences — the
// bound is far above the value itself. In a 16-bit type, where every path
// is allowed its operands' rounding of 2⁻⁸ to 2⁻¹¹, a slip that changes a
// gradient by less than the bound passes the judgement: upstream's Mamba-2
// backward with dA summed without Δ, or dD doubled, stays within the bf16
// model on the suite's problems (its dA errs by 10⁻⁶ of the bound, the
// slip moves it by 10⁻¹).
//
// Such a slip still leaves a mark the bound cannot hide: the result lies
// on the wrong formula. A correct kernel's error e = got − ref is its
// rounding; to lie within |e|/Nearer of a candidate relation's values c it
// would need e ≈ c − ref to one part in Nearer on every element, which
// rounding does not do (the candidates are the chain rule's structural
// variants: a path cut or negated, a factor left out, a shift, another
// head's gradient, zero, twice). Where that happens on an array of
// several differing elements, with the relation at least Apart of the
// model's allowance from the reference (so that rounding noise alone
// cannot make the two distances), the array follows the relation, within
// the model or not.
const (
	HiddenNearer   = 100.0
	HiddenApart    = 1e-3
	HiddenElements = 3
)

// HiddenRelation reports the first candidate the kernel's array a follows
// though a passes its judgement: a is at least HiddenNearer times nearer
// the candidate's values than the reference's (root-mean-square distances
// in units of the model's per-element allowance u·Scale + η·Tiny, both
// rounded to a's stored type), on at least HiddenElements elements where
// the two differ (by more than two of a 16-bit stored type's spacings: a
// correct kernel's value may round either way of a smaller difference),
// the candidate at least HiddenApart from the reference. The
// evidence is said in words.
func HiddenRelation(a judge.Array, cands []Candidate) (c Candidate, evidence string, ok bool) {
	n := len(a.Want)
	if n < HiddenElements || len(a.Got) != n || len(a.Scale) != n {
		return Candidate{}, "", false
	}
	prec := a.Computed.Precision()
	u, eta := prec.UnitRoundoff(), prec.Tiny()
	allow := make([]float64, n)
	for i := range allow {
		allow[i] = u * a.Scale[i]
		if a.Tiny != nil {
			allow[i] += eta * a.Tiny[i]
		}
		if !(allow[i] > 0) || math.IsInf(allow[i], 0) || math.IsNaN(a.Got[i]) || math.IsInf(a.Got[i], 0) {
			return Candidate{}, "", false
		}
	}
	// one spacing of the stored 16-bit type at x: 2u·|x|, or its
	// subnormals' spacing below them
	ulp := func(x float64) float64 { return 2*a.Stored.OutputRoundoff()*math.Abs(x) + a.Stored.OutputSpacing() }
	round := func(x float64) float64 {
		if a.Stored.Narrow() {
			return a.Stored.Round(x)
		}
		return x
	}
	rms := func(x, y []float64, roundY bool) float64 {
		var s float64
		for i := range x {
			yi := y[i]
			if roundY {
				yi = round(yi)
			}
			d := (x[i] - yi) / allow[i]
			s += d * d
		}
		return math.Sqrt(s / float64(n))
	}
	dRef := rms(a.Got, a.Want, true)
	if !(dRef > 0) {
		return Candidate{}, "", false // the reference itself, to the last bit
	}
	twice := make([]float64, n)
	for i, w := range a.Want {
		twice[i] = 2 * w
	}
	all := append(append([]Candidate(nil), cands...),
		Candidate{Tag: "zero", Cause: "is zero", Want: make([]float64, n)},
		Candidate{Tag: "factor(2)", Cause: "is twice the reference (counted twice)", Want: twice})
	for _, cand := range all {
		if len(cand.Want) != n {
			continue
		}
		differ := 0
		for i, w := range cand.Want {
			if d := math.Abs(w - a.Want[i]); d > 0 && (!a.Stored.Narrow() || d > 2*ulp(a.Want[i])) {
				differ++
			}
		}
		if differ < HiddenElements {
			continue
		}
		apart := rms(a.Want, cand.Want, false)
		dCand := rms(a.Got, cand.Want, true)
		if apart >= HiddenApart && dCand*HiddenNearer <= dRef && !math.IsNaN(apart+dCand) {
			near := "it exactly"
			if dCand > 0 {
				near = fmt.Sprintf("%.2g times nearer it", dRef/dCand)
			}
			return cand, fmt.Sprintf("within the error model, but %s than the reference (root-mean-square distances %.3g and %.3g of the allowance; the relation is %.3g of it from the reference, on %d of %d elements)",
				near, dCand, dRef, apart, differ, n), true
		}
	}
	return Candidate{}, "", false
}

package diagnose

import (
	"math"
	"math/rand/v2"
	"testing"

	"ssmverify/judge"
	"ssmverify/ssm"
)

// hiddenCase is an array of n elements with its allowance u·Scale: a
// reference, a candidate relation δ allowances away from it on every
// element, and the kernel's values at the reference or at the candidate
// plus rounding noise of σ allowances.
func hiddenCase(r *rand.Rand, n int, stored ssm.DType, delta, sigma float64, slipped bool) (judge.Array, Candidate) {
	a := judge.Array{Name: "dA", Got: make([]float64, n), Want: make([]float64, n), Scale: make([]float64, n), Stored: stored, Computed: ssm.F32}
	cand := Candidate{Tag: "lacks(Δ)", Cause: "lacks Δ", Want: make([]float64, n)}
	u := ssm.F32.Precision().UnitRoundoff()
	for i := range a.Want {
		a.Want[i] = r.NormFloat64()
		a.Scale[i] = math.Abs(a.Want[i])*(1+10*r.Float64())/u*1e-3 + 1/u*1e-6
		allow := u * a.Scale[i]
		cand.Want[i] = a.Want[i] + delta*allow*(1+r.Float64())*float64(1-2*r.IntN(2))
		base := a.Want[i]
		if slipped {
			base = cand.Want[i]
		}
		a.Got[i] = base + sigma*allow*r.NormFloat64()
		if stored.Narrow() {
			a.Got[i] = stored.Round(a.Got[i])
		}
	}
	return a, cand
}

// TestHiddenRelation: a correct kernel's rounding (noise from 10⁻⁶ to 1
// allowance, of any relation δ away) is never taken for a relation, in
// float32 or rounded to bf16; a kernel on the relation's formula, with
// noise a thousandth of δ, is named with it.
func TestHiddenRelation(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for trial := 0; trial < 4000; trial++ {
		n := 3 + r.IntN(60)
		stored := []ssm.DType{ssm.F32, ssm.BF16}[trial%2]
		delta := math.Pow(10, -3+3*r.Float64()) // 10⁻³ … 1 allowance
		sigma := math.Pow(10, -6+6*r.Float64()) // 10⁻⁶ … 1
		a, c := hiddenCase(r, n, stored, delta, sigma, false)
		if got, ev, ok := HiddenRelation(a, []Candidate{c}); ok {
			t.Fatalf("trial %d (n %d, %v, δ %.3g, σ %.3g): a correct result taken for %s: %s", trial, n, stored, delta, sigma, got.Tag, ev)
		}
	}
	for trial := 0; trial < 200; trial++ {
		n := 3 + r.IntN(60)
		delta := math.Pow(10, -2+2*r.Float64())
		a, c := hiddenCase(r, n, ssm.F32, delta, delta*1e-3, true)
		got, ev, ok := HiddenRelation(a, []Candidate{c})
		if !ok || got.Tag != c.Tag {
			t.Fatalf("trial %d (n %d, δ %.3g): a result on the relation's formula not named (%v %q)", trial, n, delta, ok, got.Tag)
		}
		if trial == 0 {
			t.Logf("named: %s %s", got.Tag, ev)
		}
	}
}

// TestHiddenRelationNeedsEvidence: fewer differing elements than
// HiddenElements, a relation nearer the reference than HiddenApart, a
// relation within two bf16 spacings of it, and the reference itself to
// the bit are never named.
func TestHiddenRelationNeedsEvidence(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	a, c := hiddenCase(r, 8, ssm.F32, 0.1, 1e-6, true)
	few := append([]float64(nil), a.Want...)
	copy(few[:HiddenElements-1], c.Want[:HiddenElements-1])
	a.Got = append([]float64(nil), few...)
	if _, ev, ok := HiddenRelation(a, []Candidate{{Tag: "x", Want: few}}); ok {
		t.Errorf("named on %d differing elements: %s", HiddenElements-1, ev)
	}
	b, c2 := hiddenCase(r, 8, ssm.F32, HiddenApart/4, 1e-9, true)
	if _, ev, ok := HiddenRelation(b, []Candidate{c2}); ok {
		t.Errorf("named a relation %g allowances from the reference: %s", HiddenApart/4, ev)
	}
	exact := judge.Array{Name: "dD", Want: []float64{1, 2, 3, 4}, Got: []float64{1, 2, 3, 4}, Scale: []float64{1e3, 1e3, 1e3, 1e3}, Stored: ssm.F32, Computed: ssm.F32}
	if _, ev, ok := HiddenRelation(exact, []Candidate{{Tag: "x", Want: []float64{1.1, 2.1, 3.1, 4.1}}}); ok {
		t.Errorf("named a relation of the exact reference: %s", ev)
	}
	// bf16: a relation one spacing away, the kernel's values rounded to it
	w := []float64{1, 1.5, 2, 3}
	cw := make([]float64, len(w))
	got := make([]float64, len(w))
	for i, x := range w {
		cw[i] = x * (1 + 0x1p-8)
		got[i] = ssm.BF16.Round(cw[i])
	}
	sub := judge.Array{Name: "ddt", Want: w, Got: got, Scale: []float64{1e6, 1e6, 1e6, 1e6}, Stored: ssm.BF16, Computed: ssm.F32}
	if _, ev, ok := HiddenRelation(sub, []Candidate{{Tag: "x", Want: cw}}); ok {
		t.Errorf("named a relation within two bf16 spacings: %s", ev)
	}
}

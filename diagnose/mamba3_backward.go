package diagnose

import (
	"fmt"
	"math"
	"strings"

	"ssmverify/judge"
	"ssmverify/mamba3"
	"ssmverify/report"
)

// Mamba3Backward diagnoses a failing backward of Mamba-3's SISO layer from
// the structure of the failure, not from a catalogue of backward slips:
// the forward it ran, if wrong, by Mamba3 (its tag first: "fwd:…"); and,
// for every gradient beyond the threshold, the relation it
// bears to the float64 gradient (Relate): zero, a constant factor, a
// per-element factor of the layer's own quantities, a path of the chain
// rule missing or with its sign flipped (mamba3.GradWithout), a shift in
// time, the right total in the wrong slots. The finding's tag joins the
// relations found ("bwd:dADT:no-path:beta"); a gradient no relation
// explains is "bwd:dX:none" with where it fails.
//
// A gradient no relation explains is then judged by its slices
// (measureSlices, with runBwd): a failure that stays at its batch or head
// indices when they are permuted
// ("bwd:dK:head-index"), or that crosses between slices
// ("bwd:dV:v-input-head-crossed"), or that depends on an earlier call
// ("bwd:dK:head-stale": memory read and never written) — where an offset
// of a store the forward keeps for the backward, or of the backward's own
// indexing, shows.
//
// run (nil: none) runs the kernel's forward again, for the forward's
// diagnosis (Mamba3's operator); runBwd (nil: none) its backward.
func Mamba3Backward(p *mamba3.Problem, ct *mamba3.Cotangent, y []float64, st *mamba3.State, g *mamba3.Grads, run Mamba3Runner, runBwd Mamba3BackwardRunner) (f report.Finding) {
	defer contained(&f, "diagnose.Mamba3Backward", func() string { return mamba3Shape(p) })
	return diagnoseMamba3Backward(p, ct, y, st, g, run, runBwd)
}

// Mamba3BackwardRunner runs a kernel's Mamba-3 forward and backward on a
// problem for a cotangent, for the probes of the diagnosis.
type Mamba3BackwardRunner func(p *mamba3.Problem, ct *mamba3.Cotangent) ([]float64, *mamba3.State, *mamba3.Grads, error)

func diagnoseMamba3Backward(p *mamba3.Problem, ct *mamba3.Cotangent, y []float64, st *mamba3.State, g *mamba3.Grads, run Mamba3Runner, runBwd Mamba3BackwardRunner) report.Finding {
	var tags, causes, where []string
	want, wst := mamba3.Forward(p)
	if !ssdPasses(judge.Mamba3Arrays(p, y, want, st, wst, mamba3.ErrorScale(p))) {
		f := Mamba3(p, y, st, run)
		tags = append(tags, "fwd:"+f.Tag)
		causes = append(causes, "the forward under the backward: "+f.Cause)
		where = append(where, f.Where)
	}
	ref := mamba3.Grad(p, ct)
	arrays, err := judge.Mamba3GradArrays(p, g, ref, mamba3.GradErrorScale(p, ct))
	if err != nil {
		return report.Finding{Tag: "bwd:missing", Cause: err.Error()}
	}
	th := judge.Threshold(p.DType)
	candsOf := m3GradCandidates(p, ct, ref)
	for _, a := range arrays {
		ok, rs := ssdJudged([]judge.Array{a})
		cands := candsOf(a.Name)
		if ok {
			// within the model, but on a wrong formula (HiddenRelation)
			if tag, cause, hidden := hiddenGrad(a, cands); hidden {
				tags, causes = append(tags, tag), append(causes, cause)
			}
			continue
		}
		where = append(where, failingCounts(rs, th, a.Name)...)
		rel, ok := Relate(a, cands, th)
		if !ok {
			tags = append(tags, "bwd:"+a.Name+":none")
			causes = append(causes, a.Name+": no relation to the reference fits")
			continue
		}
		tags = append(tags, "bwd:"+a.Name+":"+rel.Tag)
		causes = append(causes, a.Name+" "+rel.Cause)
	}
	if len(tags) == 0 {
		return report.Finding{Cause: "the failure did not reproduce on this problem"}
	}
	f := report.Finding{Tag: strings.Join(tags, "+"), Cause: strings.Join(causes, "; "), Where: strings.Join(where, "; ")}
	// gradients no relation explains: their slices, whatever the forward
	// (a forward wrong by a property of the kernel's arithmetic, its
	// angles in bf16, leaves the gradients' slices to be judged)
	if runBwd != nil && strings.Contains(f.Tag+"+", ":none+") {
		probe := func(q *mamba3.Problem, qct *mamba3.Cotangent) ([]judge.Array, error) {
			_, _, qg, err := runBwd(q, qct)
			if err != nil {
				return nil, err
			}
			return judge.Mamba3GradArrays(q, qg, mamba3.Grad(q, qct), mamba3.GradErrorScale(q, qct))
		}
		if sf, ok := mamba3Slices(p, ct, arrays, probe); ok {
			replaceUnrelated(tags, causes, sf)
			f.Tag, f.Cause = strings.Join(tags, "+"), strings.Join(causes, "; ")
			f.Evidence = append(f.Evidence, sf.evidence...)
		}
	}
	return f
}

// Mamba3BackwardHidden looks, in a Mamba-3 backward whose forward and
// gradients pass their judgement (arrays: judge.Mamba3GradArrays of the
// kernel's gradients against ref, mamba3.Grad's), for a gradient that
// follows a structural relation to the reference all the same
// (HiddenRelation), as SSDBackwardHidden does for Mamba-2's; a Finding
// with no Tag where none does.
func Mamba3BackwardHidden(p *mamba3.Problem, ct *mamba3.Cotangent, ref *mamba3.Grads, arrays []judge.Array) (f report.Finding) {
	defer contained(&f, "diagnose.Mamba3BackwardHidden", func() string { return mamba3Shape(p) })
	return hiddenFinding(arrays, m3GradCandidates(p, ct, ref), mamba3Shape(p))
}

// m3GradCandidates returns the structural relations of each Mamba-3
// gradient (mamba3Candidates), the chain rule's variants computed once,
// at the first call.
func m3GradCandidates(p *mamba3.Problem, ct *mamba3.Cotangent, ref *mamba3.Grads) func(name string) []Candidate {
	var without map[mamba3.Path]*mamba3.Grads
	return func(name string) []Candidate {
		if without == nil {
			without = mamba3.GradsWithout(p, ct)
		}
		return mamba3Candidates(p, name, ref, without)
	}
}

// A Candidate is what a gradient would be under one relation to the
// reference: Want replaces the reference, Scale multiplies the error
// model's scale (a gradient scaled by c errs by |c| times as much).
type Candidate struct {
	Tag, Cause string
	Want       []float64
	Scale      float64
}

// Relate returns the first candidate the kernel's array matches within
// the threshold (ok false when none does). Besides the candidates given it
// tries, in order: zero; a constant factor fitted by least squares; the
// reference's elements in another order with the same total (a sum into
// the wrong slots, a shift).
//
// First of all, a 16-bit array that nowhere differs from the reference by
// more than one unit in the last place of its type is at the output's
// resolution: no structure can be told from a rounding there (an operand
// rounded to fp16 below its normal range errs by its absolute spacing,
// which the relative error model does not cover), and the relation is
// "output-ulp", a precision finding.
func Relate(a judge.Array, cands []Candidate, th float64) (Candidate, bool) {
	if atOutputULP(a) {
		return Candidate{Tag: "output-ulp", Cause: "differs from the reference by at most one unit in the last place of its 16-bit type everywhere: a rounding in that type " +
			"(an operand rounded to it below its normal range errs by the type's absolute spacing), not a structure that can be told"}, true
	}
	try := func(c Candidate) bool {
		b := a
		b.Want = c.Want
		if c.Scale != 0 && c.Scale != 1 {
			b.Scale = make([]float64, len(a.Scale))
			for i, s := range a.Scale {
				b.Scale[i] = s * math.Abs(c.Scale)
			}
		}
		ok, _ := ssdJudged([]judge.Array{b})
		return ok
	}
	var zero bool = true
	for _, g := range a.Got {
		if g != 0 {
			zero = false
			break
		}
	}
	if zero {
		return Candidate{Tag: "zero", Cause: "is zero: never computed or never written"}, true
	}
	var gw, ww float64
	for i, w := range a.Want {
		gw += a.Got[i] * w
		ww += w * w
	}
	if ww > 0 {
		c := gw / ww
		if r, name := simpleFactor(c); name != "" {
			want := make([]float64, len(a.Want))
			for i, w := range a.Want {
				want[i] = r * w
			}
			if try(Candidate{Want: want, Scale: r}) {
				return Candidate{Tag: fmt.Sprintf("factor(%g)", r), Cause: name}, true
			}
		}
	}
	for _, c := range cands {
		if try(c) {
			return c, true
		}
	}
	// the right total in other slots
	var sg, sw, ss float64
	for i, g := range a.Got {
		sg += g
		sw += a.Want[i]
		ss += a.Scale[i]
	}
	u := a.Computed.Precision().UnitRoundoff()
	if math.Abs(sg-sw) <= th*u*ss && math.Abs(sw) > th*u*ss {
		return Candidate{Tag: "wrong-slot", Cause: "has the reference's total in the wrong elements: a sum over the wrong axis or into the wrong slot"}, true
	}
	return Candidate{}, false
}

// atOutputULP reports whether a is a 16-bit array whose every element is
// within one unit in the last place of the reference (judge.ULPsOf), with
// at least one that differs.
func atOutputULP(a judge.Array) bool {
	if !a.Stored.Narrow() || len(a.Got) != len(a.Want) {
		return false
	}
	differs := false
	for i, g := range a.Got {
		if g == a.Want[i] {
			continue
		}
		if !(judge.ULPsOf(g-a.Want[i], math.Abs(a.Want[i]), a.Stored) <= 1) {
			return false
		}
		differs = true
	}
	return differs
}

// simpleFactor rounds c to the factors a slip makes (±2^k, ±3, ±1/3) and
// says it in words; "" when c is none of them or is 1.
func simpleFactor(c float64) (float64, string) {
	for _, f := range []float64{-1, 2, 0.5, -2, -0.5, 4, 0.25, 3, 1.0 / 3, -3} {
		if math.Abs(c-f) <= 0.02*math.Abs(f) {
			if f == -1 {
				return f, "has its sign flipped"
			}
			return f, fmt.Sprintf("is %g times the reference", f)
		}
	}
	return 0, ""
}

// mamba3Candidates are a gradient's structural relations to the reference
// ref: a path of the chain rule cut or negated, a per-element factor of
// the layer's own quantities (the head-major gradients), a shift by one
// step in time.
func mamba3Candidates(p *mamba3.Problem, name string, ref *mamba3.Grads, without map[mamba3.Path]*mamba3.Grads) []Candidate {
	full := gradField(ref, name)
	var out []Candidate
	for _, path := range mamba3.Paths() {
		out = append(out, pathCandidates(full, gradField(without[path], name), path.Tag(), path.String())...)
	}
	L, H, B := p.Seqlen, p.Heads, p.Batch
	if name == "dADT" || name == "dDT" || name == "dTrap" {
		n := B * H * L
		lam, lam1, dt, alpha := make([]float64, n), make([]float64, n), p.DT, make([]float64, n)
		for i := 0; i < n; i++ {
			l := 1 / (1 + math.Exp(-p.Trap[i]))
			lam[i], lam1[i], alpha[i] = l, l*(1-l), math.Exp(p.ADT[i])
		}
		for _, f := range []struct {
			tag, words string
			x          []float64
		}{{"λ(1−λ)", "σ'(Trap) = λ(1−λ)", lam1}, {"Δ", "Δ", dt}, {"α", "α", alpha}, {"λ", "λ", lam}} {
			times, over := make([]float64, n), make([]float64, n)
			for i := range full {
				times[i], over[i] = full[i]*f.x[i], full[i]/f.x[i]
			}
			out = append(out, Candidate{Tag: "lacks(" + f.tag + ")", Cause: "lacks the factor " + f.words, Want: over},
				Candidate{Tag: "extra(" + f.tag + ")", Cause: "has an extra factor " + f.words, Want: times})
		}
	}
	// a shift by one step: rows of L steps, each step `inner` elements
	rows, inner := 0, 0
	switch name {
	case "dADT", "dDT", "dTrap":
		rows, inner = B*H, 1
	case "dQ", "dK", "dV", "dAngles", "dZ":
		rows, inner = B, len(full)/(B*L)
	}
	return append(out, shiftCandidates(full, rows, L, inner)...)
}

// shiftCandidates are a per-step gradient full's shifts by one step in
// time, either way: rows of L steps, each step inner elements (none where
// rows is 0 or the rows are shorter than minShiftSteps).
func shiftCandidates(full []float64, rows, L, inner int) []Candidate {
	var out []Candidate
	for _, k := range []int{1, -1} {
		if rows == 0 || L < minShiftSteps {
			break
		}
		sh := make([]float64, len(full))
		for r := 0; r < rows; r++ {
			for t := 0; t < L; t++ {
				if s := t + k; s >= 0 && s < L {
					copy(sh[(r*L+t)*inner:(r*L+t+1)*inner], full[(r*L+s)*inner:(r*L+s+1)*inner])
				}
			}
		}
		out = append(out, Candidate{Tag: fmt.Sprintf("shift(%+d)", k), Cause: fmt.Sprintf("is the reference's gradient of the step %+d: an index off by one in time", k), Want: sh})
	}
	return out
}

// pathCandidates are a gradient full's relations to one path of the chain
// rule, given the gradient without it (cut): the path missing, or with its
// sign flipped (2·cut − full); none where the gradient does not flow
// through the path.
func pathCandidates(full, cut []float64, tag, words string) []Candidate {
	if sameSlice(cut, full) {
		return nil
	}
	neg := make([]float64, len(full))
	for i := range neg {
		neg[i] = 2*cut[i] - full[i]
	}
	return []Candidate{{Tag: "no-path:" + tag, Cause: "lacks its path through " + words, Want: cut},
		{Tag: "negated-path:" + tag, Cause: "has its path through " + words + " with the sign flipped", Want: neg}}
}

func sameSlice(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// gradField is the named gradient ("dQ", …, "dstate_ssm") of g.
func gradField(g *mamba3.Grads, name string) []float64 {
	for _, f := range g.Fields() {
		if f.Name == name {
			return f.Values
		}
	}
	return nil
}

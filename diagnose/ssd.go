package diagnose

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"ssmverify/judge"
	"ssmverify/mamba2"
	"ssmverify/report"
	"ssmverify/ssm"
)

// SSDRunner runs a Mamba-2 kernel's prefill (nil when the diagnosis may
// not call the kernel again).
type SSDRunner func(p *mamba2.Problem) (*mamba2.Output, error)

// ssdFeature is a feature of a prefill problem that the diagnosis can
// switch off, and what switching it off leaves.
type ssdFeature struct {
	name string
	on   func(p *mamba2.Problem) bool
	off  func(p *mamba2.Problem)
}

var ssdFeatures = []ssdFeature{
	{"initial_states", func(p *mamba2.Problem) bool { return p.InitialStates != nil }, func(p *mamba2.Problem) { p.InitialStates = nil }},
	{"cu_seqlens", func(p *mamba2.Problem) bool { return p.CuSeqlens != nil }, func(p *mamba2.Problem) { p.CuSeqlens = nil }},
	{"D", func(p *mamba2.Problem) bool { return p.D != nil }, func(p *mamba2.Problem) { p.D = nil }},
	{"z", func(p *mamba2.Problem) bool { return p.Z != nil }, func(p *mamba2.Problem) { p.Z = nil }},
	{"dt_bias", func(p *mamba2.Problem) bool { return p.DtBias != nil }, func(p *mamba2.Problem) { p.DtBias = nil }},
	{"softplus", func(p *mamba2.Problem) bool { return p.Softplus }, func(p *mamba2.Problem) { p.Softplus = false }},
	{"dt_limit", func(p *mamba2.Problem) bool { return !p.DefaultLimits() }, func(p *mamba2.Problem) { p.DtMin, p.DtMax = 0, 0 }},
	{"groups", func(p *mamba2.Problem) bool { return p.Groups > 1 }, func(p *mamba2.Problem) {
		// every head reads group 0's B and C
		G, N := p.Groups, p.Dstate
		rows := p.Batch * p.Seqlen
		b, c := make([]float64, rows*N), make([]float64, rows*N)
		for r := 0; r < rows; r++ {
			copy(b[r*N:(r+1)*N], p.B[r*G*N:r*G*N+N])
			copy(c[r*N:(r+1)*N], p.C[r*G*N:r*G*N+N])
		}
		p.B, p.C, p.Groups = b, c, 1
	}},
}

// prefillSlips returns the slips of the catalogue (mamba2.Slips) the kernel's
// prefill matches: the first that fit alone — formulas before precisions —
// else the pairs that fit together (a slip applied to the problem, then
// another), a formula with a formula before a formula with a precision.
// A pair is one Slip whose tag joins both ("dt:no-bias+narrow:tf32").
func prefillSlips(p *mamba2.Problem, got *mamba2.Output, yRatios []float64) []mamba2.Slip {
	all := mamba2.Slips()
	scr, screened := newSlipScreen(p, got, yRatios)
	fit := func(q *mamba2.Problem, s mamba2.Slip) bool {
		if s.Prefill == nil {
			return false
		}
		if screened && !scr.admits(q, s) {
			return false
		}
		alt, asc := s.Prefill(q)
		if alt == nil {
			return false
		}
		ok := ssdPasses(judge.PrefillArrays(q, got, alt, asc))
		return ok && onGrid(s.Tag, got.FinalStates)
	}
	return searchSlips(all, func(s mamba2.Slip) bool { return fit(p, s) }, func(a, b mamba2.Slip) bool {
		if a.Apply == nil {
			return false
		}
		q := *p
		return a.Apply(&q) && fit(&q, b)
	})
}

// stepSlips is prefillSlips for a decode step.
func stepSlips(s *mamba2.Step, got *mamba2.StepOutput) []mamba2.Slip {
	all := mamba2.Slips()
	fit := func(q *mamba2.Step, sl mamba2.Slip) bool {
		if sl.Step == nil {
			return false
		}
		alt, asc := sl.Step(q)
		if alt == nil {
			return false
		}
		arrays := judge.StepArrays(q, got, alt, asc)
		if !ssdPasses(arrays) {
			// The slip may put a head beyond the arithmetic's range (a
			// negative Δ undamped): its ±Inf and NaN are the range's, the
			// rest must fit.
			masked, kept := maskBeyondRange(arrays, stepUnits(q))
			if kept == 0 || !ssdPasses(masked) {
				return false
			}
		}
		return onGrid(sl.Tag, updated(s, got.State))
	}
	return searchSlips(all, func(sl mamba2.Slip) bool { return fit(s, sl) }, func(a, b mamba2.Slip) bool {
		if a.ApplyStep == nil {
			return false
		}
		q := *s
		return a.ApplyStep(&q) && fit(&q, b)
	})
}

// stepUnits maps the elements of a step's y and state (judge.StepArrays)
// to the units a value beyond the range spreads within: a slot's head (a
// padding row's y to a unit of its own).
func stepUnits(s *mamba2.Step) []func(i int) int {
	H, P, N := s.Heads, s.Headdim, s.Dstate
	return []func(int) int{
		func(i int) int {
			b, h := i/(H*P), i/P%H
			if slot := s.Slot(b); slot >= 0 {
				return slot*H + h
			}
			return -1 - (b*H + h)
		},
		func(i int) int { return i / (P * N) },
	}
}

// maskBeyondRange returns arrays with the kernel's non-finite values in
// the units (unit[k] of array k's element) where the reference leaves the
// range of the arithmetic or of the stored type (a value or its error
// scale beyond the largest finite number) replaced by the reference's:
// there a kernel's ±Inf, or the NaN of ∞ − ∞ and 0·∞, is what its format
// gives. kept counts the elements still compared. Mamba-1's slips do the
// same (compareInRange).
func maskBeyondRange(arrays []judge.Array, unit []func(i int) int) (masked []judge.Array, kept int) {
	out := map[int]bool{}
	limit := func(a judge.Array) float64 {
		return math.Min(a.Computed.Precision().Largest(), a.Stored.OutputOverflow())
	}
	for k, a := range arrays {
		if k >= len(unit) || len(a.Scale) != len(a.Want) {
			continue
		}
		lim := limit(a)
		for i, w := range a.Want {
			if math.Abs(w) >= lim || a.Scale[i] >= lim {
				out[unit[k](i)] = true
			}
		}
	}
	masked = make([]judge.Array, len(arrays))
	for k, a := range arrays {
		masked[k] = a
		if k >= len(unit) || len(out) == 0 || len(a.Got) != len(a.Want) {
			kept += len(a.Got)
			continue
		}
		g := append([]float64(nil), a.Got...)
		for i, v := range g {
			if out[unit[k](i)] && (math.IsNaN(v) || math.IsInf(v, 0)) {
				g[i] = a.Want[i]
			} else {
				kept++
			}
		}
		masked[k].Got = g
	}
	if len(out) == 0 {
		kept = 0 // nothing beyond the range: the comparison as it was
	}
	return masked, kept
}

func searchSlips(all []mamba2.Slip, single func(mamba2.Slip) bool, pair func(a, b mamba2.Slip) bool) []mamba2.Slip {
	for _, precision := range []bool{false, true} {
		var fits []mamba2.Slip
		for _, s := range all {
			if s.Precision == precision && single(s) {
				fits = append(fits, s)
			}
		}
		if len(fits) > 0 {
			return fits
		}
	}
	for _, withPrecision := range []bool{false, true} {
		var fits []mamba2.Slip
		for i, a := range all {
			for j, b := range all {
				if i == j || a.Precision || b.Precision != withPrecision || (!withPrecision && j < i && a.Apply != nil && b.Apply != nil) {
					continue
				}
				if pair(a, b) || pair(b, a) {
					first, second := a, b
					fits = append(fits, mamba2.Slip{Tag: first.Tag + "+" + second.Tag, Cause: first.Cause + "; and " + second.Cause})
				}
			}
		}
		if len(fits) > 0 {
			return fits
		}
	}
	return nil
}

// onGrid is the distribution test of a diagnosis of a state kept in 16
// bits: the kernel's states must lie on that type's grid (all but 1%),
// since errors merely as large as its rounding prove nothing.
func onGrid(tag string, states []float64) bool {
	var dt ssm.DType
	switch tag {
	case "narrow:state-bf16":
		dt = ssm.BF16
	case "narrow:state-fp16":
		dt = ssm.F16
	default:
		return true
	}
	off := 0
	for _, v := range states {
		if dt.Round(v) != v {
			off++
		}
	}
	return off*100 <= len(states)
}

func ssdPasses(arrays []judge.Array) bool {
	ok, _ := ssdJudged(arrays)
	return ok
}

// ssdJudged judges the arrays once: whether every element passes, and
// the per-element ratios by array (for where the failure shows).
func ssdJudged(arrays []judge.Array) (bool, map[string][]float64) {
	c, ratios, err := judge.CompareArrays(arrays)
	if err != nil {
		return false, nil
	}
	return c.NonFinite == 0 && c.Worst.Ratio <= judge.Threshold(arrays[0].Computed), ratios
}

// allPass reports whether every ratio is within the threshold.
func allPass(ratios []float64, th float64) bool {
	for _, r := range ratios {
		if !(r <= th) {
			return false
		}
	}
	return true
}

// SSDPrefill diagnoses a prefill that failed: which slip of the catalogue
// (mamba2.Slips) the kernel's result matches within the error model, which
// features the failure needs (switched off one at a time, with run), and
// where it shows — which arrays, from which step, relative to the chunks
// and the sequences, in which heads.
func SSDPrefill(p *mamba2.Problem, got *mamba2.Output, run SSDRunner) (f report.Finding) {
	defer contained(&f, "diagnose.SSDPrefill", p.Shape)
	return diagnoseSSDPrefill(p, got, run)
}

func diagnoseSSDPrefill(p *mamba2.Problem, got *mamba2.Output, run SSDRunner) report.Finding {
	want, sc := mamba2.Prefill(p)
	arrays := judge.PrefillArrays(p, got, want, sc)
	if e := ssdShape(arrays); e != nil {
		return shapeFinding(e)
	}
	ok, ratios := ssdJudged(arrays)
	if ok {
		return report.Finding{Tag: "", Cause: "the failure did not reproduce on this problem"}
	}
	th := judge.Threshold(arrays[0].Computed)
	f := report.Finding{Where: ssdWhere(p, ratios, th)}
	fits := prefillSlips(p, got, ratios["y"])
	// a slip in the final states alone: y right, the states wrong
	if len(fits) == 0 && allPass(ratios["y"], th) {
		f.Evidence = append(f.Evidence, "y is right; only the states are wrong")
	}
	if len(fits) > 0 {
		f.Tag, f.Cause = fits[0].Tag, fits[0].Cause
		for _, s := range fits[1:] {
			f.Also = append(f.Also, s.Tag)
		}
	}
	if run != nil {
		for _, ft := range ssdFeatures {
			if !ft.on(p) {
				continue
			}
			q := *p
			ft.off(&q)
			o, err := run(&q)
			if err != nil {
				continue
			}
			w, s := mamba2.Prefill(&q)
			if ssdPasses(judge.PrefillArrays(&q, o, w, s)) {
				f.Needs = append(f.Needs, ft.name)
			}
		}
	}
	if f.Tag == "" && run != nil {
		// no catalogued slip: the kernel's operator, measured, related
		// to the reference's by region
		op, err := measureSSDOperator(p, run)
		switch {
		case err != nil:
			f.Evidence = append(f.Evidence, "the operator could not be measured: "+err.Error())
		default:
			if of, ok := op.diagnose(th); ok {
				f.Tag, f.Cause = of.Tag, of.Cause
				f.Where = of.Where + "; " + f.Where
				f.Evidence = append(f.Evidence, of.Evidence...)
			} else {
				f.Evidence = append(f.Evidence, fmt.Sprintf("the kernel's operator from x and the initial states to y is the reference's (%d calls): the failure is outside that map (the states, or Δ where the probe's inputs hide it)", op.calls))
			}
		}
	}
	if f.Tag == "" {
		f.Tag = "none"
		f.Cause = "no known slip of Mamba-2's prefill fits"
	}
	return f
}

// SSDStep diagnoses a decode step that failed, as SSDPrefill does.
func SSDStep(s *mamba2.Step, got *mamba2.StepOutput) (f report.Finding) {
	defer contained(&f, "diagnose.SSDStep", func() string { return stepShape(s) })
	return diagnoseSSDStep(s, got)
}

func diagnoseSSDStep(s *mamba2.Step, got *mamba2.StepOutput) report.Finding {
	want, sc := mamba2.Decode(s)
	arrays := judge.StepArrays(s, got, want, sc)
	if e := ssdShape(arrays); e != nil {
		return shapeFinding(e)
	}
	ok, ratios := ssdJudged(arrays)
	if ok {
		return report.Finding{Tag: "", Cause: "the failure did not reproduce on this step"}
	}
	f := report.Finding{Where: strings.Join(failingCounts(ratios, judge.Threshold(arrays[0].Computed), "y", "state"), "; ")}
	// a padding row's slot, or a slot no row names, written
	if touched := untouchedWritten(s, got); touched != "" {
		return report.Finding{Tag: "decode:padding-written", Cause: "a state slot that no row updates (a padding row's, or an unused one) was written", Where: touched}
	}
	fits := stepSlips(s, got)
	if len(fits) == 0 {
		f.Tag, f.Cause = "none", "no known slip of the decode step fits"
		return f
	}
	f.Tag, f.Cause = fits[0].Tag, fits[0].Cause
	for _, sl := range fits[1:] {
		f.Also = append(f.Also, sl.Tag)
	}
	return f
}

// updated returns the states of the slots the step's rows update.
func updated(s *mamba2.Step, state []float64) []float64 {
	per := s.Heads * s.Headdim * s.Dstate
	var out []float64
	for b := 0; b < s.Batch; b++ {
		if slot := s.Slot(b); slot >= 0 {
			out = append(out, state[slot*per:(slot+1)*per]...)
		}
	}
	return out
}

func untouchedWritten(s *mamba2.Step, got *mamba2.StepOutput) string {
	var slots []string
	for _, slot := range s.ChangedUntouched(got.State) {
		slots = append(slots, fmt.Sprint(slot))
	}
	if len(slots) == 0 {
		return ""
	}
	return "state slots " + strings.Join(slots, ", ") + fmt.Sprintf(" (indices %v)", s.Indices)
}

// ssdWhere locates the failing elements of a prefill: per array, the
// first failing step, whether it is a chunk's or a sequence's first, and
// the failing heads.
func ssdWhere(p *mamba2.Problem, ratios map[string][]float64, th float64) string {
	var parts []string
	H, P := p.Heads, p.Headdim
	if rs := ratios["y"]; rs != nil {
		first, heads, n := -1, map[int]bool{}, 0
		for i, r := range rs {
			if r > th || math.IsNaN(r) {
				t := i / (H * P) % p.Seqlen
				if first < 0 || t < first {
					first = t
				}
				heads[i/P%H] = true
				n++
			}
		}
		if n > 0 {
			s := fmt.Sprintf("y: %d of %d elements from step %d", n, len(rs), first)
			var notes []string
			if p.Chunk > 0 && first > 0 && first%p.Chunk == 0 {
				notes = append(notes, fmt.Sprintf("the first step of chunk %d", first/p.Chunk))
			}
			for i, sq := range p.Sequences() {
				if first == sq[0] && i > 0 {
					notes = append(notes, fmt.Sprintf("the first step of sequence %d", i))
				}
			}
			if first == 0 {
				notes = append(notes, "from the start")
			}
			if len(heads) < H {
				hs := make([]int, 0, len(heads))
				for h := range heads {
					hs = append(hs, h)
				}
				sort.Ints(hs)
				notes = append(notes, fmt.Sprintf("heads %v of %d", hs, H))
			}
			if len(notes) > 0 {
				s += " (" + strings.Join(notes, ", ") + ")"
			}
			parts = append(parts, s)
		}
	}
	return strings.Join(append(parts, failingCounts(ratios, th, "final_states", "seq_states")...), "; ")
}

// failingCounts says, for each named array, how many of its elements
// fail ("state: 59 of 2048 elements"); arrays with none are left out.
func failingCounts(ratios map[string][]float64, th float64, names ...string) []string {
	var parts []string
	for _, name := range names {
		n := 0
		for _, r := range ratios[name] {
			if r > th || math.IsNaN(r) {
				n++
			}
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s: %d of %d elements", name, n, len(ratios[name])))
		}
	}
	return parts
}

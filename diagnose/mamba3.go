package diagnose

import (
	"fmt"
	"math"
	"strings"

	"ssmverify/judge"
	"ssmverify/mamba3"
	"ssmverify/report"
)

var mamba3Arrays = []string{"y", "angle_state", "ssm_state", "k_state", "v_state"}

// Mamba3 diagnoses a failing forward (or step) of Mamba-3's SISO layer.
// Each slip of mamba3.Slips() is judged at its own magnitudes
// (mamba3.ErrorScaleVariant: a β without Δ grows the state by 1/Δ, and
// its rounding with it). In order:
//
//   - a slip whose reference the kernel's y and states match everywhere,
//     the closest (smallest worst ratio) where several do, the others
//     listed in Also;
//   - with run (nil: skipped), the kernel's operator measured by
//     impulses and related to the reference's by region (the relation
//     that holds on every failing region: measureMamba3Operator), unless
//     the slip that explains nine in ten of the failing elements has
//     that operator itself (slipOperatorAgrees): then that slip, as below;
//   - two slips together (their variants merged), named "a+b";
//   - the slip of a formula that explains the most of the failing
//     elements, if it explains at least nine in ten of them: named, with
//     what it leaves unexplained in Where and the counts in Evidence — a
//     slip and a second fault it does not describe. A slip of precision
//     (mamba3.Slip.Precision: the angle in bf16) is a property a kernel
//     may show beside a fault: it is named only where it explains every
//     failing element, and said in Evidence where it explains most;
//   - else the operator's finding where it has one (a relation on some
//     of the failing regions, or none that fits), else "none", with
//     where the failure shows.
func Mamba3(p *mamba3.Problem, y []float64, st *mamba3.State, run Mamba3Runner) (f report.Finding) {
	defer contained(&f, "diagnose.Mamba3", func() string { return mamba3Shape(p) })
	return diagnoseMamba3(p, y, st, run)
}

func diagnoseMamba3(p *mamba3.Problem, y []float64, st *mamba3.State, run Mamba3Runner) report.Finding {
	want, wst := mamba3.Forward(p)
	sc := mamba3.ErrorScale(p)
	arrays := judge.Mamba3Arrays(p, y, want, st, wst, sc)
	if e := ssdShape(arrays); e != nil {
		return shapeFinding(e)
	}
	ok, ratios := ssdJudged(arrays)
	if ok {
		return report.Finding{Cause: "the failure did not reproduce on this problem"}
	}
	th := judge.Threshold(p.DType)
	f := report.Finding{Where: strings.Join(failingCounts(ratios, th, mamba3Arrays...), "; ")}
	failing := failingSet(ratios, th)
	bulk := failingBulk(ratios, th)
	judgeVariant := func(v mamba3.Variant) (bool, map[string][]float64) {
		ay, ast := mamba3.ForwardVariant(p, v)
		return ssdJudged(judge.Mamba3Arrays(p, y, ay, st, ast, mamba3.ErrorScaleVariant(p, v)))
	}
	slips := mamba3.Slips()
	best, bestExplained := -1, 0
	var property []string
	var bestRatios map[string][]float64
	fitRatio := math.Inf(1)
	for i, s := range slips {
		pass, rs := judgeVariant(s.Variant)
		var produced int
		if s.Precision {
			// the variant's error scale carries its rounding, so that a
			// result merely rounded otherwise (a float64 kernel's states
			// stored in float32) passes it too, and so does a small fault
			// beside the property (past the reference's threshold, within
			// the wider one): a precision is the cause only of a failure
			// it produces — its variant fails this problem by itself, or
			// its own values stray from the reference's at least halfway
			// to the threshold (there an angle the kernel rounds the other
			// way fails alike) at nine in ten of the failure's bulk
			// (failingBulk: elements a little past the threshold by the
			// property and the kernel's other roundings together are not
			// its test) — and where the result lies nearer its values
			alone, stray := variantStray(p, want, wst, sc, s.Variant)
			produced = producedBy(stray, failing, th)
			if pass && (!closerToVariant(p, y, st, sc, ratios, s.Variant) || !alone && 10*producedBy(stray, bulk, th) < 9*len(bulk)) {
				pass = false
			}
		}
		if pass {
			w := worstRatio(rs)
			switch {
			case f.Tag == "":
				f.Tag, f.Cause, fitRatio = s.Tag, s.Cause, w
			case w < fitRatio:
				f.Also = append(f.Also, f.Tag)
				f.Tag, f.Cause, fitRatio = s.Tag, s.Cause, w
			default:
				f.Also = append(f.Also, s.Tag)
			}
			continue
		}
		n := explained(failing, rs, th)
		if s.Precision {
			// a property a kernel may show beside the fault (its angles
			// in bf16): never the cause of a failure it does not produce;
			// said where it produces nine in ten of the failing elements
			// and those it explains lie nearer its values than the
			// reference's
			if 10*produced >= 9*len(failing) && nearerVariant(p, y, st, want, wst, s.Variant, failing, rs, th) {
				property = append(property, fmt.Sprintf("%s explains %d of the %d failing elements: a property of the kernel's arithmetic beside the fault, not its cause", s.Tag, n, len(failing)))
			}
			continue
		}
		if n > bestExplained {
			best, bestExplained, bestRatios = i, n, rs
		}
	}
	if f.Tag != "" {
		return f
	}
	// the slip that explains nine in ten of the failing elements, named
	// with what it leaves said as a second fault
	partial := best >= 0 && 10*bestExplained >= 9*len(failing)
	namedBeside := func() report.Finding {
		g := f
		s, total := slips[best], len(failing)
		g.Tag = s.Tag
		g.Cause = s.Cause + fmt.Sprintf(" — it explains %d of the %d failing elements, not all: a second fault remains", bestExplained, total)
		g.Where = "unexplained by " + s.Tag + ": " + strings.Join(failingCounts(bestRatios, th, mamba3Arrays...), "; ")
		g.Evidence = append(g.Evidence, fmt.Sprintf("failing against the reference: %d elements; against %s: %d", total, s.Tag, total-bestExplained+newlyFailing(failing, bestRatios, th)))
		g.Evidence = append(g.Evidence, property...)
		return g
	}
	// the operator, measured: a relation that holds on every failing
	// region is the cause; one on some of them waits for the catalogue
	var opFinding *report.Finding
	if run != nil {
		op, err := measureMamba3Operator(p, run)
		switch {
		case err != nil:
			f.Evidence = append(f.Evidence, "the operator could not be measured: "+err.Error())
		default:
			if of, ok := op.diagnose(th); ok {
				of.Where += "; " + f.Where
				of.Evidence = append(of.Evidence, property...)
				if !strings.HasSuffix(of.Tag, ":unrelated") && !strings.Contains(of.Cause, "a second fault") {
					// a slip of the catalogue that explains nine in ten of
					// the failing elements and whose own operator the
					// kernel's is: the relation is that slip's (a free
					// factor per column fits β without Δ, and a second
					// fault beside it, as well)
					if partial {
						if held, differ, ok := slipOperatorAgrees(p, op, slips[best].Variant, th); ok {
							g := namedBeside()
							g.Evidence = append(g.Evidence,
								fmt.Sprintf("the kernel's operator is the slip's: it gives %d of the %d entries where the kernel's differs from the reference's (%d calls, impulses)", held, differ, op.calls),
								"the operator alone: ["+of.Tag+"] "+of.Cause)
							return g
						}
					}
					return of
				}
				opFinding = &of
			} else {
				f.Evidence = append(f.Evidence, fmt.Sprintf("the kernel's operator from V and the initial S and v_prev to y and S is the reference's (%d calls): the failure is outside that map (the angle, k_prev or v_prev handed on)", op.calls))
			}
		}
	}
	// a pair with a precision: the precision produces the bulk
	producesBulk := func(v mamba3.Variant) bool {
		_, stray := variantStray(p, want, wst, sc, v)
		return 10*producedBy(stray, bulk, th) >= 9*len(bulk)
	}
	for i := range slips {
		for j := i + 1; j < len(slips); j++ {
			v, ok := mamba3.Merge(slips[i].Variant, slips[j].Variant)
			if !ok {
				continue
			}
			precision := slips[i].Precision || slips[j].Precision
			if pass, _ := judgeVariant(v); pass && (!precision || closerToVariant(p, y, st, sc, ratios, v) && producesBulk(v)) {
				f.Tag = slips[i].Tag + "+" + slips[j].Tag
				f.Cause = slips[i].Cause + "; and " + slips[j].Cause
				return f
			}
		}
	}
	total := len(failing)
	if partial {
		return namedBeside()
	}
	// the slices, measured: a failure that stays at its batch or head
	// indices, or that crosses between slices
	if run != nil {
		probe := func(q *mamba3.Problem, _ *mamba3.Cotangent) ([]judge.Array, error) {
			y, st, err := run(q)
			if err != nil {
				return nil, err
			}
			w, wst := mamba3.Forward(q)
			return judge.Mamba3Arrays(q, y, w, st, wst, mamba3.ErrorScale(q)), nil
		}
		if sf, ok := mamba3Slices(p, nil, arrays, probe); ok {
			g := report.Finding{Tag: sf.forwardTag(), Cause: strings.Join(sf.arrays, ", ") + " " + sf.cause, Where: f.Where}
			g.Evidence = append(append(g.Evidence, sf.evidence...), property...)
			if opFinding != nil {
				g.Evidence = append(g.Evidence, "the operator: ["+opFinding.Tag+"] "+opFinding.Cause)
			}
			return g
		}
	}
	if opFinding != nil {
		return *opFinding
	}
	f.Evidence = append(f.Evidence, property...)
	f.Tag, f.Cause = "none", "no known slip of Mamba-3's exponential-trapezoidal layer fits"
	if best >= 0 {
		f.Evidence = append(f.Evidence, fmt.Sprintf("closest: %s explains %d of %d failing elements", slips[best].Tag, bestExplained, total))
	}
	return f
}

// closerToVariant reports whether the kernel's result lies nearer the
// variant's values than the reference's (toRef: its ratios against the
// reference), both measured with the reference's error scale sc.
func closerToVariant(p *mamba3.Problem, y []float64, st *mamba3.State, sc *mamba3.Scale, toRef map[string][]float64, v mamba3.Variant) bool {
	vy, vst := mamba3.ForwardVariant(p, v)
	_, toVar := ssdJudged(judge.Mamba3Arrays(p, y, vy, st, vst, sc))
	return worstRatio(toVar) < worstRatio(toRef)
}

// failingBulk is the set of failing elements within two orders of
// magnitude of the worst ratio (all past the threshold where the worst is
// not finite): where the failure lies, without the elements a little past
// the threshold that any fault's ordinary roundings add.
func failingBulk(ratios map[string][]float64, th float64) map[[2]int]bool {
	return failingSet(ratios, bulkCut(worstRatio(ratios), th))
}

// bulkCut is the ratio past which a failing element is of the failure's
// bulk: within two orders of magnitude of the worst, or the threshold
// where the worst is not finite.
func bulkCut(worst, th float64) float64 {
	if math.IsInf(worst, 0) || math.IsNaN(worst) {
		return th
	}
	return math.Max(th, worst/100)
}

// variantStray judges the variant's own values against the reference's
// (want, wst) on the reference's error scale sc: whether they fail p by
// themselves (the property shows on this problem alone), and their ratios.
func variantStray(p *mamba3.Problem, want []float64, wst *mamba3.State, sc *mamba3.Scale, v mamba3.Variant) (alone bool, ratios map[string][]float64) {
	vy, vst := mamba3.ForwardVariant(p, v)
	ok, rs := ssdJudged(judge.Mamba3Arrays(p, vy, want, vst, wst, sc))
	return !ok, rs
}

// producedBy counts the failing elements where the variant's own values
// stray from the reference's at least halfway to the threshold (stray:
// variantStray's ratios): the elements a precision would make fail by
// itself. A kernel with the property fails where the variant strays, an
// angle rounded the other way by a hair included (both lie about half a
// unit from the reference there); a fault beside a property the problem
// does not bring out (2048 tokens: the error model's angle term has grown
// past it) fails where the variant does not.
func producedBy(stray map[string][]float64, failing map[[2]int]bool, th float64) int {
	n := 0
	for e := range failing {
		if r := stray[mamba3Arrays[e[0]]]; e[1] < len(r) && !(r[e[1]] <= th/2) {
			n++
		}
	}
	return n
}

// nearerVariant reports whether nine in ten of the failing elements that
// pass under the variant (ratios rs) lie nearer its values than the
// reference's: the variant's error scale carries its rounding, so that a
// fault small beside it passes too.
func nearerVariant(p *mamba3.Problem, y []float64, st *mamba3.State, want []float64, wst *mamba3.State, v mamba3.Variant, failing map[[2]int]bool, rs map[string][]float64, th float64) bool {
	vy, vst := mamba3.ForwardVariant(p, v)
	if st == nil {
		st = &mamba3.State{}
	}
	got := [][]float64{y, st.Angle, st.SSM, st.K, st.V}
	ref := [][]float64{want, wst.Angle, wst.SSM, wst.K, wst.V}
	alt := [][]float64{vy, vst.Angle, vst.SSM, vst.K, vst.V}
	n, near := 0, 0
	for e := range failing {
		a, i := e[0], e[1]
		if r := rs[mamba3Arrays[a]]; i >= len(r) || !(r[i] <= th) || i >= len(got[a]) {
			continue
		}
		n++
		if math.Abs(got[a][i]-alt[a][i]) < math.Abs(got[a][i]-ref[a][i]) {
			near++
		}
	}
	return n > 0 && 10*near >= 9*n
}

func worstRatio(rs map[string][]float64) float64 {
	var w float64
	for _, r := range rs {
		for _, x := range r {
			w = math.Max(w, x)
		}
	}
	return w
}

// failingSet is the set of (array, element) beyond the threshold.
func failingSet(ratios map[string][]float64, th float64) map[[2]int]bool {
	out := map[[2]int]bool{}
	for ai, name := range mamba3Arrays {
		for i, r := range ratios[name] {
			if !(r <= th) {
				out[[2]int{ai, i}] = true
			}
		}
	}
	return out
}

// explained counts the failing elements that pass under rs, less the
// elements that pass against the reference and fail under rs (a variant
// that "explains" by breaking what was right explains nothing).
func explained(failing map[[2]int]bool, rs map[string][]float64, th float64) int {
	n := 0
	for e := range failing {
		if r := rs[mamba3Arrays[e[0]]]; e[1] < len(r) && r[e[1]] <= th {
			n++
		}
	}
	return max(0, n-newlyFailing(failing, rs, th))
}

func newlyFailing(failing map[[2]int]bool, rs map[string][]float64, th float64) int {
	n := 0
	for ai, name := range mamba3Arrays {
		for i, r := range rs[name] {
			if !(r <= th) && !failing[[2]int{ai, i}] && !math.IsNaN(r) {
				n++
			}
		}
	}
	return n
}

// slipOperatorAgrees reports whether slip v's own operator — its
// variant of the reference, measured by the same impulses with the
// variant's error scale — gives nine in ten of the kernel's operator's
// entries that differ from the reference's (held of differ).
func slipOperatorAgrees(p *mamba3.Problem, op *operator, v mamba3.Variant, th float64) (held, differ int, ok bool) {
	vop, err := measureMamba3OperatorScaled(p, variantRunner(v), func(q *mamba3.Problem) *mamba3.Scale { return mamba3.ErrorScaleVariant(q, v) })
	if err != nil {
		return 0, 0, false
	}
	held, differ = op.agreement(vop, th)
	return held, differ, differ > 0 && 10*held >= 9*differ
}

// variantRunner is the float64 reference with slip v, as a kernel.
func variantRunner(v mamba3.Variant) Mamba3Runner {
	return func(p *mamba3.Problem) ([]float64, *mamba3.State, error) {
		y, st := mamba3.ForwardVariant(p, v)
		return y, st, nil
	}
}

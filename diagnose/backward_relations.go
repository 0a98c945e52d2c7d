package diagnose

import (
	"fmt"
	"math"
	"strings"

	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// gradientRelation reads, for the failing gradients in order (worst
// first), a relation of the kernel's gradient to the reference's that no
// catalogued slip states (the relations of diagnose.Relate, for the ABI's
// gradients):
//
//   - bwd-zero:NAME — the gradient is zero where the reference's is not:
//     never computed, or never written;
//   - bwd-shift:NAME — the gradient of a step (du, ddelta, dz) is the
//     reference's of the step before or after: an index off by one in
//     time (the step at the row's end, which has no counterpart, aside;
//     rows of at least minShiftSteps steps, so that the steps compared
//     outnumber the one set aside: on a row of one step, which a shrunk
//     case often is, every problem would "be" a shift);
//   - bwd-wrong-slot:NAME — the reference's total in other elements: a sum
//     over the wrong axis or into the wrong slot.
//
// Each is checked by undoing it and judging the gradient again: the
// relation holds where the undone gradient passes.
func gradientRelation(p *ssm.Problem, got, want *ssm.Grads, sc *mamba1.GradScale, dt ssm.DType, failing []judge.GradWorst) (tag, cause string, ok bool) {
	wf, gf := want.ByName(), got.ByName()
	for _, fw := range failing {
		name := fw.Name
		g, w := gf[name], wf[name]
		if len(g) != len(w) || len(g) == 0 {
			continue
		}
		if allZero(g) && !allZero(w) {
			return "bwd-zero:" + name, name + " is zero where the reference's is not: never computed, or never written", true
		}
		if (name == "du" || name == "ddelta" || name == "dz") && p.Seqlen >= minShiftSteps {
			L := p.Seqlen
			for _, k := range []int{1, -1} {
				// got[t] = want[t+k]: undone, got'[t+k] = got[t]; the step
				// with no counterpart takes the reference's value
				un := append([]float64(nil), w...)
				for i := range g {
					if t := i % L; t+k >= 0 && t+k < L {
						un[i+k] = g[i]
					}
				}
				if gradPasses(p, got, name, un, dt, want, sc) {
					return "bwd-shift:" + name, fmt.Sprintf("%s is the reference's gradient of the step %+d: an index off by one in time", name, k), true
				}
			}
		}
		if sameTotal(g, w, name, p, got, dt, want, sc) {
			return "bwd-wrong-slot:" + name, name + " has the reference's total in other elements: a sum over the wrong axis or into the wrong slot", true
		}
	}
	return "", "", false
}

// minShiftSteps is the shortest row on which a shift in time is told.
const minShiftSteps = 8

// gradPasses reports whether got with its gradient name replaced by v
// (of the same length) passes for that gradient.
func gradPasses(p *ssm.Problem, got *ssm.Grads, name string, v []float64, dt ssm.DType, want *ssm.Grads, sc *mamba1.GradScale) bool {
	g := got.Clone()
	copy(g.ByName()[name], v)
	return !contains(judge.CompareGrads(p, g, dt, want, sc).Failing(dt), name)
}

// sameTotal reports whether g sums to w's total within the error model's
// allowance for the sum (the sum of the elements' scales) while w's total
// is larger than that allowance: the reference's mass in other elements.
func sameTotal(g, w []float64, name string, p *ssm.Problem, got *ssm.Grads, dt ssm.DType, want *ssm.Grads, sc *mamba1.GradScale) bool {
	s := sc.Scale.ByName()[name]
	if len(s) != len(w) {
		return false
	}
	var sg, sw, ss float64
	for i := range g {
		sg, sw, ss = sg+g[i], sw+w[i], ss+s[i]
	}
	allow := judge.Threshold(dt) * dt.Precision().UnitRoundoff() * ss
	return math.Abs(sg-sw) <= allow && math.Abs(sw) > 4*allow
}

func allZero(v []float64) bool {
	for _, x := range v {
		if x != 0 {
			return false
		}
	}
	return true
}

// placedInBackward says where a failure is when no slip or relation
// explains it: the library's forward on the same problem is right (judged
// as the forward's tests judge it), so the fault is in the backward, in
// the gradients named, over the steps given. ok is false when the forward
// is wrong too (the forward's diagnosis is then the place to start) or
// cannot be run.
func placedInBackward(l Differentiator, p *ssm.Problem, got, want *ssm.Grads, sc *mamba1.GradScale, dt ssm.DType, names []string, nonFinite int) (tag, cause string, ok bool) {
	out, err := l.Scan(p, dt)
	if err != nil {
		return "", "", false
	}
	if c, err := judge.CompareScan(p, out, dt, nil, nil); err != nil || !c.Passed(dt) {
		return "", "", false
	}
	if len(names) == 0 {
		return "", "", false
	}
	steps := ""
	if lo, hi, _, ok := stepsWrong(p, got, want, sc, dt, false); ok {
		steps = fmt.Sprintf(", at steps %d to %d of %d", lo, hi, p.Seqlen)
	}
	what := strings.Join(names, ",")
	if nonFinite > 0 {
		what += fmt.Sprintf(" (%d non-finite)", nonFinite)
	}
	return "bwd-gradients:" + what, fmt.Sprintf("the library's forward is right on this problem and its gradients %s are wrong%s: a fault of the backward "+
		"that no known slip and no relation to the reference (a constant factor, zero, a shift in time, a sum in the wrong slots, a derivative alone) describes", what, steps), true
}

package report

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"ssmverify/judge"
	"ssmverify/ssm"
)

// BackwardCell aggregates the backward-pass comparisons of one method ×
// dtype × real/complex A: how many, how many failed, and per gradient the
// worst ratio and ulp.
type BackwardCell struct {
	Tally
	Grads []GradStat `json:"grads"`
}

// GradStat is one gradient's worst ratio and ulp over a cell's checks.
type GradStat struct {
	Name     string `json:"name"`
	MaxRatio Num    `json:"max_ratio"`
	MaxULP   Num    `json:"max_ulp"`
}

// AddBackward records one backward comparison made by test.
func (r *Report) AddBackward(test string, m ssm.Method, dt ssm.DType, isComplex bool, c judge.GradComparison) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cell := r.cell(m, dt, isComplex)
	if cell.Backward == nil {
		cell.Backward = &BackwardCell{}
	}
	b := cell.Backward
	w := c.Worst()
	worst := test + ": " + w.String()
	if c.NonFinite > 0 || len(c.Missing) > 0 {
		worst += "; non-finite or missing gradients"
	}
	b.add(test, w.Ratio, c.Passed(dt), worst)
	for _, g := range c.Grads {
		k := slices.IndexFunc(b.Grads, func(s GradStat) bool { return s.Name == g.Name })
		if k < 0 {
			// in ABI order whatever order the checks arrive in (tests run in
			// parallel), so that reports of two runs compare line by line
			b.Grads = append(b.Grads, GradStat{Name: g.Name})
			slices.SortStableFunc(b.Grads, func(x, y GradStat) int { return gradOrder(x.Name) - gradOrder(y.Name) })
			k = slices.IndexFunc(b.Grads, func(s GradStat) bool { return s.Name == g.Name })
		}
		s := &b.Grads[k]
		if g.Ratio > float64(s.MaxRatio) || math.IsNaN(g.Ratio) {
			s.MaxRatio = Num(round3(g.Ratio))
		}
		if g.ULP > float64(s.MaxULP) {
			s.MaxULP = Num(round3(g.ULP))
		}
	}
}

// gradOrder is a gradient's place in ABI order (ssm.GradNames); names it
// does not know go last.
func gradOrder(name string) int {
	if i := slices.Index(ssm.GradNames, name); i >= 0 {
		return i
	}
	return len(ssm.GradNames)
}

// backwardSummary is the summary's table of the backward pass: per cell
// with backward checks, the verdict, the checks and, per gradient, the
// worst ratio; "" when no backward was judged.
func (r *Report) backwardSummary() string {
	var b strings.Builder
	for _, c := range r.Cells {
		bw := c.Backward
		if bw == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\nbackward pass (max ratio per gradient; threshold as the forward's):\n")
		}
		v := "ok"
		if bw.Failures > 0 {
			v = "FAIL"
		}
		var grads []string
		for _, g := range bw.Grads {
			grads = append(grads, fmt.Sprintf("%s %.3g", g.Name, float64(g.MaxRatio)))
		}
		fmt.Fprintf(&b, "%-10s %-5s %-8s %-5s %7d  %s\n", c.Method, c.DType, c.Kind, v, bw.Checks, strings.Join(grads, ", "))
	}
	return b.String()
}

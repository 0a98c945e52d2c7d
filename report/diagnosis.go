package report

import (
	"fmt"
	"slices"
	"strings"

	"ssmverify/ssm"
)

// Finding is the diagnosis of one failing scan or backward pass (package
// diagnose fills it): structured, so that report.json carries the cause as
// data and every reader (the summary, the gate's terminal, report.md, the
// mutation tester) shows the same thing.
type Finding struct {
	// Tag names the cause for machines ("no-D", "method:zoh",
	// "bilinear-sign", "bwd-factor:dD", …); "none" when no diagnosis fits,
	// "" when the failure did not reproduce.
	Tag string `json:"tag"`
	// Cause says in words what the kernel computes instead (the formula).
	Cause string `json:"cause"`
	// Also lists other slips the result is equally consistent with.
	Also []string `json:"also,omitempty"`
	// Needs lists the features the failure needs: switched off one at a
	// time, each of these makes the kernel pass.
	Needs []string `json:"needs,omitempty"`
	// Where says which array, part and steps fail.
	Where string `json:"where"`
	// Evidence carries the numbers behind the cause (fitted constants,
	// probes, the worst element).
	Evidence []string `json:"evidence,omitempty"`
}

// String is the finding on one line: the cause, then what else fits, what
// it needs, where it shows and the evidence.
func (f Finding) String() string {
	var b strings.Builder
	b.WriteString(f.Cause)
	if len(f.Also) > 0 {
		fmt.Fprintf(&b, " (equally consistent: %s)", strings.Join(f.Also, ", "))
	}
	if d := f.Detail(); d != "" {
		b.WriteString("; " + d)
	}
	return b.String()
}

// Detail is what the finding says beyond its cause: the features it needs,
// where it shows and the evidence.
func (f Finding) Detail() string {
	var parts []string
	if len(f.Needs) > 0 {
		parts = append(parts, "needs "+strings.Join(f.Needs, ", "))
	}
	if f.Where != "" {
		parts = append(parts, f.Where)
	}
	return strings.Join(append(parts, f.Evidence...), "; ")
}

// Precision reports whether the finding names a loss of precision (the
// error's size is that of a narrower arithmetic) rather than a formula or a
// structure: the diagnosis of last resort.
func (f Finding) Precision() bool { return strings.HasPrefix(f.Tag, "narrow:") }

// Named reports whether the finding names a cause (a formula, a structure,
// a precision), not "none", an error or a failure that did not reproduce.
func (f Finding) Named() bool { return f.Tag != "" && f.Tag != "none" && f.Tag != "error" }

// Diagnosis is the cause of the failures of one test in one cell.
type Diagnosis struct {
	Test   string `json:"test"`
	Method string `json:"method"`
	DType  string `json:"dtype"`
	Kind   string `json:"kind"`
	// Backward is true for a diagnosis of the backward pass.
	Backward bool `json:"backward,omitempty"`
	Finding
	// Text is the finding on one line (Finding.String), for readers of
	// report.json that want no structure.
	Text string `json:"finding"`
	// As names the cell whose diagnosis this one takes (the same method's
	// fp32 or fp64 cell; see Report.settleDiagnoses), and Own is what this
	// cell's own diagnosis said before; both empty otherwise.
	As  string `json:"as,omitempty"`
	Own string `json:"own,omitempty"`
}

// Cell names the diagnosis' cell: method/dtype/kind.
func (d Diagnosis) Cell() string { return d.Method + "/" + d.DType + "/" + d.Kind }

// AddDiagnosis records the cause of a failure of test's forward scan in a
// cell.
func (r *Report) AddDiagnosis(test string, m ssm.Method, dt ssm.DType, isComplex bool, f Finding) {
	r.addDiagnosis(test, m, dt, isComplex, false, f)
}

// AddBackwardDiagnosis records the cause of a failure of test's backward
// pass in a cell.
func (r *Report) AddBackwardDiagnosis(test string, m ssm.Method, dt ssm.DType, isComplex bool, f Finding) {
	r.addDiagnosis(test, m, dt, isComplex, true, f)
}

func (r *Report) addDiagnosis(test string, m ssm.Method, dt ssm.DType, isComplex, backward bool, f Finding) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Diagnoses = append(r.Diagnoses, Diagnosis{Test: test, Method: m.String(), DType: dt.String(), Kind: ssm.AKind(isComplex),
		Backward: backward, Finding: f, Text: f.String()})
}

// settleDiagnoses applies the order of precedence between diagnoses, so
// that none can send the reader after the wrong cause:
//
//  1. The forward before the backward: a backward diagnosis in a method
//     and A whose forward has a formula or structural diagnosis (in any
//     dtype) takes the forward's. The gradients of a wrong forward are
//     wrong whatever the backward does, and the slips of the backward that
//     fit them best ("ddelta_bias times −5e12") are accidents of the
//     forward's error; fix the forward, then judge the backward again.
//  2. The wider dtype before the 16-bit one: a 16-bit cell whose own
//     diagnosis is a precision loss, or none, takes the formula or
//     structural diagnosis of the same method, A and direction in fp32
//     (else fp64). A kernel whose formula is wrong is wrong in every dtype;
//     in 16 bits the rounding of inputs and output blurs the formula's
//     signature, and the precision diagnosis that can then fit best
//     ("rounding with 8-bit significands") names the wrong cause.
//
// The diagnosis taken names its source (As) and keeps the cell's own
// (Own) and where the failure shows.
func (r *Report) settleDiagnoses() {
	formula := func(d Diagnosis) bool { return d.Named() && !d.Precision() && d.As == "" }
	take := func(i int, w Diagnosis) {
		d := r.Diagnoses[i]
		own, where := "["+d.Tag+"] "+d.Text, d.Where
		d.Finding = w.Finding
		d.Finding.Where = where // where it shows is this cell's own
		d.Text, d.As, d.Own = d.Finding.String(), w.Cell(), own
		if w.Backward != d.Backward {
			d.As = w.Cell() + " forward"
		}
		r.Diagnoses[i] = d
	}
	forward := func(d Diagnosis) (Diagnosis, bool) {
		for _, dt := range []string{ssm.F32.String(), ssm.F64.String(), ssm.F16.String(), ssm.BF16.String()} {
			for _, w := range r.Diagnoses {
				if !w.Backward && w.DType == dt && w.Method == d.Method && w.Kind == d.Kind && formula(w) {
					return w, true
				}
			}
		}
		return Diagnosis{}, false
	}
	for i, d := range r.Diagnoses {
		if d.Backward && d.Tag != "" && d.As == "" {
			if w, ok := forward(d); ok {
				take(i, w)
			}
		}
	}
	wide := func(d Diagnosis, dt string) (Diagnosis, bool) {
		for _, w := range r.Diagnoses {
			if w.DType == dt && w.Method == d.Method && w.Kind == d.Kind && w.Backward == d.Backward && formula(w) {
				return w, true
			}
		}
		return Diagnosis{}, false
	}
	for i, d := range r.Diagnoses {
		if (d.DType != ssm.F16.String() && d.DType != ssm.BF16.String()) || d.As != "" || formula(d) || d.Tag == "" {
			continue
		}
		for _, dt := range []string{ssm.F32.String(), ssm.F64.String()} {
			if w, ok := wide(d, dt); ok {
				take(i, w)
				break
			}
		}
	}
}

// DiagnosisGroup is one cause and everything it explains.
type DiagnosisGroup struct {
	Tag, Cause string
	Backward   bool
	// Variants counts the other wordings of the same cause merged into
	// the group (a fitted constant that differs from problem to problem:
	// exp-scaled's c, "explains k of n"): one entry per cause.
	Variants  int
	Cells     []string // method/dtype/kind, in report order
	Inherited []string // cells that take this diagnosis from a wider dtype's
	Tests     []string // top-level tests
	Example   Diagnosis
}

// DiagnosisGroups groups the diagnoses by cause (tag and direction; for
// "none" and "not-reproduced", by their words too),
// the causes explaining most cells first: one line per cause is what a
// person reads, not one per test and cell.
func (r *Report) DiagnosisGroups() []DiagnosisGroup {
	r.mu.Lock()
	defer r.mu.Unlock()
	return groupDiagnoses(r.Diagnoses)
}

func groupDiagnoses(ds []Diagnosis) []DiagnosisGroup {
	var gs []DiagnosisGroup
	var wordings []map[string]bool // each group's causes' words, while grouping
	for _, d := range ds {
		if d.Tag == "" {
			// The failure did not reproduce on the problem the diagnosis
			// scanned (a property's shrunk case, a prefix): said as such,
			// never left blank.
			d.Tag = "not-reproduced"
			if d.Cause == "" {
				d.Cause = "the failure does not reproduce on the problem the diagnosis scans"
			}
		}
		backward := d.Backward && !strings.HasSuffix(d.As, " forward") // a backward that takes the forward's cause is grouped with it
		unnamed := d.Tag == "none" || d.Tag == "not-reproduced"
		k := slices.IndexFunc(gs, func(g DiagnosisGroup) bool {
			return g.Tag == d.Tag && g.Backward == backward && (!unnamed || g.Cause == d.Cause)
		})
		if k < 0 {
			gs = append(gs, DiagnosisGroup{Tag: d.Tag, Cause: d.Cause, Backward: backward, Example: d})
			wordings = append(wordings, map[string]bool{d.Cause: true})
			k = len(gs) - 1
		}
		g := &gs[k]
		if !wordings[k][d.Cause] {
			wordings[k][d.Cause] = true
			g.Variants++
		}
		if d.As != "" {
			name := d.Cell()
			if d.Backward {
				name += " backward"
			}
			if !slices.Contains(g.Inherited, name) && !slices.Contains(g.Cells, name) {
				g.Inherited = append(g.Inherited, name)
			}
		} else if !slices.Contains(g.Cells, d.Cell()) {
			g.Cells = append(g.Cells, d.Cell())
			g.Inherited = slices.DeleteFunc(g.Inherited, func(c string) bool { return c == d.Cell() })
		}
		if t := topLevel(d.Test); !slices.Contains(g.Tests, t) {
			g.Tests = append(g.Tests, t)
		}
	}
	slices.SortStableFunc(gs, func(a, b DiagnosisGroup) int {
		// Named causes before "none" and "not-reproduced", then by how
		// much they explain.
		if an, bn := a.Tag != "none" && a.Tag != "not-reproduced", b.Tag != "none" && b.Tag != "not-reproduced"; an != bn {
			if an {
				return -1
			}
			return 1
		}
		return (len(b.Cells) + len(b.Inherited)) - (len(a.Cells) + len(a.Inherited))
	})
	return gs
}

// DiagnosisTable is the diagnoses as a person reads them first: one entry
// per cause with the cells and tests it covers and one example's evidence,
// never cut. indent prefixes every line.
func DiagnosisTable(gs []DiagnosisGroup, indent string) string {
	if len(gs) == 0 {
		return ""
	}
	var b strings.Builder
	for _, g := range gs {
		dir := ""
		if g.Backward {
			dir = " (backward)"
		}
		fmt.Fprintf(&b, "%s[%s]%s %s%s\n", indent, g.Tag, dir, g.Cause, g.VariantNote())
		cells := strings.Join(g.Cells, ", ")
		if len(g.Inherited) > 0 {
			if cells != "" {
				cells += "; "
			}
			cells += strings.Join(g.Inherited, ", ") + " (as the same method's forward or wider cell, which names the cause: fix it first)"
		}
		fmt.Fprintf(&b, "%s    cells: %s\n", indent, cells)
		fmt.Fprintf(&b, "%s    tests: %s\n", indent, strings.Join(g.Tests, ", "))
		if d := g.Example.Detail(); d != "" {
			fmt.Fprintf(&b, "%s    e.g. %s %s: %s\n", indent, g.Example.Test, g.Example.Cell(), d)
		}
	}
	return b.String()
}

// VariantNote says how many other wordings of the cause the group holds.
func (g DiagnosisGroup) VariantNote() string {
	if g.Variants == 0 {
		return ""
	}
	return fmt.Sprintf(" (and %d more wordings of this cause: its fitted constants differ from problem to problem)", g.Variants)
}

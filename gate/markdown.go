package gate

import (
	"fmt"
	"math"
	"strings"

	"ssmverify/report"
)

// Markdown is report.md: short enough for a pull-request comment. The
// verdict comes first, then the causes of the failures (the diagnosis
// table, one entry per cause with the cells and tests it covers), then
// every failure with the first line of its reason and the one-line command
// that reproduces it, then what could not be decided, performance, the
// numbers and plots. Nothing is cut mid-sentence: a long list is cut at
// an entry, and says how many more report.json holds.
func Markdown(r *report.Report) string {
	var b strings.Builder
	failed := r.Failed()
	badge := map[string]string{report.VerdictPass: "✅ PASS", report.VerdictFail: "❌ FAIL", report.VerdictUndecided: "⚠️ UNDECIDED",
		report.VerdictError: "⛔ ERROR"}[r.Verdict]
	passed := 0
	for _, t := range r.Tests {
		if t.Outcome == report.Passed {
			passed++
		}
	}
	fmt.Fprintf(&b, "## ssmverify gate: %s\n\n", badge)
	fmt.Fprintf(&b, "%d tests passed, %d failed", passed, len(failed))
	regressions := 0
	for _, p := range r.Performance {
		if p.Verdict == report.Regression {
			regressions++
		}
	}
	if len(r.Performance) > 0 {
		fmt.Fprintf(&b, ", %d performance regressions", regressions)
	}
	fmt.Fprintf(&b, " (exit %d)", r.ExitCode)
	if r.Library.Path != "" {
		fmt.Fprintf(&b, ". Library `%s` (%s, %s), sha256 `%.12s`", r.Library.Path, r.Library.Backend, r.Library.Device, r.Library.SHA256)
	}
	if r.RapidSeed != 0 {
		fmt.Fprintf(&b, "; property tests with `RAPID_SEED=%d`.\n\n", r.RapidSeed)
	} else {
		fmt.Fprintf(&b, "; property tests with fresh seeds (not reproducible: rerun with `-rapid-seed`).\n\n")
	}
	for _, p := range r.Bridged {
		adapter := ""
		if p.Bridge != nil {
			adapter = fmt.Sprintf(" (`%s`)", p.Bridge.Adapter)
		}
		fmt.Fprintf(&b, "Behind the bridge, `%s`: `%s`%s on %s.\n\n", p.Package, p.Kernel.Path, adapter, p.Kernel.Device)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "- **error:** %s\n", e)
	}
	if len(r.Errors) > 0 {
		b.WriteString("\n")
	}
	if gs := r.DiagnosisGroups(); len(gs) > 0 {
		b.WriteString("### Causes (diagnoses: what the kernel computes instead)\n\n")
		for _, g := range gs {
			dir := ""
			if g.Backward {
				dir = " (backward)"
			}
			fmt.Fprintf(&b, "- **`%s`**%s %s%s\n", g.Tag, dir, g.Cause, g.VariantNote())
			cells := strings.Join(g.Cells, ", ")
			if len(g.Inherited) > 0 {
				if cells != "" {
					cells += "; "
				}
				cells += strings.Join(g.Inherited, ", ") + " (as the same method's forward or wider cell: fix it first)"
			}
			fmt.Fprintf(&b, "  - cells: %s\n  - tests: %s\n", cells, strings.Join(g.Tests, ", "))
			if d := g.Example.Detail(); d != "" {
				fmt.Fprintf(&b, "  - e.g. %s %s: %s\n", g.Example.Test, g.Example.Cell(), d)
			}
		}
		b.WriteString("\n")
	}
	if leaves := r.LeafFailures(); len(leaves) > 0 {
		b.WriteString("### Failures\n\n")
		const show = 25
		for i, t := range leaves {
			if i == show {
				fmt.Fprintf(&b, "- … and %d more (junit.xml, report.json)\n", len(leaves)-show)
				break
			}
			fmt.Fprintf(&b, "- `%s` %s", t.Package, t.Name)
			if t.Task != "" && len(r.Tasks) > 1 {
				fmt.Fprintf(&b, " (task %s)", t.Task)
			}
			if t.Reason != "" {
				fmt.Fprintf(&b, ": %s", t.Reason)
			}
			fmt.Fprintf(&b, "\n  `%s`\n", t.Reproduce)
		}
		b.WriteString("\n")
	}
	var undecided []string
	for _, t := range r.Tests {
		if t.Outcome == report.Undecided {
			undecided = append(undecided, fmt.Sprintf("`%s` %s: %s", t.Package, t.Name, t.Reason))
		}
	}
	for _, u := range r.Undecided {
		if u.Part != "" {
			undecided = append(undecided, fmt.Sprintf("%s (%s): %s", u.Test, u.Part, u.Reason))
		}
	}
	if len(undecided) > 0 {
		b.WriteString("### Undecided (could not be decided on this machine: not a pass)\n\n")
		for _, u := range undecided {
			fmt.Fprintf(&b, "- %s\n", u)
		}
		b.WriteString("\n")
	}
	if regressions > 0 {
		b.WriteString("### Regressions\n\n")
		for _, p := range r.Performance {
			if p.Verdict == report.Regression {
				fmt.Fprintf(&b, "- **%s**: %s\n  `SSMK_LIB=%s build/gate -pkgs verify -run Check7 -baseline %s`\n", p.Method, p.Reason, r.Library.Path, r.Baseline)
			}
		}
		b.WriteString("\n")
	}
	if len(r.Performance) > 0 {
		b.WriteString("### Performance (Check7, µs per launch, median [95% CI])\n\n")
		if r.Baseline != "" {
			fmt.Fprintf(&b, "Against `%s`.\n\n| method | baseline | this run | Δ | p | verdict |\n|---|---|---|---|---|---|\n", r.Baseline)
			for _, p := range r.Performance {
				fmt.Fprintf(&b, "| %s | %.1f [%.1f, %.1f] | %.1f [%.1f, %.1f] | %+.1f%% | %.3g | **%s**: %s |\n", p.Method,
					p.BaseMedian, p.BaseLo, p.BaseHi, p.Median, p.Lo, p.Hi, p.DeltaPct, p.P, p.Verdict, p.Reason)
			}
		} else {
			b.WriteString("No baseline (`make gate BASELINE=file` compares).\n\n| method | this run | n |\n|---|---|---|\n")
			for _, p := range r.Performance {
				fmt.Fprintf(&b, "| %s | %.1f [%.1f, %.1f] | %d |\n", p.Method, p.Median, p.Lo, p.Hi, p.N)
			}
		}
		b.WriteString("\n")
	}
	cellTable(&b, r, false, "Accuracy: largest scaled error ratio per method (threshold 4; n/s: declared not supported; -: not judged)")
	cellTable(&b, r, true, "Backward: largest scaled error ratio of any gradient per method (threshold 4)")
	for _, p := range r.Plots {
		fmt.Fprintf(&b, "![%s](%s)\n", strings.TrimSuffix(p, ".png"), p)
	}
	if len(r.Plots) > 0 {
		b.WriteString("\n")
	}
	host := ""
	if r.Host != nil {
		host = r.Host.Hostname
	}
	fmt.Fprintf(&b, "<sub>%s · %s · tasks %s · report.json (schema %s), junit.xml</sub>\n", r.Started, host, strings.Join(r.Tasks, ", "), report.ReportSchema)
	return b.String()
}

// cellTable writes, as a collapsed table under summary, every cell's
// largest ratio (the backward's where backward is set): "n/s" where the
// library declares the cell unsupported, "-" where nothing was compared,
// "inf" and "nan" as such.
func cellTable(b *strings.Builder, r *report.Report, backward bool, summary string) {
	var rows []string
	for _, c := range r.Cells {
		v := ratioText(float64(c.MaxRatio), c.Checks)
		if backward {
			if c.Backward == nil {
				continue
			}
			v = ratioText(float64(c.Backward.MaxRatio), c.Backward.Checks)
		}
		if c.Support == "no" {
			v = "n/s"
		}
		if (c.Failures > 0 && !backward) || (backward && c.Backward.Failures > 0) {
			v = "**" + v + " FAIL**"
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s |", c.Method, c.DType, c.Kind, v))
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "<details><summary>%s</summary>\n\n| method | dtype | A | max ratio |\n|---|---|---|---|\n%s\n\n</details>\n\n", summary, strings.Join(rows, "\n"))
}

func ratioText(v float64, checks int) string {
	switch {
	case checks == 0:
		return "-"
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	}
	return fmt.Sprintf("%.3g", v)
}

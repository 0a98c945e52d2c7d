package gate

import (
	"fmt"
	"strings"
)

// Markdown is report.md: short enough for a pull-request comment. The
// verdict comes first, then every failure with the one-line command that
// reproduces it, then performance, then the numbers and plots.
func Markdown(r *Report) string {
	var b strings.Builder
	failed := r.Failed()
	badge := map[string]string{Pass: "✅ PASS", Fail: "❌ FAIL", Undecided: "⚠️ UNDECIDED", SetupError: "⛔ ERROR"}[r.Verdict]
	passed := 0
	for _, t := range r.Tests {
		if t.Result == Pass {
			passed++
		}
	}
	fmt.Fprintf(&b, "## ssmverify gate: %s\n\n", badge)
	fmt.Fprintf(&b, "%d tests passed, %d failed", passed, len(failed))
	regressions := 0
	for _, p := range r.Performance {
		if p.Verdict == Regression {
			regressions++
		}
	}
	if len(r.Performance) > 0 {
		fmt.Fprintf(&b, ", %d performance regressions", regressions)
	}
	fmt.Fprintf(&b, " (exit %d). Library `%s` (%s, %s), sha256 `%.12s`", r.ExitCode, r.Library.Path, r.Library.Backend, r.Library.Device, r.Library.SHA256)
	if r.RapidSeed != 0 {
		fmt.Fprintf(&b, "; property tests with `RAPID_SEED=%d`.\n\n", r.RapidSeed)
	} else {
		fmt.Fprintf(&b, "; property tests with fresh seeds (not reproducible: rerun with `-rapid-seed`).\n\n")
	}
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "- **error:** %s\n", e)
	}
	if len(r.Errors) > 0 {
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
			// The first two lines of the test's own log say what went wrong.
			var lines []string
			for _, l := range t.Output {
				if s := strings.TrimSpace(l); s != "" && !strings.HasPrefix(s, "=== ") && !strings.HasPrefix(s, "--- ") && len(lines) < 2 {
					lines = append(lines, s)
				}
			}
			first := strings.Join(lines, " ")
			if len(first) > 240 {
				first = first[:240] + "…"
			}
			fmt.Fprintf(&b, "- `%s` %s", t.Package, t.Name)
			if t.Task != "" && len(r.Tasks) > 1 {
				fmt.Fprintf(&b, " (task %s)", t.Task)
			}
			if first != "" {
				fmt.Fprintf(&b, ": %s", first)
			}
			fmt.Fprintf(&b, "\n  `%s`\n", t.Reproduce)
		}
		b.WriteString("\n")
	}
	var undecided []string
	for _, t := range r.Tests {
		if t.Result == Undecided {
			undecided = append(undecided, fmt.Sprintf("`%s` %s: %s", t.Package, t.Name, strings.Join(t.Output, " ")))
		}
	}
	undecided = append(undecided, r.Undecided...)
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
			if p.Verdict == Regression {
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
	figureTable(&b, r.Figures, "max scaled error ratio", "Accuracy: largest scaled error ratio per method (threshold 4)")
	figureTable(&b, r.Figures, "backward max scaled error ratio", "Backward: largest scaled error ratio of any gradient per method (threshold 4)")
	for _, p := range r.Plots {
		fmt.Fprintf(&b, "![%s](%s)\n", strings.TrimSuffix(p, ".png"), p)
	}
	if len(r.Plots) > 0 {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "<sub>%s · %s · tasks %s · report.json (schema %s), junit.xml</sub>\n", r.Created, r.Host.Hostname, strings.Join(r.Tasks, ", "), Schema)
	return b.String()
}

// figureTable writes, as a collapsed table under summary, every figure
// named name: method, dtype, A and value; nothing when there is none.
func figureTable(b *strings.Builder, figs []Figure, name, summary string) {
	var rows []Figure
	for _, f := range figs {
		if f.Name == name {
			rows = append(rows, f)
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(b, "<details><summary>%s</summary>\n\n| method | dtype | A | max ratio |\n|---|---|---|---|\n", summary)
	for _, f := range rows {
		fmt.Fprintf(b, "| %s | %s | %s | %.3g |\n", f.Method, f.DType, f.Kind, f.Value)
	}
	b.WriteString("\n</details>\n\n")
}

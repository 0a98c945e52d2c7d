package report

import (
	"fmt"
	"slices"
	"strings"
)

// Summary is the report as a person reads it in ten seconds: the verdict,
// one line per method × dtype × real/complex, then what failed.
func (r *Report) Summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	verdict := "PASS"
	switch {
	case !r.Passed:
		verdict = "FAIL"
	case r.Verdict == VerdictUndecided:
		verdict = "UNDECIDED (what could not be decided here is listed below; nothing failed)"
	}
	fmt.Fprintf(&b, "ssmverify %s — %s (%s, %s)\n", verdict, r.Library.Path, r.Library.Backend, r.Library.Device)
	fmt.Fprintf(&b, "selection: %s\n\n", r.Library.Selection)
	unsupported := 0
	if r.Bridge != nil {
		b.WriteString(r.kernelSummary())
	} else {
		unsupported = r.cellSummary(&b)
		if len(r.Bridged) > 0 {
			b.WriteString("\nkernels behind the bridge, judged beside the library (their cells below):\n")
			for _, p := range r.Bridged {
				adapter := ""
				if p.Bridge != nil {
					adapter = " (" + p.Bridge.Adapter + ")"
				}
				fmt.Fprintf(&b, "  %s: %s%s on %s\n", p.Package, p.Kernel.Path, adapter, p.Kernel.Device)
			}
			b.WriteString(r.kernelSummary())
		}
	}
	b.WriteString(r.backwardSummary())
	if r.Bridge != nil && len(r.NotSupported) > 0 {
		fmt.Fprintf(&b, "\nnot supported (not declared by the adapter; not failures): %d items left unjudged by tests (report.json: not_supported)\n", len(r.NotSupported))
	} else if unsupported > 0 || len(r.NotSupported) > 0 {
		fmt.Fprintf(&b, "\nnot supported (declared by the library; not failures): %d of %d combinations", unsupported, len(r.Cells))
		if len(r.NotSupported) > 0 {
			fmt.Fprintf(&b, "; %d items left unjudged by tests (report.json: not_supported)", len(r.NotSupported))
		}
		b.WriteString("\n")
	}
	var features []string
	for _, c := range r.Cells {
		if c.Features != "" {
			line := fmt.Sprintf("  %s/%s/%s: %s", c.Method, c.DType, c.Kind, c.Features)
			if !slices.ContainsFunc(features, func(l string) bool { return strings.HasSuffix(l, ": "+c.Features) }) {
				features = append(features, line)
			}
		}
	}
	if len(features) > 0 {
		fmt.Fprintf(&b, "\ndeclared features (ssmk_scan_features; the first cell of each declaration):\n%s\n", strings.Join(features, "\n"))
		if len(r.Fitted) > 0 {
			fmt.Fprintf(&b, "problems fitted to them in %d tests (report.json: fitted), e.g. %s: %s\n", len(r.Fitted), r.Fitted[0].Test, r.Fitted[0].What)
		}
	}
	var checks []string
	for _, t := range r.Tests {
		if n, ok := performanceCheck(t.Name); ok {
			v := string(t.Outcome)
			if t.Outcome == Failed {
				v = "FAIL"
			}
			line := fmt.Sprintf("  %s %s", n, v)
			if t.Outcome == Failed && t.Reason != "" {
				line += ": " + t.Reason
			}
			if parts := r.undecidedParts(t.Name); len(parts) > 0 {
				if t.Outcome == Undecided {
					line += ": "
				} else {
					line += "; undecided: "
				}
				line += strings.Join(parts, "; ")
			}
			checks = append(checks, line)
		}
	}
	if len(checks) > 0 {
		fmt.Fprintf(&b, "\nperformance checks (CHECKS.md; check1.json … check7.json; undecided: could not decide on this machine, not a pass):\n%s\n", strings.Join(checks, "\n"))
	}
	var failed []TestVerdict
	for _, t := range r.Tests {
		if !t.Passed && !strings.Contains(t.Name, "/") {
			failed = append(failed, t)
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(&b, "\nfailed tests (%d; the first line of each failure; out/verify.log has the whole):\n", len(failed))
		for _, t := range failed {
			reason := t.Reason
			if reason == "" {
				reason = "(no message: see the log)"
			}
			fmt.Fprintf(&b, "  FAIL %s: %s\n", t.Name, reason)
		}
		for _, c := range r.Cells {
			if c.Failures > 0 {
				fmt.Fprintf(&b, "  %s/%s/%s: %d of %d checks failed; worst %s\n", c.Method, c.DType, c.Kind, c.Failures, c.Checks, c.Worst)
			}
			if bw := c.Backward; bw != nil && bw.Failures > 0 {
				fmt.Fprintf(&b, "  %s/%s/%s backward: %d of %d checks failed; worst %s\n", c.Method, c.DType, c.Kind, bw.Failures, bw.Checks, bw.Worst)
			}
		}
	}
	if len(r.Crashes) > 0 {
		fmt.Fprintf(&b, "\ncrashed (%d; the test process died inside each, and the run resumed without it):\n", len(r.Crashes))
		for _, c := range r.Crashes {
			fmt.Fprintf(&b, "  CRASH %s: %s\n", c.Test, c.Why)
		}
	}
	if gs := groupDiagnoses(r.Diagnoses); len(gs) > 0 {
		fmt.Fprintf(&b, "\ndiagnoses: %d causes of the failures (package diagnose; report.json: diagnoses; docs/diagnosis.md)\n", len(gs))
		b.WriteString(DiagnosisTable(gs, "  "))
	}
	b.WriteString("\n" + r.verdictLine(len(failed)) + "\n")
	return b.String()
}

// verdictLine is the summary's last line: the verdict and what it rests
// on, so that the last line on a terminal is always the run's verdict.
func (r *Report) verdictLine(failed int) string {
	switch {
	case len(r.Errors) > 0:
		return fmt.Sprintf("ssmverify ERROR: the run could not decide: %s", r.Errors[0])
	case !r.Passed:
		s := fmt.Sprintf("ssmverify FAIL: %d tests failed, %d causes diagnosed (above)", failed, len(groupDiagnoses(r.Diagnoses)))
		if len(r.Crashes) > 0 {
			s += fmt.Sprintf(", %d crashed", len(r.Crashes))
		}
		return s
	case r.Verdict == VerdictUndecided:
		return fmt.Sprintf("ssmverify UNDECIDED: nothing failed; %d parts could not be decided on this machine (above), which is not a pass", len(r.Undecided))
	}
	return fmt.Sprintf("ssmverify PASS: %d tests", len(r.Tests))
}

// cellSummary writes the table of the ABI's cells and returns how many are
// declared not supported.
func (r *Report) cellSummary(b *strings.Builder) int {
	mw := 10 // the method column: as wide as the longest name (exp-trapezoidal)
	for _, c := range r.Cells {
		mw = max(mw, len(c.Method))
	}
	fmt.Fprintf(b, "%-*s %-5s %-8s %-5s %-12s %7s %10s %10s %9s\n", mw, "method", "dtype", "A", "", "declared", "checks", "max ratio", "max ulp*", "threshold")
	unsupported := 0
	for _, c := range r.Cells {
		v := "ok"
		switch {
		case c.Failures > 0:
			v = "FAIL"
		case c.Support == "no":
			v, unsupported = "n/s", unsupported+1
		case c.Checks == 0:
			v = "-"
		}
		decl := c.Support
		if decl == "" {
			decl = "?"
		}
		fmt.Fprintf(b, "%-*s %-5s %-8s %-5s %-12s %7d %10.3g %10.3g %9g\n", mw, c.Method, c.DType, c.Kind, v, decl, c.Checks,
			float64(c.MaxRatio), float64(c.MaxULP), float64(c.Threshold))
	}
	b.WriteString("\nchecks: comparisons made; max ratio: the largest |kernel − reference| / (u·S + η·T), which decides\n" +
		"(ok: every comparison at or below the threshold; -: none made; n/s: declared not supported, not judged);\n" +
		"declared: what ssmk_capabilities says (scan only: no ssmk_discretize; bridge: a method the ABI does not carry,\n" +
		"judged through the bridge on the suite's numpy path, TestTrapezoidal); max ulp*: the largest error in units\n" +
		"of the dtype's last place of the magnitude of the element's terms (normwise, like the ratio), for reading only:\n" +
		"large where the problem is ill-conditioned (bilinear near its pole), which the ratio's scale accounts for\n")
	return unsupported
}

// performanceCheck reports whether test is one of the seven performance
// checks themselves (TestCheck1IdenticalInputs …, not their decision tests),
// and its short name.
func performanceCheck(test string) (string, bool) {
	if len(test) < len("TestCheckN") || !strings.HasPrefix(test, "TestCheck") || strings.Contains(test, "Decision") || strings.Contains(test, "/") {
		return "", false
	}
	n := test[len("TestCheck")]
	if n < '1' || n > '7' {
		return "", false
	}
	return "Check" + string(n), true
}

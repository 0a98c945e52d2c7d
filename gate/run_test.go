package gate

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGateEndToEnd: a real gate run against the library under test (the
// CPU build in CI) with a small selection of the suite — the golden
// package, the verify suite's golden test and Check7 — produces every file:
// report.json that loads, junit.xml that parses, report.md whose verdict is
// the exit code's, and the three plots.
func TestGateEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test in subprocesses")
	}
	out := t.TempDir()
	r := Run(Config{Out: out, Root: "..", Packages: []string{"golden", "verify"}, VerifyRun: "^Test(Golden|Check7MethodComparison)$",
		Task: "e2e", MaxRegression: 0.05, Plots: true, Log: io.Discard})
	if len(r.Errors) > 0 {
		t.Fatalf("setup errors: %v", r.Errors)
	}
	if r.ExitCode != ExitPass {
		t.Fatalf("exit %d (%s): failures %+v", r.ExitCode, r.Verdict, r.LeafFailures())
	}
	loaded, err := Load(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tt := range loaded.Tests {
		names[tt.Package+"."+tt.Name] = true
	}
	for _, want := range []string{"golden.TestGoldenReferenceReproduces", "verify.TestGolden", "verify.TestCheck7MethodComparison", "gate.TestConvergenceOrder/rk4"} {
		if !names[want] {
			t.Errorf("report.json lacks test %s", want)
		}
	}
	if len(loaded.Performance) != 6 {
		t.Errorf("%d performance rows, want one per method", len(loaded.Performance))
	}
	d := parseJUnit(t, filepath.Join(out, "junit.xml"))
	if len(d.Suites) == 0 {
		t.Error("junit.xml has no test suites")
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil || !strings.HasPrefix(string(md), "## ssmverify gate: ✅ PASS") {
		t.Errorf("report.md starts %q (err %v), want the PASS verdict", strings.SplitN(string(md), "\n", 2)[0], err)
	}
	for _, p := range []string{"convergence.png", "ratios-fp32.png", "throughput.png"} {
		if st, err := os.Stat(filepath.Join(out, p)); err != nil || st.Size() < 10000 {
			t.Errorf("plot %s: %v", p, err)
		}
		if !strings.Contains(string(md), "]("+p+")") {
			t.Errorf("report.md does not link %s", p)
		}
	}
}

// Command gate runs the verification suite as a merge gate and writes
// out/report.json, out/junit.xml, out/report.md and plots (see package
// ssmverify/gate for the verdicts and exit codes).
//
//	gate [flags]                         run the gate (make gate)
//	gate -run Check7 -write-baseline F   measure Check7 and store it as a baseline (make baseline)
//	gate -baseline F                     compare Check7 with baseline F (make gate BASELINE=F)
//	gate merge -out DIR REPORT.json...   merge task reports (a Slurm array) into one
//	gate bench [-gpu NAME] [-accuracy RC] DIR
//	                                     make bench's table and speed targets from the
//	                                     Check7 runs in DIR/SIZE-DTYPE-COMPLEX-LIBRARY/
//
// The library is the one cudalib.OpenDefault picks: SSMK_LIB, else
// SSMK_BACKEND (cuda, cpu, auto).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"ssmverify/gate"
	"ssmverify/perf"
	"ssmverify/report"
)

// defaultRapidSeed is $RAPID_SEED when it is a number, else 1: a gate pins
// its property draws unless told otherwise.
func defaultRapidSeed() uint64 {
	if v, err := strconv.ParseUint(os.Getenv("RAPID_SEED"), 10, 64); err == nil {
		return v
	}
	return 1
}

// defaultPackages is the gate's packages: a bridged suite joins the ABI's
// where SSMK_BRIDGE, or its own SSMK_BRIDGE_MAMBA2 or SSMK_BRIDGE_MAMBA3,
// names a kernel for it (gate.BridgeFor).
func defaultPackages() string {
	pkgs := "golden,fuzz,verify,kernels"
	for _, p := range gate.BridgedSuites {
		if gate.BridgeFor(p) != "" {
			pkgs += "," + filepath.Base(p)
		}
	}
	return pkgs
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "merge" {
		os.Exit(merge(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "bench" {
		os.Exit(bench(os.Args[2:], os.Stdout))
	}
	fs := flag.NewFlagSet("gate", flag.ContinueOnError)
	out := fs.String("out", "out", "output folder")
	root := fs.String("root", ".", "repository root (package folders; the Go module for go test)")
	bin := fs.String("bin", "", "folder of prebuilt test binaries <pkg>.test (GPU machines without Go); empty: go test")
	pkgs := fs.String("pkgs", defaultPackages(), "comma-separated packages of the suite to run (golden, fuzz, verify, kernels: our CUDA build's design tests, each design forced, and mamba2, mamba3: the bridged suites, against the kernel SSMK_BRIDGE names or the numpy paths); default: the first four, and each bridged suite where SSMK_BRIDGE or SSMK_BRIDGE_MAMBA2/3 names its kernel")
	run := fs.String("run", "", "verify: which tests to run (go test -run), e.g. Check7 or 'Accuracy|Golden'")
	brun := fs.String("bridged-run", "", "mamba2, mamba3: which of the bridged suites' tests to run (go test -run), e.g. 'TestMamba2(Prefill|Decode)$'")
	vargs := fs.String("verify-args", "", "verify: extra flags, e.g. '-methods zoh,foh -trials 50'")
	task := fs.String("task", "local", "this run's name in merged reports")
	baseline := fs.String("baseline", "", "compare Check7's samples with this baseline file")
	maxReg := fs.Float64("max-regression", 0.05, "fail on a significant slowdown beyond this fraction")
	writeBaseline := fs.String("write-baseline", "", "store this run's Check7 samples as a baseline file")
	plots := fs.Bool("plots", true, "draw the PNG plots")
	nonFinite := fs.Bool("nonfinite", false, "hold the library to the fuzz corpus's non-finite policy (go doc ./fuzz): what it must return where an intermediate overflows; off, only finite, in-range behaviour is judged unless the library declares SSMK_CAP_NONFINITE")
	seed := fs.Uint64("rapid-seed", defaultRapidSeed(),
		"seed of the suite's property tests (default: $RAPID_SEED, else 1), so that a commit's verdict is reproducible; 0: fresh seeds, to explore")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(report.ExitSetup)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "gate: unexpected argument %q (flags only; `gate merge` merges reports)\n", fs.Arg(0))
		os.Exit(report.ExitSetup)
	}
	if *maxReg <= 0 || *maxReg >= 1 {
		fmt.Fprintf(os.Stderr, "gate: -max-regression = %g, want a fraction in (0, 1), e.g. 0.05\n", *maxReg)
		os.Exit(report.ExitSetup)
	}
	var packages []string
	for _, p := range strings.Split(*pkgs, ",") {
		switch p = strings.TrimSpace(p); p {
		case "":
		case "golden", "fuzz", "verify", "kernels":
			packages = append(packages, p)
		case "mamba2", "mamba3":
			packages = append(packages, "verify/"+p)
		default:
			fmt.Fprintf(os.Stderr, "gate: -pkgs: unknown package %q, want some of golden, fuzz, verify, kernels, mamba2, mamba3\n", p)
			os.Exit(report.ExitSetup)
		}
	}
	if *baseline != "" {
		if _, err := perf.LoadBaseline(*baseline); err != nil {
			fmt.Fprintln(os.Stderr, "gate:", err)
			os.Exit(report.ExitSetup)
		}
	}
	cfg := gate.Config{Out: *out, Root: *root, Bin: *bin, Packages: packages, VerifyRun: *run, BridgedRun: *brun,
		VerifyArgs: strings.Fields(*vargs), Task: *task, Baseline: *baseline, MaxRegression: *maxReg, Plots: *plots, RapidSeed: *seed, NonFinitePolicy: *nonFinite, Log: os.Stderr}
	r := gate.Run(cfg)
	if *writeBaseline != "" && len(r.Errors) == 0 {
		c7, err := report.LoadCheck7(filepath.Join(*out, "verify", "check7.json"))
		if err != nil {
			fmt.Fprintf(os.Stderr, "gate: -write-baseline: %v (include Check7 in the run)\n", err)
			os.Exit(report.ExitSetup)
		}
		if err := perf.WriteBaseline(*writeBaseline, c7, r.Library); err != nil {
			fmt.Fprintln(os.Stderr, "gate: -write-baseline:", err)
			os.Exit(report.ExitSetup)
		}
		fmt.Fprintf(os.Stderr, "gate: baseline of %d methods written to %s (%s)\n", len(c7.Samples), *writeBaseline, c7.Config)
	}
	summary(r, *out)
	os.Exit(r.ExitCode)
}

// bench prints make bench's table and the speed targets it shows. It fails
// (exit 2) only when the runs cannot be read: a missed target is a figure
// to report, not a broken bench.
func bench(args []string, w io.Writer) int {
	fs := flag.NewFlagSet("gate bench", flag.ContinueOnError)
	gpu := fs.String("gpu", "", "the GPU and driver, for the table's first line")
	acc := fs.Int("accuracy", 0, "exit status of the accuracy tests of the same build (0: passed)")
	if err := fs.Parse(args); err != nil {
		return report.ExitSetup
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "gate bench: want one folder of Check7 runs (usage: gate bench [-gpu NAME] [-accuracy RC] DIR)")
		return report.ExitSetup
	}
	runs, err := report.LoadBench(fs.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "gate", err)
		return report.ExitSetup
	}
	verdict := "pass"
	if *acc != 0 {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "make bench: %s; accuracy of the same build: %s\n", *gpu, verdict)
	perf.WriteBenchTable(w, runs)
	if ts := perf.BenchTargets(runs); len(ts) > 0 {
		fmt.Fprintln(w, "\nspeed targets:")
		for _, t := range ts {
			fmt.Fprintln(w, t)
		}
	}
	return 0
}

func merge(args []string) int {
	fs := flag.NewFlagSet("gate merge", flag.ContinueOnError)
	out := fs.String("out", "out/merged", "folder for the merged report.json, junit.xml and report.md")
	if err := fs.Parse(args); err != nil {
		return report.ExitSetup
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "gate merge: no task reports given (usage: gate merge -out DIR task1/report.json task2/report.json …)")
		return report.ExitSetup
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "gate merge:", err)
		return report.ExitSetup
	}
	m, err := gate.MergeFiles(*out, fs.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "gate", err)
		return report.ExitSetup
	}
	summary(m, *out)
	return m.ExitCode
}

// summary prints, last on the terminal, what a person acts on: the setup
// errors, the failures (the first ten, each with the first line of its
// reason and its reproduce command), what was undecided, the performance
// verdicts that are not a plain pass, then the causes of the failures (the
// diagnosis table, last so that it stays on the screen) and the verdict.
func summary(r *report.Report, out string) {
	for _, e := range r.Errors {
		fmt.Fprintln(os.Stderr, "gate: error:", e)
	}
	failed := r.LeafFailures()
	const show = 10
	for i, t := range failed {
		if i == show {
			fmt.Fprintf(os.Stderr, "gate: … %d more failures in %s\n", len(failed)-show, filepath.Join(out, "report.md"))
			break
		}
		reason := t.Reason
		if reason == "" {
			reason = "(no message: see " + filepath.Join(out, t.Package+".log") + ")"
		}
		fmt.Fprintf(os.Stderr, "gate: FAIL %s %s: %s\n      %s\n", t.Package, t.Name, reason, t.Reproduce)
	}
	for _, t := range r.Tests {
		if t.Outcome == report.Undecided {
			fmt.Fprintf(os.Stderr, "gate: undecided %s %s: %s\n", t.Package, t.Name, t.Reason)
		}
	}
	for _, p := range r.Performance {
		if p.Verdict == report.Regression || p.Verdict == report.VerdictUndecided || p.Verdict == report.Improvement {
			fmt.Fprintf(os.Stderr, "gate: performance %s: %s: %s\n", p.Method, p.Verdict, p.Reason)
		}
	}
	if gs := r.DiagnosisGroups(); len(gs) > 0 {
		fmt.Fprintf(os.Stderr, "gate: %d causes of the failures (diagnoses; report.md has them first):\n", len(gs))
		fmt.Fprint(os.Stderr, report.DiagnosisTable(gs, "  "))
	}
	fmt.Fprintf(os.Stderr, "gate: %s (exit %d): %d tests, %d failed; %s/{report.json,junit.xml,report.md}\n",
		strings.ToUpper(r.Verdict), r.ExitCode, len(r.Tests), len(r.Failed()), out)
}

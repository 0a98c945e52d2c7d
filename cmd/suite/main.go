// Command suite runs the verification suite as make verify does and ends
// with one verdict: the golden files, the ABI suite (verify) against the
// library under test, and the bridged suites of Mamba-2 (verify/mamba2)
// and Mamba-3 (verify/mamba3) against the kernel SSMK_BRIDGE names (the
// suite's numpy paths by default).
//
//	suite [-out DIR] [-parts golden,verify,mamba2,mamba3] [-bin DIR]
//
// Each part starts from an empty report: its report.json, summary.txt,
// check*.json and log are removed first, so that nothing on disk is an
// earlier run's. A part's process that dies inside a test (a panic, a
// library's segmentation fault) is resumed without that test, which fails
// as crashed (testrun.RunResuming): every run ends with its summaries. The
// last line printed is the run's verdict, and the exit status says the
// same: 0 pass, 1 fail, 2 could not run, 3 undecided (something could not
// be decided here: a timing on a busy machine, a bridged suite whose
// worker cannot start without NumPy) — as the gate's.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"ssmverify/bridge"
	"ssmverify/report"
	"ssmverify/testrun"
)

// part is one test package of the run and where its report goes.
type part struct {
	name, pkg string
	dir       string // its report's folder ("" for golden: no report)
	log       string
}

// outcome is what a part ended with: its exit status (report.Exit*) and
// one line for the closing table.
type outcome struct {
	exit int
	line string
}

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := flag.NewFlagSet("suite", flag.ContinueOnError)
	out := fs.String("out", "out", "output folder: report.json, summary.txt, verify.log; mamba2/ and mamba3/")
	parts := fs.String("parts", "golden,verify,mamba2,mamba3", "comma-separated parts to run: golden, verify, mamba2, mamba3")
	bin := fs.String("bin", "", "folder of prebuilt test binaries <pkg>.test (GPU machines without Go); empty: go test")
	if err := fs.Parse(args); err != nil {
		return report.ExitSetup
	}
	dir, err := filepath.Abs(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "suite: -out:", err)
		return report.ExitSetup
	}
	known := map[string]part{
		"golden": {"golden", "golden", "", filepath.Join(dir, "golden.log")},
		"verify": {"verify", "verify", dir, filepath.Join(dir, "verify.log")},
		"mamba2": {"mamba2", "verify/mamba2", filepath.Join(dir, "mamba2"), filepath.Join(dir, "mamba2.log")},
		"mamba3": {"mamba3", "verify/mamba3", filepath.Join(dir, "mamba3"), filepath.Join(dir, "mamba3.log")},
	}
	var todo []part
	for _, name := range strings.Split(*parts, ",") {
		p, ok := known[strings.TrimSpace(name)]
		if !ok {
			fmt.Fprintf(os.Stderr, "suite: -parts: unknown part %q, want some of golden, verify, mamba2, mamba3\n", name)
			return report.ExitSetup
		}
		todo = append(todo, p)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "suite: cannot create the output folder:", err)
		return report.ExitSetup
	}
	root, _ := os.Getwd()
	var results []outcome
	for _, p := range todo {
		clean(p)
		fmt.Printf("\nsuite: %s (%s; the raw log: %s)\n", p.name, p.pkg, rel(p.log))
		results = append(results, runPart(root, *bin, p))
	}
	return closing(todo, results)
}

// clean removes what an earlier run of p left.
func clean(p part) {
	_ = os.Remove(p.log)
	if p.dir == "" {
		return
	}
	for _, f := range []string{"report.json", "summary.txt", ".report.json.tmp"} {
		_ = os.Remove(filepath.Join(p.dir, f))
	}
	checks, _ := filepath.Glob(filepath.Join(p.dir, "check*.json"))
	for _, f := range checks {
		_ = os.Remove(f)
	}
}

func runPart(root, bin string, p part) outcome {
	log, err := os.Create(p.log)
	if err != nil {
		return outcome{report.ExitSetup, "cannot write its log: " + err.Error()}
	}
	defer log.Close()
	spec := testrun.Spec{Root: root, Package: p.pkg, Bin: bin, Env: os.Environ(), Timeout: 3 * time.Hour}
	if p.dir == "" {
		res, err := testrun.Run(spec, log)
		if err != nil {
			return outcome{report.ExitSetup, err.Error()}
		}
		failed := 0
		for _, t := range res.Tests {
			if t.Result == testrun.Fail || t.Result == testrun.Crashed {
				failed++
				fmt.Printf("  FAIL %s: %s\n", t.Name, t.Reason)
			}
		}
		switch {
		case failed > 0:
			return outcome{report.ExitFail, fmt.Sprintf("%d of %d tests failed", failed, len(res.Tests))}
		case res.Err != nil:
			fmt.Println(tailLines(res.Output, 15))
			return outcome{report.ExitSetup, "the tests did not run: " + lastLine(res.Output)}
		}
		fmt.Printf("  %d tests passed\n", len(res.Tests))
		return outcome{report.ExitPass, fmt.Sprintf("%d tests", len(res.Tests))}
	}
	spec.Args = []string{"-report", p.dir}
	res, crashes, err := testrun.RunResuming(spec, log, func(c testrun.Crash) ([]string, error) {
		fmt.Printf("  CRASH in %s: %s — resuming without it\n", c.Test, c.Why)
		if err := report.RecordCrash(p.dir, c); err != nil {
			return nil, err
		}
		return []string{"-append"}, nil
	})
	if err != nil && len(crashes) == 0 {
		return outcome{report.ExitSetup, err.Error()}
	}
	summary, serr := os.ReadFile(filepath.Join(p.dir, "summary.txt"))
	r, lerr := report.Load(filepath.Join(p.dir, "report.json"))
	if serr != nil || lerr != nil || r.Verdict == "" {
		// The process ended without finishing its report: it could not
		// start (no library, no worker), or crashed outside any test.
		if why := bridge.NoWorkerLine(res.Output); why != "" {
			fmt.Println("  NOT RUN: " + why)
			return outcome{report.ExitUndecided, "NOT RUN: " + why}
		}
		fmt.Println(tailLines(res.Output, 20))
		why := lastLine(res.Output)
		if err != nil {
			why = err.Error()
		}
		return outcome{report.ExitSetup, "wrote no summary: " + why}
	}
	fmt.Print(string(summary))
	line := fmt.Sprintf("%s (%s)", strings.ToUpper(r.Verdict), rel(filepath.Join(p.dir, "summary.txt")))
	if r.Bridge != nil {
		line += " — " + r.Library.Path
	}
	if err != nil {
		line += "; " + err.Error()
		return outcome{report.ExitFail, line}
	}
	return outcome{r.ExitCode, line}
}

// closing prints one line per part and the run's verdict last, and
// returns the exit status: the worst part's (error, fail, undecided,
// pass, in that order of precedence).
func closing(parts []part, results []outcome) int {
	rank := map[int]int{report.ExitSetup: 3, report.ExitFail: 2, report.ExitUndecided: 1, report.ExitPass: 0}
	exit := report.ExitPass
	fmt.Println("\nsuite: the run's parts")
	for i, p := range parts {
		o := results[i]
		fmt.Printf("  %-7s %s\n", p.name, o.line)
		if rank[o.exit] > rank[exit] {
			exit = o.exit
		}
	}
	verdict := map[int]string{report.ExitPass: "PASS", report.ExitFail: "FAIL", report.ExitSetup: "ERROR (the run could not decide)",
		report.ExitUndecided: "UNDECIDED (nothing failed; some of it could not be decided here, which is not a pass)"}[exit]
	fmt.Printf("ssmverify %s (exit %d)\n", verdict, exit)
	return exit
}

func rel(p string) string {
	wd, _ := os.Getwd()
	if r, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return p
}

// lastLine is the last line of out that says something: go test's own
// closing lines (FAIL, FAIL pkg 0.03s, exit status 2) are passed over.
func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		s := strings.TrimSpace(lines[i])
		if s == "" || s == "FAIL" || strings.HasPrefix(s, "FAIL\t") || strings.HasPrefix(s, "exit status ") {
			continue
		}
		return s
	}
	return "(no output)"
}

func tailLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

package gate

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"ssmverify/bridge"
	"ssmverify/cudalib"
	"ssmverify/perf"
	"ssmverify/report"
	"ssmverify/ssm"
	"ssmverify/testrun"
)

// DesignTests selects our kernels' tests (package kernels) that judge a
// library's forward and backward designs: each design the CUDA build has
// forced in turn on every method, input type and option and judged by the
// error model, the automatic choice recognised by its outputs' bits, the
// complex kernel's angles and the overflow of Δ·u, and the backward plans
// on saved states through each design (SSMK_CAP_BWD_SAVED). The suite's own shapes
// take whichever design the library chooses; these name the design a
// failure is in (TestForwardDesigns/complex/chan8, say). A library with
// one design (the CPU build, an adapter) runs them through its choice.
var DesignTests = "^(" + strings.Join(designTests, "|") + ")$"

var designTests = []string{
	"TestForwardDesigns", "TestForwardDesignsDiffer", "TestForwardAutoChoice", "TestForwardDesignRefusesUnknown",
	"TestForwardComplexAngles", "TestForwardDeltaUOverflow",
	"TestBackwardDesigns", "TestBackwardDesignsDiffer", "TestBackwardAutoChoice", "TestBackwardDesignRefusesUnknown",
	"TestBackwardSavedPlan", "TestBackwardSavedKeepsDesign", "TestBackwardSavedRefuses",
}

// Config is one gate run.
type Config struct {
	Out  string // output folder (report.json, junit.xml, report.md, plots, logs)
	Root string // repository root: package folders and, for go test, the module
	// Bin is a folder of prebuilt test binaries <pkg>.test (scripts/gpu.sh
	// builds them for machines without Go); empty: go test.
	Bin      string
	Packages []string // of golden, fuzz, verify, kernels (its DesignTests alone)
	// VerifyRun selects verify's tests (-run); empty: all of them.
	VerifyRun string
	// BridgedRun selects the bridged suites' tests (-run); empty: all.
	BridgedRun string
	// VerifyArgs are extra flags for the verify suite (-methods, -trials, …).
	VerifyArgs    []string
	Task          string  // this run's name in merged reports
	Baseline      string  // baseline file to compare Check7 with; empty: none
	MaxRegression float64 // fraction, e.g. 0.05
	Plots         bool
	// RapidSeed seeds the suite's property tests (rapid's RAPID_SEED), so
	// that one commit and one library get one verdict, as Hypothesis
	// derandomizes on CI; 0 draws a fresh seed per property, which
	// explores more and gates nothing reproducibly.
	RapidSeed uint64
	// NonFinitePolicy holds the library to the fuzz package's non-finite
	// policy (what a kernel must return where an intermediate overflows:
	// go doc ./fuzz) in the corpus replay; off, those seeds are left out
	// and only finite, in-range behaviour is judged (the accuracy suite's
	// contract). A library that declares SSMK_CAP_NONFINITE is held to it
	// either way.
	NonFinitePolicy bool
	Log             io.Writer // progress lines
}

// Run runs the gate and writes its files. The report is the suite's own
// (report.Report, read back from the verify package's report.json, with
// its cells and diagnoses), with the tests of every package run, the
// Check7 comparison, figures and plots added; it is returned even on a
// setup error (its Errors say what happened).
func Run(cfg Config) *report.Report {
	r := report.New(report.LibraryInfo{})
	logf := func(format string, args ...any) { fmt.Fprintf(cfg.Log, "gate: "+format+"\n", args...) }
	stamp := func(r *report.Report) {
		r.Tasks, r.Command, r.RapidSeed, r.Host = []string{cfg.Task}, strings.Join(os.Args, " "), cfg.RapidSeed, report.ThisHost()
	}
	stamp(r)
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		r.Errors = append(r.Errors, fmt.Sprintf("cannot create the output folder %s: %v", cfg.Out, err))
		return finish(r, cfg, nil)
	}
	// A gate of bridged suites alone (a repository of Triton kernels) has
	// no ABI library to open.
	if len(cfg.Packages) > 0 && !slices.ContainsFunc(cfg.Packages, func(p string) bool { return !bridged(p) }) {
		logf("bridged suites alone: no ABI library opened")
	} else {
		lib, err := cudalib.OpenDefault()
		if err != nil {
			r.Errors = append(r.Errors, SetupMessage(err))
			return finish(r, cfg, nil)
		}
		r.Library = report.Identify(lib)
		logf("library %s (%s; %s) on %s", r.Library.Path, r.Library.Backend, r.Library.Selection, r.Library.Device)
	}
	var runs []pkgRun
	for _, pkg := range cfg.Packages {
		if pkg == "kernels" {
			runs = append(runs, pkgRun{pkg: pkg, run: DesignTests})
			continue
		}
		if pkg != "verify" {
			pr := pkgRun{pkg: pkg, bridged: bridged(pkg)}
			if pr.bridged {
				pr.run = cfg.BridgedRun
			}
			runs = append(runs, pr)
			continue
		}
		// Check7's timings go first, in a process of their own, so that a
		// baseline (Check7 alone) and a gate (the whole suite) measure under
		// the same conditions: measured after the accuracy suite in one
		// process, the CPU build ran 50% slower on the 2-core CI machine (the
		// cause was not isolated; the Go runtime's heap and GC sharing the
		// cores with the kernel's OpenMP team is the likely one). The rest
		// of the suite appends its report to Check7's (-append).
		c7 := "^" + report.Check7Test + "$"
		selects := func(name string) bool {
			if cfg.VerifyRun == "" {
				return true
			}
			re, err := regexp.Compile(strings.SplitN(cfg.VerifyRun, "/", 2)[0])
			return err == nil && re.MatchString(name)
		}
		first := true
		if selects(report.Check7Test) {
			runs = append(runs, pkgRun{pkg: pkg, run: c7, only: true})
			first = false
		}
		if cfg.VerifyRun != c7 && cfg.VerifyRun != "Check7" {
			runs = append(runs, pkgRun{pkg: pkg, run: cfg.VerifyRun, skip: c7, append: !first})
		}
	}
	verifyDir := filepath.Join(cfg.Out, "verify")
	_ = os.Remove(filepath.Join(verifyDir, "report.json"))
	var tests []report.TestVerdict
	outputs := map[string][]byte{} // each bridged suite's output, for why it judged nothing
	for _, pr := range runs {
		start := time.Now()
		logf("%s: running %s…", pr.pkg, pr)
		if pr.bridged {
			_ = os.Remove(filepath.Join(bridgedDir(cfg, pr.pkg), "report.json"))
		}
		res, err := runPackage(cfg, pr, r.Library.Path)
		if err != nil {
			r.Errors = append(r.Errors, err.Error())
			continue
		}
		if pr.bridged {
			outputs[pr.pkg] = res.Output
		}
		got := report.FromRun(res.Tests, cfg.Task, func(pkg, name string) string { return reproduce(cfg, pkg, name, r.Library.Path) })
		nf := 0
		for _, t := range got {
			if t.Outcome == report.Failed {
				nf++
			}
		}
		if res.Err != nil && nf == 0 {
			// The process failed without a failing test: a build error, a
			// panic outside a test, a timeout. Report it as a failure.
			got = append(got, report.TestVerdict{Package: pr.pkg, Name: "(package)", Outcome: report.Failed, Task: cfg.Task,
				Reason: "the test process failed outside any test: " + lastLine(res.Output), Output: tail(string(res.Output), 40),
				Reproduce: reproduce(cfg, pr.pkg, "", r.Library.Path)})
			nf++
		}
		tests = append(tests, got...)
		logf("%s: %s, %.0f s", pr.pkg, countLine(pr.pkg, got, nf), time.Since(start).Seconds())
	}
	// The suite's report (cells, diagnoses, tables, undecided parts) is the
	// gate's; the tests are the runner's, every package's.
	if vr, err := report.Load(filepath.Join(verifyDir, "report.json")); err == nil {
		vr.Errors, vr.Performance, vr.Figures, vr.Plots = append(r.Errors, vr.Errors...), nil, nil, nil
		r = vr
		stamp(r)
	}
	// The bridged suites' reports (another kernel each) join it: their
	// cells, diagnoses and undecided parts; a suite whose worker could not
	// start (no NumPy for the numpy paths) judged nothing, which leaves the
	// run undecided, never passed.
	for _, pr := range runs {
		if !pr.bridged {
			continue
		}
		br, err := report.Load(filepath.Join(bridgedDir(cfg, pr.pkg), "report.json"))
		if err != nil {
			why := "its worker did not start or it wrote no report (" + filepath.Join(cfg.Out, filepath.Base(pr.pkg)+".log") + ")"
			if line := bridge.NoWorkerLine(outputs[pr.pkg]); line != "" {
				why = line
			}
			r.Undecide(pr.pkg, "every test", "not run: "+why)
			continue
		}
		if err := r.Include(pr.pkg, br); err != nil {
			r.Errors = append(r.Errors, err.Error())
		}
	}
	r.SetTests(tests)
	m := &measured{verify: r}
	r.Figures = append(r.Figures, verifyFigures(r, cfg.Task)...)
	r.Figures = append(r.Figures, convergenceFigures(r, cfg.Task)...)
	if c7, err := report.LoadCheck7(filepath.Join(verifyDir, "check7.json")); err == nil {
		m.check7 = c7
		cmp, err := perf.ComparePerformance(c7, cfg.Baseline, cfg.MaxRegression)
		if err != nil {
			r.Errors = append(r.Errors, err.Error())
		}
		for i := range cmp {
			cmp[i].Task = cfg.Task
		}
		r.Performance, r.Baseline = cmp, cfg.Baseline
	} else if cfg.Baseline != "" {
		r.Errors = append(r.Errors, fmt.Sprintf("BASELINE=%s given but Check7 did not run (no %s): include Check7 in the run", cfg.Baseline, filepath.Join(verifyDir, "check7.json")))
	}
	return finish(r, cfg, m)
}

// countLine is a package's tests in one line: how many, how many failed,
// and for golden, what its tests judge (the golden files themselves; the
// library's golden cases run in verify as TestGolden).
func countLine(pkg string, tests []report.TestVerdict, failed int) string {
	s := fmt.Sprintf("%d tests, %d failed", len(tests), failed)
	if pkg == "golden" {
		s += " (the golden files' checksums and reproduction; the library's golden cases are verify's TestGolden)"
	}
	return s
}

// lastLine is the last non-empty line of out.
func lastLine(out []byte) string {
	lines := tail(string(out), 5)
	for i := len(lines) - 1; i >= 0; i-- {
		if s := strings.TrimSpace(lines[i]); s != "" {
			return s
		}
	}
	return "(no output)"
}

// measured is what a run measured besides the tests' verdicts, loaded once
// for the figures, the comparison and the plots; a part that did not run is
// nil.
type measured struct {
	verify *report.Report
	check7 *report.Check7
}

// finish decides the verdict and writes every file.
func finish(r *report.Report, cfg Config, m *measured) *report.Report {
	r.Finish()
	r.SortTests()
	if cfg.Plots && len(r.Errors) == 0 && m != nil {
		plots, err := WritePlots(cfg.Out, m.verify, m.check7)
		if err != nil {
			r.Errors = append(r.Errors, "plots: "+err.Error())
			r.Decide()
		}
		r.Plots = plots
	}
	if err := writeFiles(cfg.Out, r); err != nil {
		fmt.Fprintln(cfg.Log, "gate: writing the report:", err)
		r.ExitCode = report.ExitSetup
	}
	return r
}

// SetupMessage turns a library-loading error into one line saying what
// happened and what to do.
func SetupMessage(err error) string {
	var missing *cudalib.MissingError
	var abi *cudalib.ABIError
	switch {
	case errors.As(err, &abi):
		return fmt.Sprintf("ABI mismatch: %s implements ssmk ABI %d, this gate speaks %d: rebuild the library against cudalib/include/ssmk.h", abi.Path, abi.Got, cudalib.ABIVersion)
	case errors.Is(err, cudalib.ENoDevice):
		return "no GPU: the CUDA library was required (SSMK_BACKEND=cuda or SSMK_LIB) but found no device: run on a GPU runner, or set SSMK_BACKEND=cpu to gate the CPU build (" + oneLine(err) + ")"
	case errors.As(err, &missing):
		return "library not found: " + oneLine(err) + ": build it (make lib, make lib-cuda) or point SSMK_LIB at yours"
	}
	return "the library does not load: " + oneLine(err) + ": check SSMK_LIB / SSMK_BACKEND and that the file is an ssmk library for this machine"
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// pkgRun is one test process: a package with -run and -skip patterns.
type pkgRun struct {
	pkg, run, skip string
	only           bool // run is Check7 alone, whatever Config.VerifyRun says
	append         bool // verify: merge the report.json an earlier process wrote (-append)
	bridged        bool // a bridged suite (verify/mamba2, verify/mamba3): its report is Included
}

// BridgedSuites are the packages of the suites that judge a kernel behind
// the bridge (SSMK_BRIDGE; the suite's numpy paths by default).
var BridgedSuites = []string{"verify/mamba2", "verify/mamba3"}

func bridged(pkg string) bool { return slices.Contains(BridgedSuites, pkg) }

// BridgeFor is the kernel a bridged suite judges: SSMK_BRIDGE_MAMBA2 for
// verify/mamba2 (SSMK_BRIDGE_MAMBA3 for verify/mamba3) where it is set, so
// that one gate can judge two adapters (upstream's Mamba-2 and Mamba-3
// kernels have one each), else SSMK_BRIDGE; "" is the suite's numpy path.
func BridgeFor(pkg string) string {
	if v := os.Getenv("SSMK_BRIDGE_" + strings.ToUpper(filepath.Base(pkg))); v != "" {
		return v
	}
	return os.Getenv("SSMK_BRIDGE")
}

// bridgedDir is where a bridged suite writes its report: OUT/mamba2.
func bridgedDir(cfg Config, pkg string) string {
	return mustAbs(filepath.Join(cfg.Out, filepath.Base(pkg)))
}

func (p pkgRun) String() string {
	s := ""
	if p.run != "" {
		s += " -run " + p.run
	}
	if p.skip != "" {
		s += " -skip " + p.skip
	}
	return strings.TrimSpace(s) + " "
}

// runPackage runs one package's tests (go test, or its prebuilt binary:
// package testrun) with its log in OUT/PKG.log.
func runPackage(cfg Config, pr pkgRun, libPath string) (testrun.Result, error) {
	var args []string
	reportDir := ""
	switch {
	case pr.pkg == "verify":
		reportDir = mustAbs(filepath.Join(cfg.Out, "verify"))
		args = append(args, "-report", reportDir)
		if pr.append {
			args = append(args, "-append")
		}
		args = append(args, cfg.VerifyArgs...)
	case pr.bridged:
		reportDir = bridgedDir(cfg, pr.pkg)
		args = append(args, "-report", reportDir)
	}
	logPath := filepath.Join(cfg.Out, filepath.Base(pr.pkg)+".log")
	if pr.only {
		logPath = filepath.Join(cfg.Out, pr.pkg+"-check7.log")
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return testrun.Result{}, err
	}
	defer logFile.Close()
	// The gate opened the library through OpenDefault; the suite must test
	// the same file, whatever SSMK_BACKEND would pick.
	env := suiteEnv(os.Environ(), cfg.RapidSeed)
	if libPath != "" {
		env = append(env, "SSMK_LIB="+libPath)
	}
	if cfg.NonFinitePolicy {
		env = append(env, "SSMK_NONFINITE_POLICY=1")
	}
	if pr.bridged {
		env = append(env, "SSMK_BRIDGE="+BridgeFor(pr.pkg)) // the last of a key is the one a process gets
	}
	// A process that dies inside a test is resumed without it: the test
	// fails as crashed, with what the process had recorded kept
	// (report.RecordCrash) and every other test's verdict reached.
	spec := testrun.Spec{Root: cfg.Root, Package: pr.pkg, Bin: cfg.Bin, Run: pr.run, Skip: pr.skip, Args: args, Env: env}
	res, crashes, err := testrun.RunResuming(spec, logFile, func(c testrun.Crash) ([]string, error) {
		fmt.Fprintf(cfg.Log, "gate: %s: the test process crashed in %s (%s); resuming without it\n", pr.pkg, c.Test, c.Why)
		if reportDir == "" {
			return nil, nil
		}
		if err := report.RecordCrash(reportDir, c); err != nil {
			return nil, err
		}
		return []string{"-append"}, nil
	})
	if err != nil && len(crashes) > 0 {
		res.Err = err // crashed too often: the tests that did not run are the setup error's
		return res, nil
	}
	return res, err
}

// suiteEnv is env with RAPID_SEED set to seed (removed for seed 0, so that
// a seed in the caller's environment cannot pin a run asked to explore).
func suiteEnv(env []string, seed uint64) []string {
	out := make([]string, 0, len(env)+1)
	for _, kv := range env {
		if !strings.HasPrefix(kv, "RAPID_SEED=") {
			out = append(out, kv)
		}
	}
	if seed != 0 {
		out = append(out, "RAPID_SEED="+strconv.FormatUint(seed, 10))
	}
	return out
}

// reproduce is a one-line command that re-runs one test against the same
// library, with the same property seed.
func reproduce(cfg Config, pkg, name, libPath string) string {
	run := ""
	if name != "" {
		parts := strings.Split(name, "/")
		for i, s := range parts {
			parts[i] = "^" + regexpQuote(s) + "$"
		}
		run = " -run '" + strings.Join(parts, "/") + "'"
	}
	args := ""
	if pkg == "verify" && len(cfg.VerifyArgs) > 0 {
		args = " -args " + strings.Join(cfg.VerifyArgs, " ")
	}
	env := ""
	if libPath != "" {
		env = "SSMK_LIB=" + libPath
	}
	if b := BridgeFor(pkg); b != "" && bridged(pkg) {
		env = strings.TrimSpace(fmt.Sprintf("SSMK_BRIDGE='%s' %s", b, env))
	}
	if cfg.RapidSeed != 0 {
		env = strings.TrimSpace(fmt.Sprintf("RAPID_SEED=%d %s", cfg.RapidSeed, env))
	}
	if cfg.Bin != "" {
		up := strings.Repeat("../", strings.Count(pkg, "/")+1) // from the package's folder back to the root
		return fmt.Sprintf("cd %s && %s %s -test.v%s%s", pkg, env, filepath.Join(up, cfg.Bin, filepath.Base(pkg)+".test"),
			strings.ReplaceAll(run, " -run ", " -test.run "), strings.TrimPrefix(args, " -args"))
	}
	return fmt.Sprintf("%s go test ./%s -count=1 -v%s%s", env, pkg, run, args)
}

func regexpQuote(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func tail(s string, n int) []string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

func mustAbs(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

// verifyFigures lists, per method, dtype and real/complex A of the verify
// report, the largest scaled error ratio and ulp distance and the number of
// comparisons, and those of the backward pass (overall and per gradient)
// where it was judged.
func verifyFigures(vr *report.Report, task string) []report.Figure {
	if vr == nil {
		return nil
	}
	var out []report.Figure
	for _, c := range vr.Cells {
		out = append(out,
			report.Figure{Name: "max scaled error ratio", Value: c.MaxRatio, Unit: "|kernel − reference|/(u·S + η·T)", Method: c.Method, DType: c.DType, Kind: c.Kind, Task: task},
			report.Figure{Name: "max error", Value: c.MaxULP, Unit: "ulp", Method: c.Method, DType: c.DType, Kind: c.Kind, Task: task},
			report.Figure{Name: "comparisons", Value: report.Num(c.Checks), Unit: "count", Method: c.Method, DType: c.DType, Kind: c.Kind, Task: task})
		if bw := c.Backward; bw != nil {
			out = append(out,
				report.Figure{Name: "backward max scaled error ratio", Value: bw.MaxRatio, Unit: "|kernel − reference|/(u·S + η·T)", Method: c.Method, DType: c.DType, Kind: c.Kind, Task: task},
				report.Figure{Name: "backward comparisons", Value: report.Num(bw.Checks), Unit: "count", Method: c.Method, DType: c.DType, Kind: c.Kind, Task: task})
			for _, g := range bw.Grads {
				out = append(out,
					report.Figure{Name: "backward max scaled error ratio: " + g.Name, Value: g.MaxRatio, Unit: "|kernel − reference|/(u·S + η·T)", Method: c.Method, DType: c.DType, Kind: c.Kind, Task: task},
					report.Figure{Name: "backward max error: " + g.Name, Value: g.MaxULP, Unit: "ulp", Method: c.Method, DType: c.DType, Kind: c.Kind, Task: task})
			}
		}
	}
	return out
}

// convergenceFigures lists the orders the verify suite's convergence test
// fitted (none when it did not run).
func convergenceFigures(vr *report.Report, task string) []report.Figure {
	if vr == nil || vr.Convergence == nil {
		return nil
	}
	var out []report.Figure
	for _, m := range ssm.Methods() {
		if s, ok := vr.Convergence.Slopes[m.String()]; ok {
			out = append(out, report.Figure{Name: "global convergence order", Value: report.Num(s), Unit: "slope of log error vs log Δ", Method: m.String(), DType: "fp64", Task: task})
		}
	}
	return out
}

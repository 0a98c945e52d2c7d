package gate

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/jstemmer/go-junit-report/v2/gtr"
	"github.com/jstemmer/go-junit-report/v2/parser/gotest"

	"ssmverify/cudalib"
	"ssmverify/report"
	"ssmverify/ssm"
)

// Config is one gate run.
type Config struct {
	Out  string // output folder (report.json, junit.xml, report.md, plots, logs)
	Root string // repository root: package folders and, for go test, the module
	// Bin is a folder of prebuilt test binaries <pkg>.test (scripts/gpu.sh
	// builds them for machines without Go); empty: go test.
	Bin      string
	Packages []string // of golden, fuzz, verify
	// VerifyRun selects verify's tests (-run); empty: all of them.
	VerifyRun string
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
	Log       io.Writer // progress lines
}

// Run runs the gate and writes its files. The report is returned even on a
// setup error (its Errors say what happened).
func Run(cfg Config) *Report {
	r := &Report{Schema: Schema, Created: time.Now().UTC().Format(time.RFC3339), Tasks: []string{cfg.Task},
		Command: strings.Join(os.Args, " "), RapidSeed: cfg.RapidSeed}
	r.Host = hostInfo()
	logf := func(format string, args ...any) { fmt.Fprintf(cfg.Log, "gate: "+format+"\n", args...) }
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		r.Errors = append(r.Errors, fmt.Sprintf("cannot create the output folder %s: %v", cfg.Out, err))
		return finish(r, cfg, nil)
	}
	lib, err := cudalib.OpenDefault()
	if err != nil {
		r.Errors = append(r.Errors, SetupMessage(err))
		return finish(r, cfg, nil)
	}
	r.Library = libraryInfo(lib)
	logf("library %s (%s; %s) on %s", r.Library.Path, r.Library.Backend, r.Library.Selection, r.Library.Device)
	var runs []pkgRun
	for _, pkg := range cfg.Packages {
		if pkg != "verify" {
			runs = append(runs, pkgRun{pkg: pkg})
			continue
		}
		// Check7's timings go first, in a process of their own, so that a
		// baseline (Check7 alone) and a gate (the whole suite) measure under
		// the same conditions: measured after the accuracy suite in one
		// process, the CPU build ran 50% slower on the 2-core CI machine (the
		// cause was not isolated; the Go runtime's heap and GC sharing the
		// cores with the kernel's OpenMP team is the likely one).
		c7 := "^" + report.Check7Test + "$"
		selects := func(name string) bool {
			if cfg.VerifyRun == "" {
				return true
			}
			re, err := regexp.Compile(strings.SplitN(cfg.VerifyRun, "/", 2)[0])
			return err == nil && re.MatchString(name)
		}
		if selects(report.Check7Test) {
			runs = append(runs, pkgRun{pkg: pkg, run: c7, only: true})
		}
		if cfg.VerifyRun != c7 && cfg.VerifyRun != "Check7" {
			runs = append(runs, pkgRun{pkg: pkg, run: cfg.VerifyRun, skip: c7})
		}
	}
	for _, pr := range runs {
		pkg := pr.pkg
		start := time.Now()
		logf("%s: running %s…", pkg, pr)
		tests, err := runPackage(cfg, pr, r.Library.Path)
		if err != nil {
			r.Errors = append(r.Errors, err.Error())
			continue
		}
		r.Tests = append(r.Tests, tests...)
		nf := 0
		for _, t := range tests {
			if t.Result == Fail {
				nf++
			}
		}
		logf("%s: %d tests, %d failed, %.0f s", pkg, len(tests), nf, time.Since(start).Seconds())
	}
	verifyDir := filepath.Join(cfg.Out, "verify")
	m := &measured{verify: loadVerifyReport(filepath.Join(verifyDir, "report.json"))}
	r.Figures = append(r.Figures, verifyFigures(m.verify, cfg.Task)...)
	if m.verify != nil {
		for _, u := range m.verify.Undecided {
			if u.Part != "" {
				r.Undecided = append(r.Undecided, fmt.Sprintf("%s (%s): %s", u.Test, u.Part, u.Reason))
			}
		}
	}
	r.Figures = append(r.Figures, convergenceFigures(m.verify, cfg.Task)...)
	if c7, err := report.LoadCheck7(filepath.Join(verifyDir, "check7.json")); err == nil {
		m.check7 = c7
		perf, err := ComparePerformance(c7, cfg.Baseline, cfg.MaxRegression)
		if err != nil {
			r.Errors = append(r.Errors, err.Error())
		}
		for i := range perf {
			perf[i].Task = cfg.Task
		}
		r.Performance, r.Baseline = perf, cfg.Baseline
	} else if cfg.Baseline != "" {
		r.Errors = append(r.Errors, fmt.Sprintf("BASELINE=%s given but Check7 did not run (no %s): include Check7 in the run", cfg.Baseline, filepath.Join(verifyDir, "check7.json")))
	}
	return finish(r, cfg, m)
}

// measured is what a run measured besides the tests' verdicts, loaded once
// for the figures, the comparison and the plots; a part that did not run is
// nil.
type measured struct {
	verify *report.Report
	check7 *report.Check7
}

// finish decides the verdict and writes every file.
func finish(r *Report, cfg Config, m *measured) *Report {
	sortTests(r.Tests)
	r.Decide()
	if cfg.Plots && len(r.Errors) == 0 && m != nil {
		plots, err := WritePlots(cfg.Out, m.verify, m.check7)
		if err != nil {
			r.Errors = append(r.Errors, "plots: "+err.Error())
			r.Decide()
		}
		r.Plots = plots
	}
	for _, w := range []func() error{
		func() error { return r.Write(cfg.Out) },
		func() error { return WriteJUnit(filepath.Join(cfg.Out, "junit.xml"), r) },
		func() error { return os.WriteFile(filepath.Join(cfg.Out, "report.md"), []byte(Markdown(r)), 0o644) },
	} {
		if err := w(); err != nil {
			fmt.Fprintln(cfg.Log, "gate: writing the report:", err)
			r.ExitCode = ExitSetup
		}
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

func libraryInfo(l *cudalib.Library) Library {
	info := Library{Path: l.Path, Backend: l.Backend, Selection: l.Selection, ABIVersion: l.ABIVersionOf()}
	if d, err := l.DeviceName(); err == nil {
		info.Device = d
	}
	if b, err := os.ReadFile(l.Path); err == nil {
		h := sha256.Sum256(b)
		info.SHA256 = hex.EncodeToString(h[:])
	}
	return info
}

func hostInfo() Host {
	h, _ := os.Hostname()
	return Host{Hostname: h, OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
}

// pkgRun is one test process: a package with -run and -skip patterns.
type pkgRun struct {
	pkg, run, skip string
	only           bool // run is Check7 alone, whatever Config.VerifyRun says
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

// runPackage runs one package's tests (go test, or its prebuilt binary)
// and parses the verbose output.
func runPackage(cfg Config, pr pkgRun, libPath string) ([]Test, error) {
	pkg := pr.pkg
	var args []string
	var cmd *exec.Cmd
	extra := []string{}
	if pkg == "verify" {
		extra = append(extra, "-report", mustAbs(filepath.Join(cfg.Out, "verify")))
		extra = append(extra, cfg.VerifyArgs...)
	}
	run := pr.run
	if cfg.Bin != "" {
		bin := mustAbs(filepath.Join(cfg.Bin, pkg+".test"))
		if _, err := os.Stat(bin); err != nil {
			return nil, fmt.Errorf("no test binary %s: build it with scripts/gpu.sh build (or run without -bin on a machine with Go)", bin)
		}
		args = []string{"-test.v", "-test.count=1", "-test.timeout=30m"}
		if run != "" {
			args = append(args, "-test.run="+run)
		}
		if pr.skip != "" {
			args = append(args, "-test.skip="+pr.skip)
		}
		cmd = exec.Command(bin, append(args, extra...)...)
		cmd.Dir = filepath.Join(cfg.Root, pkg)
	} else {
		args = []string{"test", "-v", "-count=1", "-timeout=30m"}
		if run != "" {
			args = append(args, "-run="+run)
		}
		if pr.skip != "" {
			args = append(args, "-skip="+pr.skip)
		}
		args = append(args, "./"+pkg)
		if len(extra) > 0 {
			args = append(append(args, "-args"), extra...)
		}
		cmd = exec.Command("go", args...)
		cmd.Dir = cfg.Root
	}
	// The gate opened the library through OpenDefault; the suite must test
	// the same file, whatever SSMK_BACKEND would pick.
	cmd.Env = append(suiteEnv(os.Environ(), cfg.RapidSeed), "SSMK_LIB="+libPath)
	logPath := filepath.Join(cfg.Out, pkg+".log")
	if pr.only {
		logPath = filepath.Join(cfg.Out, pkg+"-check7.log")
	}
	var out bytes.Buffer
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd.Stdout = io.MultiWriter(&out, logFile)
	cmd.Stderr = cmd.Stdout
	runErr := cmd.Run()
	var exitErr *exec.ExitError
	if runErr != nil && !errors.As(runErr, &exitErr) {
		return nil, fmt.Errorf("%s: cannot run the tests: %v", pkg, runErr)
	}
	parsed, err := gotest.NewParser(gotest.PackageName("ssmverify/" + pkg)).Parse(bytes.NewReader(out.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("%s: parsing the test output (%s): %v", pkg, logPath, err)
	}
	tests := testsOf(parsed, pkg, cfg, libPath)
	failed := false
	for _, t := range tests {
		failed = failed || t.Result == Fail
	}
	if runErr != nil && !failed {
		// The process failed without a failing test: a build error, a
		// panic outside a test, a timeout. Report it as a failure.
		tests = append(tests, Test{Package: pkg, Name: "(package)", Result: Fail, Task: cfg.Task,
			Output: tail(out.String(), 40), Reproduce: reproduce(cfg, pkg, "", libPath)})
	}
	return tests, nil
}

func testsOf(rep gtr.Report, pkg string, cfg Config, libPath string) []Test {
	var tests []Test
	for _, p := range rep.Packages {
		for _, t := range p.Tests {
			res := map[gtr.Result]string{gtr.Pass: Pass, gtr.Fail: Fail, gtr.Skip: Skip}[t.Result]
			if res == "" {
				res = Fail // Unknown: started but never finished (a crash)
			}
			tt := Test{Package: pkg, Name: t.Name, Result: res, Seconds: t.Duration.Seconds(), Task: cfg.Task}
			if res == Skip {
				// A check that could not decide here says "undecided: why"
				// when it skips: that is not a skip of choice.
				for _, l := range t.Output {
					if _, why, ok := strings.Cut(l, "undecided: "); ok {
						tt.Result, tt.Output = Undecided, []string{strings.TrimSpace(why)}
						break
					}
				}
			}
			if res == Fail {
				tt.Output = capLines(t.Output, 40)
				tt.Reproduce = reproduce(cfg, pkg, t.Name, libPath)
			}
			tests = append(tests, tt)
		}
	}
	return tests
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
	env := "SSMK_LIB=" + libPath
	if cfg.RapidSeed != 0 {
		env = fmt.Sprintf("RAPID_SEED=%d %s", cfg.RapidSeed, env)
	}
	if cfg.Bin != "" {
		return fmt.Sprintf("cd %s && %s %s -test.v%s%s", pkg, env, filepath.Join("..", cfg.Bin, pkg+".test"),
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

func capLines(lines []string, n int) []string {
	if len(lines) > n {
		return append(append([]string{}, lines[:n]...), fmt.Sprintf("… %d more lines", len(lines)-n))
	}
	return lines
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

// loadVerifyReport reads the verify suite's report.json (nil when the
// suite did not run or wrote none).
func loadVerifyReport(path string) *report.Report {
	vr, err := report.Load(path)
	if err != nil {
		return nil
	}
	return vr
}

// verifyFigures lists, per method, dtype and real/complex A of the verify
// report, the largest scaled error ratio and ulp distance and the number of
// comparisons, and those of the backward pass (overall and per gradient)
// where it was judged.
func verifyFigures(vr *report.Report, task string) []Figure {
	if vr == nil {
		return nil
	}
	var out []Figure
	for _, c := range vr.Cells {
		out = append(out,
			Figure{Name: "max scaled error ratio", Value: finite(float64(c.MaxRatio)), Unit: "|kernel − reference|/(u·S + η·T)", Method: c.Method, DType: c.DType, Kind: c.Kind, Task: task},
			Figure{Name: "max error", Value: finite(float64(c.MaxULP)), Unit: "ulp", Method: c.Method, DType: c.DType, Kind: c.Kind, Task: task},
			Figure{Name: "comparisons", Value: float64(c.Checks), Unit: "count", Method: c.Method, DType: c.DType, Kind: c.Kind, Task: task})
		if bw := c.Backward; bw != nil {
			out = append(out,
				Figure{Name: "backward max scaled error ratio", Value: finite(float64(bw.MaxRatio)), Unit: "|kernel − reference|/(u·S + η·T)", Method: c.Method, DType: c.DType, Kind: c.Kind, Task: task},
				Figure{Name: "backward comparisons", Value: float64(bw.Checks), Unit: "count", Method: c.Method, DType: c.DType, Kind: c.Kind, Task: task})
			for _, g := range bw.Grads {
				out = append(out,
					Figure{Name: "backward max scaled error ratio: " + g.Name, Value: finite(float64(g.MaxRatio)), Unit: "|kernel − reference|/(u·S + η·T)", Method: c.Method, DType: c.DType, Kind: c.Kind, Task: task},
					Figure{Name: "backward max error: " + g.Name, Value: finite(float64(g.MaxULP)), Unit: "ulp", Method: c.Method, DType: c.DType, Kind: c.Kind, Task: task})
			}
		}
	}
	return out
}

// convergenceFigures lists the orders the verify suite's convergence test
// fitted (none when it did not run).
func convergenceFigures(vr *report.Report, task string) []Figure {
	if vr == nil || vr.Convergence == nil {
		return nil
	}
	var out []Figure
	for _, m := range ssm.Methods() {
		if s, ok := vr.Convergence.Slopes[m.String()]; ok {
			out = append(out, Figure{Name: "global convergence order", Value: s, Unit: "slope of log error vs log Δ", Method: m.String(), DType: "fp64", Task: task})
		}
	}
	return out
}

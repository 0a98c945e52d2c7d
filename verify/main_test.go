package verify

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"ssmverify/cudalib"
	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/report"
	"ssmverify/ssm"
	"ssmverify/testrun"
)

var (
	lib       *cudalib.Library
	rep       *report.Report
	reportDir = flag.String("report", "", "write report.json and summary.txt into this folder")
	appendRep = flag.Bool("append", false, "merge the report.json already in -report's folder (an earlier part of the same run) into this one")
)

// TestMain opens the library under test once (cudalib.OpenDefault: the CPU
// build in CI, the CUDA build on a GPU machine, SSMK_LIB for a user's
// library), runs the suite, and writes the report.
func TestMain(m *testing.M) {
	flag.Parse()
	l, err := cudalib.OpenDefault()
	if err != nil {
		fmt.Fprintln(os.Stderr, "verify: cannot open the library under test:", err)
		os.Exit(2)
	}
	lib, rep = l, report.New(report.Identify(l))
	for _, m := range ssm.Methods() {
		for _, dt := range ssm.AllDTypes() {
			for _, c := range []bool{false, true} {
				rep.Declare(m, dt, c, l.Capabilities(m, dt, c))
				f, err := l.Features(m, dt, c)
				if err != nil {
					fmt.Fprintln(os.Stderr, "verify: the library's declared features:", err)
					os.Exit(2)
				}
				declared[combo{m, dt, c}] = f
				rep.DeclareFeatures(m, dt, c, f)
			}
		}
	}
	if *reportDir == "" {
		// make mutants runs ./verify and ./golden in one go test, where a
		// -report flag would reach golden too.
		*reportDir = os.Getenv("SSMK_REPORT_DIR")
	}
	if *appendRep {
		if err := rep.MergeFrom(*reportDir); err != nil {
			fmt.Fprintln(os.Stderr, "verify: -append:", err)
			os.Exit(2)
		}
	}
	out := testrun.CaptureStdout()
	code := m.Run()
	if tests, err := testrun.Parse(out(), "verify", testrun.ErrorSites(".")); err == nil {
		rep.SetReasons(tests)
	}
	rep.Finish()
	if *reportDir != "" {
		if err := rep.Write(*reportDir); err != nil {
			fmt.Fprintln(os.Stderr, "verify: writing the report:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// track records the test's verdict in the report when it ends and, for a
// top-level test, checkpoints the report (report.Checkpoint): should the
// process die in a later test, the runner resumes without it and keeps
// what this one recorded.
func track(t *testing.T) {
	t.Cleanup(func() {
		if err := rep.TestEnded(t.Name(), outcome(t), *reportDir); err != nil {
			t.Logf("checkpointing the report: %v", err)
		}
	})
}

func outcome(t *testing.T) report.Outcome {
	switch {
	case t.Failed():
		return report.Failed
	case t.Skipped() && rep.IsUndecided(t.Name()):
		return report.Undecided
	case t.Skipped():
		return report.Skipped
	}
	return report.Passed
}

// undecided ends a test that cannot decide on this machine: the report
// shows it as undecided with the reason, never as a pass.
func undecided(t *testing.T, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	rep.Undecide(t.Name(), "", reason)
	t.Skip("undecided: " + reason)
}

// partlyUndecided records that part of what a test decides could not be
// decided here; the test's verdict covers the rest, and the report names
// the part with the reason.
func partlyUndecided(t *testing.T, part, reason string) {
	t.Helper()
	rep.Undecide(t.Name(), part, reason)
	t.Logf("undecided (%s): %s", part, reason)
}

// fallback reports whether the library declares that method m computes zoh
// for complex A in dtype dt (then complex results are held to the library's
// own zoh, in TestComplexFallback, not to the complex reference).
func fallback(m ssm.Method, dt ssm.DType) bool {
	return lib.Capabilities(m, dt, true).ComplexZOHFallback()
}

// judged reports whether the library declares (m, dt, real/complex A)
// supported, through ssmk_discretize too when discretize is set; if not,
// it records in the report that test left what unjudged. What a library
// declares unsupported is never a failure.
func judged(test, what string, m ssm.Method, dt ssm.DType, isComplex, discretize bool) bool {
	c := lib.Capabilities(m, dt, isComplex)
	if c.Supported() && (!discretize || !c.ScanOnly()) {
		return true
	}
	why := "declared unsupported"
	if c.Supported() {
		why = "declared scan only: no ssmk_discretize"
	}
	rep.Unsupported(test, fmt.Sprintf("%s %v %v %s (%s)", what, m, dt, ssm.AKind(isComplex), why))
	return false
}

// combo is a method, dtype and real/complex A.
type combo struct {
	m         ssm.Method
	dt        ssm.DType
	isComplex bool
}

// declared is what the library's scan takes for each combination
// (ssmk_scan_features; ssm.AllFeatures for a library of ABI v1).
var declared = map[combo]ssm.Features{}

func featuresOf(m ssm.Method, dt ssm.DType, isComplex bool) ssm.Features {
	return declared[combo{m, dt, isComplex}]
}

// errNotTaken marks a problem outside what the library declares it takes:
// recorded as not supported, never a failure.
var errNotTaken = errors.New("outside what the library declares it takes (ssmk_scan_features)")

// fitProblem returns p as the library takes it (ssm.Features.Fit of its
// declaration for p's combination), recording under test what was changed,
// or an errNotTaken error, recorded as not supported, when p cannot be
// fitted.
func fitProblem(test string, p *ssm.Problem, dt ssm.DType) (*ssm.Problem, error) {
	f := featuresOf(p.Method, dt, p.Complex)
	q, notes, err := f.Fit(p)
	if err != nil {
		rep.Unsupported(test, fmt.Sprintf("%v %v %s: %v", p.Method, dt, ssm.AKind(p.Complex), err))
		return nil, fmt.Errorf("%w: %v", errNotTaken, err)
	}
	if len(notes) > 0 {
		rep.Fit(test, strings.Join(notes, "; "))
	}
	return q, nil
}

// within is spec s moved within the library's declaration for its
// combination in dt (mamba1.Spec.Within): the suite's own problems drawn at
// sizes the library takes instead of left unjudged; scanChecked fits the
// rest.
func within(s mamba1.Spec, dt ssm.DType) mamba1.Spec {
	return s.Within(featuresOf(s.Method, dt, s.Complex))
}

// diagnosis investigates a failing scan of p in dt (package diagnose) once
// per test and cell, records it in the report, and returns the line for
// the test's log ("" when the cell already has one).
func diagnosis(test string, p *ssm.Problem, dt ssm.DType) string {
	if !rep.WantDiagnosis(test, p.Method, dt, p.Complex) {
		return ""
	}
	f := diagnoseSmall(p, dt)
	rep.AddDiagnosis(test, p.Method, dt, p.Complex, f)
	return "\ndiagnosis [" + f.Tag + "]: " + f.String()
}

// diagnoseSmall diagnoses p, or, when p is large (a diagnosis scans it a
// few dozen times), the smallest of its prefixes that still fails: batch
// row 0, the first 64, 512 or 2049 steps, the first 16 states; p itself
// when none does and p is not too large.
func diagnoseSmall(p *ssm.Problem, dt ssm.DType) diagnose.Finding {
	const large = 1 << 15
	if p.OutLen()*p.Dstate <= large {
		return diagnose.Scan(lib, p, dt)
	}
	if _, err := lib.Scan(p, dt); err != nil {
		return diagnose.Scan(lib, p, dt) // a refusal: diagnosed by shrinking sizes, without references
	}
	for _, L := range []int{64, 512, 2049} {
		n := min(16, p.Dstate)
		if !featuresOf(p.Method, dt, p.Complex).TakesDstate(n) {
			n = p.Dstate
		}
		q := diagnose.Prefix(p, 1, min(L, p.Seqlen), n)
		if got, err := lib.Scan(q, dt); err == nil {
			if c, err := judge.CompareScan(q, got, dt, nil, nil); err == nil && !c.Passed(dt) {
				f := diagnose.Scan(lib, q, dt)
				f.Evidence = append(f.Evidence, "diagnosed on the prefix "+q.Shape())
				return f
			}
		}
	}
	// The failure needs the whole problem: diagnosed on it where a few
	// dozen scans of it stay affordable.
	if p.OutLen()*p.Dstate <= 1<<22 {
		return diagnose.Scan(lib, p, dt)
	}
	return diagnose.Finding{Tag: "none", Cause: "not diagnosed: no small prefix of the problem fails (" + p.Shape() + ")"}
}

// scanChecked runs the kernel on p in dt (rounding p first to the types
// the kernel reads, ssm.Problem.RoundTo, so kernel and reference see the
// same numbers), compares with the
// reference and records the comparison under test. It returns the
// comparison and the (possibly rounded) problem. Callers ask judged first:
// a refusal here is of a declared combination, recorded as a failure of
// its cell and returned with the refusal's diagnosis.
func scanChecked(test string, p *ssm.Problem, dt ssm.DType) (judge.Comparison, *ssm.Problem, error) {
	p, err := fitProblem(test, p, dt)
	if err != nil {
		return judge.Comparison{}, p, err
	}
	if dt != ssm.F64 {
		p = p.Clone()
		p.RoundTo(dt)
	}
	got, err := lib.Scan(p, dt)
	if err != nil {
		rep.Add(test, p.Method, dt, p.Complex, math.Inf(1), math.Inf(1), false, "refused: "+err.Error())
		return judge.Comparison{}, p, fmt.Errorf("%w%s", err, diagnosis(test, p, dt))
	}
	c, err := judge.CompareScan(p, got, dt, nil, nil)
	if err != nil {
		return c, p, err
	}
	rep.Add(test, p.Method, dt, p.Complex, c.Worst.Ratio, c.Worst.ULP, c.Passed(dt), c.Worst.String())
	return c, p, nil
}

package report

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"

	"ssmverify/cudalib"
	"ssmverify/testrun"
)

// Verdicts of a report (Decide) and of a performance comparison (Perf).
const (
	VerdictPass      = "pass"
	VerdictFail      = "fail"
	VerdictUndecided = "undecided"
	VerdictError     = "error" // the run could not decide: setup
	Regression       = "regression"
	Improvement      = "improvement"
	NoChange         = "no significant change"
)

// Exit codes of cmd/gate, one per verdict.
const (
	ExitPass      = 0
	ExitFail      = 1
	ExitSetup     = 2
	ExitUndecided = 3
)

// Host identifies the machine a report was made on.
type Host struct {
	Hostname string `json:"hostname"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	CPUs     int    `json:"cpus"`
}

// ThisHost identifies this machine.
func ThisHost() *Host {
	h, _ := os.Hostname()
	return &Host{Hostname: h, OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
}

// Figure is one measured number with its unit.
type Figure struct {
	Name   string `json:"name"`
	Value  Num    `json:"value"`
	Unit   string `json:"unit"`
	Method string `json:"method,omitempty"`
	DType  string `json:"dtype,omitempty"`
	Kind   string `json:"kind,omitempty"`
	Task   string `json:"task,omitempty"`
}

// Perf is one method's Check7 timing, compared with a baseline where one
// was given (package perf decides the verdict and writes the reason).
type Perf struct {
	Method string  `json:"method"`
	Unit   string  `json:"unit"` // µs per launch
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Lo     float64 `json:"ci95_lo"`
	Hi     float64 `json:"ci95_hi"`
	// Baseline figures; zero when there is no baseline.
	BaseN      int     `json:"baseline_n,omitempty"`
	BaseMedian float64 `json:"baseline_median,omitempty"`
	BaseLo     float64 `json:"baseline_ci95_lo,omitempty"`
	BaseHi     float64 `json:"baseline_ci95_hi,omitempty"`
	DeltaPct   float64 `json:"delta_pct,omitempty"` // (median − baseline)/baseline × 100
	P          float64 `json:"p,omitempty"`
	Alpha      float64 `json:"alpha,omitempty"`
	// Verdict: pass (no baseline: measured only), no significant change,
	// improvement, regression or undecided.
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
	Task    string `json:"task,omitempty"`
}

// Identify identifies the opened library l: its file and the file's
// sha256, backend, device, how it was selected and its ABI version.
func Identify(l *cudalib.Library) LibraryInfo {
	dev, err := l.DeviceName()
	if err != nil {
		dev = "unavailable: " + err.Error()
	}
	info := LibraryInfo{Path: l.Path, Backend: l.Backend, Device: dev, Selection: l.Selection, ABIVersion: l.ABIVersionOf()}
	if b, err := os.ReadFile(l.Path); err == nil {
		h := sha256.Sum256(b)
		info.SHA256 = hex.EncodeToString(h[:])
	}
	return info
}

// SetReasons gives every failed test the first line of its failure's
// message, from the suite's own output as testrun.Parse read it.
func (r *Report) SetReasons(tests []testrun.Test) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, v := range r.Tests {
		if v.Outcome != Failed {
			continue
		}
		for _, t := range tests {
			if t.Name == v.Name && t.Reason != "" {
				r.Tests[i].Reason = t.Reason
				break
			}
		}
	}
}

// SetTests replaces the report's tests by those a runner parsed (every
// test and subtest of every package, with their logs), keeping the reasons
// the suite recorded where the parse found none.
func (r *Report) SetTests(tests []TestVerdict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, t := range tests {
		if t.Reason != "" {
			continue
		}
		for _, v := range r.Tests {
			if v.Name == t.Name && (v.Package == "" || v.Package == t.Package) {
				tests[i].Reason = v.Reason
			}
		}
	}
	r.Tests = tests
}

// Failed lists the failed tests, in report order.
func (r *Report) Failed() []TestVerdict {
	var out []TestVerdict
	for _, t := range r.Tests {
		if t.Outcome == Failed {
			out = append(out, t)
		}
	}
	return out
}

// LeafFailures lists the failed tests none of whose subtests failed: a
// parent that failed only because a subtest did adds nothing to read.
func (r *Report) LeafFailures() []TestVerdict {
	failed := r.Failed()
	var out []TestVerdict
	for _, t := range failed {
		parent := false
		for _, u := range failed {
			if u.Package == t.Package && u.Task == t.Task && strings.HasPrefix(u.Name, t.Name+"/") {
				parent = true
				break
			}
		}
		if !parent {
			out = append(out, t)
		}
	}
	return out
}

// Decide sets Verdict and ExitCode from the setup errors, the tests, the
// cells and the performance comparisons: error when the run could not
// decide, fail on any failed test, failed cell or regression, undecided
// when a test, a part of one or a comparison could not decide (never a
// silent pass), else pass. A run in which no test ran is an error: nothing
// was verified.
func (r *Report) Decide() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decide()
}

func (r *Report) decide() {
	failed := false
	for _, t := range r.Tests {
		failed = failed || t.Outcome == Failed
	}
	for _, c := range r.Cells {
		failed = failed || c.Failures > 0 || (c.Backward != nil && c.Backward.Failures > 0)
	}
	for _, p := range r.Performance {
		failed = failed || p.Verdict == Regression
	}
	r.Passed = !failed && len(r.Errors) == 0
	switch {
	case len(r.Errors) > 0:
		r.Verdict, r.ExitCode = VerdictError, ExitSetup
	case failed:
		r.Verdict, r.ExitCode = VerdictFail, ExitFail
	default:
		r.Verdict, r.ExitCode = VerdictPass, ExitPass
		for _, t := range r.Tests {
			if t.Outcome == Undecided {
				r.Verdict, r.ExitCode = VerdictUndecided, ExitUndecided
			}
		}
		for _, p := range r.Performance {
			if p.Verdict == VerdictUndecided {
				r.Verdict, r.ExitCode = VerdictUndecided, ExitUndecided
			}
		}
		// a part of a test that could not be decided (a timing on a busy
		// machine) leaves the run undecided too: what is listed as
		// undecided is never reported as a pass
		if len(r.Undecided) > 0 {
			r.Verdict, r.ExitCode = VerdictUndecided, ExitUndecided
		}
	}
	if r.Verdict == VerdictPass && len(r.Tests) == 0 {
		r.Errors = append(r.Errors, "no test ran: nothing was verified")
		r.Verdict, r.ExitCode, r.Passed = VerdictError, ExitSetup, false
	}
}

// SortTests puts failures first (the reader's first concern), then by
// package, the most telling first (the verification suite, the golden
// files, the fuzz corpus), and name.
func (r *Report) SortTests() {
	r.mu.Lock()
	defer r.mu.Unlock()
	rank := map[Outcome]int{Failed: 0, Undecided: 1, Passed: 2, Skipped: 3}
	pkgRank := map[string]int{"verify": 0, "golden": 1, "fuzz": 2}
	sort.SliceStable(r.Tests, func(i, j int) bool {
		a, b := r.Tests[i], r.Tests[j]
		if rank[a.Outcome] != rank[b.Outcome] {
			return rank[a.Outcome] < rank[b.Outcome]
		}
		if a.Package != b.Package {
			return pkgRank[a.Package] < pkgRank[b.Package]
		}
		return a.Name < b.Name
	})
}

// FromRun turns a runner's tests into the report's, failures with their
// log (at most 40 lines) and the command that reproduces them
// (reproduce(name)).
func FromRun(tests []testrun.Test, task string, reproduce func(pkg, name string) string) []TestVerdict {
	out := make([]TestVerdict, 0, len(tests))
	for _, t := range tests {
		o := map[string]Outcome{testrun.Pass: Passed, testrun.Fail: Failed, testrun.Skip: Skipped,
			testrun.Undecided: Undecided, testrun.Crashed: Failed}[t.Result]
		v := TestVerdict{Package: t.Package, Name: t.Name, Passed: o != Failed, Outcome: o, Reason: t.Reason, Seconds: t.Seconds, Task: task}
		if o == Failed {
			v.Output = capLines(t.Output, 40)
			v.Reproduce = reproduce(t.Package, t.Name)
		}
		out = append(out, v)
	}
	return out
}

func capLines(lines []string, n int) []string {
	if len(lines) > n {
		return append(append([]string{}, lines[:n]...), fmt.Sprintf("… %d more lines", len(lines)-n))
	}
	return lines
}

// Package gate turns the verification suite into a merge gate: it runs the
// accuracy, golden, fuzz-corpus and performance tests against a kernel
// library, compares Check7's timings with a stored baseline by benchstat's
// statistics, and writes one versioned report (report.json), a JUnit file
// for CI test tabs (junit.xml), a pull-request summary (report.md) and
// plots. cmd/gate is its command line; make gate runs it.
//
// # Verdicts and exit codes
//
// A run passes (exit 0) only when every required test passed and no
// performance comparison found a significant regression. It fails (exit 1)
// on any failed test or significant regression; exit 2 means it could not
// run (the library does not load, a GPU was required and none answered,
// an ABI mismatch, bad flags), with one line saying what happened and what
// to do; exit 3 means a performance comparison could not decide (too few
// samples, or a spread too wide to see a regression of the allowed size),
// never a silent pass.
//
// # Performance comparison
//
// For each method, the baseline's and this run's Check7 samples (µs per
// launch) are compared as benchstat does (golang.org/x/perf/benchmath,
// AssumeNothing): medians with 95% confidence intervals and a Mann–Whitney
// U test at α = 0.05. A change is significant when p < α; a significant
// slowdown beyond -max-regression (default 5%) fails the gate, a significant
// speed-up of at least MinEffect (1%) is reported as an improvement. With fewer samples than the test
// needs to reach α, or a confidence interval wider than the allowed
// regression on either side, the verdict is "undecided" with the reason.
package gate

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"ssmverify/report"
)

// Schema names the version of report.json.
const Schema = "ssmverify.gate-report/v1"

// Exit codes of cmd/gate.
const (
	ExitPass      = 0
	ExitFail      = 1
	ExitSetup     = 2
	ExitUndecided = 3
)

// Verdicts of a report, a test or a performance comparison.
const (
	Pass        = "pass"
	Fail        = "fail"
	Skip        = "skip"
	Undecided   = "undecided"
	SetupError  = "error"
	Regression  = "regression"
	Improvement = "improvement"
	NoChange    = "no significant change"
)

// Report is report.json. Every measured figure carries its unit.
type Report struct {
	Schema   string   `json:"schema"`
	Created  string   `json:"created"` // RFC 3339
	Verdict  string   `json:"verdict"` // pass, fail, undecided, error
	ExitCode int      `json:"exit_code"`
	Tasks    []string `json:"tasks"`   // task names (one, or the merged ones)
	Command  string   `json:"command"` // how this report was produced
	// RapidSeed is the seed of the suite's property tests (RAPID_SEED);
	// 0: a fresh seed per property, not reproducible.
	RapidSeed uint64   `json:"rapid_seed"`
	Library   Library  `json:"library"`
	Host      Host     `json:"host"`
	Errors    []string `json:"errors,omitempty"` // setup errors, one line each

	Tests []Test `json:"tests"`
	// Undecided lists the parts of passed tests that could not be decided
	// on this machine, with the reason (a wholly undecided test is a Test
	// with Result undecided).
	Undecided   []string `json:"undecided,omitempty"`
	Figures     []Figure `json:"figures"`
	Performance []Perf   `json:"performance,omitempty"`
	Baseline    string   `json:"baseline,omitempty"` // the baseline file compared with
	Plots       []string `json:"plots,omitempty"`    // PNG files next to report.json
}

// Library identifies the library under test.
type Library struct {
	Path       string `json:"path"`
	SHA256     string `json:"sha256"`
	Backend    string `json:"backend"`
	Selection  string `json:"selection"`
	ABIVersion int    `json:"abi_version"`
	Device     string `json:"device"`
}

// Host identifies the machine.
type Host struct {
	Hostname string `json:"hostname"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	CPUs     int    `json:"cpus"`
}

// Test is one test function or subtest of the suite.
type Test struct {
	Package   string   `json:"package"`
	Name      string   `json:"name"`
	Result    string   `json:"result"` // pass, fail, skip, undecided
	Seconds   float64  `json:"seconds"`
	Task      string   `json:"task,omitempty"`
	Output    []string `json:"output,omitempty"` // a failure's log lines (at most 40)
	Reproduce string   `json:"reproduce,omitempty"`
}

// Figure is one measured number.
type Figure struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Method string  `json:"method,omitempty"`
	DType  string  `json:"dtype,omitempty"`
	Kind   string  `json:"kind,omitempty"`
	Task   string  `json:"task,omitempty"`
}

// Perf is one method's performance comparison with the baseline.
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
	Verdict    string  `json:"verdict"`
	Reason     string  `json:"reason"`
	Task       string  `json:"task,omitempty"`
}

// Failed lists the failed tests, in report order.
func (r *Report) Failed() []Test {
	var out []Test
	for _, t := range r.Tests {
		if t.Result == Fail {
			out = append(out, t)
		}
	}
	return out
}

// Decide sets Verdict and ExitCode from the tests, the performance
// comparisons and the setup errors.
func (r *Report) Decide() {
	switch {
	case len(r.Errors) > 0:
		r.Verdict, r.ExitCode = SetupError, ExitSetup
	case len(r.Failed()) > 0:
		r.Verdict, r.ExitCode = Fail, ExitFail
	default:
		r.Verdict, r.ExitCode = Pass, ExitPass
		for _, t := range r.Tests {
			if t.Result == Undecided {
				r.Verdict, r.ExitCode = Undecided, ExitUndecided
			}
		}
		for _, p := range r.Performance {
			if p.Verdict == Regression {
				r.Verdict, r.ExitCode = Fail, ExitFail
				return
			}
			if p.Verdict == Undecided {
				r.Verdict, r.ExitCode = Undecided, ExitUndecided
			}
		}
	}
	if r.Verdict == Pass && len(r.Tests) == 0 {
		r.Errors = append(r.Errors, "no test ran: nothing was verified")
		r.Verdict, r.ExitCode = SetupError, ExitSetup
	}
}

// Write writes report.json into dir.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.json"), append(b, '\n'), 0o644)
}

// Load reads a report.json and checks its schema.
func Load(path string) (*Report, error) {
	r, err := report.ReadJSON[Report](path)
	if err != nil {
		return nil, err
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("%s: schema %q, want %q", path, r.Schema, Schema)
	}
	return r, nil
}

// finite replaces ±Inf and NaN (a broken kernel's ratios) by ±MaxFloat64
// and −1, so that report.json stays valid JSON; the unit says what it is.
func finite(v float64) float64 {
	switch {
	case math.IsNaN(v):
		return -1
	case math.IsInf(v, 1):
		return math.MaxFloat64
	case math.IsInf(v, -1):
		return -math.MaxFloat64
	}
	return v
}

// sortTests puts failures first (the reader's first concern), then by
// package, the most telling first (the verification suite, the golden
// files, the fuzz corpus), and name.
func sortTests(ts []Test) {
	rank := map[string]int{Fail: 0, Undecided: 1, Pass: 2, Skip: 3}
	pkgRank := map[string]int{"verify": 0, "golden": 1, "fuzz": 2}
	sort.SliceStable(ts, func(i, j int) bool {
		if rank[ts[i].Result] != rank[ts[j].Result] {
			return rank[ts[i].Result] < rank[ts[j].Result]
		}
		if ts[i].Package != ts[j].Package {
			return pkgRank[ts[i].Package] < pkgRank[ts[j].Package]
		}
		return ts[i].Name < ts[j].Name
	})
}

// LeafFailures lists the failed tests none of whose subtests failed: a
// parent that failed only because a subtest did adds nothing to read.
func (r *Report) LeafFailures() []Test {
	failed := r.Failed()
	var out []Test
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

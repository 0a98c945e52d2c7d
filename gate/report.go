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
	"fmt"

	"ssmverify/report"
)

// Load reads a report.json and checks its schema.
func Load(path string) (*report.Report, error) {
	r, err := report.Load(path)
	if err != nil {
		return nil, err
	}
	if r.Schema != report.ReportSchema {
		return nil, fmt.Errorf("%s: schema %q, want %q", path, r.Schema, report.ReportSchema)
	}
	return r, nil
}

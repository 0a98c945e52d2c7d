package main

import (
	"testing"

	"ssmverify/bridge"
	"ssmverify/report"
)

// TestClosingVerdict: the run's exit status is its worst part's, error
// before fail before undecided before pass, and a bridged suite that could
// not start (no NumPy) leaves the run undecided, never a pass.
func TestClosingVerdict(t *testing.T) {
	pass := outcome{report.ExitPass, "PASS"}
	fail := outcome{report.ExitFail, "FAIL"}
	und := outcome{report.ExitUndecided, "UNDECIDED"}
	bad := outcome{report.ExitSetup, "wrote no summary"}
	out := bridge.NoWorkerLine([]byte("verify/mamba2: no worker could start (python3 with NumPy; Debian: apt-get install python3-numpy): skipped: x\n"))
	missing := outcome{report.ExitUndecided, out}
	ps := []part{{name: "a"}, {name: "b"}, {name: "c"}}
	for _, tc := range []struct {
		name string
		got  []outcome
		want int
	}{
		{"all pass", []outcome{pass, pass, pass}, report.ExitPass},
		{"a part not run", []outcome{pass, pass, missing}, report.ExitUndecided},
		{"undecided", []outcome{und, pass, pass}, report.ExitUndecided},
		{"fail over undecided", []outcome{und, fail, missing}, report.ExitFail},
		{"error over fail", []outcome{fail, bad, pass}, report.ExitSetup},
	} {
		if got := closing(ps, tc.got); got != tc.want {
			t.Errorf("%s: exit %d, want %d", tc.name, got, tc.want)
		}
	}
	if out == "" {
		t.Error("the bridged suite's skip line was not recognised")
	}
}

// TestLastLineSaysWhy: a part that cannot start is reported by its reason,
// not by go test's closing FAIL.
func TestLastLineSaysWhy(t *testing.T) {
	out := "verify: cannot open the library under test: SSMK_LIB: cudalib: /x.so not found\nFAIL\tssmverify/verify\t0.036s\nFAIL\n"
	if got := lastLine([]byte(out)); got != "verify: cannot open the library under test: SSMK_LIB: cudalib: /x.so not found" {
		t.Errorf("lastLine: %q", got)
	}
}

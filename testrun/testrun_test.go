package testrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// verbose is go test -v output: a test that logs before it fails, a parent
// failing through a subtest, a pass, an undecided skip, and a test the
// process died inside.
const verbose = `=== RUN   TestInfoThenError
    checks_test.go:10: library /x.so, ABI v1
    checks_test.go:12: bilinear and zoh give the same output
--- FAIL: TestInfoThenError (0.00s)
=== RUN   TestParent
=== RUN   TestParent/bilinear
    convergence_test.go:26: bilinear: global order 0.00, want 2
--- FAIL: TestParent (0.00s)
    --- FAIL: TestParent/bilinear (0.00s)
=== RUN   TestShortHeader
    backward_test.go:316: bilinear fp32 real: threshold 4
          dC[2523]: kernel 2.76e+38, reference -0.0812, ratio 6.91e+44
          dz[1424]: kernel -9.09e+37, reference 0.0923, ratio 9.81e+43
--- FAIL: TestShortHeader (0.00s)
=== RUN   TestPass
--- PASS: TestPass (0.01s)
=== RUN   TestNoisy
    checks_test.go:40: undecided: too noisy to tell
--- SKIP: TestNoisy (0.00s)
=== RUN   TestCrash
panic: runtime error: invalid memory address
FAIL	ssmverify/verify	0.1s
`

// TestParse: each test's result, the first line of a failure's message
// written from an error call site (not the informational log before it),
// a parent's reason from its failing subtest, an undecided skip, and a
// test the process died inside, which is a crash and not a failure.
func TestParse(t *testing.T) {
	sites := map[string]bool{"checks_test.go:12": true, "convergence_test.go:26": true, "backward_test.go:316": true}
	tests, err := Parse([]byte(verbose), "verify", sites)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Test{}
	for _, tt := range tests {
		got[tt.Name] = tt
	}
	for _, c := range []struct{ name, result, reason string }{
		{"TestInfoThenError", Fail, "bilinear and zoh give the same output"},
		{"TestParent", Fail, "bilinear: bilinear: global order 0.00, want 2"},
		{"TestParent/bilinear", Fail, "bilinear: global order 0.00, want 2"},
		{"TestShortHeader", Fail, "bilinear fp32 real: threshold 4 — dC[2523]: kernel 2.76e+38, reference -0.0812, ratio 6.91e+44"},
		{"TestPass", Pass, ""},
		{"TestNoisy", Undecided, "too noisy to tell"},
		{"TestCrash", Crashed, "the test process ended inside this test (a crash: see the log)"},
	} {
		if g := got[c.name]; g.Result != c.result || g.Reason != c.reason {
			t.Errorf("%s: %s %q, want %s %q", c.name, g.Result, g.Reason, c.result, c.reason)
		}
	}
	if f := FailedTopLevel(tests); strings.Join(f, ",") != "TestInfoThenError,TestParent,TestShortHeader" {
		t.Errorf("FailedTopLevel = %v: want the two failures, not the subtest or the crash", f)
	}
	// Without the sources, the first log line is the reason.
	tests, _ = Parse([]byte(verbose), "verify", nil)
	if tests[0].Reason != "library /x.so, ABI v1" {
		t.Errorf("without sites: %q, want the first log line", tests[0].Reason)
	}
}

// TestParseTimedOut: a test running when go test's -timeout panicked is
// undecided with the limit named (the run's budget ended it), not a
// crash of the kernel; the tests before it keep their verdicts.
func TestParseTimedOut(t *testing.T) {
	log := "=== RUN   TestA\n--- PASS: TestA (1.00s)\n=== RUN   TestB\n=== RUN   TestB/fp32\n" +
		"panic: test timed out after 8m30s\n\trunning tests:\n\t\tTestB/fp32 (2m0s)\n\ngoroutine 1 [running]:\n"
	tests, err := Parse([]byte(log), "verify", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Test{}
	for _, tt := range tests {
		got[tt.Name] = tt
	}
	if got["TestA"].Result != Pass {
		t.Errorf("TestA: %s, want pass", got["TestA"].Result)
	}
	want := "the run's time limit (8m30s) ended the process inside this test: not judged"
	for _, name := range []string{"TestB", "TestB/fp32"} {
		if g := got[name]; g.Result != Undecided || g.Reason != want {
			t.Errorf("%s: %s %q, want undecided %q", name, g.Result, g.Reason, want)
		}
	}
	// The same log without the panic's line is a crash.
	tests, _ = Parse([]byte(strings.Replace(log, "panic: test timed out after 8m30s", "panic: runtime error", 1)), "verify", nil)
	for _, tt := range tests {
		if tt.Name == "TestB/fp32" && tt.Result != Crashed {
			t.Errorf("without the timeout's panic: %s, want crashed", tt.Result)
		}
	}
}

// TestErrorSites: the error calls of a package's files, by file and line.
func TestErrorSites(t *testing.T) {
	dir := t.TempDir()
	src := "package p\n\nfunc f(t T) {\n\tt.Logf(\"x\")\n\tt.Errorf(\"y\")\n\tt.Fatal(err)\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "a_test.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	s := ErrorSites(dir)
	if len(s) != 2 || !s["a_test.go:5"] || !s["a_test.go:6"] {
		t.Errorf("ErrorSites = %v, want a_test.go:5 and :6", s)
	}
	if ErrorSites(t.TempDir()) != nil {
		t.Error("a folder without Go files has error sites")
	}
}

// TestParseTestify: a testify assertion logs an empty line at its call
// site and its message in fields below it; the reason is its Messages, else
// its Error with its continuation lines, never "Error Trace:".
func TestParseTestify(t *testing.T) {
	const out = `=== RUN   TestWithMessage
    design_test.go:244: 
        	Error Trace:	/work/main/cudalib/design_test.go:244
        	Error:      	Should be true
        	Test:       	TestWithMessage
        	Messages:   	zoh complex chan4: out[0 0 0]: kernel NaN, reference -4.79e+16
--- FAIL: TestWithMessage (0.60s)
=== RUN   TestEqual
    plan_test.go:31: 
        	Error Trace:	/work/main/cudalib/plan_test.go:31
        	Error:      	Not equal: 
        	            	expected: "chan8"
        	            	actual  : "chan4"
        	Test:       	TestEqual
--- FAIL: TestEqual (0.01s)
`
	tests, err := Parse([]byte(out), "cudalib", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"TestWithMessage": "zoh complex chan4: out[0 0 0]: kernel NaN, reference -4.79e+16",
		"TestEqual":       `Not equal: expected: "chan8" actual  : "chan4"`,
	}
	for _, tt := range tests {
		if tt.Reason != want[tt.Name] {
			t.Errorf("%s: reason %q, want %q", tt.Name, tt.Reason, want[tt.Name])
		}
	}
}

// TestParseWithoutVerbose: without -v, go test prints a failure's lines
// under its "--- FAIL" line, subtests indented; their reasons are read from
// there.
func TestParseWithoutVerbose(t *testing.T) {
	const out = `--- FAIL: TestAccuracy (0.02s)
    --- FAIL: TestAccuracy/realistic (0.00s)
        accuracy_test.go:77: [rapid] failed after 0 tests: bilinear fp32
            To reproduce, specify -run="TestAccuracy/realistic"
        accuracy_test.go:92: bilinear fp32: declared supported, but ssmk_scan_fwd wrote past the end of out
FAIL
FAIL	ssmverify/verify	0.048s
`
	tests, err := Parse([]byte(out), "verify", map[string]bool{"accuracy_test.go:92": true})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, tt := range tests {
		got[tt.Name] = tt.Reason
	}
	if got["TestAccuracy/realistic"] != "bilinear fp32: declared supported, but ssmk_scan_fwd wrote past the end of out" ||
		got["TestAccuracy"] != "realistic: bilinear fp32: declared supported, but ssmk_scan_fwd wrote past the end of out" {
		t.Errorf("reasons %q", got)
	}
}

// TestCommand: go test and a prebuilt binary get the same flags, each in
// its own spelling, and the binary runs in its package's folder.
func TestCommand(t *testing.T) {
	s := Spec{Root: "/r", Package: "verify", Run: "^TestA$", Skip: "Check7", Failfast: true, Args: []string{"-report", "/o"}}
	c, err := s.Command()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Args, " "); got != "go test -v -count=1 -timeout=30m0s -run=^TestA$ -skip=Check7 -failfast ./verify -args -report /o" || c.Dir != "/r" {
		t.Errorf("go test: %q in %s", got, c.Dir)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "verify.test"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	s.Bin = bin
	if c, err = s.Command(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Args[1:], " "); got != "-test.v -test.count=1 -test.timeout=30m0s -test.run=^TestA$ -test.skip=Check7 -test.failfast -report /o" || c.Dir != "/r/verify" {
		t.Errorf("binary: %q in %s", got, c.Dir)
	}
	s.Bin = t.TempDir()
	if _, err := s.Command(); err == nil || !strings.Contains(err.Error(), "scripts/gpu.sh build") {
		t.Errorf("a missing binary: %v", err)
	}
}

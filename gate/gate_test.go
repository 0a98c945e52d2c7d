package gate

import (
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ssmverify/cudalib"
	"ssmverify/report"
)

func sample() *report.Report {
	r := report.New(report.LibraryInfo{Path: "/x/libssmk_cpu.so", SHA256: "abc", Backend: "cpu"})
	r.Started, r.Tasks = "2026-11-21T00:00:00Z", []string{"t1"}
	r.Tests = []report.TestVerdict{
		{Package: "verify", Name: "TestAccuracy", Outcome: report.Passed, Passed: true, Seconds: 1.5, Task: "t1"},
		{Package: "verify", Name: "TestSweep", Outcome: report.Failed, Task: "t1", Reason: "ratio 1e6 > 4", Output: []string{"    sweep_test.go:1: ratio 1e6 > 4"}, Reproduce: "go test ./verify -run '^TestSweep$'"},
		{Package: "fuzz", Name: "FuzzScan", Outcome: report.Skipped, Passed: true, Task: "t1"},
	}
	return r
}

// junitDoc is what a CI test tab reads of junit.xml.
type junitDoc struct {
	XMLName xml.Name `xml:"testsuites"`
	Suites  []struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Errors   int    `xml:"errors,attr"`
		Cases    []struct {
			Name    string `xml:"name,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
				Data    string `xml:",chardata"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
			Skipped *struct{} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func parseJUnit(t *testing.T, path string) junitDoc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var d junitDoc
	if err := xml.Unmarshal(b, &d); err != nil {
		t.Fatalf("junit.xml does not parse: %v", err)
	}
	return d
}

// TestJUnit: junit.xml parses, counts what the report holds, and carries
// each failure's log and reproduce command; regressions and undecided
// comparisons appear as a failure and an error.
func TestJUnit(t *testing.T) {
	r := sample()
	r.Performance = []report.Perf{{Method: "foh", Verdict: report.Regression, Reason: "+12% slower"}, {Method: "zoh", Verdict: report.VerdictUndecided, Reason: "too few samples"}}
	r.Decide()
	path := filepath.Join(t.TempDir(), "junit.xml")
	if err := WriteJUnit(path, r); err != nil {
		t.Fatal(err)
	}
	d := parseJUnit(t, path)
	tests, failures, errs, skipped, reproduce := 0, 0, 0, 0, false
	for _, s := range d.Suites {
		tests += s.Tests
		failures += s.Failures
		errs += s.Errors
		for _, c := range s.Cases {
			if c.Skipped != nil {
				skipped++
			}
			if c.Failure != nil && strings.Contains(c.Failure.Data, "reproduce: go test ./verify -run '^TestSweep$'") {
				reproduce = true
			}
		}
	}
	if tests != 5 || failures != 2 || errs != 1 || skipped != 1 || !reproduce {
		t.Errorf("junit: %d tests, %d failures, %d errors, %d skipped, reproduce line %t; want 5, 2, 1, 1, true", tests, failures, errs, skipped, reproduce)
	}
}

// TestMarkdownVerdictMatchesExit: report.md's first line states the verdict
// that the exit code reports, and the failures come before anything else.
func TestMarkdownVerdictMatchesExit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*report.Report)
		exit  int
		badge string
	}{
		{"pass", func(r *report.Report) { r.Tests = r.Tests[:1] }, report.ExitPass, "PASS"},
		{"fail", func(*report.Report) {}, report.ExitFail, "FAIL"},
		{"regression", func(r *report.Report) {
			r.Tests = r.Tests[:1]
			r.Performance = []report.Perf{{Method: "foh", Verdict: report.Regression}}
		}, report.ExitFail, "FAIL"},
		{"undecided", func(r *report.Report) {
			r.Tests = r.Tests[:1]
			r.Performance = []report.Perf{{Method: "foh", Verdict: report.VerdictUndecided}}
		}, report.ExitUndecided, "UNDECIDED"},
		{"undecided check", func(r *report.Report) {
			r.Tests = append(r.Tests[:1], report.TestVerdict{Package: "verify", Name: "TestCheck6MicroBenchmarks", Outcome: report.Undecided, Passed: true, Reason: "every figure noisy"})
		}, report.ExitUndecided, "UNDECIDED"},
		{"setup", func(r *report.Report) { r.Errors = []string{"no GPU: …"} }, report.ExitSetup, "ERROR"},
		{"nothing ran", func(r *report.Report) { r.Tests = nil }, report.ExitSetup, "ERROR"},
	} {
		r := sample()
		tc.edit(r)
		r.Decide()
		md := Markdown(r)
		first := strings.SplitN(md, "\n", 2)[0]
		if r.ExitCode != tc.exit || !strings.Contains(first, tc.badge) {
			t.Errorf("%s: exit %d, first line %q; want exit %d and %s", tc.name, r.ExitCode, first, tc.exit, tc.badge)
		}
		if tc.name == "undecided check" && !strings.Contains(md, "TestCheck6MicroBenchmarks: every figure noisy") {
			t.Errorf("an undecided check is not listed with its reason:\n%s", md)
		}
		if tc.name == "fail" && (!strings.Contains(md, "TestSweep") || strings.Index(md, "### Failures") > strings.Index(md, "<sub>")) {
			t.Errorf("fail: the failure is not listed before the footer:\n%s", md)
		}
	}
}

// TestMerge: task reports of one library merge into one verdict, one
// junit.xml and one report.md; a task that tested another library is
// refused, and so is a missing or foreign report file.
func TestMerge(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i, edit := range []func(*report.Report){
		func(r *report.Report) { r.Tests = r.Tests[:1] },
		func(r *report.Report) { r.Tests = r.Tests[1:2] }, // the failure
		func(r *report.Report) {
			r.Tests = r.Tests[:1]
			r.Performance = []report.Perf{{Method: "rk4", Verdict: report.NoChange}}
		},
	} {
		r := sample()
		r.Tasks = []string{"task" + string(rune('1'+i))}
		for k := range r.Tests {
			r.Tests[k].Task = r.Tasks[0]
		}
		edit(r)
		r.Decide()
		d := filepath.Join(dir, r.Tasks[0])
		if err := r.Write(d); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, filepath.Join(d, "report.json"))
	}
	out := filepath.Join(dir, "merged")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := MergeFiles(out, paths)
	if err != nil {
		t.Fatal(err)
	}
	if m.Verdict != report.VerdictFail || m.ExitCode != report.ExitFail || len(m.Tasks) != 3 || len(m.Tests) != 3 || len(m.Performance) != 1 {
		t.Errorf("merged: %s exit %d, %d tasks, %d tests, %d comparisons; want fail, 1, 3, 3, 1", m.Verdict, m.ExitCode, len(m.Tasks), len(m.Tests), len(m.Performance))
	}
	if m.Tests[0].Outcome != report.Failed || m.Tests[0].Task != "task2" {
		t.Errorf("the failure is not listed first: %+v", m.Tests[0])
	}
	d := parseJUnit(t, filepath.Join(out, "junit.xml"))
	if len(d.Suites) < 3 {
		t.Errorf("junit has %d suites, want one per task and package", len(d.Suites))
	}
	md, _ := os.ReadFile(filepath.Join(out, "report.md"))
	if !strings.Contains(string(md), "(task task2)") {
		t.Errorf("report.md does not name the failing task:\n%s", md)
	}
	other := sample()
	other.Library.SHA256 = "def"
	if _, err := Merge([]*report.Report{sample(), other}); err == nil || !strings.Contains(err.Error(), "not one library") {
		t.Errorf("merging two libraries: %v, want a refusal", err)
	}
	reseeded := sample()
	reseeded.RapidSeed = 2
	if _, err := Merge([]*report.Report{sample(), reseeded}); err == nil || !strings.Contains(err.Error(), "RAPID_SEED") {
		t.Errorf("merging two property seeds: %v, want a refusal", err)
	}
	if _, err := MergeFiles(out, []string{filepath.Join(dir, "missing.json")}); err == nil {
		t.Error("a missing task report was merged")
	}
}

// TestSetupMessages: each way a library can fail to load gives one line
// that says what to do.
func TestSetupMessages(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want []string
	}{
		{&cudalib.MissingError{Path: "/x.so"}, []string{"library not found", "SSMK_LIB"}},
		{&cudalib.ABIError{Path: "/x.so", Got: 2}, []string{"ABI mismatch", "ABI 2", "rebuild"}},
		{errors.Join(errors.New("SSMK_BACKEND=cuda"), cudalib.ENoDevice), []string{"no GPU", "GPU runner", "SSMK_BACKEND=cpu"}},
		{errors.New("dlopen: bad ELF"), []string{"does not load", "bad ELF"}},
	} {
		msg := SetupMessage(tc.err)
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("SetupMessage(%v) = %q, want it to contain %q", tc.err, msg, w)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("SetupMessage(%v) spans lines: %q", tc.err, msg)
		}
	}
}

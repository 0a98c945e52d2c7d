package gate

import (
	"encoding/xml"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ssmverify/cudalib"
	"ssmverify/report"
)

func noisy(r *rand.Rand, n int, center, rel float64) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = center * (1 + rel*(2*r.Float64()-1))
	}
	return s
}

// TestCompareSamples: benchstat's decision on synthetic samples, one case
// per verdict, including both reasons for "could not decide".
func TestCompareSamples(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name     string
		old, cur []float64
		want     string
		reason   string
	}{
		{"same", noisy(r, 30, 100, 0.01), noisy(r, 30, 100, 0.01), NoChange, "p ="},
		{"10% slower", noisy(r, 30, 100, 0.01), noisy(r, 30, 110, 0.01), Regression, "slower"},
		{"3% slower: significant but allowed", noisy(r, 30, 100, 0.005), noisy(r, 30, 103, 0.005), NoChange, "within the allowed 5%"},
		{"10% faster", noisy(r, 30, 100, 0.01), noisy(r, 30, 90, 0.01), Improvement, "-10"},
		{"0.3% faster: drift", noisy(r, 100, 100, 0.001), noisy(r, 100, 99.7, 0.001), NoChange, "below the 1%"},
		{"too few samples", []float64{100, 101, 99}, []float64{120, 121, 119}, Undecided, "too few samples"},
		{"too noisy", noisy(r, 30, 100, 0.4), noisy(r, 30, 104, 0.4), Undecided, "spread too wide"},
		{"noisy but far slower", noisy(r, 30, 100, 0.5), noisy(r, 30, 300, 0.5), Regression, "beyond the noise"},
		{"no baseline", nil, noisy(r, 10, 100, 0.01), Pass, "no baseline"},
	} {
		p := CompareSamples("zoh", tc.old, tc.cur, 0.05)
		if p.Verdict != tc.want || !strings.Contains(p.Reason, tc.reason) {
			t.Errorf("%s: %s (%s), want %s with a reason containing %q", tc.name, p.Verdict, p.Reason, tc.want, tc.reason)
		}
	}
}

// TestComparePerformanceConfigMismatch: a baseline measured on another
// problem is refused, not compared.
func TestComparePerformanceConfigMismatch(t *testing.T) {
	dir := t.TempDir()
	c7 := &report.Check7{Config: "8×512×1024×16 fp32", Samples: map[string][]float64{"zoh": {1, 2, 3}}}
	path := filepath.Join(dir, "b.json")
	if err := WriteBaseline(path, &report.Check7{Config: "2×64×256×16 fp32", Samples: c7.Samples}, Library{}); err != nil {
		t.Fatal(err)
	}
	if _, err := ComparePerformance(c7, path, 0.05); err == nil || !strings.Contains(err.Error(), "not comparable") {
		t.Fatalf("err = %v, want a refusal naming both configurations", err)
	}
}

func sample() *Report {
	r := &Report{Schema: Schema, Created: "2026-11-21T00:00:00Z", Tasks: []string{"t1"},
		Library: Library{Path: "/x/libssmk_cpu.so", SHA256: "abc", Backend: "cpu"}}
	r.Tests = []Test{
		{Package: "verify", Name: "TestAccuracy", Result: Pass, Seconds: 1.5, Task: "t1"},
		{Package: "verify", Name: "TestSweep", Result: Fail, Task: "t1", Output: []string{"    sweep_test.go:1: ratio 1e6 > 4"}, Reproduce: "go test ./verify -run '^TestSweep$'"},
		{Package: "fuzz", Name: "FuzzScan", Result: Skip, Task: "t1"},
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
	r.Performance = []Perf{{Method: "foh", Verdict: Regression, Reason: "+12% slower"}, {Method: "zoh", Verdict: Undecided, Reason: "too few samples"}}
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
		edit  func(*Report)
		exit  int
		badge string
	}{
		{"pass", func(r *Report) { r.Tests = r.Tests[:1] }, ExitPass, "PASS"},
		{"fail", func(*Report) {}, ExitFail, "FAIL"},
		{"regression", func(r *Report) {
			r.Tests = r.Tests[:1]
			r.Performance = []Perf{{Method: "foh", Verdict: Regression}}
		}, ExitFail, "FAIL"},
		{"undecided", func(r *Report) {
			r.Tests = r.Tests[:1]
			r.Performance = []Perf{{Method: "foh", Verdict: Undecided}}
		}, ExitUndecided, "UNDECIDED"},
		{"undecided check", func(r *Report) {
			r.Tests = append(r.Tests[:1], Test{Package: "verify", Name: "TestCheck6MicroBenchmarks", Result: Undecided, Output: []string{"every figure noisy"}})
		}, ExitUndecided, "UNDECIDED"},
		{"setup", func(r *Report) { r.Errors = []string{"no GPU: …"} }, ExitSetup, "ERROR"},
		{"nothing ran", func(r *Report) { r.Tests = nil }, ExitSetup, "ERROR"},
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
	for i, edit := range []func(*Report){
		func(r *Report) { r.Tests = r.Tests[:1] },
		func(r *Report) { r.Tests = r.Tests[1:2] }, // the failure
		func(r *Report) { r.Tests = r.Tests[:1]; r.Performance = []Perf{{Method: "rk4", Verdict: NoChange}} },
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
	if m.Verdict != Fail || m.ExitCode != ExitFail || len(m.Tasks) != 3 || len(m.Tests) != 3 || len(m.Performance) != 1 {
		t.Errorf("merged: %s exit %d, %d tasks, %d tests, %d comparisons; want fail, 1, 3, 3, 1", m.Verdict, m.ExitCode, len(m.Tasks), len(m.Tests), len(m.Performance))
	}
	if m.Tests[0].Result != Fail || m.Tests[0].Task != "task2" {
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
	if _, err := Merge([]*Report{sample(), other}); err == nil || !strings.Contains(err.Error(), "not one library") {
		t.Errorf("merging two libraries: %v, want a refusal", err)
	}
	reseeded := sample()
	reseeded.RapidSeed = 2
	if _, err := Merge([]*Report{sample(), reseeded}); err == nil || !strings.Contains(err.Error(), "RAPID_SEED") {
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

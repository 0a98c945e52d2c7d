package report

import (
	"strings"
	"testing"

	"ssmverify/testrun"
)

// TestCrashSurvivesResumption: what a process checkpointed before it
// crashed, and the crash itself, reach the resumed process's report and
// its summary, which fails.
func TestCrashSurvivesResumption(t *testing.T) {
	dir := t.TempDir()
	lib := LibraryInfo{Path: "/lib/libx.so", SHA256: "ab"}
	first := New(lib)
	if err := first.TestEnded("TestA", Passed, dir); err != nil {
		t.Fatal(err)
	}
	if err := RecordCrash(dir, testrun.Crash{Test: "TestB", Why: "panic: boom at judge/grads.go:1"}); err != nil {
		t.Fatal(err)
	}
	resumed := New(lib)
	if err := resumed.MergeFrom(dir); err != nil {
		t.Fatal(err)
	}
	resumed.RecordTest("TestC", Passed)
	resumed.Finish()
	if resumed.Verdict != VerdictFail || len(resumed.Crashes) != 1 || len(resumed.Tests) != 3 {
		t.Fatalf("verdict %s, crashes %v, tests %v", resumed.Verdict, resumed.Crashes, resumed.Tests)
	}
	s := resumed.Summary()
	for _, want := range []string{"CRASH TestB: panic: boom at judge/grads.go:1", "FAIL TestB: crashed: panic: boom"} {
		if !strings.Contains(s, want) {
			t.Errorf("the summary lacks %q:\n%s", want, s)
		}
	}
	if last := lastLine(s); !strings.HasPrefix(last, "ssmverify FAIL") {
		t.Errorf("the summary's last line is %q, want the verdict", last)
	}
	// a crash before any checkpoint still merges (a report of no library)
	empty := t.TempDir()
	if err := RecordCrash(empty, testrun.Crash{Test: "TestA", Why: "SIGSEGV"}); err != nil {
		t.Fatal(err)
	}
	if err := New(lib).MergeFrom(empty); err != nil {
		t.Errorf("a crash record of no library does not merge: %v", err)
	}
}

// TestSummaryEndsWithVerdict: the last line is the verdict, for a pass, an
// undecided run (a part undecided is never a pass) and a failure.
func TestSummaryEndsWithVerdict(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(r *Report)
		want string
	}{
		{"pass", func(r *Report) {}, "ssmverify PASS"},
		{"undecided part", func(r *Report) { r.Undecide("TestCheck3", "fp32", "too noisy") }, "ssmverify UNDECIDED"},
		{"fail", func(r *Report) { r.RecordTest("TestB", Failed) }, "ssmverify FAIL"},
	} {
		r := New(LibraryInfo{Path: "x"})
		r.RecordTest("TestA", Passed)
		tc.mod(r)
		r.Finish()
		if last := lastLine(r.Summary()); !strings.HasPrefix(last, tc.want) {
			t.Errorf("%s: last line %q, want %q", tc.name, last, tc.want)
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

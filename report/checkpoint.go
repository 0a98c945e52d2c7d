package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"ssmverify/testrun"
)

// Checkpoint writes report.json into dir as it stands (not finished: no
// verdict, no summary), atomically, so that a process that dies inside a
// later test leaves what its earlier tests recorded. The suites call it as
// each top-level test ends; the runner that resumes after a crash
// (testrun.RunResuming) adds the crash (RecordCrash) and the resumed
// process merges the file (-append) and finishes the report.
func (r *Report) Checkpoint(dir string) error {
	if dir == "" {
		return nil
	}
	r.mu.Lock()
	js, err := json.Marshal(r)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, ".report.json.tmp")
	if err := os.WriteFile(tmp, js, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "report.json"))
}

// TestEnded records a test's verdict as it ends and, for a top-level test,
// checkpoints the report into dir: the suites' track helpers call it.
func (r *Report) TestEnded(name string, o Outcome, dir string) error {
	r.RecordTest(name, o)
	if strings.Contains(name, "/") {
		return nil
	}
	return r.Checkpoint(dir)
}

// MergeFrom merges the report.json in dir (an earlier part of the same
// run, or what a crashed process checkpointed) into r: the suites' -append.
func (r *Report) MergeFrom(dir string) error {
	prev, err := Load(filepath.Join(dir, "report.json"))
	if err != nil {
		return err
	}
	return r.Merge(prev)
}

// RecordCrash adds to the report in dir (a checkpoint) that its test
// process crashed inside c.Test, as that test's failure with the crash's
// reason. With no checkpoint (the process died before any test ended), it
// writes a report of no library holding the crash alone, which Merge takes
// into any, so that the resumed process (-append) still carries it.
func RecordCrash(dir string, c testrun.Crash) error {
	r, err := Load(filepath.Join(dir, "report.json"))
	if err != nil {
		if !os.IsNotExist(err) {
			return err
		}
		r = New(LibraryInfo{})
	}
	r.Tests = append(r.Tests, TestVerdict{Name: c.Test, Outcome: Failed, Reason: "crashed: " + c.Why, Output: capLines(c.Output, 40)})
	r.Crashes = append(r.Crashes, Crash{Test: c.Test, Why: c.Why})
	return r.Checkpoint(dir)
}

// Crash is a test inside which the suite's process died (a panic, a fatal
// signal from the library): the run went on without it, and it failed.
type Crash struct {
	Test string `json:"test"`
	Why  string `json:"why"`
}

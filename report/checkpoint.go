package report

import (
	"encoding/json"
	"os"
	"path/filepath"

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

// RecordCrash adds to the report in dir (a checkpoint) that its test
// process crashed inside c.Test, as that test's failure with the crash's
// reason, and reports whether there was a checkpoint to add it to (a
// resumed process merges it only then: -append). With none (the process
// died before any test ended), a new report holding the crash is written,
// stamped with lib where it is known, so that the resumed process still
// merges it.
func RecordCrash(dir string, c testrun.Crash, lib LibraryInfo) (bool, error) {
	path := filepath.Join(dir, "report.json")
	r, err := Load(path)
	if err != nil {
		if !os.IsNotExist(err) {
			return false, err
		}
		r = New(lib)
	}
	r.Tests = append(r.Tests, TestVerdict{Name: c.Test, Outcome: Failed, Reason: "crashed: " + c.Why, Output: capLines(c.Output, 40)})
	r.Crashes = append(r.Crashes, Crash{Test: c.Test, Why: c.Why})
	return true, r.Checkpoint(dir)
}

// Crash is a test inside which the suite's process died (a panic, a fatal
// signal from the library): the run went on without it, and it failed.
type Crash struct {
	Test string `json:"test"`
	Why  string `json:"why"`
}

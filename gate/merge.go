package gate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Merge combines the reports of the tasks of one run (a Slurm array, a CI
// matrix) into one: every task's tests, figures and performance, the union
// of their errors, one verdict. The tasks must have tested the same
// library (by sha256); a task whose report is missing is an error.
func Merge(reports []*Report) (*Report, error) {
	if len(reports) == 0 {
		return nil, fmt.Errorf("merge: no task reports")
	}
	m := &Report{Schema: Schema, Created: time.Now().UTC().Format(time.RFC3339), Library: reports[0].Library,
		Host: reports[0].Host, Command: strings.Join(os.Args, " "), RapidSeed: reports[0].RapidSeed}
	var hosts []string
	for _, r := range reports {
		if r.Library.SHA256 != m.Library.SHA256 {
			return nil, fmt.Errorf("merge: task %s tested %s (sha256 %.12s), task %s tested %s (sha256 %.12s): not one library",
				strings.Join(reports[0].Tasks, ","), m.Library.Path, m.Library.SHA256, strings.Join(r.Tasks, ","), r.Library.Path, r.Library.SHA256)
		}
		if r.RapidSeed != m.RapidSeed {
			// One verdict needs one set of property draws to reproduce it.
			return nil, fmt.Errorf("merge: task %s ran the property tests with RAPID_SEED=%d, task %s with %d: not one run",
				strings.Join(reports[0].Tasks, ","), m.RapidSeed, strings.Join(r.Tasks, ","), r.RapidSeed)
		}
		m.Tasks = append(m.Tasks, r.Tasks...)
		m.Errors = append(m.Errors, r.Errors...)
		m.Tests = append(m.Tests, r.Tests...)
		m.Figures = append(m.Figures, r.Figures...)
		m.Performance = append(m.Performance, r.Performance...)
		m.Plots = append(m.Plots, r.Plots...)
		if r.Baseline != "" {
			m.Baseline = r.Baseline
		}
		if !strings.Contains(strings.Join(hosts, ","), r.Host.Hostname) {
			hosts = append(hosts, r.Host.Hostname)
		}
	}
	m.Host.Hostname = strings.Join(hosts, ",")
	sortTests(m.Tests)
	m.Decide()
	return m, nil
}

// MergeFiles loads the task reports, merges them and writes report.json,
// junit.xml and report.md into out. Plots stay in the task folders; their
// paths are rewritten relative to out.
func MergeFiles(out string, paths []string) (*Report, error) {
	var reports []*Report
	for _, p := range paths {
		r, err := Load(p)
		if err != nil {
			return nil, fmt.Errorf("merge: %w", err)
		}
		for i, pl := range r.Plots {
			if rel, err := filepath.Rel(out, filepath.Join(filepath.Dir(p), pl)); err == nil {
				r.Plots[i] = rel
			}
		}
		reports = append(reports, r)
	}
	m, err := Merge(reports)
	if err != nil {
		return nil, err
	}
	if err := m.Write(out); err != nil {
		return nil, err
	}
	if err := WriteJUnit(filepath.Join(out, "junit.xml"), m); err != nil {
		return nil, err
	}
	return m, os.WriteFile(filepath.Join(out, "report.md"), []byte(Markdown(m)), 0o644)
}

package gate

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"ssmverify/report"
)

// Merge combines the reports of the tasks of one run (a Slurm array, a CI
// matrix) into one (report.Report.Merge): every task's tests, cells,
// diagnoses, figures and performance, the union of their errors, one
// verdict. The tasks must have tested the same library (by sha256) with
// the same property seed.
func Merge(reports []*report.Report) (*report.Report, error) {
	if len(reports) == 0 {
		return nil, fmt.Errorf("merge: no task reports")
	}
	m := report.New(reports[0].Library)
	m.Command, m.RapidSeed, m.Host = strings.Join(os.Args, " "), reports[0].RapidSeed, &report.Host{}
	if h := reports[0].Host; h != nil {
		*m.Host = *h
		m.Host.Hostname = ""
	}
	for _, r := range reports {
		if err := m.Merge(r); err != nil {
			return nil, fmt.Errorf("merge: task %s: %w", strings.Join(r.Tasks, ","), err)
		}
	}
	m.Host.Hostname = strings.TrimPrefix(m.Host.Hostname, ",")
	m.SortTests()
	m.Decide()
	return m, nil
}

// MergeFiles loads the task reports, merges them and writes report.json,
// junit.xml and report.md into out. Plots stay in the task folders; their
// paths are rewritten relative to out.
func MergeFiles(out string, paths []string) (*report.Report, error) {
	var reports []*report.Report
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
	return m, writeFiles(out, m)
}

// writeFiles writes report.json (with summary.txt), junit.xml and report.md
// into out.
func writeFiles(out string, r *report.Report) error {
	if err := r.Write(out); err != nil {
		return err
	}
	if err := WriteJUnit(filepath.Join(out, "junit.xml"), r); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "report.md"), []byte(Markdown(r)), 0o644)
}

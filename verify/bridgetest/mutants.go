package bridgetest

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"ssmverify/report"
)

// TritonEdit replaces occurrences of a short expression in one file of a
// checkout's mamba_ssm/ops/triton.
type TritonEdit struct {
	File        string `json:"file"`
	Old         string `json:"old"`
	New         string `json:"new"`
	Occurrences []int  `json:"occurrences"`
}

// TritonMutant is one planted bug: one edit (or several, Files), the case
// that must kill it and the diagnosis it must get.
type TritonMutant struct {
	Name string `json:"name"`
	TritonEdit
	Files []TritonEdit `json:"files"`
	Case  string       `json:"case"`
	Tag   string       `json:"tag"`
}

// Edits returns the mutant's edits.
func (m TritonMutant) Edits() []TritonEdit {
	if len(m.Files) > 0 {
		return m.Files
	}
	return []TritonEdit{m.TritonEdit}
}

// ReplaceOccurrences replaces the listed occurrences (1-based; all when
// none are listed) of old in s, and fails when one is missing.
func ReplaceOccurrences(s, old, new string, which []int) (string, error) {
	n := strings.Count(s, old)
	if n == 0 {
		return "", fmt.Errorf("%q not found", old)
	}
	if len(which) == 0 {
		return strings.ReplaceAll(s, old, new), nil
	}
	var b strings.Builder
	k, rest := 0, s
	for {
		i := strings.Index(rest, old)
		if i < 0 {
			break
		}
		k++
		b.WriteString(rest[:i])
		if slices.Contains(which, k) {
			b.WriteString(new)
		} else {
			b.WriteString(old)
		}
		rest = rest[i+len(old):]
	}
	b.WriteString(rest)
	for _, w := range which {
		if w > n {
			return "", fmt.Errorf("occurrence %d of %q: only %d", w, old, n)
		}
	}
	return b.String(), nil
}

// MutantTree copies the checkout's mamba_ssm/ops/triton and mamba_ssm/utils
// (what the adapter loads) into dir and applies the mutant's edits.
func MutantTree(checkout, dir string, m TritonMutant) error {
	for _, sub := range []string{"mamba_ssm/ops/triton", "mamba_ssm/utils"} {
		src := filepath.Join(checkout, sub)
		err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".py") {
				return err
			}
			rel, _ := filepath.Rel(checkout, path)
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
		})
		if err != nil {
			return err
		}
	}
	for _, e := range m.Edits() {
		path := filepath.Join(dir, "mamba_ssm", "ops", "triton", e.File)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		s, err := ReplaceOccurrences(string(b), e.Old, e.New, e.Occurrences)
		if err != nil {
			return fmt.Errorf("mutant %s, %s: %v (the checkout has moved on)", m.Name, e.File, err)
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// LoadTritonMutants reads a mutant list (testdata/triton-mutants.json).
func LoadTritonMutants(path string) ([]TritonMutant, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var list struct {
		Mutants []TritonMutant `json:"mutants"`
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return list.Mutants, nil
}

// ForEachMutant plants each mutant in a fresh copy of checkout and calls
// run with its index and the copy's folder, four at a time (each compiles
// its kernels afresh in a worker of its own); a mutant that does not apply
// is run's error.
func ForEachMutant(t *testing.T, checkout string, mutants []TritonMutant, run func(i int, m TritonMutant, dir string) error) []error {
	errs := make([]error, len(mutants))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	for i, m := range mutants {
		wg.Add(1)
		go func(i int, m TritonMutant) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			dir := t.TempDir()
			if errs[i] = MutantTree(checkout, dir, m); errs[i] == nil {
				errs[i] = run(i, m, dir)
			}
		}(i, m)
	}
	wg.Wait()
	return errs
}

// CheckMutantsApply applies every mutant of path to the checkout the
// environment variable env names (skipping without it): the list is kept in
// step with upstream's files, without a GPU.
func CheckMutantsApply(t *testing.T, env, path string) {
	checkout := os.Getenv(env)
	if checkout == "" {
		t.Skip(env + " not set")
	}
	mutants, err := LoadTritonMutants(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mutants {
		if err := MutantTree(checkout, t.TempDir(), m); err != nil {
			t.Errorf("%s: %v", m.Name, err)
		}
	}
}

// MutantsFromEnv returns the checkout the environment variable env names
// and the mutant list at path, and skips the test without it (a GPU
// machine with torch and Triton runs them; see doc).
func MutantsFromEnv(t *testing.T, env, path, doc string) (string, []TritonMutant) {
	checkout := os.Getenv(env)
	if checkout == "" {
		t.Skipf("%s=path/to/mamba checkout not set (a GPU machine with torch and Triton: %s)", env, doc)
	}
	mutants, err := LoadTritonMutants(path)
	if err != nil {
		t.Fatal(err)
	}
	return checkout, mutants
}

// MutantResult is what a mutant's case gave: whether the judgement failed
// it, its worst ratio and the diagnosis.
type MutantResult struct {
	Killed  bool
	Ratio   float64
	Finding report.Finding
}

// Tally reports a mutant run: each mutant that did not run (errs) or
// survived is an error, the table of results goes into the report, and at
// least 90% must be named with their planted slip, alone or joined with a
// second cause the unmutated kernel has too (dt:no-bias+narrow:tf32).
func Tally(t *testing.T, rep *report.Report, title string, mutants []TritonMutant, results []MutantResult, errs []error) {
	t.Helper()
	tab := report.Table{Name: title, Columns: []string{"mutant", "case", "killed", "ratio", "diagnosis", "planted", "named"}}
	killed, named := 0, 0
	for i, m := range mutants {
		r := results[i]
		if errs[i] != nil {
			t.Errorf("mutant %s: %v", m.Name, errs[i])
			continue
		}
		if r.Killed {
			killed++
		} else {
			t.Errorf("mutant %s survived its case %s (ratio %.3g)", m.Name, m.Case, r.Ratio)
		}
		ok := slices.Contains(strings.Split(r.Finding.Tag, "+"), m.Tag)
		if ok {
			named++
		}
		tab.Rows = append(tab.Rows, []string{m.Name, m.Case, fmt.Sprint(r.Killed), fmt.Sprintf("%.3g", r.Ratio), r.Finding.Tag, m.Tag, fmt.Sprint(ok)})
		t.Logf("%-24s %-26s killed %-5t ratio %-9.3g [%s] %s", m.Name, m.Case, r.Killed, r.Ratio, r.Finding.Tag, r.Finding)
	}
	rep.AddTable(tab)
	t.Logf("killed %d of %d, named correctly %d of %d", killed, len(mutants), named, len(mutants))
	if float64(named) < 0.9*float64(len(mutants)) {
		t.Errorf("named correctly %d of %d, want at least 90%%", named, len(mutants))
	}
}

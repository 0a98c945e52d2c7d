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

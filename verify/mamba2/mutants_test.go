package mamba2

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

	"ssmverify/bridge"
	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/report"
	"ssmverify/ssd"
	"ssmverify/ssm"
)

type tritonEdit struct {
	File        string `json:"file"`
	Old         string `json:"old"`
	New         string `json:"new"`
	Occurrences []int  `json:"occurrences"`
}

type tritonMutant struct {
	Name string `json:"name"`
	tritonEdit
	Files []tritonEdit `json:"files"`
	Case  string       `json:"case"`
	Tag   string       `json:"tag"`
}

func (m tritonMutant) edits() []tritonEdit {
	if len(m.Files) > 0 {
		return m.Files
	}
	return []tritonEdit{m.tritonEdit}
}

// replaceOccurrences replaces the listed occurrences (1-based; all when
// none are listed) of old in s, and fails when one is missing.
func replaceOccurrences(s, old, new string, which []int) (string, error) {
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
		if contains(which, k) {
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

func contains(v []int, x int) bool {
	for _, y := range v {
		if y == x {
			return true
		}
	}
	return false
}

// mutantTree copies the checkout's mamba_ssm/ops/triton and mamba_ssm/utils
// (what the adapter loads) into dir and applies the mutant's edits.
func mutantTree(checkout, dir string, m tritonMutant) error {
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
	for _, e := range m.edits() {
		path := filepath.Join(dir, "mamba_ssm", "ops", "triton", e.File)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		s, err := replaceOccurrences(string(b), e.Old, e.New, e.Occurrences)
		if err != nil {
			return fmt.Errorf("mutant %s, %s: %v (the checkout has moved on)", m.Name, e.File, err)
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func TestReplaceOccurrences(t *testing.T) {
	s, err := replaceOccurrences("a+a+a", "a", "b", []int{1, 3})
	if err != nil || s != "b+a+b" {
		t.Errorf("got %q, %v; want b+a+b", s, err)
	}
	if _, err := replaceOccurrences("a+a", "a", "b", []int{3}); err == nil {
		t.Error("occurrence 3 of 2: no error")
	}
	if _, err := replaceOccurrences("a", "c", "b", nil); err == nil {
		t.Error("missing: no error")
	}
}

// TestMamba2TritonMutants plants the bugs of testdata/triton-mutants.json in
// copies of upstream's Triton kernels (SSMK_MAMBA2_MUTANTS=checkout) and
// requires that each is killed by its case and that at least 90% are
// diagnosed with the planted cause. Four mutants run at a time, each in a
// worker of its own (Triton compiles each mutated kernel afresh).
func TestMamba2TritonMutants(t *testing.T) {
	checkout := os.Getenv("SSMK_MAMBA2_MUTANTS")
	if checkout == "" {
		t.Skip("SSMK_MAMBA2_MUTANTS=path/to/mamba checkout not set (a GPU machine with torch and Triton: docs/bridge.md)")
	}
	track(t)
	var list struct {
		Mutants []tritonMutant `json:"mutants"`
	}
	b, err := os.ReadFile("testdata/triton-mutants.json")
	if err == nil {
		err = json.Unmarshal(b, &list)
	}
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		killed  bool
		tag     string
		ratio   float64
		finding report.Finding
		err     error
	}
	results := make([]result, len(list.Mutants))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4)
	f32 := pair{ssm.F32, ssm.F32}
	for i, m := range list.Mutants {
		wg.Add(1)
		go func(i int, m tritonMutant) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := &results[i]
			dir := t.TempDir()
			if r.err = mutantTree(checkout, dir, m); r.err != nil {
				return
			}
			// One configuration per kernel (upstream's deterministic mode):
			// a mutant's verdict needs no tuning, and each worker compiles
			// its kernels afresh.
			w, err := bridge.Start(bridge.Spec{Python: spec.Python, Adapter: "mamba2_upstream", Args: []string{"checkout=" + dir, "commit=mutant-" + m.Name},
				Timeout: spec.Timeout, Env: []string{"MAMBA_DETERMINISTIC=1"}})
			if err != nil {
				r.err = err
				return
			}
			defer w.Close()
			k := &bridge.SSD{W: w}
			op, name, _ := strings.Cut(m.Case, ":")
			if op == "prefill" {
				p := prefillCase(name, f32)
				got, err := k.Prefill(p)
				if err != nil {
					r.killed, r.tag, r.err = true, "crash", err
					return
				}
				want, sc := ssd.Prefill(p)
				c, _, _ := judge.CompareSSD(judge.PrefillArrays(p, got, want, sc))
				r.ratio = c.Worst.Ratio
				r.killed = c.NonFinite > 0 || c.Worst.Ratio > judge.Threshold(p.DType)
				if r.killed {
					r.finding = diagnose.SSDPrefill(p, got, k.Prefill)
				}
			} else {
				s := decodeCase(name, f32)
				got, err := k.Step(s)
				if err != nil {
					r.killed, r.tag, r.err = true, "crash", err
					return
				}
				want, sc := ssd.Decode(s)
				c, _, _ := judge.CompareSSD(judge.StepArrays(s, got, want, sc))
				r.ratio = c.Worst.Ratio
				r.killed = c.NonFinite > 0 || c.Worst.Ratio > judge.Threshold(s.DType)
				if r.killed {
					r.finding = diagnose.SSDStep(s, got)
				}
			}
			r.tag = r.finding.Tag
		}(i, m)
	}
	wg.Wait()
	tab := report.Table{Name: "mamba2 Triton mutants (" + checkout + ")", Columns: []string{"mutant", "case", "killed", "ratio", "diagnosis", "planted", "named"}}
	killed, named := 0, 0
	for i, m := range list.Mutants {
		r := results[i]
		if r.err != nil && r.tag != "crash" {
			t.Errorf("mutant %s: %v", m.Name, r.err)
			continue
		}
		// a diagnosis names the planted slip alone, or with a second cause
		// that the unmutated kernel has too (TF32 products, softplus)
		ok := slices.Contains(strings.Split(r.tag, "+"), m.Tag)
		if r.killed {
			killed++
		} else {
			t.Errorf("mutant %s survived its case %s (ratio %.3g)", m.Name, m.Case, r.ratio)
		}
		if ok {
			named++
		}
		tab.Rows = append(tab.Rows, []string{m.Name, m.Case, fmt.Sprint(r.killed), fmt.Sprintf("%.3g", r.ratio), r.tag, m.Tag, fmt.Sprint(ok)})
		t.Logf("%-24s %-26s killed %-5t ratio %-9.3g [%s] %s", m.Name, m.Case, r.killed, r.ratio, r.tag, r.finding)
	}
	rep.AddTable(tab)
	t.Logf("killed %d of %d, named correctly %d of %d", killed, len(list.Mutants), named, len(list.Mutants))
	if float64(named) < 0.9*float64(len(list.Mutants)) {
		t.Errorf("named correctly %d of %d, want at least 90%%", named, len(list.Mutants))
	}
}

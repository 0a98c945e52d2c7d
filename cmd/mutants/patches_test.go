package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"ssmverify/cmd/mutants/patch"
)

// TestCatalogueHasPatches: every mutant of the catalogue and of the CUDA
// catalogue has one patch, K-name.patch, and every patch is catalogued.
func TestCatalogueHasPatches(t *testing.T) {
	if len(Catalogue) < 12 {
		t.Errorf("the catalogue has %d mutants, want at least 12", len(Catalogue))
	}
	for i, m := range Catalogue {
		if m.K != i+1 {
			t.Errorf("catalogue entry %d has k = %d, want %d", i, m.K, i+1)
		}
	}
	known := map[string]bool{}
	for _, m := range append(append([]Mutant{}, Catalogue...), CUDACatalogue...) {
		name := fmt.Sprintf("%03d-%s.patch", m.K, m.Name)
		known[name] = true
		if _, err := os.Stat(filepath.Join("patches", name)); err != nil {
			t.Errorf("mutant %d (%s) has no patch %s", m.K, m.Name, name)
		}
	}
	files, _ := filepath.Glob("patches/*.patch")
	for _, f := range files {
		if !known[filepath.Base(f)] {
			t.Errorf("%s is no mutant of the catalogues", f)
		}
	}
}

// TestPatchesApply: every mutant's patch applies to today's sources, each
// hunk at exactly one place (package patch), and changes the file: a patch
// that no longer fits fails here, not in make mutants. The shipped sources
// hold no planted bug: no SSMK_MUTANT anywhere in them.
func TestPatchesApply(t *testing.T) {
	root := "../.."
	for _, m := range append(append([]Mutant{}, Catalogue...), CUDACatalogue...) {
		diff, err := patchOf(root, m.K)
		if err != nil {
			t.Error(err)
			continue
		}
		files, err := patch.Parse(diff)
		if err != nil {
			t.Errorf("mutant %d: %v", m.K, err)
			continue
		}
		for _, f := range files {
			before, err := os.ReadFile(filepath.Join(root, f.Path))
			if err != nil {
				t.Errorf("mutant %d: %v", m.K, err)
				continue
			}
			after, err := f.Apply(string(before))
			if err != nil {
				t.Errorf("mutant %d: %v", m.K, err)
			} else if after == string(before) {
				t.Errorf("mutant %d: the patch leaves %s as it is", m.K, f.Path)
			}
		}
	}
	srcs, _ := filepath.Glob(root + "/kernels/src/*")
	more, _ := filepath.Glob(root + "/kernels/src/cuda/*")
	var files []string
	for _, f := range append(srcs, more...) {
		if st, err := os.Stat(f); err == nil && !st.IsDir() {
			files = append(files, f)
		}
	}
	if src := readAll(t, files...); strings.Contains(src, "SSMK_MUTANT") {
		t.Error("the shipped sources mention SSMK_MUTANT: a planted bug belongs in cmd/mutants/patches")
	}
}

// Every CUDA mutant's patch changes the CUDA sources alone (the CPU build
// does not have them), and is numbered above 100.
func TestCUDACatalogueTouchesCUDA(t *testing.T) {
	for _, m := range CUDACatalogue {
		if m.K <= 100 || m.Cause != "" || m.Check != 0 {
			t.Errorf("CUDA mutant %d: numbers above 100 (the CPU catalogue's are below), no cause, no check", m.K)
		}
		for _, f := range patched(t, m.K) {
			if !strings.HasPrefix(f, "kernels/src/cuda/") {
				t.Errorf("CUDA mutant %d patches %s, outside kernels/src/cuda/", m.K, f)
			}
		}
	}
}

// DeviceShared is exactly the catalogue's mutants whose patches change only
// the headers that the CUDA sources include, and each is an accuracy bug
// (the CUDA runs leave the timed checks out).
func TestDeviceSharedMatchesPatches(t *testing.T) {
	headers := []string{"kernels/src/ssmk_methods.h", "kernels/src/ssmk_narrow.h"}
	files, _ := filepath.Glob("../../kernels/src/cuda/*.cu")
	cu := readAll(t, files...)
	for _, h := range headers {
		if !strings.Contains(cu, `#include "../`+filepath.Base(h)+`"`) {
			t.Errorf("no CUDA source includes %s: its mutants would not reach the CUDA build", h)
		}
	}
	shared := map[int]bool{}
	for _, m := range Catalogue {
		in := true
		for _, f := range patched(t, m.K) {
			in = in && (f == headers[0] || f == headers[1])
		}
		shared[m.K] = in
	}
	listed := map[int]bool{}
	for _, k := range DeviceShared {
		listed[k] = true
		if !shared[k] {
			t.Errorf("DeviceShared lists mutant %d, whose patch changes more than %v", k, headers)
		}
		if k < 1 || k > len(Catalogue) || Catalogue[k-1].Check != 0 {
			t.Errorf("DeviceShared lists mutant %d: want an accuracy bug of the catalogue", k)
		}
	}
	for k, in := range shared {
		if in && !listed[k] {
			t.Errorf("mutant %d patches only %v, which DeviceShared lacks", k, headers)
		}
	}
	ms := cudaMutants()
	if len(ms) != len(DeviceShared)+len(CUDACatalogue) || ms[0].K != DeviceShared[0] || ms[len(ms)-1].K != CUDACatalogue[len(CUDACatalogue)-1].K {
		t.Errorf("cudaMutants() = %d mutants, want DeviceShared's %d then CUDACatalogue's %d", len(ms), len(DeviceShared), len(CUDACatalogue))
	}
}

// TestMutantTree: a mutant's tree is a copy of kernels/ with its patch
// applied and the ABI's header beside it, the shipped sources untouched.
func TestMutantTree(t *testing.T) {
	dir := t.TempDir()
	diff, err := patchOf("../..", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := sourceTree("../..", dir, diff); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "kernels/src/ssmk_methods.h"))
	orig, _ := os.ReadFile("../../kernels/src/ssmk_methods.h")
	if string(got) == string(orig) || !strings.Contains(string(got), "sign-flipped formula") || strings.Contains(string(orig), "sign-flipped formula") {
		t.Error("mutant 1's tree does not hold bilinear's flipped sign, or the shipped header does")
	}
	if _, err := os.Stat(filepath.Join(dir, "kernels/build-cuda.sh")); err != nil {
		t.Errorf("the tree lacks build-cuda.sh: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "cudalib/include/ssmk.h")); err != nil {
		t.Errorf("the tree lacks the ABI's header: %v", err)
	}
	if gos, _ := filepath.Glob(filepath.Join(dir, "kernels/*.go")); len(gos) > 0 {
		t.Errorf("the tree holds Go files %v: under build/ they would join go test ./...", gos)
	}
}

// patched lists the files mutant k's patch changes.
func patched(t *testing.T, k int) []string {
	t.Helper()
	diff, err := patchOf("../..", k)
	if err != nil {
		t.Fatal(err)
	}
	files, err := patch.Parse(diff)
	if err != nil {
		t.Fatalf("mutant %d: %v", k, err)
	}
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	return out
}

// TestGeneratedCandidates: the operators find mutations in every generated
// source, none on a comment, a preprocessor line or an error message; each
// candidate's patch applies to today's sources; a sample is the same for
// one seed and another for another; every candidate's region names tags.
func TestGeneratedCandidates(t *testing.T) {
	cands, err := candidates("../..")
	if err != nil {
		t.Fatal(err)
	}
	perFile, perOp := map[string]int{}, map[string]int{}
	for _, c := range cands {
		perFile[c.File]++
		perOp[c.Op]++
		if skipLine.MatchString(c.Before) {
			t.Errorf("%s:%d: a mutation of a skipped line %q", c.File, c.Line, c.Before)
		}
		if len(regionTags(c)) == 0 {
			t.Errorf("%s:%d (%s): no region tags", c.File, c.Line, c.Func)
		}
	}
	for _, f := range generatedSources {
		if perFile[f] < 20 {
			t.Errorf("%s: %d candidates, want at least 20", f, perFile[f])
		}
	}
	if len(perOp) < len(operators)-2 {
		t.Errorf("only %d of %d operators find a mutation in the sources: %v", len(perOp), len(operators), perOp)
	}
	// Each operator on a line written for it.
	dir := t.TempDir()
	line := "    acc += a * b + c - d / e; if (i < n && j <= m && k > 2 && l >= 1 && x == y && z != w) return v[i];"
	src := "#pragma once\nvoid kernel_row(int i) {\n" + line + "\n    h = ab * h;\n}\n"
	if err := os.MkdirAll(filepath.Join(dir, "kernels/src"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range generatedSources {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	made, err := candidates(dir)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, c := range made {
		found[c.Op] = true
	}
	for _, op := range operators {
		if !found[op.name] {
			t.Errorf("operator %s finds nothing in %q", op.name, line)
		}
	}
	a, b := sample(cands, 50, 1), sample(cands, 50, 1)
	if len(a) != 50 || !slices.EqualFunc(a, b, func(x, y Generated) bool { return x.ID == y.ID }) {
		t.Error("one seed gave two samples")
	}
	if c := sample(cands, 50, 2); slices.EqualFunc(a, c, func(x, y Generated) bool { return x.ID == y.ID }) {
		t.Error("two seeds gave one sample")
	}
	for _, g := range a[:3] {
		if _, err := patch.Parse(g.Patch()); err != nil {
			t.Fatalf("%+v: %v", g, err)
		}
	}
	// -generate-lines: only matching lines, every one of them when n
	// exceeds their number, each named by its index among all candidates.
	lines := regexp.MustCompile(`saved|starts`)
	want := 0
	for _, g := range cands {
		if lines.MatchString(codeOf(g.Before)) {
			want++
		}
	}
	focus := sampleOf(cands, lines, len(cands), 1)
	if want == 0 || len(focus) != want {
		t.Fatalf("-generate-lines %q: %d mutants, want all %d of its lines'", lines, len(focus), want)
	}
	for _, g := range focus {
		if !lines.MatchString(g.Before) || cands[g.ID].Before != g.Before || cands[g.ID].After != g.After {
			t.Errorf("-generate-lines: mutant %d (%s:%d) is not candidate %d of a matching line", g.ID, g.File, g.Line, g.ID)
		}
	}
}

package kernels

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestBuildDepsCoverPreprocessor holds build-cuda.sh's object cache to the
// C preprocessor: the files its key hashes for a translation unit (its own
// include scan, --deps) must include every file of this tree that g++ -MM
// finds the unit including. A file the scan missed would let a mutant's
// build reuse an object compiled without the patch, and the mutant would be
// judged as the unmutated library. g++ preprocesses the host pass only, so
// the scan may list more (device-only includes, both sides of an #if), never
// fewer.
func TestBuildDepsCoverPreprocessor(t *testing.T) {
	for _, tool := range []string{"bash", "g++", "realpath"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: %v", tool, err)
		}
	}
	units, _ := filepath.Glob("src/cuda/*.cu")
	if len(units) == 0 {
		t.Fatal("no src/cuda/*.cu")
	}
	for _, u := range units {
		out, err := exec.Command("bash", "build-cuda.sh", "--deps", u).CombinedOutput()
		if err != nil {
			t.Fatalf("build-cuda.sh --deps %s: %v\n%s", u, err, out)
		}
		scan := strings.Fields(string(out))
		// -MG lists the headers not found (CUDA's own) as they are named,
		// instead of failing on them; they are not this tree's files.
		pre, err := exec.Command("g++", "-x", "c++", "-std=c++17", "-MM", "-MG", "-I../cudalib/include", u).CombinedOutput()
		if err != nil {
			t.Fatalf("g++ -MM %s: %v\n%s", u, err, pre)
		}
		if miss := uncovered(scan, preprocessorDeps(string(pre))); len(miss) > 0 {
			t.Errorf("%s: build-cuda.sh --deps misses %v, which g++ -MM finds included", u, miss)
		}
		if !slices.Contains(scan, absPath(u)) {
			t.Errorf("%s: build-cuda.sh --deps leaves out the unit itself: %v", u, scan)
		}
	}
}

// preprocessorDeps is the files of this tree in a make rule written by
// g++ -MM (target: prerequisites, lines continued by backslashes), as
// absolute paths; names that are no file here (CUDA's headers) are left out.
func preprocessorDeps(rule string) []string {
	_, prereq, _ := strings.Cut(strings.ReplaceAll(rule, "\\\n", " "), ":")
	tree := absPath(".") + string(filepath.Separator)
	var files []string
	for _, f := range strings.Fields(prereq) {
		if abs := absPath(f); abs != "" && strings.HasPrefix(abs, tree) {
			files = append(files, abs)
		}
	}
	return files
}

// absPath is path made absolute and cleaned, symbolic links resolved; "" when
// no such file exists.
func absPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return ""
	}
	return real
}

// uncovered is the files of want that got lacks, each once, in want's order.
func uncovered(got, want []string) []string {
	var miss []string
	for _, w := range want {
		if !slices.Contains(got, w) && !slices.Contains(miss, w) {
			miss = append(miss, w)
		}
	}
	return miss
}

// TestBuildDepsComparisonCanFail shows the comparison above failing when the
// scan lacks a header the preprocessor found, and parsing -MM's continued
// lines and relative names.
func TestBuildDepsComparisonCanFail(t *testing.T) {
	here := absPath(".")
	rule := "kernels.o: src/cuda/kernels.cu \\\n src/cuda/scan_kernel.cuh src/cuda/../ssmk_methods.h \\\n cuda_runtime.h\n"
	pre := preprocessorDeps(rule)
	want := []string{filepath.Join(here, "src/cuda/kernels.cu"), filepath.Join(here, "src/cuda/scan_kernel.cuh"), filepath.Join(here, "src/ssmk_methods.h")}
	if !slices.Equal(pre, want) {
		t.Fatalf("preprocessorDeps = %v, want %v (cuda_runtime.h is no file here)", pre, want)
	}
	if miss := uncovered(want[:2], pre); !slices.Equal(miss, want[2:]) {
		t.Errorf("uncovered = %v, want %v", miss, want[2:])
	}
	if miss := uncovered(want, pre); len(miss) != 0 {
		t.Errorf("uncovered of a full scan = %v, want none", miss)
	}
}

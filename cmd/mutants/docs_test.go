package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// livingDocs are the documents that describe the project as it is (the
// dated findings and performance notes record what was true on their day).
var livingDocs = []string{"README.md", "CHECKS.md", "docs/mutants.md", "docs/diagnosis.md", "docs/gpu.md",
	"docs/fuzzing.md", "docs/gate.md", "docs/adapters.md", "docs/abi.md", "golden/check_numpy.py"}

// TestDocumentedCounts: every count the living documents state of what the
// repository holds — kernel-bug mutants, check faults, CUDA mutants, golden
// cases, seed inputs of the fuzz corpus — is the count today.
func TestDocumentedCounts(t *testing.T) {
	root := "../.."
	kernel, checks, resume, narrow, backward := 0, 0, 0, 0, 0
	for _, m := range Catalogue {
		switch kindOf(m) {
		case "check":
			checks++
		case "narrow":
			narrow++
		case "backward":
			backward++
		case "resume":
			resume++
		default:
			kernel++
		}
	}
	var man struct {
		Cases []json.RawMessage `json:"cases"`
	}
	b, err := os.ReadFile(filepath.Join(root, "golden/manifest.json"))
	if err != nil || json.Unmarshal(b, &man) != nil {
		t.Fatalf("golden/manifest.json: %v", err)
	}
	seeds, err := filepath.Glob(filepath.Join(root, "fuzz/testdata/fuzz/*/*"))
	if err != nil {
		t.Fatal(err)
	}
	counts := []struct {
		re   *regexp.Regexp
		want int
	}{
		{regexp.MustCompile(`(\d+) kernel[- ]bug`), kernel},
		{regexp.MustCompile(`(\d+) check faults`), checks},
		{regexp.MustCompile(`(\d+) resumption bugs`), resume},
		{regexp.MustCompile(`(\d+) mixed-precision bugs`), narrow},
		{regexp.MustCompile(`(\d+) backward bugs`), backward},
		{regexp.MustCompile(`(\d+) CUDA mutants`), len(CUDACatalogue)},
		{regexp.MustCompile(`(\d+) golden cases`), len(man.Cases)},
		{regexp.MustCompile(`over the (\d+) cases`), len(man.Cases)},
		{regexp.MustCompile(`(\d+) seed inputs`), len(seeds)},
	}
	found := 0
	for _, doc := range livingDocs {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range counts {
			for _, m := range c.re.FindAllSubmatch(b, -1) {
				found++
				if n, _ := strconv.Atoi(string(m[1])); n != c.want {
					t.Errorf("%s says %q: the repository holds %d", doc, m[0], c.want)
				}
			}
		}
	}
	if found < 5 {
		t.Errorf("only %d counts found in the living documents: the patterns no longer match how they are written", found)
	}
}

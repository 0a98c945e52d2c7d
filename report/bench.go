package report

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"ssmverify/ssm"
)

// A BenchRun is one Check7 of make bench: which library ran it, at which
// size, input type and A. make bench (scripts/gpu.sh bench) writes each into
// a folder named SIZE-DTYPE-COMPLEX-LIBRARY, e.g. 8x512x1024x16-bf16-false-mamba.
type BenchRun struct {
	Library string // ssmk (this project's build) or mamba (Mamba's kernel through adapters/mamba)
	Size    string // BxDxLxN
	DType   string // fp32, fp64, bf16, fp16
	Complex bool
	Check7  *Check7
}

// Config is the run's problem as the table names it: size, dtype, A.
func (r BenchRun) Config() string { return r.Size + " " + r.DType + " " + ssm.AKind(r.Complex) }

// Row is the named method's row, or nil.
func (r BenchRun) Row(method string) *Check7Row {
	for i := range r.Check7.Methods {
		if r.Check7.Methods[i].Method == method {
			return &r.Check7.Methods[i]
		}
	}
	return nil
}

var benchDir = regexp.MustCompile(`^(\d+x\d+x\d+x\d+)-(fp32|fp64|bf16|fp16)-(true|false)-([A-Za-z0-9_]+)$`)

// LoadBench reads every DIR/SIZE-DTYPE-COMPLEX-LIBRARY/check7.json under dir.
// A folder of another name, or one without a readable check7.json, is an
// error: a table with a run silently missing would misstate the targets.
func LoadBench(dir string) ([]BenchRun, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("bench: %w (the folder of make bench's Check7 runs)", err)
	}
	var runs []BenchRun
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		m := benchDir.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("bench: folder %q in %s is not SIZE-DTYPE-COMPLEX-LIBRARY (e.g. 8x512x1024x16-fp32-false-ssmk)", e.Name(), dir)
		}
		c, err := LoadCheck7(filepath.Join(dir, e.Name(), "check7.json"))
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		runs = append(runs, BenchRun{Library: m[4], Size: m[1], DType: m[2], Complex: m[3] == "true", Check7: c})
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("bench: no SIZE-DTYPE-COMPLEX-LIBRARY folders in %s", dir)
	}
	sortBench(runs)
	return runs, nil
}

// sortBench orders runs by problem size (elements), then dtype, A and library.
func sortBench(runs []BenchRun) {
	elems := func(size string) int64 {
		n := int64(1)
		for _, f := range strings.Split(size, "x") {
			var v int64
			fmt.Sscan(f, &v)
			n *= v
		}
		return n
	}
	sort.SliceStable(runs, func(i, j int) bool {
		a, b := runs[i], runs[j]
		if ea, eb := elems(a.Size), elems(b.Size); ea != eb {
			return ea < eb
		}
		if a.Library != b.Library {
			return a.Library == "ssmk" // this project's build first
		}
		if a.DType != b.DType {
			return a.DType < b.DType
		}
		return !a.Complex && b.Complex
	})
}

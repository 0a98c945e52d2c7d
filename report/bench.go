package report

import (
	"fmt"
	"io"
	"math"
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

// row is the named method's row, or nil.
func (r BenchRun) row(method string) *Check7Row {
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

// ForwardFlag is the forward's ratio to zoh above which the table marks a
// method: the performance issue's 1.10× for every method against zoh.
const ForwardFlag = 1.10

// WriteBenchTable writes make bench's table: a row per library, size, dtype,
// A and method with the forward's median, bandwidth, ratio to zoh and the
// floor (the bytes at copy bandwidth), and the backward's median and ratio
// to zoh's where the library has one.
func WriteBenchTable(w io.Writer, runs []BenchRun) {
	fmt.Fprintf(w, "%-7s %-16s %-5s %-7s %-9s %10s %8s %9s %6s  floor µs  %9s %9s\n",
		"library", "size", "dtype", "A", "method", "median µs", "GB/s", "% copy BW", "× zoh", "bwd µs", "bwd × zoh")
	for _, r := range runs {
		c := r.Check7
		floor := float64(c.BytesPerScan) / (c.CopyBandwidthGBps * 1e3)
		for _, m := range c.Methods {
			bwd := fmt.Sprintf("  %9s %9s", "-", "-")
			if m.BackwardUS > 0 {
				bwd = fmt.Sprintf("  %9.1f %9.3f", m.BackwardUS, m.BackwardRatioToZOH)
			}
			flag := ""
			if m.RatioToZOH > ForwardFlag {
				flag = fmt.Sprintf("  > %.2f×", ForwardFlag)
			}
			fmt.Fprintf(w, "%-7s %-16s %-5s %-7s %-9s %10.1f %8.1f %9.2f %6.3f  %8.1f%s%s\n", r.Library, r.Size, r.DType, ssm.AKind(r.Complex),
				m.Method, m.MedianUS, m.GBPerSec, 100*m.FracCopyBW, m.RatioToZOH, floor, bwd, flag)
		}
	}
}

// A BenchTarget is one speed target judged from make bench's runs: Ratio is
// what was measured (a time over another), Limit what it must stay below
// (at or below, for the backward's ratio to zoh's).
type BenchTarget struct {
	Name   string  // what is compared
	Config string  // the problem: size, dtype, A
	Detail string  // the figures behind the ratio
	Ratio  float64 // measured
	Limit  float64
	Met    bool
}

func (t BenchTarget) String() string {
	v := "met"
	if !t.Met {
		v = "MISSED"
	}
	return fmt.Sprintf("%-6s %-44s %-26s %6.3f (limit %.2f): %s", v, t.Name, t.Config, t.Ratio, t.Limit, t.Detail)
}

// BenchTargets judges the speed targets that make bench's runs can show:
//   - every method's backward within Check7's MaxBackwardSlowdown of zoh's
//     (1.15 on a GPU), per size, dtype and A of this project's build;
//   - zoh's backward, and zoh's forward, faster than Mamba's kernel's in the
//     same configuration, where a Mamba run is there;
//   - 16-bit inputs faster than fp32 for every method, and than Mamba's
//     kernel in the same input type.
//
// A target whose runs are missing is left out, not guessed.
func BenchTargets(runs []BenchRun) []BenchTarget {
	find := func(lib, size, dt string, cx bool) *BenchRun {
		for i := range runs {
			r := &runs[i]
			if r.Library == lib && r.Size == size && r.DType == dt && r.Complex == cx {
				return r
			}
		}
		return nil
	}
	var ts []BenchTarget
	for _, r := range runs {
		if r.Library != "ssmk" {
			continue
		}
		if lim := r.Check7.MaxBackwardSlowdown; lim > 0 {
			worst, ratio, detail := "", 0.0, ""
			for _, m := range r.Check7.Methods {
				if m.BackwardUS > 0 && m.BackwardRatioToZOH > ratio {
					worst, ratio = m.Method, m.BackwardRatioToZOH
					detail = fmt.Sprintf("slowest: %s %.1f µs", worst, m.BackwardUS)
				}
			}
			if z := r.row("zoh"); worst != "" && z != nil {
				ts = append(ts, BenchTarget{Name: fmt.Sprintf("every backward within %.2f× of zoh's", lim), Config: r.Config(),
					Detail: fmt.Sprintf("%s against zoh's %.1f µs", detail, z.BackwardUS), Ratio: ratio, Limit: lim, Met: ratio <= lim})
			}
		}
		// against Mamba's kernel, zoh alone (the method it has)
		if mr := find("mamba", r.Size, r.DType, r.Complex); mr != nil {
			ours, theirs := r.row("zoh"), mr.row("zoh")
			if ours != nil && theirs != nil {
				ts = append(ts, faster("zoh's forward faster than Mamba's", r.Config(), ours.MedianUS, theirs.MedianUS))
				if ours.BackwardUS > 0 && theirs.BackwardUS > 0 {
					ts = append(ts, faster("zoh's backward faster than Mamba's", r.Config(), ours.BackwardUS, theirs.BackwardUS))
				}
			}
		}
		// 16-bit inputs against fp32, every method
		if (r.DType == "bf16" || r.DType == "fp16") && !r.Complex {
			if f32 := find("ssmk", r.Size, "fp32", false); f32 != nil {
				ratio, detail := 0.0, ""
				for _, m := range r.Check7.Methods {
					if m32 := f32.row(m.Method); m32 != nil && m32.MedianUS > 0 && m.MedianUS/m32.MedianUS > ratio {
						ratio = m.MedianUS / m32.MedianUS
						detail = fmt.Sprintf("slowest: %s %.1f against %.1f µs", m.Method, m.MedianUS, m32.MedianUS)
					}
				}
				if detail != "" {
					ts = append(ts, BenchTarget{Name: r.DType + " faster than fp32, every method", Config: r.Config(),
						Detail: detail, Ratio: ratio, Limit: 1, Met: ratio < 1})
				}
			}
		}
	}
	return ts
}

// faster is the target "ours faster than theirs" (µs each).
func faster(name, config string, ours, theirs float64) BenchTarget {
	r := ours / theirs
	if math.IsNaN(r) {
		r = math.Inf(1)
	}
	return BenchTarget{Name: name, Config: config, Detail: fmt.Sprintf("%.1f against %.1f µs", ours, theirs),
		Ratio: r, Limit: 1, Met: r < 1}
}

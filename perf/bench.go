package perf

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"ssmverify/report"
	"ssmverify/ssm"
)

// ForwardFlag is the forward's ratio to zoh above which the table marks a
// method: the performance issue's 1.10× for every method against zoh.
const ForwardFlag = 1.10

// WriteBenchTable writes make bench's table: a row per library, size, dtype,
// A and method with the forward's median, bandwidth, ratio to zoh and the
// floor (the bytes at copy bandwidth), the backward's median and ratio to
// zoh's where the library has one, and the backward's median on saved
// states (ssmk_plan_create_bwd_saved) where it has those.
func WriteBenchTable(w io.Writer, runs []report.BenchRun) {
	fmt.Fprintf(w, "%-7s %-16s %-5s %-7s %-9s %10s %8s %9s %6s  floor µs  %9s %9s %9s\n",
		"library", "size", "dtype", "A", "method", "median µs", "GB/s", "% copy BW", "× zoh", "bwd µs", "bwd × zoh", "saved µs")
	for _, r := range runs {
		c := r.Check7
		floor := float64(c.BytesPerScan) / (c.CopyBandwidthGBps * 1e3)
		for _, m := range c.Methods {
			bwd := fmt.Sprintf("  %9s %9s %9s", "-", "-", "-")
			if m.BackwardUS > 0 {
				saved := "-"
				if m.BackwardSavedUS > 0 {
					saved = fmt.Sprintf("%.1f", m.BackwardSavedUS)
				}
				bwd = fmt.Sprintf("  %9.1f %9.3f %9s", m.BackwardUS, m.BackwardRatioToZOH, saved)
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
// what was measured (a time over another, or a fraction of the copy
// bandwidth), Limit what it must stay at or below — or, where AtLeast, at or
// above.
type BenchTarget struct {
	Name    string  // what is compared
	Config  string  // the problem: size, dtype, A
	Detail  string  // the figures behind the ratio
	Ratio   float64 // measured
	Limit   float64
	AtLeast bool
	Met     bool
}

func (t BenchTarget) String() string {
	v, bound := "met", "limit"
	if !t.Met {
		v = "MISSED"
	}
	if t.AtLeast {
		bound = "at least"
	}
	return fmt.Sprintf("%-6s %-44s %-26s %6.3f (%s %.2f): %s", v, t.Name, t.Config, t.Ratio, bound, t.Limit, t.Detail)
}

// The speed targets of our kernels (docs/performance.md has each figure
// against them).
const (
	// MinCopyFraction: zoh's fp32 forward at the largest size run moves its
	// bytes at this fraction of the copy bandwidth or more.
	MinCopyFraction = 0.40
	// MaxNarrowToMamba: zoh's forward with 16-bit inputs within this
	// fraction of Mamba's kernel's time in the same input type.
	MaxNarrowToMamba = 0.6
	// MaxBackwardToMamba: zoh's backward within this fraction of Mamba's.
	MaxBackwardToMamba = 0.9
	// MaxComplexToReal: complex zoh's forward within this multiple of real
	// zoh's, same size and dtype.
	MaxComplexToReal = 3
	// MaxFohToZOH: foh's forward within this multiple of zoh's.
	MaxFohToZOH = 1.10
)

// BenchTargets judges the speed targets that make bench's runs can show:
//   - zoh's fp32 forward at MinCopyFraction of the copy bandwidth or more,
//     at the largest size run (batch·dim·seqlen·dstate);
//   - foh's forward within MaxFohToZOH of zoh's, and every method's backward
//     within Check7's MaxBackwardSlowdown of zoh's (1.15 on a GPU), per size,
//     dtype and A of this project's build;
//   - complex zoh's forward within MaxComplexToReal of real zoh's;
//   - against Mamba's kernel in the same configuration, where a Mamba run is
//     there: zoh's fp32 forward faster, with 16-bit inputs within
//     MaxNarrowToMamba of its time, and zoh's backward within
//     MaxBackwardToMamba: the plain plans' (ours recomputes the states its
//     chunks start from; Mamba's, through adapters/mamba, reads those its
//     forward saved when the plan was built) and, where both libraries
//     have them, the plans on saved states' (the backward alone, like for
//     like);
//   - 16-bit inputs faster than fp32 for every method.
//
// A target whose runs are missing is left out, not guessed.
func BenchTargets(runs []report.BenchRun) []BenchTarget {
	find := func(lib, size, dt string, cx bool) *report.BenchRun {
		for i := range runs {
			r := &runs[i]
			if r.Library == lib && r.Size == size && r.DType == dt && r.Complex == cx {
				return r
			}
		}
		return nil
	}
	var ts []BenchTarget
	if r := largestRun(runs, "fp32"); r != nil {
		if z := r.Row("zoh"); z != nil {
			ts = append(ts, BenchTarget{Name: fmt.Sprintf("zoh's forward at %.0f%% of copy or more", 100*MinCopyFraction),
				Config: r.Config(), Detail: fmt.Sprintf("%.1f µs, %.1f%% of copy", z.MedianUS, 100*z.FracCopyBW),
				Ratio: z.FracCopyBW, Limit: MinCopyFraction, AtLeast: true, Met: z.FracCopyBW >= MinCopyFraction})
		}
	}
	for _, r := range runs {
		if r.Library != "ssmk" {
			continue
		}
		if z, f := r.Row("zoh"), r.Row("foh"); z != nil && f != nil {
			ts = append(ts, within(fmt.Sprintf("foh's forward within %.2f× of zoh's", MaxFohToZOH), r.Config(),
				f.MedianUS, z.MedianUS, MaxFohToZOH))
		}
		if lim := r.Check7.MaxBackwardSlowdown; lim > 0 {
			worst, ratio, detail := "", 0.0, ""
			for _, m := range r.Check7.Methods {
				if m.BackwardUS > 0 && m.BackwardRatioToZOH > ratio {
					worst, ratio = m.Method, m.BackwardRatioToZOH
					detail = fmt.Sprintf("slowest: %s %.1f µs", worst, m.BackwardUS)
				}
			}
			if z := r.Row("zoh"); worst != "" && z != nil {
				ts = append(ts, BenchTarget{Name: fmt.Sprintf("every backward within %.2f× of zoh's", lim), Config: r.Config(),
					Detail: fmt.Sprintf("%s against zoh's %.1f µs", detail, z.BackwardUS), Ratio: ratio, Limit: lim, Met: ratio <= lim})
			}
		}
		if re := find("ssmk", r.Size, r.DType, false); r.Complex && re != nil {
			if zc, zr := r.Row("zoh"), re.Row("zoh"); zc != nil && zr != nil {
				ts = append(ts, within(fmt.Sprintf("complex zoh's forward within %.0f× of real", float64(MaxComplexToReal)),
					r.Config(), zc.MedianUS, zr.MedianUS, MaxComplexToReal))
			}
		}
		// against Mamba's kernel, zoh alone (the method it has)
		if mr := find("mamba", r.Size, r.DType, r.Complex); mr != nil {
			ours, theirs := r.Row("zoh"), mr.Row("zoh")
			if ours != nil && theirs != nil {
				if r.DType == "bf16" || r.DType == "fp16" {
					ts = append(ts, within(fmt.Sprintf("zoh's forward within %.1f× of Mamba's", MaxNarrowToMamba), r.Config(),
						ours.MedianUS, theirs.MedianUS, MaxNarrowToMamba))
				} else {
					ts = append(ts, faster("zoh's forward faster than Mamba's", r.Config(), ours.MedianUS, theirs.MedianUS))
				}
				if ours.BackwardUS > 0 && theirs.BackwardUS > 0 {
					ts = append(ts, within(fmt.Sprintf("zoh's backward within %.1f× of Mamba's", MaxBackwardToMamba), r.Config(),
						ours.BackwardUS, theirs.BackwardUS, MaxBackwardToMamba))
				}
				if ours.BackwardSavedUS > 0 && theirs.BackwardSavedUS > 0 {
					ts = append(ts, within(fmt.Sprintf("zoh's backward on saved states within %.1f× of Mamba's", MaxBackwardToMamba),
						r.Config(), ours.BackwardSavedUS, theirs.BackwardSavedUS, MaxBackwardToMamba))
				}
			}
		}
		// 16-bit inputs against fp32, every method
		if (r.DType == "bf16" || r.DType == "fp16") && !r.Complex {
			if f32 := find("ssmk", r.Size, "fp32", false); f32 != nil {
				ratio, detail := 0.0, ""
				for _, m := range r.Check7.Methods {
					if m32 := f32.Row(m.Method); m32 != nil && m32.MedianUS > 0 && m.MedianUS/m32.MedianUS > ratio {
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

// largestRun is this project's real-A run of dtype dt whose problem has the
// most elements (batch·dim·seqlen·dstate), or nil.
func largestRun(runs []report.BenchRun, dt string) *report.BenchRun {
	var best *report.BenchRun
	var most int64
	for i := range runs {
		r := &runs[i]
		if r.Library != "ssmk" || r.DType != dt || r.Complex {
			continue
		}
		n := int64(1)
		for _, f := range strings.Split(r.Size, "x") {
			v, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				n = 0
				break
			}
			n *= v
		}
		if n > most {
			best, most = r, n
		}
	}
	return best
}

// within is the target "ours within lim times theirs" (µs each).
func within(name, config string, ours, theirs, lim float64) BenchTarget {
	t := faster(name, config, ours, theirs)
	t.Limit, t.Met = lim, t.Ratio <= lim
	return t
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

package report

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"ssmverify/ssm"
)

// Merge adds what another run of the suite against the same library
// recorded (prev, read from its report.json): its tests, tables, undecided
// parts, unjudged items, diagnoses, comparisons, figures, performance,
// errors and plots. A run split over processes (Check7 in a fresh process
// of its own, the rest after it: scripts/gpu.sh) or over the tasks of a
// Slurm array reports as one; reports of two libraries (by sha256, else by
// path), or of two property seeds, do not merge.
func (r *Report) Merge(prev *Report) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	// a report of no library is a crash record from a process that died
	// before it had recorded any test (RecordCrash): it merges into any
	if a, b := prev.Library, r.Library; (a.Path != "" || a.SHA256 != "") && ((a.SHA256 != "" && b.SHA256 != "" && a.SHA256 != b.SHA256) || ((a.SHA256 == "" || b.SHA256 == "") && a.Path != b.Path)) {
		return fmt.Errorf("report: cannot merge a report of %s (sha256 %.12s) into one of %s (sha256 %.12s): not one library", a.Path, a.SHA256, b.Path, b.SHA256)
	}
	if prev.RapidSeed != r.RapidSeed {
		// One verdict needs one set of property draws to reproduce it.
		return fmt.Errorf("report: cannot merge a run with RAPID_SEED=%d into one with %d: not one run", prev.RapidSeed, r.RapidSeed)
	}
	r.Tests = append(prev.Tests, r.Tests...)
	r.Undecided = append(prev.Undecided, r.Undecided...)
	r.NotSupported = append(prev.NotSupported, r.NotSupported...)
	r.Fitted = append(prev.Fitted, r.Fitted...)
	r.Diagnoses = append(prev.Diagnoses, r.Diagnoses...)
	r.Crashes = append(prev.Crashes, r.Crashes...)
	r.Errors = append(prev.Errors, r.Errors...)
	r.Figures = append(prev.Figures, r.Figures...)
	r.Performance = append(prev.Performance, r.Performance...)
	r.Plots = append(prev.Plots, r.Plots...)
	for _, t := range prev.Tasks {
		if !slices.Contains(r.Tasks, t) {
			r.Tasks = append(r.Tasks, t)
		}
	}
	if r.Baseline == "" {
		r.Baseline = prev.Baseline
	}
	if prev.Host != nil && r.Host != nil && !slices.Contains(strings.Split(r.Host.Hostname, ","), prev.Host.Hostname) {
		r.Host.Hostname += "," + prev.Host.Hostname
	} else if r.Host == nil {
		r.Host = prev.Host
	}
	for _, t := range prev.Tables {
		if !slices.ContainsFunc(r.Tables, func(u Table) bool { return u.Name == t.Name }) {
			r.Tables = append(r.Tables, t)
		}
	}
	if r.Convergence == nil {
		r.Convergence = prev.Convergence
	}
	if r.Bridge == nil {
		r.Bridge = prev.Bridge
	}
	if err := r.mergeKernels(prev.Kernels); err != nil {
		return err
	}
	r.mergeBridged(prev.Bridged)
	for _, pc := range prev.Cells {
		dt, err := ssm.ParseDType(pc.DType)
		if err != nil {
			return fmt.Errorf("report: merging: %w", err)
		}
		var c *Cell
		if m, err := ssm.ParseMethod(pc.Method); err == nil {
			c = r.cell(m, dt, pc.Kind == ssm.AKind(true))
		} else {
			// a method the ABI does not carry (Mamba-3's exponential-
			// trapezoidal, through the bridge): its cell is keyed by name
			c = r.methodCell(pc.Method, dt, pc.Kind)
			if c.Support == "" {
				c.Support = pc.Support
			}
		}
		c.merge(pc.Tally)
		c.Ratios = append(c.Ratios, pc.Ratios...)
		c.MaxULP = Num(math.Max(float64(c.MaxULP), float64(pc.MaxULP)))
		if c.Features == "" {
			c.Features = pc.Features
		}
		if c.Backward == nil {
			c.Backward = pc.Backward // the backward runs in one process
		}
	}
	return nil
}

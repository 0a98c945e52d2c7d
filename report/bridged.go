package report

import (
	"fmt"
	"slices"

	"ssmverify/ssm"
)

// BridgedPart is a bridged suite that a gate ran beside the ABI's suite:
// its package (verify/mamba2, verify/mamba3), the kernel it judged and
// how the bridge reached it.
type BridgedPart struct {
	Package string      `json:"package"`
	Kernel  LibraryInfo `json:"kernel"`
	Bridge  *BridgeInfo `json:"bridge,omitempty"`
}

// Include adds to r, a gate's report, what the bridged suite of package
// pkg recorded in its own report (br): its kernel cells (keyed by
// operation, dtype and state dtype, as Merge keys them), diagnoses,
// tables, undecided parts, unjudged items, crashes, figures and errors,
// and the kernel it judged (Bridged). Unlike Merge it takes a report of
// another library: the bridged kernel is not the ABI library. The tests
// are the runner's (SetTests), not included here.
func (r *Report) Include(pkg string, br *Report) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.mergeKernels(br.Kernels); err != nil {
		return err
	}
	r.mergeBridged(append([]BridgedPart{{Package: pkg, Kernel: br.Library, Bridge: br.Bridge}}, br.Bridged...))
	r.Diagnoses = append(r.Diagnoses, br.Diagnoses...)
	r.Undecided = append(r.Undecided, br.Undecided...)
	r.NotSupported = append(r.NotSupported, br.NotSupported...)
	r.Crashes = append(r.Crashes, br.Crashes...)
	r.Figures = append(r.Figures, br.Figures...)
	r.Errors = append(r.Errors, br.Errors...)
	for _, t := range br.Tables {
		if !slices.ContainsFunc(r.Tables, func(u Table) bool { return u.Name == t.Name }) {
			r.Tables = append(r.Tables, t)
		}
	}
	return nil
}

// mergeBridged adds the parts r does not list yet (by package and kernel).
func (r *Report) mergeBridged(parts []BridgedPart) {
	for _, p := range parts {
		if !slices.ContainsFunc(r.Bridged, func(q BridgedPart) bool { return q.Package == p.Package && q.Kernel.Path == p.Kernel.Path }) {
			r.Bridged = append(r.Bridged, p)
		}
	}
}

// mergeKernels adds another run's kernel cells to r's, cell by cell.
func (r *Report) mergeKernels(cells []*KernelCell) error {
	for _, pk := range cells {
		dt, err := ssm.ParseDType(pk.DType)
		if err != nil {
			return fmt.Errorf("report: merging: %w", err)
		}
		sdt, err := ssm.ParseDType(pk.StateDType)
		if err != nil {
			return fmt.Errorf("report: merging: %w", err)
		}
		c := r.kernelCell(pk.Op, dt, sdt)
		c.merge(pk.Tally)
		c.Crashes += pk.Crashes
		if c.Support == "" || (pk.Support == "yes" && c.Support != "yes") {
			c.Support = pk.Support
		}
	}
	return nil
}

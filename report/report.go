package report

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"ssmverify/judge"
	"ssmverify/ssm"
)

// ReportSchema names the version of report.json's layout.
const ReportSchema = "ssmverify.report/v2"

// Report is report.json: the one report of a run, whether make verify
// wrote it (the suite's TestMain) or the gate (cmd/gate: the suite's report
// read back, with the tests of every package it ran, the performance
// comparison, figures and plots added), and what the mutation tester and a
// user's tooling read. Its JSON form (schema ReportSchema):
//
//	schema     string               ReportSchema
//	library    {path, sha256, backend, device, selection, abi_version}
//	started    RFC 3339 time
//	command, tasks, rapid_seed, host  what produced it (the gate; empty for make verify)
//	passed     bool                 every cell and every test passed
//	verdict, exit_code              pass, fail, undecided or error, and the gate's exit code
//	errors     [string]             what kept the run from deciding (setup)
//	cells      [{method, dtype, kind, checks, failures, max_ratio, max_ulp, ratios,
//	             threshold, worst, failed_by, backward}]   one per method × dtype × real/complex
//	tests      [{package, name, passed, outcome, reason, seconds, output, reproduce}]
//	           every test (outcome: pass, fail, skip, undecided; reason: a failure's first line)
//	undecided  [{test, part, reason}]     what a test could not decide on this machine, and why
//	not_supported [{test, what}]    what a test did not judge because the library declares it unsupported
//	fitted     [{test, what}]     how tests changed their problems to what the library declares it takes
//	diagnoses  [{test, method, dtype, kind, backward, tag, cause, also, needs, where, evidence,
//	             finding, as, own}]  the cause of a failure (package diagnose; Finding)
//	tables     [{name, columns, rows}]           sweeps, fp32-vs-fp64, bilinear ε
//	convergence {deltas, errors, slopes}         per method (Convergence)
//	figures, performance, baseline, plots       the gate's measured numbers and Check7 comparison
//
// Ratios are the dimensionless scaled error ratio of reference.Ratio; ulps
// are in the kernel's dtype.
type Report struct {
	mu      sync.Mutex
	Schema  string      `json:"schema"`
	Library LibraryInfo `json:"library"`
	Started string      `json:"started"`
	// Command, Tasks, RapidSeed and Host say what produced the report: the
	// gate sets them (a Slurm array's merged report lists every task).
	Command string   `json:"command,omitempty"`
	Tasks   []string `json:"tasks,omitempty"`
	// RapidSeed is the seed of the suite's property tests (RAPID_SEED);
	// 0: a fresh seed per property, not reproducible.
	RapidSeed uint64 `json:"rapid_seed,omitempty"`
	Host      *Host  `json:"host,omitempty"`
	Passed    bool   `json:"passed"`
	// Verdict and ExitCode are Decide's: pass, fail, undecided, error.
	Verdict  string        `json:"verdict,omitempty"`
	ExitCode int           `json:"exit_code"`
	Errors   []string      `json:"errors,omitempty"`
	Cells    []*Cell       `json:"cells"`
	Tests    []TestVerdict `json:"tests"`
	Tables   []Table       `json:"tables"`
	// NotSupported lists what tests left unjudged because the library
	// declares it unsupported: counted apart, never a failure.
	NotSupported []NotSupported `json:"not_supported,omitempty"`
	// Fitted lists how tests changed their problems to what the library
	// declares it takes (ssmk_scan_features: D dropped, heads shared, …).
	Fitted []NotSupported `json:"fitted,omitempty"`
	// Undecided lists what tests could not decide on this machine (a
	// whole test when Part is empty), with the reason: never a pass.
	Undecided []UndecidedPart `json:"undecided,omitempty"`
	// Diagnoses give the cause of failures, one per test and cell.
	Diagnoses []Diagnosis `json:"diagnoses,omitempty"`
	// Bridged lists the bridged suites a gate ran beside the ABI's suite
	// (Include): each suite's package and the kernel it judged; their
	// cells are in Kernels, their diagnoses in Diagnoses.
	Bridged []BridgedPart `json:"bridged,omitempty"`
	// Crashes are the tests inside which the test process died (each
	// also a failed test); the run resumed without them (RecordCrash).
	Crashes []Crash `json:"crashes,omitempty"`
	// Convergence is the global error of each method's scan against the
	// exact solution as Δ shrinks (TestConvergenceOrder); nil when that
	// test did not run.
	Convergence *Convergence `json:"convergence,omitempty"`
	// Figures are the measured numbers, each with its unit; Performance
	// Check7's comparison with a baseline (package perf decides it);
	// Baseline the file compared with; Plots the PNG files beside
	// report.json.
	Figures     []Figure `json:"figures,omitempty"`
	Performance []Perf   `json:"performance,omitempty"`
	Baseline    string   `json:"baseline,omitempty"`
	Plots       []string `json:"plots,omitempty"`
	// Bridge and Kernels are a kernel behind the bridge's (package bridge):
	// what its worker said of itself, and its comparisons per operation,
	// dtype and state dtype; Cells then stay empty.
	Bridge  *BridgeInfo   `json:"bridge,omitempty"`
	Kernels []*KernelCell `json:"kernels,omitempty"`
	cells   map[cellKey]*Cell
	named   map[string]*Cell // cells of methods the ABI does not carry (methodCell)
}

// LibraryInfo identifies the library under test: one identity, filled
// once by Identify, for the suite's report, the gate's and the baselines.
type LibraryInfo struct {
	Path       string `json:"path"`
	SHA256     string `json:"sha256,omitempty"`
	Backend    string `json:"backend"`
	Device     string `json:"device"`
	Selection  string `json:"selection"`
	ABIVersion int    `json:"abi_version"`
}

type cellKey struct {
	m       ssm.Method
	dt      ssm.DType
	complex bool
}

// NotSupported is one thing a test did not judge because the library
// declares it unsupported (ssmk_capabilities).
type NotSupported struct {
	Test string `json:"test"`
	What string `json:"what"`
}

// Cell aggregates every comparison of one method × dtype × real/complex.
type Cell struct {
	Method string `json:"method"`
	DType  string `json:"dtype"`
	Kind   string `json:"kind"`
	// Support is what the library declares: "yes", "scan only", "zoh
	// fallback" or "no" (ssmk_capabilities); "" when not asked.
	Support string `json:"support,omitempty"`
	// Features is what ssmk_scan_features declares for the cell when it
	// is not every option on every shape; "" otherwise.
	Features string `json:"features,omitempty"`
	Tally
	MaxULP    Num `json:"max_ulp"`
	Threshold Num `json:"threshold"`
	// Ratios are every comparison's ratio, to 3 significant digits: the
	// distribution the gate plots.
	Ratios []Num `json:"ratios,omitempty"`
	// Backward is the cell's backward pass (nil where none was judged).
	Backward *BackwardCell `json:"backward,omitempty"`
}

// Num is a float64 that JSON-encodes ±Inf and NaN (a broken kernel's
// ratios) as the strings "inf", "-inf" and "nan" instead of failing.
type Num float64

// MarshalJSON implements json.Marshaler.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	switch {
	case math.IsNaN(f):
		return []byte(`"nan"`), nil
	case math.IsInf(f, 1):
		return []byte(`"inf"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-inf"`), nil
	}
	return json.Marshal(f)
}

// UnmarshalJSON implements json.Unmarshaler, the inverse of MarshalJSON,
// so that report.json decodes back into a Report (the gate reads it).
func (n *Num) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		switch s {
		case "nan":
			*n = Num(math.NaN())
		case "inf":
			*n = Num(math.Inf(1))
		case "-inf":
			*n = Num(math.Inf(-1))
		default:
			return fmt.Errorf("report: %q is not a number, \"inf\", \"-inf\" or \"nan\"", s)
		}
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Num(f)
	return nil
}

// Outcome is what a test function decided.
type Outcome string

const (
	Passed    Outcome = "pass"
	Failed    Outcome = "fail"
	Skipped   Outcome = "skip"      // not run here (a flag, a short run)
	Undecided Outcome = "undecided" // ran, and could not decide on this machine
)

// TestVerdict is one test function's outcome. Passed is false only for a
// failure: an undecided or skipped test did not fail, and did not pass
// either (Outcome says which).
type TestVerdict struct {
	// Package is the suite's package the test belongs to (verify, golden,
	// fuzz); empty in make verify's own report, which is verify's.
	Package string  `json:"package,omitempty"`
	Name    string  `json:"name"`
	Passed  bool    `json:"passed"`
	Outcome Outcome `json:"outcome"`
	// Reason is the first line of a failure's message (testrun.Reason), or
	// of why an undecided test could not decide.
	Reason  string  `json:"reason,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
	Task    string  `json:"task,omitempty"`
	// Output is a failure's log lines (at most 40); Reproduce the one-line
	// command that runs it again against the same library and seed.
	Output    []string `json:"output,omitempty"`
	Reproduce string   `json:"reproduce,omitempty"`
	// KernelCalls is how many calls of the kernel under test a bridged
	// suite's top-level test made (nil where not counted): a test that
	// made none — the suite's own checks on the numpy path, its CanFail
	// tests — gives every kernel the same verdict.
	KernelCalls *int64 `json:"kernel_calls,omitempty"`
}

// UndecidedPart is what a test could not decide, and why.
type UndecidedPart struct {
	Test   string `json:"test"`
	Part   string `json:"part,omitempty"` // empty: the whole test
	Reason string `json:"reason"`
}

// Table is a named table of figures (strings, already formatted).
type Table struct {
	Name    string     `json:"name"`
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
}

// Text is the table's columns and rows as aligned text, a line each,
// indented by two spaces.
func (t Table) Text() string {
	w := make([]int, len(t.Columns))
	for i, c := range t.Columns {
		w[i] = len([]rune(c))
		for _, row := range t.Rows {
			if i < len(row) {
				w[i] = max(w[i], len([]rune(row[i])))
			}
		}
	}
	var b strings.Builder
	line := func(cells []string) {
		var l strings.Builder
		for i, c := range cells {
			if i < len(w) {
				fmt.Fprintf(&l, "  %-*s", w[i], c)
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " ") + "\n")
	}
	line(t.Columns)
	for _, row := range t.Rows {
		line(row)
	}
	return b.String()
}

// New starts a report for the library lib, with a cell for every method,
// dtype and real/complex A.
func New(lib LibraryInfo) *Report {
	r := &Report{Schema: ReportSchema, Started: time.Now().UTC().Format(time.RFC3339), cells: map[cellKey]*Cell{}, Library: lib}
	for _, m := range ssm.Methods() {
		for _, dt := range ssm.AllDTypes() {
			for _, c := range []bool{false, true} {
				r.cell(m, dt, c)
			}
		}
	}
	return r
}

// NewKernel starts a report for a kernel behind the bridge: no cells of the
// ABI's methods, the worker's description in Bridge.
func NewKernel(lib LibraryInfo, b *BridgeInfo) *Report {
	return &Report{Schema: ReportSchema, Started: time.Now().UTC().Format(time.RFC3339), cells: map[cellKey]*Cell{}, Library: lib, Bridge: b}
}

func (r *Report) cell(m ssm.Method, dt ssm.DType, isComplex bool) *Cell {
	k := cellKey{m, dt, isComplex}
	c := r.cells[k]
	if c == nil {
		c = &Cell{Method: m.String(), DType: dt.String(), Kind: ssm.AKind(isComplex), Threshold: Num(judge.Threshold(dt))}
		r.cells[k] = c
		r.Cells = append(r.Cells, c)
	}
	return c
}

// Add records one comparison made by test for (m, dt, isComplex).
func (r *Report) Add(test string, m ssm.Method, dt ssm.DType, isComplex bool, ratio, ulp float64, passed bool, worst string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cell(m, dt, isComplex).add(test, ratio, ulp, passed, worst)
}

// add records one comparison in c.
func (c *Cell) add(test string, ratio, ulp float64, passed bool, worst string) {
	c.Tally.add(test, ratio, passed, test+": "+worst)
	c.Ratios = append(c.Ratios, Num(round3(ratio)))
	if ulp > float64(c.MaxULP) {
		c.MaxULP = Num(ulp)
	}
}

// Declare records what the library declares for a cell.
func (r *Report) Declare(m ssm.Method, dt ssm.DType, isComplex bool, c ssm.Caps) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := "no"
	switch {
	case c.Supported() && c.ComplexZOHFallback() && isComplex:
		s = "zoh fallback"
	case c.Supported() && c.ScanOnly():
		s = "scan only"
	case c.Supported():
		s = "yes"
	}
	r.cell(m, dt, isComplex).Support = s
}

// Unsupported records that test did not judge what, as the library
// declares it unsupported. Repeats are recorded once.
func (r *Report) Unsupported(test, what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.NotSupported = appendOnce(r.NotSupported, NotSupported{test, what})
}

// Fit records that test changed its problems as what says, to what the
// library declares it takes. Repeats are recorded once.
func (r *Report) Fit(test, what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Fitted = appendOnce(r.Fitted, NotSupported{test, what})
}

// DeclareFeatures records a cell's ssmk_scan_features when it is not every
// option on every shape.
func (r *Report) DeclareFeatures(m ssm.Method, dt ssm.DType, isComplex bool, f ssm.Features) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !f.All() {
		r.cell(m, dt, isComplex).Features = f.String()
	}
}

func appendOnce(l []NotSupported, n NotSupported) []NotSupported {
	for _, x := range l {
		if x == n {
			return l
		}
	}
	return append(l, n)
}

// WantDiagnosis reports whether test, or another subtest of its top-level
// test, has no diagnosis yet for the cell (one is enough: a diagnosis runs
// dozens of scans).
func (r *Report) WantDiagnosis(test string, m ssm.Method, dt ssm.DType, isComplex bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, d := range r.Diagnoses {
		if topLevel(d.Test) == topLevel(test) && d.Method == m.String() && d.DType == dt.String() && d.Kind == ssm.AKind(isComplex) {
			return false
		}
	}
	return true
}

// topLevel is a test's top-level name: the subtests of one test (its
// lengths, its distributions) share one diagnosis per cell.
func topLevel(test string) string {
	name, _, _ := strings.Cut(test, "/")
	return name
}

// RecordTest records a test function's outcome.
func (r *Report) RecordTest(name string, o Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Tests = append(r.Tests, TestVerdict{Name: name, Passed: o != Failed, Outcome: o})
}

// RecordKernelCalls records that test made n calls of the kernel under
// test (its verdict, recorded when it ends, gets the count).
func (r *Report) RecordKernelCalls(test string, n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.Tests) - 1; i >= 0; i-- {
		if r.Tests[i].Name == test {
			r.Tests[i].KernelCalls = &n
			return
		}
	}
}

// Undecide records that test could not decide part of what it decides (the
// whole of it when part is empty), and why.
func (r *Report) Undecide(test, part, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Undecided = append(r.Undecided, UndecidedPart{test, part, reason})
}

// IsUndecided reports whether test was undecided as a whole.
func (r *Report) IsUndecided(test string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range r.Undecided {
		if u.Test == test && u.Part == "" {
			return true
		}
	}
	return false
}

// undecidedParts lists the parts of test that were undecided.
func (r *Report) undecidedParts(test string) []string {
	var parts []string
	for _, u := range r.Undecided {
		if u.Test == test {
			if u.Part == "" {
				parts = append(parts, u.Reason)
			} else {
				parts = append(parts, u.Part+": "+u.Reason)
			}
		}
	}
	return parts
}

// AddTable adds (or replaces) a named table.
func (r *Report) AddTable(t Table) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.Tables {
		if r.Tables[i].Name == t.Name {
			r.Tables[i] = t
			return
		}
	}
	r.Tables = append(r.Tables, t)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Finish settles the diagnoses (settleDiagnoses), sorts the tests and
// decides the verdict (Decide).
func (r *Report) Finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	sort.SliceStable(r.Tests, func(i, j int) bool { return r.Tests[i].Name < r.Tests[j].Name })
	r.settleDiagnoses()
	r.decide()
}

// SetConvergence records the convergence measurement.
func (r *Report) SetConvergence(c *Convergence) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Convergence = c
}

// Load reads a report.json written by Write.
func Load(path string) (*Report, error) { return ReadJSON[Report](path) }

// ReadJSON reads the JSON file at path into a new T; a decoding error names
// the file. The loaders of report.json, check7.json and the gate's report
// share it.
func ReadJSON[T any](path string) (*T, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &v, nil
}

// Write writes report.json and summary.txt into dir.
func (r *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	r.mu.Lock()
	js, err := json.MarshalIndent(r, "", "  ")
	r.mu.Unlock()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "summary.txt"), []byte(r.Summary()), 0o644)
}

// round3 rounds to 3 significant digits (the report's ratios need no more).
func round3(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	e := math.Pow(10, math.Floor(math.Log10(math.Abs(v)))-2)
	return math.Round(v/e) * e
}

// methodCell returns the cell of a method the ABI does not carry, by its
// name (reached through the bridge: the exponential-trapezoidal method of
// Mamba-3), kind "real" or the method's word for its complex state.
func (r *Report) methodCell(method string, dt ssm.DType, kind string) *Cell {
	k := method + "/" + dt.String() + "/" + kind
	if r.named == nil {
		r.named = map[string]*Cell{}
	}
	c := r.named[k]
	if c == nil {
		c = &Cell{Method: method, DType: dt.String(), Kind: kind, Threshold: Num(judge.Threshold(dt))}
		r.named[k] = c
		r.Cells = append(r.Cells, c)
	}
	return c
}

// AddMethodCell records one comparison made by test for a method the ABI
// does not carry (methodCell), declared as support says ("bridge"; "no":
// not judged, no comparison recorded).
func (r *Report) AddMethodCell(test, method string, dt ssm.DType, kind, support string, ratio, ulp float64, passed bool, worst string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.methodCell(method, dt, kind)
	c.Support = support
	if support == "no" {
		return
	}
	c.add(test, ratio, ulp, passed, worst)
}

// Command crosscopy puts the runs of one bridged suite against several
// copies of a kernel side by side: upstream's Mamba-2 and the engines'
// copies of it (vLLM, Megatron-LM, …), each judged by the same cases.
//
//	crosscopy [-out DIR] [-suite mamba2] NAME=RUN [NAME=RUN ...]
//
// RUN is the folder a run left, as scripts/gpu.sh writes it: the suite's
// go test -v log (RUN/SUITE.log) and its report (RUN/SUITE/report.json).
// A NAME given more than once is one copy judged in several runs (a suite
// split over device calls): its cells are the union, a later run's cell
// replacing an earlier one's for a case both ran, unless the later left
// it undecided.
// Each case (a leaf subtest) gets one cell per copy: ok, FAIL with the
// diagnosis the report recorded for that case ([tag], else the failure's
// first line), n/s where the copy does not declare it, skip, or "-" where
// the copy's run has no such case. The table goes into DIR/report.json
// (a report with the table "mamba2 cross-copy", each copy's kernel and
// commit among its bridged parts, the diagnoses each under its copy's
// name; its verdict fail where a cell failed) and DIR/summary.txt; cases
// every copy passes are counted, not listed, unless -all.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"ssmverify/report"
	"ssmverify/testrun"
)

func main() { os.Exit(run(os.Args[1:])) }

// A copy is one run: its name, its report and its cases' cells.
type copyRun struct {
	name  string
	rep   *report.Report
	cells map[string]string
}

func run(args []string) int {
	fs := flag.NewFlagSet("crosscopy", flag.ContinueOnError)
	out := fs.String("out", "out/crosscopy", "output folder: report.json and summary.txt")
	suite := fs.String("suite", "mamba2", "the suite: its log is RUN/SUITE.log, its report RUN/SUITE/report.json")
	all := fs.Bool("all", false, "list the cases every copy passes too")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() < 1 {
		fmt.Fprintln(os.Stderr, "crosscopy: want NAME=RUN arguments (a run's folder: RUN/"+*suite+".log, RUN/"+*suite+"/report.json)")
		return 2
	}
	var copies []copyRun
	for _, a := range fs.Args() {
		name, dir, ok := strings.Cut(a, "=")
		if !ok || name == "" || dir == "" {
			fmt.Fprintf(os.Stderr, "crosscopy: argument %q: want NAME=RUN\n", a)
			return 2
		}
		c, err := load(name, dir, *suite)
		if err != nil {
			fmt.Fprintln(os.Stderr, "crosscopy:", err)
			return 2
		}
		if i := slices.IndexFunc(copies, func(o copyRun) bool { return o.name == name }); i >= 0 {
			copies[i].merge(c)
			continue
		}
		copies = append(copies, c)
	}
	rep := table(copies, *suite, *all)
	sum := summary(copies, rep)
	js, err := json.MarshalIndent(rep, "", "  ")
	if err == nil {
		err = os.MkdirAll(*out, 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(*out, "report.json"), append(js, '\n'), 0o644)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(*out, "summary.txt"), []byte(sum), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "crosscopy:", err)
		return 2
	}
	fmt.Print(sum)
	return 0
}

// summary is the table as text, after a line for each copy: its kernel,
// commit and device.
func summary(copies []copyRun, rep *report.Report) string {
	var b strings.Builder
	for _, c := range copies {
		commit, dev := "", c.rep.Library.Device
		if c.rep.Bridge != nil {
			commit = fmt.Sprint(c.rep.Bridge.Describe["commit"])
			if d, ok := c.rep.Bridge.Describe["device"]; ok {
				dev = fmt.Sprint(d)
			}
		}
		fmt.Fprintf(&b, "%-10s %s (commit %s) on %s\n", c.name, c.rep.Library.Path, commit, dev)
	}
	for _, t := range rep.Tables {
		fmt.Fprintf(&b, "\n%s\n%s", t.Name, t.Text())
	}
	b.WriteString("\nok: passed; FAIL [tag]: failed, with the diagnosis the copy's report recorded for the case; n/s: not declared\n" +
		"by the copy's adapter; skip: skipped; -: the copy's run has no such case; " + casesBelow + ": the copy ran its cases, listed below it\n")
	fmt.Fprintf(&b, "verdict: %s\n", rep.Verdict)
	return b.String()
}

// load reads a copy's log and report and makes its cells.
func load(name, dir, suite string) (copyRun, error) {
	logPath := filepath.Join(dir, suite+".log")
	b, err := os.ReadFile(logPath)
	if err != nil {
		return copyRun{}, fmt.Errorf("%s: %w", name, err)
	}
	tests, err := testrun.Parse(b, "verify/"+suite, nil)
	if err != nil {
		return copyRun{}, fmt.Errorf("%s: %s: %w", name, logPath, err)
	}
	rep, err := report.Load(filepath.Join(dir, suite, "report.json"))
	if err != nil {
		// a run that died before writing its report still has its log
		rep = &report.Report{}
	}
	return copyRun{name: name, rep: rep, cells: cells(tests, rep)}, nil
}

// merge adds a later run of the same copy: its cells replace c's for the
// cases it decided, its diagnoses are added, and its kernel's description
// stands in where c's run left no report.
func (c *copyRun) merge(later copyRun) {
	for name, v := range later.cells {
		old, ok := c.cells[name]
		if ok && (v == casesBelow && old != casesBelow || strings.HasPrefix(v, "undecided") && !strings.HasPrefix(old, "undecided")) {
			continue // a verdict is not replaced by a later run's lack of one
		}
		c.cells[name] = v
	}
	if c.rep.Library.Path == "" {
		c.rep.Library = later.rep.Library
	}
	if c.rep.Bridge == nil {
		c.rep.Bridge = later.rep.Bridge
	}
	c.rep.Diagnoses = append(c.rep.Diagnoses, later.rep.Diagnoses...)
}

// loggedTag is the diagnosis a failing test logged ("diagnosis … [tag]",
// as the bridged suites write it), for a run whose report was never
// written (its process ended first): the first bracketed tag on a line
// that says "diagnosis".
func loggedTag(lines []string) string {
	for _, l := range lines {
		if !strings.Contains(l, "diagnosis") {
			continue
		}
		if m := tagPattern.FindStringSubmatch(l); m != nil {
			return m[1]
		}
	}
	return ""
}

var tagPattern = regexp.MustCompile(`\[([a-z0-9][a-z0-9:+\-_.(|,)]*)\]`)

// cells are the verdicts of the leaf tests (those with no subtest).
func cells(tests []testrun.Test, rep *report.Report) map[string]string {
	parent := map[string]bool{}
	for _, t := range tests {
		for i := range len(t.Name) {
			if t.Name[i] == '/' {
				parent[t.Name[:i]] = true
			}
		}
	}
	diag := map[string]string{}
	for _, d := range rep.Diagnoses {
		if _, ok := diag[d.Test]; !ok && d.Tag != "" {
			diag[d.Test] = d.Tag
		}
	}
	// what the report's checkpoints say of the tests that ended (subtests
	// included): a case whose process a time limit or a crash cut, while
	// go test held its verdict back for its parent, ended all the same
	ended := map[string]report.Outcome{}
	for _, v := range rep.Tests {
		ended[v.Name] = v.Outcome
	}
	out := map[string]string{}
	for _, t := range tests {
		if parent[t.Name] {
			out[t.Name] = casesBelow
			continue
		}
		if o, ok := ended[t.Name]; ok && (t.Result == testrun.Undecided || t.Result == testrun.Crashed) {
			switch o {
			case report.Passed:
				out[t.Name] = "ok"
				continue
			case report.Failed:
				out[t.Name] = strings.TrimSpace("FAIL " + bracket(diag[t.Name]))
				continue
			case report.Skipped:
				out[t.Name] = "skip"
				continue
			}
		}
		switch t.Result {
		case testrun.Pass:
			out[t.Name] = "ok"
		case testrun.Skip:
			out[t.Name] = "skip"
			if declaredNot(t.Output) {
				out[t.Name] = "n/s"
			}
		case testrun.Undecided:
			out[t.Name] = "undecided"
			if strings.Contains(t.Reason, "time limit") {
				out[t.Name] = "undecided [time limit]"
			}
		default:
			cause := diag[t.Name]
			if cause == "" {
				cause = loggedTag(t.Output)
			}
			if cause == "" {
				cause = t.Reason
				if len(cause) > 60 {
					cause = cause[:57] + "…"
				}
			}
			out[t.Name] = strings.TrimSpace("FAIL " + bracket(cause))
		}
	}
	return out
}

// casesBelow is the cell of a test that has subtests in this copy's run,
// where another copy's has none (it skipped it whole): its verdicts are
// its subtests' rows.
const casesBelow = "(its cases)"

func bracket(s string) string {
	if s == "" {
		return ""
	}
	return "[" + s + "]"
}

// declaredNot reports whether a skip's log says the adapter does not
// declare what the case needs.
func declaredNot(lines []string) bool {
	for _, l := range lines {
		if strings.Contains(l, "not declared") || strings.Contains(l, "declares no") || strings.Contains(l, "not supported") {
			return true
		}
	}
	return false
}

// table makes the cross-copy report.
func table(copies []copyRun, suite string, all bool) *report.Report {
	var names []string
	for _, c := range copies {
		names = append(names, c.name)
	}
	rep := report.NewKernel(report.LibraryInfo{Path: "cross-copy: " + strings.Join(names, ", "), Backend: "bridge"}, nil)
	var cases []string
	seen := map[string]bool{}
	for _, c := range copies {
		for name, v := range c.cells {
			if !seen[name] && v != casesBelow {
				seen[name] = true
				cases = append(cases, name)
			}
		}
	}
	slices.Sort(cases)
	t := report.Table{Name: suite + " cross-copy", Columns: append([]string{"case"}, names...)}
	agree := 0
	for _, name := range cases {
		row := []string{name}
		same := true
		for _, c := range copies {
			v, ok := c.cells[name]
			if !ok {
				v = "-"
			}
			same = same && v == "ok"
			row = append(row, v)
		}
		if same && !all {
			agree++
			continue
		}
		t.Rows = append(t.Rows, row)
	}
	if agree > 0 {
		t.Rows = append(t.Rows, append([]string{fmt.Sprintf("(%d more cases: ok in every copy)", agree)}, make([]string, len(copies))...))
	}
	rep.AddTable(t)
	rep.Passed, rep.Verdict = true, report.VerdictPass
	for _, row := range t.Rows {
		for _, v := range row[1:] {
			if strings.HasPrefix(v, "FAIL") {
				rep.Passed, rep.Verdict = false, report.VerdictFail
			}
		}
	}
	for _, c := range copies {
		part := report.BridgedPart{Package: "verify/" + suite + " (" + c.name + ")", Kernel: c.rep.Library, Bridge: c.rep.Bridge}
		rep.Bridged = append(rep.Bridged, part)
		for _, d := range c.rep.Diagnoses {
			d.Test = c.name + ": " + d.Test
			rep.Diagnoses = append(rep.Diagnoses, d)
		}
	}
	return rep
}

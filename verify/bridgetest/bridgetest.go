// Package bridgetest is the harness of the suites that judge a kernel
// behind the bridge (verify/mamba2, verify/mamba3): their TestMain starts
// the worker SSMK_BRIDGE names (or the suite's own numpy path), opens the
// report, runs the tests, gives each failure its reason and writes
// report.json and summary.txt into -report.
package bridgetest

import (
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"ssmverify/bridge"
	"ssmverify/report"
	"ssmverify/testrun"
)

// appendRep merges the report.json already in -report's folder (what a
// process that crashed had checkpointed: testrun.RunResuming) into this
// run's.
var appendRep = flag.Bool("append", false, "merge the report.json already in -report's folder into this one")

// Suite is one run of a bridged suite.
type Suite struct {
	W    *bridge.Worker
	Rep  *report.Report
	Spec bridge.Spec
	dir  string // -report's folder: the report's checkpoints
	// Configs returns what the autotuners chose last (the suite's kernel
	// wrapper keeps it).
	Configs func() map[string]any
	// others are the workers Another started: with W, every worker of
	// the kernel under test, whose calls a top-level test's count sums
	mu     sync.Mutex
	others []*bridge.Worker
}

// kernelCalls is the calls made of the kernel under test so far.
func (s *Suite) kernelCalls() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	if s.W != nil {
		n = s.W.Calls()
	}
	for _, w := range s.others {
		n += w.Calls()
	}
	return n
}

// Main runs a bridged suite: pkg is its package path (for the reasons),
// defaultAdapter the adapter when SSMK_BRIDGE is unset, start called with
// the suite once the worker answers (the package keeps its globals), and
// reportDir the -report flag's value. It exits the process.
func Main(m *testing.M, pkg, defaultAdapter string, reportDir *string, start func(*Suite)) {
	logStderr()
	s, ok, err := bridge.SpecFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, pkg+":", err)
		os.Exit(2)
	}
	if !ok {
		s = bridge.Spec{Adapter: defaultAdapter}
	}
	w, err := bridge.Start(s)
	if err != nil {
		if !ok && os.Getenv("SSMK_REQUIRE_NUMPY") == "" {
			line, _, _ := strings.Cut(err.Error(), "\n")
			fmt.Println(pkg+": "+bridge.NoWorker+" (python3 with NumPy; Debian: apt-get install python3-numpy): skipped:", line)
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, pkg+": starting the worker:", err)
		os.Exit(2)
	}
	h := w.Hello()
	info := &report.BridgeInfo{Adapter: strings.TrimSpace(s.Adapter + " " + strings.Join(s.Args, " ")), Describe: h.Describe}
	dev, _ := h.Describe["device"].(string)
	name, _ := h.Describe["kernel"].(string)
	suite := &Suite{W: w, Spec: s, Rep: report.NewKernel(report.LibraryInfo{Path: name, Backend: "bridge", Device: dev, Selection: "SSMK_BRIDGE=" + info.Adapter}, info), dir: *reportDir}
	if *appendRep {
		if err := suite.Rep.MergeFrom(*reportDir); err != nil {
			fmt.Fprintln(os.Stderr, pkg+": -append:", err)
			os.Exit(2)
		}
	}
	start(suite)
	fmt.Printf("%s: judging %s through the bridge (%s) on %s\n", pkg, name, info.Adapter, dev)
	out := testrun.CaptureStdout()
	code := m.Run()
	if tests, err := testrun.Parse(out(), pkg, testrun.ErrorSites(".")); err == nil {
		suite.Rep.SetReasons(tests)
	}
	if suite.Configs != nil {
		info.Configs = suite.Configs()
	}
	info.Restarts, info.Crashes = w.Restarts, w.Crashes
	w.Close()
	suite.Rep.Finish()
	if *reportDir != "" {
		if err := suite.Rep.Write(*reportDir); err != nil {
			fmt.Fprintln(os.Stderr, pkg+": writing the report:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Another starts a worker of its own for t, of the suite's adapter with
// its arguments, closed when t ends: independent cases bound by latency
// (thousands of decode steps, each a small launch and a round trip) run
// side by side on workers of their own, where one worker would serialize
// them.
func (s *Suite) Another(t *testing.T) *bridge.Worker {
	t.Helper()
	w, err := bridge.Start(s.Spec)
	if err != nil {
		t.Fatalf("starting another worker of %s: %v", s.Spec.Adapter, err)
	}
	s.mu.Lock()
	s.others = append(s.others, w)
	s.mu.Unlock()
	t.Cleanup(func() { w.Close() })
	return w
}

// ReportFor is the report a check run on worker w writes to: the run's
// where w is the kernel under test (the suite's worker, or another of its
// adapter and arguments: Another), else a scratch report, so that what
// the machinery's and CanFail tests run — the numpy path with its planted
// slips — never enters the table of the kernel under test.
func (s *Suite) ReportFor(w *bridge.Worker) *report.Report {
	if w == s.W || (w != nil && sameSpec(w.Spec(), s.Spec)) {
		return s.Rep
	}
	return report.NewKernel(report.LibraryInfo{Path: "scratch"}, nil)
}

func sameSpec(a, b bridge.Spec) bool {
	return a.Adapter == b.Adapter && a.Python == b.Python && slices.Equal(a.Args, b.Args)
}

// Track records a test's outcome in the report when it ends: undecided
// where it skipped with a part left undecided (Report.Undecide). A
// subtest tracked is checkpointed too: go test reports a subtest's verdict
// only with its parent's, so a run cut inside a long test (its -timeout,
// the device's lease) keeps the verdicts of the subtests that ended in
// report.json (cmd/crosscopy reads them).
//
// A top-level test's verdict carries the calls of the kernel under test it
// made (report.TestVerdict.KernelCalls): one that made none — a check of
// the suite itself on the numpy path — judges every kernel alike, and a
// mutation run leaves it out (cmd/mutants). Top-level tests run one after
// another, so the count over a test's run is its own; a parallel one's
// window takes in others' calls, which errs only toward counting some.
func (s *Suite) Track(t *testing.T) {
	top := !strings.Contains(t.Name(), "/")
	before := s.kernelCalls()
	t.Cleanup(func() {
		if top {
			defer s.Rep.RecordKernelCalls(t.Name(), s.kernelCalls()-before)
		}
		o := report.Passed
		switch {
		case t.Failed():
			o = report.Failed
		case t.Skipped() && s.Rep.IsUndecided(t.Name()):
			o = report.Undecided
		case t.Skipped():
			o = report.Skipped
		}
		err := s.Rep.TestEnded(t.Name(), o, s.dir)
		if err == nil && strings.Contains(t.Name(), "/") {
			err = s.Rep.Checkpoint(s.dir)
		}
		if err != nil {
			t.Logf("checkpointing the report: %v", err)
		}
	})
}

// Buckets splits [0, n) into ranges doubling in length: [0, m), [m, 2m),
// [2m, 4m), … with m = n/8 rounded to a power of two.
func Buckets(n int) [][2]int {
	m := 1
	for m*8 < n {
		m *= 2
	}
	out := [][2]int{{0, min(m, n)}}
	for lo := m; lo < n; lo *= 2 {
		out = append(out, [2]int{lo, min(2*lo, n)})
	}
	return out
}

// Growth is the error of y per range of positions: the rms of
// |kernel − reference| over the rms of the reference, in the range.
func Growth(got, want []float64, n, rowLen, batch int, bs [][2]int) []string {
	var cells []string
	for _, b := range bs {
		var e2, w2 float64
		for r := 0; r < batch; r++ {
			for t := b[0]; t < b[1]; t++ {
				for j := 0; j < rowLen; j++ {
					i := (r*n+t)*rowLen + j
					e2 += (got[i] - want[i]) * (got[i] - want[i])
					w2 += want[i] * want[i]
				}
			}
		}
		cells = append(cells, fmt.Sprintf("%.2e", math.Sqrt(e2/w2)))
	}
	return cells
}

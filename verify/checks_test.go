package verify

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"ssmverify/cudalib"
	"ssmverify/mamba1"
	"ssmverify/perf"
	"ssmverify/report"
	"ssmverify/ssm"
)

// Flags of the seven checks, after -args; they mirror the original
// project's script. 0 means the backend's default: the Mamba-block problem
// 8×512×1024×16 with 100 trials after 10 warm-up launches on a GPU, a
// scaled-down problem on the CPU build and in -short.
var (
	flagBatch       = flag.Int("batch", 0, "checks: batch (default 8 on a GPU)")
	flagDim         = flag.Int("dim", 0, "checks: dim (default 512 on a GPU)")
	flagSeqlen      = flag.Int("seqlen", 0, "checks: seqlen (default 1024 on a GPU)")
	flagDstate      = flag.Int("dstate", 0, "checks: dstate (default 16)")
	flagTrials      = flag.Int("trials", 0, "checks: timed samples per figure (default 100 on a GPU)")
	flagWarmup      = flag.Int("warmup", 0, "checks: warm-up launches before timing (default 10 on a GPU)")
	flagMethods     = flag.String("methods", "all", "checks: comma-separated methods")
	flagDType       = flag.String("dtype", "fp32", "checks: fp32, fp64, or the 16-bit input types fp16 and bf16")
	flagScripts     = flag.String("scripts", "", "Check3: folder of shell/Slurm scripts to scan for thread settings")
	flagMaxSlowdown = flag.Float64("max-slowdown", 0, "Check7: fail a method slower than zoh by more than this factor (default 1.25 on a GPU, 3 on the CPU build)")
	flagMaxBwd      = flag.Float64("max-bwd-slowdown", 0, "Check7: fail a method whose backward is slower than zoh's by more than this factor (default 1.15 on a GPU, 3 on the CPU build)")
	flagSizes       = flag.String("sizes", "", "Check7: sizes to sweep, e.g. 1x64x256x16,8x512x1024x16")
	flagComplex     = flag.Bool("complex", false, "Check7: complex A (methods the library declares as falling back to zoh are timed as declared)")
)

type checkConfig struct {
	batch, dim, seqlen, dstate int
	trials, warmup             int
	maxSlowdown                float64
	maxBwdSlowdown             float64
	methods                    []ssm.Method
	dtype                      ssm.DType
	complex                    bool // Check7 only
}

// setLimit sets *dst to the factor v of flag name, which must be finite and
// positive; 0 keeps the backend's default.
func setLimit(name string, v float64, dst *float64) error {
	if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("-%s = %v: want a finite factor above 0 (0: the backend's default)", name, v)
	}
	if v > 0 {
		*dst = v
	}
	return nil
}

func (c checkConfig) String() string {
	kind := ""
	if c.complex {
		kind = " complex"
	}
	return fmt.Sprintf("%d×%d×%d×%d %v%s, %d trials after %d warm-up launches", c.batch, c.dim, c.seqlen, c.dstate, c.dtype, kind, c.trials, c.warmup)
}

// config resolves the flags for the library under test.
func config(t *testing.T) checkConfig {
	t.Helper()
	// On a GPU the scan is memory-bound and the method's arithmetic should
	// hide under the loads: 1.25× zoh is the limit. The CPU build runs scalar,
	// compute-bound code where an expm1 or a polynomial per state shows: 3×.
	// The backward of every method within 1.15× of zoh's on a GPU (the
	// same recurrences and sums; only the coefficients and their
	// derivatives differ), 3× on the CPU build as the forward.
	c := checkConfig{batch: 8, dim: 512, seqlen: 1024, dstate: 16, trials: 100, warmup: 10, maxSlowdown: 1.25, maxBwdSlowdown: 1.15}
	if lib.Backend == "cpu" {
		c = checkConfig{batch: 2, dim: 64, seqlen: 256, dstate: 16, trials: 15, warmup: 10, maxSlowdown: 3, maxBwdSlowdown: 3}
	}
	if err := setLimit("max-slowdown", *flagMaxSlowdown, &c.maxSlowdown); err != nil {
		t.Fatal(err)
	}
	if err := setLimit("max-bwd-slowdown", *flagMaxBwd, &c.maxBwdSlowdown); err != nil {
		t.Fatal(err)
	}
	if testing.Short() {
		c.batch, c.dim, c.seqlen, c.trials = 1, min(c.dim, 64), min(c.seqlen, 256), min(c.trials, 10)
	}
	for _, f := range []struct {
		name string
		flag *int
		dst  *int
	}{{"batch", flagBatch, &c.batch}, {"dim", flagDim, &c.dim}, {"seqlen", flagSeqlen, &c.seqlen},
		{"dstate", flagDstate, &c.dstate}, {"trials", flagTrials, &c.trials}, {"warmup", flagWarmup, &c.warmup}} {
		if *f.flag < 0 {
			t.Fatalf("-%s = %d: want a positive number (0: the backend's default)", f.name, *f.flag)
		}
		if *f.flag > 0 {
			*f.dst = *f.flag
		}
	}
	var err error
	if c.methods, err = ssm.ParseMethods(*flagMethods); err != nil {
		t.Fatalf("-methods: %v", err)
	}
	if c.dtype, err = ssm.ParseDType(*flagDType); err != nil {
		t.Fatalf("-dtype: %v", err)
	}
	c.complex = *flagComplex
	// Only what the library declares is measured; the rest is reported as
	// not supported, never failed.
	var declared []ssm.Method
	for _, m := range c.methods {
		if judged(t.Name(), "measurements of", m, c.dtype, c.complex, false) {
			declared = append(declared, m)
		}
	}
	if len(declared) == 0 {
		undecided(t, "the library declares none of the methods %v for %v %s", c.methods, c.dtype, ssm.AKind(c.complex))
	}
	c.methods = declared
	return c
}

// base is the method the checks that time one method use: zoh where the
// library declares it, else the first declared.
func (c checkConfig) base() ssm.Method {
	for _, m := range c.methods {
		if m == ssm.ZOH {
			return m
		}
	}
	return c.methods[0]
}

// checkProblem is the one problem definition of the checks: the Mamba-block
// configuration, seed 1, for method m (all methods share the same inputs).
func checkProblem(c checkConfig, m ssm.Method, isComplex bool) *ssm.Problem {
	s := mamba1.MambaBlock(m, c.batch, c.dim, c.seqlen, c.dstate)
	s.Complex = isComplex
	p, err := fitProblem("the seven checks", checkDraws.draw(within(s, c.dtype)), c.dtype)
	if err != nil {
		panic(err) // mamba1.Spec.Within's sizes always fit (gen's TestWithin)
	}
	p.RoundTo(c.dtype) // what the kernel reads
	return p
}

// checkDraws keeps the last problem the checks drew, so that timing six
// methods at 8×2048×4096 draws its 200 M values once rather than six times
// for the forward and six for the backward (about 80 s of a Check7 run).
var checkDraws drawCache

type drawCache struct {
	spec mamba1.Spec
	p    *ssm.Problem
	ct   *ssm.Cotangent
}

// draw returns a copy of mamba1.Generate(s, 1), drawn once for every method where
// gen promises the same values (Spec.ForAnyMethod); callers may modify it.
func (dc *drawCache) draw(s mamba1.Spec) *ssm.Problem {
	key := s
	if s.ForAnyMethod() {
		key.Method = ssm.ZOH
	}
	if dc.p == nil || dc.spec != key {
		*dc = drawCache{spec: key, p: mamba1.Generate(key, 1)}
	}
	p := dc.p.Clone()
	p.Method = s.Method
	return p
}

// cotangent is mamba1.NewCotangent(p, 1, false), whose dout depends only on
// p's output length, drawn once for the last problem drawn; read-only.
func (dc *drawCache) cotangent(p *ssm.Problem) *ssm.Cotangent {
	if dc.ct == nil || len(dc.ct.Out) != p.OutLen() {
		dc.ct = mamba1.NewCotangent(p, 1, false)
	}
	return dc.ct
}

// The checks' problems are drawn once for every method (Realistic inputs do
// not depend on it): each method gets mamba1.Generate's values for its own spec,
// and a caller that modifies its copy leaves the next caller's intact.
func TestCheckProblemDrawnOnce(t *testing.T) {
	c := checkConfig{batch: 1, dim: 4, seqlen: 64, dstate: 4, dtype: ssm.F64}
	first := checkProblem(c, ssm.ZOH, false)
	first.U[0], first.A[0] = 1e9, 1e9
	for _, m := range ssm.Methods() {
		got := checkProblem(c, m, false)
		s := within(mamba1.MambaBlock(m, c.batch, c.dim, c.seqlen, c.dstate), c.dtype)
		want, err := fitProblem("TestCheckProblemDrawnOnce", mamba1.Generate(s, 1), c.dtype)
		if err != nil {
			t.Skipf("%v: %v", m, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v: checkProblem's problem is not mamba1.Generate's for the method's own spec (or an earlier caller's change reached it)", m)
		}
	}
	ct := checkDraws.cotangent(first)
	if want := mamba1.NewCotangent(first, 1, false); !reflect.DeepEqual(ct, want) {
		t.Error("the shared cotangent is not mamba1.NewCotangent(p, 1, false)")
	}
}

// writeCheck writes checkN.json into the report folder (-report, as make
// verify and the gate give it; else a temporary folder, so that a plain go
// test writes nothing into the repository).
func writeCheck(t *testing.T, n int, v any) {
	t.Helper()
	dir := *reportDir
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("check%d.json", n))
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

func newPlan(t *testing.T, p *ssm.Problem, dt ssm.DType) (*cudalib.Plan, *cudalib.ScanBuffers) {
	t.Helper()
	b, err := lib.NewScanBuffers(p, dt)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := lib.NewPlan(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plan.Close)
	return plan, b
}

func us(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }

// TestCheck1IdenticalInputs: one seeded input set for all methods; the
// sha256 of every input buffer is logged; every method must get
// byte-identical inputs, the kernel must not modify any, regenerating from
// the seed must reproduce the hashes, and two runs of a method must give
// bitwise-identical outputs.
func TestCheck1IdenticalInputs(t *testing.T) {
	track(t)
	c := config(t)
	hashes := map[string]map[string]string{}
	table := report.Table{Name: "Check1: input hashes (" + c.String() + ")", Columns: []string{"array", "elements", "sha256", ""}}
	for _, m := range c.methods {
		p := checkProblem(c, m, false)
		b, err := lib.NewScanBuffers(p, c.dtype)
		if err != nil {
			t.Fatal(err)
		}
		before := map[string]string{}
		for _, in := range b.Inputs() {
			if in.Present() {
				before[in.Name] = perf.Hash(in.Bytes())
			}
		}
		if err := lib.RunScan(b); err != nil {
			t.Fatal(err)
		}
		out1 := bytes.Clone(b.Out.Bytes())
		for _, in := range b.Inputs() {
			if in.Present() && perf.Hash(in.Bytes()) != before[in.Name] {
				t.Errorf("%v: the kernel modified its input %s", m, in.Name)
			}
		}
		if err := lib.RunScan(b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out1, b.Out.Bytes()) {
			t.Errorf("%v: two runs on the same inputs gave different outputs: the kernel is not deterministic", m)
		}
		// A plan keeps its inputs on the device; the host hashes above cannot
		// see them. A kernel that writes into them (softplus or the bias
		// applied in place, an input used as scratch) feeds its next launch
		// other inputs, so the plan's first and its later launches must agree
		// bitwise. An idempotent in-place write leaves the output unchanged
		// and is, for every output, harmless; it is not caught.
		if err := perf.DecideRepeatedLaunches(planOutputs(t, b, c.warmup+2)); err != nil {
			t.Errorf("%v: %v", m, err)
		}
		hashes[m.String()] = before
		if len(table.Rows) == 0 {
			for _, in := range b.Inputs() {
				if in.Present() {
					table.Rows = append(table.Rows, []string{in.Name, strconv.Itoa(in.Len()), before[in.Name], ""})
				}
			}
		}
	}
	// Regenerating from the seed reproduces the inputs.
	b, err := lib.NewScanBuffers(checkProblem(c, c.methods[0], false), c.dtype)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range b.Inputs() {
		if in.Present() && perf.Hash(in.Bytes()) != hashes[c.methods[0].String()][in.Name] {
			t.Errorf("regenerating from seed 1 gave a different %s", in.Name)
		}
	}
	if err := perf.DecideIdenticalInputs(hashes); err != nil {
		t.Error(err)
	}
	logTable(t, table)
	writeCheck(t, 1, map[string]any{"config": c.String(), "dtype": c.dtype.String(), "hashes": hashes, "passed": !t.Failed()})
}

// planOutputs launches a fresh plan of b once and fetches its output, then
// launches it n more times and fetches again.
func planOutputs(t *testing.T, b *cudalib.ScanBuffers, n int) (first, later []float64) {
	t.Helper()
	plan, err := lib.NewPlan(b)
	if err != nil {
		t.Fatal(err)
	}
	defer plan.Close()
	if err := plan.Launch(); err != nil {
		t.Fatal(err)
	}
	if first, _, err = plan.Fetch(); err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Time(n); err != nil {
		t.Fatal(err)
	}
	if later, _, err = plan.Fetch(); err != nil {
		t.Fatal(err)
	}
	return first, later
}

func TestCheck1DecisionCatchesDeviceInputCorruption(t *testing.T) {
	if err := perf.DecideRepeatedLaunches([]float64{1, 2, math.NaN()}, []float64{1, 2, math.NaN()}); err != nil {
		t.Fatalf("equal outputs (NaN at the same place) rejected: %v", err)
	}
	err := perf.DecideRepeatedLaunches([]float64{1, 2, 3}, []float64{1, 2, math.Nextafter(3, 4)})
	if err == nil || !strings.Contains(err.Error(), "element 2") {
		t.Fatalf("a one-ulp change after repeated launches not caught: %v", err)
	}
}

func TestCheck1DecisionCatchesDifferentInputs(t *testing.T) {
	same := map[string]map[string]string{"zoh": {"u": "aa", "B": "bb"}, "rk4": {"u": "aa", "B": "bb"}}
	if err := perf.DecideIdenticalInputs(same); err != nil {
		t.Fatal(err)
	}
	diff := map[string]map[string]string{"zoh": {"u": "aa", "B": "bb"}, "rk4": {"u": "aa", "B": "cc"}}
	if err := perf.DecideIdenticalInputs(diff); err == nil || !strings.Contains(err.Error(), "got different B") {
		t.Fatalf("different B not caught: %v", err)
	}
}

// TestCheck2Synchronisation: one plan timed three ways. The synced host time
// and the device-event time must agree (perf.SyncTolerance); the unsynced host
// time's underestimation is reported; the harness every other check uses
// must be the event timer.
func TestCheck2Synchronisation(t *testing.T) {
	track(t)
	c := config(t)
	plan, _ := newPlan(t, checkProblem(c, c.base(), false), c.dtype)
	timers := []Timer{TimerHostUnsynced, TimerHostSynced, TimerEvents}
	// At least 60 rounds: the decision is a ratio's bootstrap interval, and
	// the CPU build's launches spread by 30% on a busy 2-core machine. Where
	// that interval straddles a bound, as many rounds again, twice at most
	// (a noisy minute of a CI machine left it 0.76–1.34 after 60 rounds).
	res := map[Timer]perf.Samples{}
	var under float64
	var sync perf.RatioDecision
	var err error
	for look := 0; look < 3 && (look == 0 || !sync.Decided); look++ {
		got, merr := MeasureInterleaved([]*cudalib.Plan{plan, plan, plan}, timers, c.warmup, max(c.trials, 60), 1)
		if merr != nil {
			t.Fatal(merr)
		}
		for i, timer := range timers {
			res[timer] = append(res[timer], got[i]...)
		}
		under, sync, err = perf.DecideSync(res[TimerHostUnsynced], res[TimerHostSynced], res[TimerEvents])
	}
	if err != nil {
		t.Error(err)
	}
	table := report.Table{Name: "Check2: one launch timed three ways (" + c.String() + ")", Columns: []string{"timer", "median µs", "spread", ""}}
	for _, timer := range []Timer{TimerHostUnsynced, TimerHostSynced, TimerEvents} {
		table.Rows = append(table.Rows, []string{timer.String(), us(res[timer].Median()), fmt.Sprintf("%.1f%%", 100*res[timer].Spread()), ""})
	}
	logTable(t, table)
	if lib.Backend == "cpu" && err == nil {
		t.Logf("CPU backend: launches are synchronous, so the three timers coincide (unsynced/events = %.3f)", 1/under)
	} else if lib.Backend == "cpu" {
		t.Logf("CPU backend: launches are synchronous, so the three timers should coincide; they do not (unsynced/events = %.3f)", 1/under)
	} else {
		t.Logf("an unsynced host clock underestimates the kernel's time %.1f×: it measures the launch, not the work", under)
	}
	writeCheck(t, 2, map[string]any{"config": c.String(), "median_us": map[string]float64{"host_unsynced": res[TimerHostUnsynced].Median(),
		"host_synced": res[TimerHostSynced].Median(), "events": res[TimerEvents].Median()}, "underestimate": under,
		"tolerance": perf.SyncTolerance, "decided": sync.Decided, "harness": HarnessTimer.String(), "passed": !t.Failed()})
	if !sync.Decided {
		undecided(t, "synced host time / event time %.3f with a 95%% interval %.3f–%.3f across 1 ± %.2f: too noisy to tell", sync.Ratio, sync.Lo, sync.Hi, perf.SyncTolerance)
	}
}

func TestCheck2DecisionCatchesWrongTimers(t *testing.T) {
	ev := perf.Samples{300, 301, 299, 302, 300, 301, 300, 299}
	under, d, err := perf.DecideSync(perf.Samples{5, 5, 6, 5, 5}, perf.Samples{303, 305, 302, 304, 303, 304, 302, 303}, ev)
	if err != nil || !d.Decided || under < 50 {
		t.Fatalf("agreeing timers: decided %t, underestimate %.1f, %v", d.Decided, under, err)
	}
	// A timer that measures only the launch, and one that reports half the
	// work (cudalib's mutant 16 plants that one in the CPU build).
	for _, synced := range []perf.Samples{{6, 5, 6, 5, 6, 5}, {600, 610, 590, 605, 600, 598}} {
		if _, d, err := perf.DecideSync(perf.Samples{5, 5, 5}, synced, ev); err == nil || !d.Decided {
			t.Errorf("synced %v against events %v accepted (decided %t)", synced, ev, d.Decided)
		}
	}
	// Noise that straddles the tolerance decides nothing.
	if _, d, err := perf.DecideSync(perf.Samples{5}, perf.Samples{250, 420, 330, 260, 400, 340}, perf.Samples{300, 290, 310, 280, 320, 300}); d.Decided || err != nil {
		t.Errorf("a noisy comparison decided (decided %t, %v)", d.Decided, err)
	}
}

// TestCheck3Threading: thread settings logged. On every backend the output
// must not depend on the library's host thread count (1 against at least
// 2, bitwise): a benchmark that ran methods under different settings would
// otherwise compare different computations. On a GPU backend the time must
// not depend on it either (perf.ThreadNoise); the CPU build's time depends on
// its threads by design, so there its scaling is reported and that part is
// undecided. The thread settings of shell and Slurm scripts must agree:
// those of -scripts DIR, else the repository's own scripts.
func TestCheck3Threading(t *testing.T) {
	track(t)
	c := config(t)
	env := map[string]string{}
	for _, v := range []string{"OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"} {
		env[v] = os.Getenv(v)
	}
	nAll := max(2, runtime.NumCPU())
	t.Logf("OMP_NUM_THREADS=%q MKL_NUM_THREADS=%q OPENBLAS_NUM_THREADS=%q GOMAXPROCS=%d CPUs=%d library threads=%d",
		env["OMP_NUM_THREADS"], env["MKL_NUM_THREADS"], env["OPENBLAS_NUM_THREADS"], runtime.GOMAXPROCS(0), runtime.NumCPU(), lib.SetNumThreads(0))
	prev := lib.SetNumThreads(0)
	defer lib.SetNumThreads(prev)
	result := map[string]any{"config": c.String(), "env": env, "gomaxprocs": runtime.GOMAXPROCS(0), "cpus": runtime.NumCPU()}

	// The result: every method at 1 and at nAll threads, through the scan
	// call (not a plan: Check1 judges what plans keep on the device).
	for _, m := range c.methods {
		b, err := lib.NewScanBuffers(checkProblem(c, m, false), c.dtype)
		if err != nil {
			t.Fatal(err)
		}
		var outs [2][]byte
		for i, n := range []int{1, nAll} {
			lib.SetNumThreads(n)
			if err := lib.RunScan(b); err != nil {
				t.Fatal(err)
			}
			outs[i] = bytes.Clone(b.Out.Bytes())
		}
		if err := perf.DecideThreadResult(m.String(), nAll, outs[0], outs[1]); err != nil {
			t.Error(err)
		}
	}
	result["results_compared"] = len(c.methods)

	// The time, alternating the thread count round by round so that machine
	// noise falls on both.
	plan, _ := newPlan(t, checkProblem(c, c.base(), false), c.dtype)
	lib.SetNumThreads(prev)
	if _, err := plan.Time(c.warmup); err != nil {
		t.Fatal(err)
	}
	var one, all perf.Samples
	for i := 0; i < c.trials; i++ {
		for _, n := range []int{1, nAll} {
			lib.SetNumThreads(n)
			s, err := Measure(plan, HarnessTimer, 0, 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				one = append(one, s[0])
			} else {
				all = append(all, s[0])
			}
		}
	}
	result["median_us_1_thread"], result["median_us_all_threads"] = one.Median(), all.Median()
	if lib.Backend == "cpu" {
		partlyUndecided(t, "timing", fmt.Sprintf("the CPU build's speed depends on its threads by design: %s µs with 1 thread, %s µs with %d (speed-up %.2f×), reported, not judged",
			us(one.Median()), us(all.Median()), nAll, one.Median()/all.Median()))
		result["speedup"] = one.Median() / all.Median()
	} else {
		ratio, o, why := perf.DecideThreadIndependence(one, all)
		switch o {
		case perf.Fail:
			t.Error(why)
		case perf.Undecided:
			partlyUndecided(t, "timing", why)
		}
		t.Logf("%s backend: 1 thread %s µs, %d threads %s µs: ratio %.3f (tolerance ±%.3f)", lib.Backend, us(one.Median()), nAll, us(all.Median()), ratio, perf.ThreadNoise(one, all))
		result["ratio"] = ratio
	}

	dirs := []string{"../scripts", "../docs/slurm"}
	if *flagScripts != "" {
		dirs = strings.Split(*flagScripts, ",")
	}
	var settings []perf.ThreadSetting
	for _, dir := range dirs {
		s, err := perf.ScanScripts(dir)
		if err != nil {
			t.Fatalf("-scripts: %v", err)
		}
		settings = append(settings, s...)
	}
	t.Logf("scripts scanned: %s; %d thread settings", strings.Join(dirs, ", "), len(settings))
	for _, s := range settings {
		t.Logf("%s:%d %s=%s", s.File, s.Line, s.Var, s.Value)
	}
	result["scripts"], result["script_settings"] = dirs, settings
	if err := perf.DecideScripts(settings); err != nil {
		t.Error(err)
	}
	result["passed"] = !t.Failed()
	writeCheck(t, 3, result)
}

func TestCheck3DecisionCatchesThreadDependentResult(t *testing.T) {
	a := []byte{1, 2, 3, 4}
	if err := perf.DecideThreadResult("zoh", 2, a, bytes.Clone(a)); err != nil {
		t.Fatalf("equal outputs rejected: %v", err)
	}
	if err := perf.DecideThreadResult("zoh", 2, a, []byte{1, 2, 3, 5}); err == nil || !strings.Contains(err.Error(), "1 and 2 host threads") {
		t.Fatalf("an output that depends on the thread count was accepted: %v", err)
	}
}

func TestCheck3DecisionCatchesInconsistentScripts(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"cifar100.sh":   "#!/bin/bash\nexport OMP_NUM_THREADS=4\npython train.py\n",
		"det.slurm":     "#SBATCH --gres=gpu:2\nOMP_NUM_THREADS=16 torchrun main.py\n",
		"rk4.sh":        "# OMP_NUM_THREADS=8 is a comment\nexport OMP_NUM_THREADS=1\n",
		"README.md":     "OMP_NUM_THREADS=99 in prose is not a script\n",
		"consistent.sh": "export MKL_NUM_THREADS=1\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	settings, err := perf.ScanScripts(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(settings) != 4 {
		t.Fatalf("found %d settings, want 4 (three OMP, one MKL; no comments, no prose): %+v", len(settings), settings)
	}
	err = perf.DecideScripts(settings)
	if err == nil {
		t.Fatal("OMP_NUM_THREADS = 1, 4 and 16 across scripts was accepted")
	}
	for _, want := range []string{"cifar100.sh:2 OMP_NUM_THREADS=4", "det.slurm:2 OMP_NUM_THREADS=16", "rk4.sh:2 OMP_NUM_THREADS=1", "3 different values"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %q: %v", want, err)
		}
	}
	if err := perf.DecideScripts(settings[:1]); err != nil {
		t.Errorf("one setting is consistent: %v", err)
	}
	if _, o, _ := perf.DecideThreadIndependence(perf.Samples{300, 301, 302}, perf.Samples{200, 201, 200}); o != perf.Fail {
		t.Error("a GPU backend 1.5× faster with more host threads was accepted")
	}
}

// TestCheck4CodePaths: the library, its backend and why OpenDefault chose
// it; a forced backend must be the one loaded. Every method × real/complex
// is supported as declared and fingerprinted: on an input where the formulas
// differ, each method's output must differ from every other's by far more
// than rounding, so a method that runs another's code path (or a fallback)
// is caught and named. Declared complex fallbacks are reported, not failed.
func TestCheck4CodePaths(t *testing.T) {
	track(t)
	c := config(t)
	dev, _ := lib.DeviceName()
	t.Logf("library %s, ABI v%d, backend %s, device %s\nselection: %s", lib.Path, lib.ABIVersionOf(), lib.Backend, dev, lib.Selection)
	if forced := strings.ToLower(os.Getenv("SSMK_BACKEND")); (forced == "cuda" || forced == "cpu") && os.Getenv("SSMK_LIB") == "" && lib.Backend != forced {
		t.Errorf("SSMK_BACKEND=%s but the loaded library's backend is %s", forced, lib.Backend)
	}
	// dt ≈ 0.3 makes the methods' g differ at x/2 … x³/24 with |x| up to ~5.
	s := mamba1.MambaBlock(ssm.ZOH, 1, 8, 64, c.dstate)
	result := map[string]any{"library": lib.Path, "backend": lib.Backend, "device": dev, "selection": lib.Selection}
	var fallbacks []string
	for _, isComplex := range []bool{false, true} {
		s.Complex = isComplex
		base := mamba1.Generate(within(s, c.dtype), 2)
		for i := range base.DeltaBias {
			base.DeltaBias[i] = ssm.InverseSoftplus(0.3)
		}
		base, err := fitProblem(t.Name(), base, c.dtype)
		if err != nil {
			t.Fatal(err)
		}
		outs := map[string][]float64{}
		for _, m := range ssm.Methods() {
			caps := lib.Capabilities(m, c.dtype, isComplex)
			if !judged(t.Name(), "code-path fingerprints of", m, c.dtype, isComplex, false) {
				continue
			}
			if isComplex && caps.ComplexZOHFallback() {
				fallbacks = append(fallbacks, m.String())
				t.Logf("DECLARED FALLBACK: %v with complex A computes zoh (reported, not failed)", m)
				continue
			}
			p := base.Clone()
			p.Method = m
			out, err := lib.Scan(p, c.dtype)
			if err != nil {
				t.Errorf("%v %s: declared supported, but %v", m, ssm.AKind(isComplex), err)
				continue
			}
			outs[m.String()] = out.Out
		}
		minRel := 1e4 * c.dtype.Precision().UnitRoundoff()
		for _, m := range perf.NonFinite(outs) {
			partlyUndecided(t, ssm.AKind(isComplex)+" "+m, "its output is not finite (NaN or ∞): no code path can be told from it (the accuracy tests judge the values)")
		}
		for _, col := range perf.Fingerprint(outs, minRel) {
			t.Errorf("%s A: %s and %s give the same output (max relative difference %.3g < %.3g): one runs the other's code path", ssm.AKind(isComplex), col.A, col.B, col.RelDiff, minRel)
		}
		result[ssm.AKind(isComplex)+"_methods_fingerprinted"] = len(outs)
	}
	result["declared_complex_fallbacks"] = fallbacks
	result["passed"] = !t.Failed()
	writeCheck(t, 4, result)
}

func TestCheck4DecisionCatchesSharedCodePath(t *testing.T) {
	outs := map[string][]float64{"zoh": {1, 2, 3}, "foh": {1.1, 2.2, 3.3}, "rk4": {1, 2, 3.0000001}}
	col := perf.Fingerprint(outs, 1e-4)
	if len(col) != 1 || col[0].A != "rk4" || col[0].B != "zoh" {
		t.Fatalf("rk4 running zoh's path not named: %+v", col)
	}
}

// TestCheck5Warmup: every iteration of a fresh plan timed, the first launch
// included, each next to one iteration of a warm plan of the same problem
// (perf.PairedWarmup), so that machine noise slows both of a pair and cancels.
// The warm plan's own first iterations are the process's cold start (module
// load and, on a GPU in a fresh process, context creation: run it alone,
// go test -run Check5, to see those); they are timed and reported. Asserts
// the harness's warm-up covers the fresh plan's warm-up.
func TestCheck5Warmup(t *testing.T) {
	track(t)
	c := config(t)
	n := max(30, 3*c.warmup)
	p := checkProblem(c, c.methods[len(c.methods)-1], false)
	warm, _ := newPlan(t, p, c.dtype)
	timeOne := func(plan *cudalib.Plan) float64 {
		ms, err := plan.Time(1)
		if err != nil {
			t.Fatal(err)
		}
		return ms * 1e3
	}
	first := make(perf.Samples, n)
	for i := range first {
		first[i] = timeOne(warm)
	}
	processCold, processNeeded := perf.SteadyState(first)
	t.Logf("warm plan: first launch in the process %s µs, steady median %s µs: cold start %.2f×; %d iterations before steady state (unpaired)",
		us(first[0]), us(perf.Samples(first[n/2:]).Median()), processCold, processNeeded)
	// A genuine cold start shows in every fresh plan; noise that pairing
	// does not cancel only adds slow iterations to one measurement. So up to
	// three fresh plans are measured and the smallest warm-up count decides.
	// A measurement whose steady ratios spread over perf.MaxSteadyBand cannot
	// tell a warm-up from noise: it is recorded but decides nothing.
	type attempt struct {
		Fresh  perf.Samples `json:"fresh_us"`
		Warm   perf.Samples `json:"warm_us"`
		Cold   float64      `json:"cold_start_ratio"`
		Needed int          `json:"warmup_needed"`
		Band   float64      `json:"steady_band"`
		Noisy  bool         `json:"noisy"`
	}
	var attempts []attempt
	best := -1
	for a := 0; a < 3; a++ {
		fresh, _ := newPlan(t, p, c.dtype)
		f, w := make(perf.Samples, n), make(perf.Samples, n)
		for i := 0; i < n; i++ {
			// Alternate which of a pair goes first, so that neither is
			// always the one to find the caches of the other.
			if i%2 == 0 {
				f[i], w[i] = timeOne(fresh), timeOne(warm)
			} else {
				w[i], f[i] = timeOne(warm), timeOne(fresh)
			}
		}
		cold, needed := perf.PairedWarmup(f, w)
		band := perf.SteadyBand(perf.PairedRatios(f, w))
		noisy := band > perf.MaxSteadyBand
		attempts = append(attempts, attempt{f, w, cold, needed, band, noisy})
		t.Logf("fresh plan %d: first launch %s µs next to a warm %s µs, steady medians %s / %s µs: cold start %.2f×; %d iterations before steady state (steady band ±%.0f%%%s); harness warm-up %d",
			a+1, us(f[0]), us(w[0]), us(perf.Samples(f[n/2:]).Median()), us(perf.Samples(w[n/2:]).Median()), cold, needed, 100*band,
			map[bool]string{true: ": too noisy to decide", false: ""}[noisy], c.warmup)
		if noisy {
			continue
		}
		if best < 0 || needed < best {
			best = needed
		}
		if needed <= c.warmup {
			break
		}
	}
	if best < 0 {
		writeCheck(t, 5, map[string]any{"config": c.String(), "attempts": attempts, "harness_warmup": c.warmup, "passed": false})
		undecided(t, "every fresh plan's steady iterations spread beyond ±%.0f%%: a warm-up cannot be told from noise here", 100*perf.MaxSteadyBand)
	}
	if err := perf.DecideWarmup(best, c.warmup); err != nil {
		t.Error(err)
	}
	writeCheck(t, 5, map[string]any{"config": c.String(), "process_first_us": first, "process_cold_start_ratio": processCold,
		"process_warmup_needed": processNeeded, "attempts": attempts, "warmup_needed": best,
		"harness_warmup": c.warmup, "passed": !t.Failed()})
}

func TestCheck5DecisionCatchesShortWarmup(t *testing.T) {
	s := perf.Samples{900, 700, 520, 430, 330, 301, 299, 300, 302, 300, 301, 300, 299, 301}
	cold, needed := perf.SteadyState(s)
	if needed != 5 || cold < 2.9 {
		t.Fatalf("cold %.2f, needed %d: want 3.0 and 5 (330 is 10%% above the steady 300)", cold, needed)
	}
	// One slow first iteration (a 7.5× cold start) is warm-up, not smoothed
	// away by the window, and a harness without warm-up fails on it.
	one := perf.Samples{2250, 300, 301, 299, 300, 302, 300, 301, 300, 299, 301, 300}
	if c, n := perf.SteadyState(one); n != 1 || c < 7 {
		t.Fatalf("a single cold iteration: cold %.2f, needed %d; want 7.5 and 1", c, n)
	}
	if err := perf.DecideWarmup(1, 0); err == nil {
		t.Fatal("no warm-up accepted for a cold first iteration")
	}
	// A lucky sample inside a warm-up does not end it.
	if _, n := perf.SteadyState(perf.Samples{900, 300, 800, 700, 600, 300, 301, 299, 300, 302, 300, 301, 300, 299}); n != 5 {
		t.Fatalf("a lucky second sample ended the warm-up at %d, want 5", n)
	}
	// One noise spike after a warm start is not warm-up.
	if _, n := perf.SteadyState(perf.Samples{300, 301, 299, 900, 300, 302, 300, 301, 300, 299, 301, 300}); n != 0 {
		t.Fatalf("a single spike counted as %d warm-up iterations", n)
	}
	if err := perf.DecideWarmup(needed, 2); err == nil {
		t.Fatal("a warm-up of 2 accepted where 3 iterations were cold")
	}
	if err := perf.DecideWarmup(needed, 10); err != nil {
		t.Fatal(err)
	}
}

// TestCheck5PairingCancelsNoise: an autotuner's 16 slow launches (2×) while
// the machine is busy over the second half (both plans 1.8× slower there, as
// on a shared 2-core CI machine): the fresh plan's own samples hide the
// warm-up (its steady median rises to meet it), the ratios to the warm plan
// timed beside it do not.
func TestCheck5PairingCancelsNoise(t *testing.T) {
	const n = 30
	fresh, warm := make(perf.Samples, n), make(perf.Samples, n)
	for i := range fresh {
		busy := 1.0
		if i >= 14 {
			busy = 1.8 + 0.3*float64(i%3)
		}
		warm[i] = 300 * busy * (1 + 0.01*float64(i%2))
		fresh[i] = 300 * busy
		if i < 16 {
			fresh[i] *= 2
		}
	}
	if _, n := perf.SteadyState(fresh); n > 10 {
		t.Fatalf("the unpaired samples already show %d iterations of warm-up: the test does not model the hiding", n)
	}
	if _, n := perf.PairedWarmup(fresh, warm); n != 16 {
		t.Fatalf("paired ratios: %d iterations of warm-up, want 16", n)
	}
	if err := perf.DecideWarmup(16, 10); err == nil {
		t.Fatal("a warm-up of 10 accepted for 16 slow launches")
	}
}

// TestCheck6MicroBenchmarks: individual operations on the backend, each
// with its median and spread (re-measured when the spread exceeds 10%,
// marked noisy if it still does): each method's discretization alone
// (exp vs division vs polynomial), the scan with and without D, z and
// variable B/C, and the original key comparison — the scalar bilinear
// against the dense matrix route (batched dstate×dstate LU solves with gonum
// on the CPU) — as ratios.
func TestCheck6MicroBenchmarks(t *testing.T) {
	track(t)
	c := config(t)
	table := report.Table{Name: "Check6: micro-benchmarks (" + c.String() + ")", Columns: []string{"operation", "median µs", "spread", "ratio", "noisy", ""}}
	result := map[string]any{"config": c.String()}
	row := func(name string, s perf.Samples, noisy bool, ratio float64) {
		r := ""
		if ratio > 0 {
			r = fmt.Sprintf("%.3g", ratio)
		}
		table.Rows = append(table.Rows, []string{name, us(s.Median()), fmt.Sprintf("%.1f%%", 100*s.Spread()), r, strconv.FormatBool(noisy), ""})
		result[name] = map[string]any{"median_us": s.Median(), "spread": s.Spread(), "noisy": noisy}
	}
	// Discretization alone, over a sixteenth of the scan's state updates:
	// enough elements that the operation, not the launch, is timed.
	n := c.batch * c.dim * c.dstate * max(1, c.seqlen/16)
	delta, a := make([]float64, n), make([]float64, n)
	for i := range delta {
		delta[i], a[i] = 0.01+0.09*float64(i%97)/97, -float64(1+i%c.dstate)
	}
	var zohDisc float64
	for _, m := range c.methods {
		if !judged(t.Name(), "discretize timing of", m, c.dtype, false, true) {
			continue
		}
		dp, err := lib.NewDiscretizePlan(m, c.dtype, false, delta, a)
		if err != nil {
			t.Fatal(err)
		}
		s, noisy, err := perf.StableMeasure(func() (perf.Samples, error) { return Measure(dp, HarnessTimer, c.warmup, c.trials, 10) })
		dp.Close()
		if err != nil {
			t.Fatal(err)
		}
		if zohDisc == 0 {
			zohDisc = s.Median()
		}
		row("discretize "+m.String(), s, noisy, s.Median()/zohDisc)
	}
	// The scan with and without its features (the base method), measured
	// interleaved so that noise falls on all alike: less work must not cost
	// more (perf.DecideLessWork).
	base := c.base().String()
	variants := []struct {
		name string
		edit func(p *ssm.Problem)
	}{
		{"scan " + base + ", Mamba block", func(*ssm.Problem) {}},
		{"scan " + base + ", no D", func(p *ssm.Problem) { p.D = nil }},
		{"scan " + base + ", no z", func(p *ssm.Problem) { p.Z = nil }},
		{"scan " + base + ", constant B/C", func(p *ssm.Problem) {
			p.VariableB, p.VariableC = false, false
			p.B, p.C = p.B[:p.Dim*p.Dstate], p.C[:p.Dim*p.Dstate]
		}},
	}
	var plans []*cudalib.Plan
	var timers []Timer
	taken := variants[:0]
	for _, v := range variants {
		p := checkProblem(c, c.base(), false)
		v.edit(p)
		if _, _, err := featuresOf(p.Method, c.dtype, p.Complex).Fit(p); err != nil {
			rep.Unsupported(t.Name(), v.name+": "+err.Error())
			continue
		}
		taken = append(taken, v)
		plan, _ := newPlan(t, p, c.dtype)
		plans, timers = append(plans, plan), append(timers, HarnessTimer)
	}
	// At least 60 rounds: the decision is a ratio's bootstrap interval.
	scans, err := MeasureInterleaved(plans, timers, c.warmup, max(c.trials, 60), 1)
	if err != nil {
		t.Fatal(err)
	}
	decided := 0
	row(taken[0].name, scans[0], scans[0].Spread() > perf.NoiseBound, 1)
	for k, v := range taken[1:] {
		s := scans[k+1]
		d, err := perf.DecideLessWork(v.name, scans[0], s)
		if err != nil {
			t.Error(err)
		}
		if d.Decided {
			decided++
		} else {
			partlyUndecided(t, v.name, fmt.Sprintf("%.3g× the full scan with a 95%% interval %.3g–%.3g across 1 + %.2g: too noisy to tell", d.Ratio, d.Lo, d.Hi, perf.LessWorkTolerance))
		}
		row(v.name, s, s.Spread() > perf.NoiseBound, d.Ratio)
	}
	result["less_work_decided"] = decided
	if decided == 0 && len(taken) > 1 {
		logTable(t, table)
		result["passed"] = false
		writeCheck(t, 6, result)
		undecided(t, "no comparison of a scan with less work against the full scan decided (every 95%% interval crosses 1 + %.2g): too noisy here", perf.LessWorkTolerance)
	}
	if judged(t.Name(), "the scalar-vs-dense comparison of", ssm.Bilinear, c.dtype, false, true) {
		result["dense_over_scalar"] = bilinearDense(t, c, delta, a, row)
	}
	logTable(t, table)
	result["passed"] = !t.Failed()
	writeCheck(t, 6, result)
}

// bilinearDense times the scalar bilinear of the kernel against the dense
// route: for batch·dim channels, (I − ΔA/2)⁻¹(I + ΔA/2) by an LU solve of a
// dstate×dstate system (gonum, CPU). It returns dense/scalar.
func bilinearDense(t *testing.T, c checkConfig, delta, a []float64, row func(string, perf.Samples, bool, float64)) float64 {
	dp, err := lib.NewDiscretizePlan(ssm.Bilinear, c.dtype, false, delta, a)
	if err != nil {
		t.Fatal(err)
	}
	scalar, noisy, err := perf.StableMeasure(func() (perf.Samples, error) { return Measure(dp, HarnessTimer, c.warmup, c.trials, 10) })
	dp.Close()
	if err != nil {
		t.Fatal(err)
	}
	channels := c.batch * c.dim
	dense, dnoisy, err := perf.StableMeasure(func() (perf.Samples, error) {
		var s perf.Samples
		A := mat.NewDiagDense(c.dstate, a[:c.dstate]) // the dense route solves a full dstate×dstate system per channel
		B := mat.NewDense(c.dstate, 1, nil)
		for trial := 0; trial < max(5, c.trials/10); trial++ {
			t0 := time.Now()
			for ch := 0; ch < channels; ch++ {
				if _, _, err := mamba1.Discretize(ssm.Bilinear, delta[ch%len(delta)], A, B); err != nil {
					return nil, err
				}
			}
			s = append(s, float64(time.Since(t0).Nanoseconds())/1e3)
		}
		return s, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	row("bilinear scalar (kernel)", scalar, noisy, 0)
	row("bilinear dense LU (gonum, CPU)", dense, dnoisy, dense.Median()/scalar.Median())
	return dense.Median() / scalar.Median()
}

func TestCheck6DecisionCatchesCostlierLessWork(t *testing.T) {
	full := perf.Samples{100, 101, 99, 100, 100, 102, 99, 101}
	if d, err := perf.DecideLessWork("no z", full, perf.Samples{80, 81, 79, 80, 80, 81, 80, 79}); !d.Decided || err != nil {
		t.Fatalf("a cheaper scan without z: decided %t, %v", d.Decided, err)
	}
	if _, err := perf.DecideLessWork("no z", full, perf.Samples{130, 131, 129, 130, 130, 131, 130, 129}); err == nil {
		t.Fatal("a scan without z 1.3× slower than the full scan passed")
	}
	if d, err := perf.DecideLessWork("no z", full, perf.Samples{130, 60, 200, 90, 150, 70, 180, 100}); d.Decided || err != nil {
		t.Fatalf("a noisy figure decided (decided %t, err %v)", d.Decided, err)
	}
}

func TestCheck6DecisionRemeasuresNoise(t *testing.T) {
	calls := 0
	_, noisy, err := perf.StableMeasure(func() (perf.Samples, error) {
		calls++
		return perf.Samples{100, 150, 60, 200, 90}, nil
	})
	if err != nil || !noisy || calls != 2 {
		t.Fatalf("noisy %t after %d calls (err %v): want noisy after a re-measurement", noisy, calls, err)
	}
	calls = 0
	_, noisy, _ = perf.StableMeasure(func() (perf.Samples, error) {
		calls++
		if calls == 1 {
			return perf.Samples{100, 150, 60, 200, 90}, nil
		}
		return perf.Samples{100, 101, 99, 100, 100}, nil
	})
	if noisy || calls != 2 {
		t.Fatalf("a quiet re-measurement marked noisy (%t, %d calls)", noisy, calls)
	}
}

// TestCheck7MethodComparison: every method on the same path and inputs,
// warm-up discarded, median and bootstrap 95% CI, throughput (elements/s,
// GB/s of the bytes the scan must move, fraction of ssmk_copy_bandwidth)
// and the ratio to zoh. Fails a method slower than zoh beyond -max-slowdown
// and flags as suspicious one that does at least zoh's work yet runs
// significantly faster. -sizes adds a scaling table.
func TestCheck7MethodComparison(t *testing.T) {
	track(t)
	if t.Name() != report.Check7Test {
		t.Fatalf("the gate runs Check7 as %s: rename report.Check7Test with the test", report.Check7Test)
	}
	c := config(t)
	var sizes [][4]int
	if *flagSizes != "" {
		var err error
		if sizes, err = parseSizes(*flagSizes); err != nil {
			t.Fatalf("-sizes: %v", err)
		}
	}
	probe := checkProblem(c, ssm.ZOH, c.complex)
	bytesMoved := cudalib.ScanBytes(probe, c.dtype)
	copyBW, err := lib.CopyBandwidth(max(bytesMoved, 64<<20), 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := perf.CheckCopyBandwidth(copyBW); err != nil {
		t.Error(err)
	}
	// Every method's plan, then the trials round-robin across them.
	var order []ssm.Method
	var plans []*cudalib.Plan
	var timers []Timer
	for _, m := range append([]ssm.Method{ssm.ZOH}, c.methods...) {
		if slices.Contains(order, m) {
			continue
		}
		plan, _ := newPlan(t, checkProblem(c, m, c.complex), c.dtype)
		order, plans, timers = append(order, m), append(plans, plan), append(timers, HarnessTimer)
	}
	measured, err := MeasureInterleaved(plans, timers, c.warmup, c.trials, 1)
	if err != nil {
		t.Fatal(err)
	}
	samples := map[ssm.Method]perf.Samples{}
	for i, m := range order {
		samples[m] = measured[i]
	}
	bwd, saved := backwardSamples(t, c, order)
	table := report.Table{Name: fmt.Sprintf("Check7: method comparison (%s; copy bandwidth %.0f GB/s; %.2f MB per scan)", c, copyBW, float64(bytesMoved)/1e6),
		Columns: []string{"method", "median µs", "95% CI µs", "Gelem/s", "GB/s", "% copy BW", "× zoh", "95% CI", "verdict",
			"bwd µs", "bwd × zoh bwd", "bwd verdict", "bwd on saved states µs", ""}}
	var rows []report.Check7Row
	elems := float64(c.batch * c.dim * c.seqlen)
	undecidedRows, decisions := 0, 0
	decide := func(part string, o perf.Outcome, reason string) {
		switch o {
		case perf.Fail:
			t.Error(reason)
		case perf.Undecided:
			partlyUndecided(t, part, reason)
			undecidedRows++
		}
	}
	for _, m := range c.methods {
		row, o, reason := perf.DecideMethod(m.String(), samples[m], samples[ssm.ZOH], c.maxSlowdown)
		if m != ssm.ZOH {
			decisions++
			decide(m.String(), o, reason)
		}
		sec := row.MedianUS * 1e-6
		row.ElementsPerSec, row.GBPerSec = elems/sec, float64(bytesMoved)/sec/1e9
		row.FracCopyBW = row.GBPerSec / copyBW
		bcols := []string{"-", "-", "-", "-"}
		if bwd != nil {
			b, o, reason := perf.DecideMethod(m.String(), bwd[m], bwd[ssm.ZOH], c.maxBwdSlowdown)
			if m != ssm.ZOH {
				decisions++
				decide(m.String()+" backward", o, "the backward: "+reason)
			}
			row.BackwardUS, row.BackwardRatioToZOH, row.BackwardVerdict = b.MedianUS, b.RatioToZOH, b.Verdict
			row.BackwardRatioCILow, row.BackwardRatioCIHigh = b.RatioCILow, b.RatioCIHigh
			bcols = []string{us(b.MedianUS), fmt.Sprintf("%.3f (%.3f–%.3f)", b.RatioToZOH, b.RatioCILow, b.RatioCIHigh), b.Verdict, "-"}
			if saved != nil {
				row.BackwardSavedUS = saved[m].Median()
				bcols[3] = us(row.BackwardSavedUS)
			}
		}
		rows = append(rows, row)
		table.Rows = append(table.Rows, append([]string{m.String(), us(row.MedianUS), us(row.CILowUS) + "–" + us(row.CIHighUS),
			fmt.Sprintf("%.3g", row.ElementsPerSec/1e9), fmt.Sprintf("%.1f", row.GBPerSec), fmt.Sprintf("%.2f", 100*row.FracCopyBW),
			fmt.Sprintf("%.3f", row.RatioToZOH), fmt.Sprintf("%.3f–%.3f", row.RatioCILow, row.RatioCIHigh), row.Verdict}, append(bcols, "")...))
	}
	logTable(t, table)
	rep.AddTable(table)
	perMethod := map[string][]float64{}
	for m, s := range samples {
		perMethod[m.String()] = s
	}
	result := &report.Check7{Schema: report.Check7Schema, Config: c.String(), CopyBandwidthGBps: copyBW,
		BytesPerScan: bytesMoved, ElementsPerScan: int64(c.batch * c.dim * c.seqlen), MaxSlowdown: c.maxSlowdown,
		Methods: rows, Samples: perMethod}
	if bwd != nil {
		result.MaxBackwardSlowdown, result.BackwardSamples = c.maxBwdSlowdown, map[string][]float64{}
		for m, s := range bwd {
			result.BackwardSamples[m.String()] = s
		}
	}
	if saved != nil {
		result.BackwardSavedSamples = map[string][]float64{}
		for m, s := range saved {
			result.BackwardSavedSamples[m.String()] = s
		}
	}
	if *flagSizes != "" {
		sweep := report.Table{Name: "Check7: scaling", Columns: []string{"size", "method", "median µs", "GB/s", ""}}
		for _, z := range sizes {
			size := fmt.Sprintf("%dx%dx%dx%d", z[0], z[1], z[2], z[3])
			sc := c
			sc.batch, sc.dim, sc.seqlen, sc.dstate = z[0], z[1], z[2], z[3]
			for _, m := range c.methods {
				p := checkProblem(sc, m, c.complex)
				plan, _ := newPlan(t, p, c.dtype)
				s, err := Measure(plan, HarnessTimer, c.warmup, c.trials, 1)
				if err != nil {
					t.Fatal(err)
				}
				sweep.Rows = append(sweep.Rows, []string{size, m.String(), us(s.Median()),
					fmt.Sprintf("%.1f", float64(cudalib.ScanBytes(p, c.dtype))/(s.Median()*1e3)), ""})
			}
		}
		logTable(t, sweep)
		result.Scaling = sweep.Rows
	}
	result.Passed = !t.Failed() && undecidedRows == 0
	writeCheck(t, 7, result)
	if decisions > 0 && undecidedRows == decisions && !t.Failed() {
		undecided(t, "no method's ratio to zoh decided (report.json: undecided lists why for each): too noisy here")
	}
}

// parseSizes reads -sizes: comma-separated BxDxLxN, each a positive
// integer.
func parseSizes(s string) ([][4]int, error) {
	var out [][4]int
	for _, size := range strings.Split(s, ",") {
		parts := strings.Split(strings.TrimSpace(size), "x")
		var v [4]int
		ok := len(parts) == 4
		for i := 0; ok && i < 4; i++ {
			n, err := strconv.Atoi(parts[i])
			ok, v[i] = err == nil && n > 0, n
		}
		if !ok {
			return nil, fmt.Errorf("%q is not BxDxLxN (four positive integers, e.g. 8x512x1024x16)", size)
		}
		out = append(out, v)
	}
	return out, nil
}

// backwardSamples times every method's backward pass on Check7's problem
// (dout of order one and no dlast_state, as autograd calls Mamba's backward
// for a loss on the outputs), the plans interleaved as the forward's are:
// plain, the plans of ssmk_plan_create_bwd, each launch computing the
// gradients from the inputs alone, nil where the library declares no
// backward for one of the methods in c's dtype; saved, where the library
// declares them for every method, the plans on saved states of
// ssmk_plan_create_bwd_saved (the backward alone, as a training step runs
// it after a forward that saved its states), timed beside them, else nil.
func backwardSamples(t *testing.T, c checkConfig, order []ssm.Method) (plain, saved map[ssm.Method]perf.Samples) {
	if !lib.HasBackward() {
		return nil, nil
	}
	withSaved := lib.HasSavedBackward()
	var plans []*cudalib.Plan
	var timers []Timer
	for _, m := range order {
		caps := lib.Capabilities(m, c.dtype, c.complex)
		if !caps.Backward() {
			return nil, nil
		}
		withSaved = withSaved && caps.BackwardSaved()
	}
	kinds := []func(*cudalib.GradBuffers) (*cudalib.BackwardPlan, error){lib.NewBackwardPlan}
	if withSaved {
		kinds = append(kinds, lib.NewSavedBackwardPlan)
	}
	// plans[k·len(order) + i]: plan kind k of method i, both kinds of a
	// method from one draw of its buffers (the plans copy them)
	plans = make([]*cudalib.Plan, len(kinds)*len(order))
	for i, m := range order {
		p := checkProblem(c, m, c.complex)
		b, err := lib.NewGradBuffers(p, checkDraws.cotangent(p), c.dtype, false)
		if err != nil {
			t.Fatal(err)
		}
		for k, newPlan := range kinds {
			plan, err := newPlan(b)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(plan.Close)
			plans[k*len(order)+i] = plan.Plan
		}
	}
	for range plans {
		timers = append(timers, HarnessTimer)
	}
	measured, err := MeasureInterleaved(plans, timers, c.warmup, c.trials, 1)
	if err != nil {
		t.Fatal(err)
	}
	plain = map[ssm.Method]perf.Samples{}
	for i, m := range order {
		plain[m] = measured[i]
	}
	if withSaved {
		saved = map[ssm.Method]perf.Samples{}
		for i, m := range order {
			saved[m] = measured[len(order)+i]
		}
	}
	return plain, saved
}

func TestCheck7DecisionCatchesSlowAndSuspicious(t *testing.T) {
	zoh := perf.Samples{300, 302, 298, 301, 299, 300, 303, 297}
	if _, o, why := perf.DecideMethod("rk4", perf.Samples{310, 312, 309, 311, 308, 310, 313, 309}, zoh, 1.25); o != perf.Pass {
		t.Fatalf("rk4 at 1.03× zoh: %v, %s", o, why)
	}
	if _, o, why := perf.DecideMethod("foh", perf.Samples{420, 421, 419, 422, 418, 420, 423, 417}, zoh, 1.25); o != perf.Fail || !strings.Contains(why, "over the allowed 1.25×") {
		t.Fatalf("foh at 1.4× zoh: %v, %s", o, why)
	}
	// The +63.76% pattern: a method that does more work than zoh 1.64× faster.
	if _, o, why := perf.DecideMethod("poly", perf.Samples{183, 184, 182, 185, 183, 184, 182, 183}, zoh, 1.25); o != perf.Fail || !strings.Contains(why, "SUSPICIOUS") {
		t.Fatalf("a method 1.64× faster than zoh: %v, %s", o, why)
	}
	// Bilinear replaces the exp by a division: faster is possible, not suspicious.
	if _, o, why := perf.DecideMethod("bilinear", perf.Samples{183, 184, 182, 185, 183, 184, 182, 183}, zoh, 1.25); o != perf.Pass {
		t.Fatalf("bilinear faster than zoh: %v, %s", o, why)
	}
}

// noisyTimer is what a timer whose readings carry ±60% noise reports for
// work of true times us: each reading off by a uniform factor in [0.4, 1.6].
func noisyTimer(seed uint64, n int, us float64) perf.Samples {
	r := rand.New(rand.NewPCG(seed, 7))
	s := make(perf.Samples, n)
	for i := range s {
		s[i] = us * (0.4 + 1.2*r.Float64())
	}
	return s
}

// TestCheckDecisionsUndecidedOnNoisyTimer: readings with ±60% noise get no passing
// timing decision (the new user saw Check6 pass with every row
// noisy, and Check7 call every method ok with intervals of 0.5–1.9× zoh):
// Check2's and Check6's ratios, Check7's methods and Check5's warm-up are
// each undecided, over many draws.
func TestCheckDecisionsUndecidedOnNoisyTimer(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		// Check2: synced host time against the noisy events, 60 rounds.
		if _, d, _ := perf.DecideSync(noisyTimer(seed, 60, 5), perf.Samples(noisyTimer(seed+100, 60, 300)), noisyTimer(seed+200, 60, 300)); d.Outcome() == perf.Pass {
			t.Errorf("seed %d: Check2 passed on ±60%% noise (ratio %.3f, 95%% CI %.3f–%.3f)", seed, d.Ratio, d.Lo, d.Hi)
		}
		// Check6: a scan without z at 0.9× the full scan's work.
		if d, _ := perf.DecideLessWork("no z", noisyTimer(seed+300, 60, 300), noisyTimer(seed+400, 60, 270)); d.Outcome() == perf.Pass {
			t.Errorf("seed %d: Check6 passed on ±60%% noise (ratio %.3f, 95%% CI %.3f–%.3f)", seed, d.Ratio, d.Lo, d.Hi)
		}
		// Check7: a method at 1.1× zoh, with the defaults of a GPU (100
		// trials, 1.25×) and of the CPU build (15 trials, 3×).
		for _, c := range []struct {
			trials int
			bound  float64
		}{{100, 1.25}, {15, 3}} {
			for _, m := range []string{"foh", "bilinear"} {
				if row, o, _ := perf.DecideMethod(m, noisyTimer(seed+500, c.trials, 330), noisyTimer(seed+600, c.trials, 300), c.bound); o == perf.Pass {
					t.Errorf("seed %d: Check7 passed %s on ±60%% noise, %d trials (%.3f×, 95%% CI %.3f–%.3f, bound %g)", seed, m, c.trials, row.RatioToZOH, row.RatioCILow, row.RatioCIHigh, c.bound)
				}
			}
		}
		// Check3 (a GPU backend): 1 host thread against all, 15 trials each.
		if _, o, _ := perf.DecideThreadIndependence(noisyTimer(seed+900, 15, 300), noisyTimer(seed+901, 15, 300)); o == perf.Pass {
			t.Errorf("seed %d: Check3's timing passed on ±60%% noise", seed)
		}
		// Check5: a fresh plan's ratios to a warm one, 30 iterations.
		r := perf.PairedRatios(noisyTimer(seed+700, 30, 300), noisyTimer(seed+800, 30, 300))
		if b := perf.SteadyBand(r); b <= perf.MaxSteadyBand {
			t.Errorf("seed %d: Check5's steady band ±%.2f on ±60%% noise: it would decide", seed, b)
		}
	}
}

// TestCheck5DecisionCatchesLongColdStart: twenty launches at ten times the
// steady time, then ten steady ones (on a machine with 2% noise), is a
// step change, not noise: the warm-up is 20 iterations and a harness that
// warms up 10 fails. The second half's band alone (±1339% when the issue's
// user ran it) called it too noisy to decide.
func TestCheck5DecisionCatchesLongColdStart(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	s := make(perf.Samples, 30)
	for i := range s {
		s[i] = 300 * (0.98 + 0.04*r.Float64())
		if i < 20 {
			s[i] *= 10
		}
	}
	if b := perf.SteadyBand(s); b > perf.MaxSteadyBand {
		t.Fatalf("steady band ±%.2f: the cold start is taken for noise", b)
	}
	cold, needed := perf.SteadyState(s)
	if needed != 20 || cold < 9 {
		t.Fatalf("cold start %.2f×, %d iterations: want 10× and 20", cold, needed)
	}
	if err := perf.DecideWarmup(needed, 10); err == nil {
		t.Fatal("a warm-up of 10 accepted for 20 launches at 10×")
	}
	// Paired with a warm plan timed beside it, the same.
	warm := make(perf.Samples, 30)
	for i := range warm {
		warm[i] = 300 * (0.98 + 0.04*r.Float64())
	}
	if _, n := perf.PairedWarmup(s, warm); n != 20 {
		t.Fatalf("paired: %d iterations of warm-up, want 20", n)
	}
}

// TestCheck7DecisionRefusesImplausibleCopyBandwidth: a copy bandwidth no memory has
// (the user saw 33 554 432 GB/s accepted) is refused, a real one
// (an H200's 4 000 GB/s, a CPU's 20) accepted.
func TestCheck7DecisionRefusesImplausibleCopyBandwidth(t *testing.T) {
	for _, bw := range []float64{33554432, 6.7e7, 0, -1, math.NaN(), math.Inf(1)} {
		if perf.CheckCopyBandwidth(bw) == nil {
			t.Errorf("a copy bandwidth of %g GB/s accepted", bw)
		}
	}
	for _, bw := range []float64{4000, 20, 0.5} {
		if err := perf.CheckCopyBandwidth(bw); err != nil {
			t.Errorf("%g GB/s refused: %v", bw, err)
		}
	}
}

// TestCheck7DecisionLimits: -max-slowdown and -max-bwd-slowdown take a
// finite positive factor (0: the backend's default) and refuse the rest by
// name, so that a gate's looser limit is a number it states, never a NaN
// that no ratio exceeds.
func TestCheck7DecisionLimits(t *testing.T) {
	for _, c := range []struct {
		v, want float64
		ok      bool
	}{{0, 1.15, true}, {1.6, 1.6, true}, {1e9, 1e9, true}, {-1, 0, false}, {math.NaN(), 0, false}, {math.Inf(1), 0, false}} {
		got := 1.15
		err := setLimit("max-bwd-slowdown", c.v, &got)
		switch {
		case c.ok && (err != nil || got != c.want):
			t.Errorf("-max-bwd-slowdown %v: %v, limit %v, want %v", c.v, err, got, c.want)
		case !c.ok && (err == nil || !strings.Contains(err.Error(), "-max-bwd-slowdown")):
			t.Errorf("-max-bwd-slowdown %v: error %v, want one naming the flag", c.v, err)
		}
	}
}

// TestCheck4DecisionLeavesNonFiniteOut: a method whose output is NaN
// (an accuracy bug) is no code-path collision: Fingerprint leaves it out
// and NonFinite names it (the user saw a wrong bilinear reported as
// sharing zoh's code path).
func TestCheck4DecisionLeavesNonFiniteOut(t *testing.T) {
	nan := math.NaN()
	outs := map[string][]float64{"zoh": {1, 2, 3}, "foh": {1.1, 2.2, 3.3}, "bilinear": {nan, 2, nan}}
	if col := perf.Fingerprint(outs, 1e-4); len(col) != 0 {
		t.Errorf("collisions %v with a NaN output", col)
	}
	if bad := perf.NonFinite(outs); len(bad) != 1 || bad[0] != "bilinear" {
		t.Errorf("NonFinite = %v, want [bilinear]", bad)
	}
}

// A measurement drowned in machine noise decides nothing, or decides the
// warm-up it has, where counting it once let a 16-launch warm-up pass
// (mutant 18 survived a CI run on a loaded machine: of two fresh plans, the
// quiet one read 16 iterations, the noisy one 0). The series are that
// run's, in µs: the noisy one's second half spreads beyond MaxSteadyBand,
// and its 16 launches at 2× are a step (perf.SteadyFrom) after which the
// rest is steady enough to count them.
func TestCheck5NoisyAttemptDecidesNothing(t *testing.T) {
	quietF := perf.Samples{6217, 5879, 5829, 5872, 5892, 5902, 5866, 5854, 5999, 6007, 5843, 5847, 5869, 5888, 5842, 5850,
		2879, 2948, 2888, 2947, 2881, 2957, 2970, 2903, 2966, 2924, 2942, 2964, 2927, 2920}
	quietW := perf.Samples{3049, 2971, 2935, 2970, 2916, 2983, 2914, 2936, 2982, 3051, 2963, 2947, 2907, 2933, 2914, 2878,
		2931, 2946, 2897, 2997, 3000, 2991, 2970, 2910, 2897, 2928, 2904, 2915, 2964, 3629}
	noisyF := perf.Samples{5916, 5883, 5679, 5961, 5891, 5812, 5849, 7089, 8495, 4977, 5805, 5633, 5406, 5924, 5863, 5990,
		4093, 3179, 4716, 2952, 2921, 2878, 2905, 3060, 2918, 1597, 3464, 2974, 1551, 1799}
	noisyW := perf.Samples{2948, 2890, 3023, 2953, 2964, 3007, 2895, 2919, 1559, 3861, 1553, 4513, 1518, 2987, 2938, 2991,
		1548, 2279, 2956, 2898, 3048, 3148, 2937, 3142, 3159, 2925, 2093, 2846, 2062, 3699}
	if _, n := perf.PairedWarmup(quietF, quietW); n != 16 || perf.SteadyBand(perf.PairedRatios(quietF, quietW)) > perf.MaxSteadyBand {
		t.Errorf("the quiet measurement: %d iterations, band %.2f; want 16 within ±%g", n, perf.SteadyBand(perf.PairedRatios(quietF, quietW)), perf.MaxSteadyBand)
	}
	r := perf.PairedRatios(noisyF, noisyW)
	if _, n := perf.SteadyState(r); perf.SteadyBand(r) <= perf.MaxSteadyBand && n < 16 {
		t.Errorf("the noisy measurement decided a warm-up of %d iterations (band ±%.2f): want undecided, or the 16 it has", n, perf.SteadyBand(r))
	}
	if half := r[len(r)/2:]; 2*half.Spread() <= perf.MaxSteadyBand {
		t.Errorf("the noisy measurement's second half spreads ±%.2f: the test no longer models a noisy run", 2*half.Spread())
	}
}

// TestParseSizes: -sizes takes comma-separated BxDxLxN of positive
// integers and refuses anything else before a measurement starts (a
// negative dim once reached makeslice and crashed the sweep).
func TestParseSizes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want [][4]int
	}{
		{"8x512x1024x16", [][4]int{{8, 512, 1024, 16}}},
		{"1x64x256x16, 2x8x70x4", [][4]int{{1, 64, 256, 16}, {2, 8, 70, 4}}},
	} {
		got, err := parseSizes(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("parseSizes(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "1x-64x256x16", "1x0x256x16", "8x512x1024", "8x512x1024x16x2", "8x512x1024x16junk",
		"8x512x1024x16,", "axbxcxd", "8 x512x1024x16"} {
		if got, err := parseSizes(bad); err == nil || !strings.Contains(err.Error(), "BxDxLxN") {
			t.Errorf("parseSizes(%q) = %v, %v; want an error naming BxDxLxN", bad, got, err)
		}
	}
}

package gate

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"ssmverify/bridge"
	"ssmverify/judge"
	"ssmverify/report"
	"ssmverify/ssm"
)

// TestGateEndToEnd: a real gate run against the library under test (the
// CPU build in CI) with a small selection of the suite — the golden
// package, the verify suite's golden, convergence and Check7 tests — produces every file:
// report.json that loads, junit.xml that parses, report.md whose verdict is
// the exit code's, and the three plots.
func TestGateEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test in subprocesses")
	}
	out := t.TempDir()
	r := Run(Config{Out: out, Root: "..", Packages: []string{"golden", "verify"}, VerifyRun: "^Test(Golden|Check7MethodComparison|ConvergenceOrder)$",
		Task: "e2e", MaxRegression: 0.05, Plots: true, RapidSeed: 7, Log: io.Discard})
	if len(r.Errors) > 0 {
		t.Fatalf("setup errors: %v", r.Errors)
	}
	// Check7 and the convergence test time the library: on a loaded
	// machine they may not decide, and the run is then undecided with each
	// such part listed, never a pass and never a failure. Both outcomes are
	// right; the verdict must agree with what is listed.
	undecided := len(r.Undecided) > 0
	for _, p := range r.Performance {
		undecided = undecided || p.Verdict == report.VerdictUndecided
	}
	for _, tt := range r.Tests {
		undecided = undecided || tt.Outcome == report.Undecided
	}
	wantExit, wantBadge := report.ExitPass, "✅ PASS"
	if undecided {
		wantExit, wantBadge = report.ExitUndecided, "⚠️ UNDECIDED"
		t.Logf("undecided on this machine (load): %+v", r.Undecided)
	}
	if r.ExitCode != wantExit {
		t.Fatalf("exit %d (%s), want %d: failures %+v, undecided %+v", r.ExitCode, r.Verdict, wantExit, r.LeafFailures(), r.Undecided)
	}
	loaded, err := Load(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if loaded.RapidSeed != 7 {
		t.Errorf("report.json: rapid_seed %d, want the run's 7", loaded.RapidSeed)
	}
	names := map[string]bool{}
	for _, tt := range loaded.Tests {
		names[tt.Package+"."+tt.Name] = true
	}
	for _, want := range []string{"golden.TestGoldenReferenceReproduces", "verify.TestGolden", "verify.TestCheck7MethodComparison", "verify.TestConvergenceOrder/rk4"} {
		if !names[want] {
			t.Errorf("report.json lacks test %s", want)
		}
	}
	// the CPU build declares the backward and its plans on saved states:
	// each method's forward, backward and backward on saved states
	if len(loaded.Performance) != 18 {
		t.Errorf("%d performance rows, want three per method", len(loaded.Performance))
	}
	d := parseJUnit(t, filepath.Join(out, "junit.xml"))
	if len(d.Suites) == 0 {
		t.Error("junit.xml has no test suites")
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil || !strings.HasPrefix(string(md), "## ssmverify gate: "+wantBadge) {
		t.Errorf("report.md starts %q (err %v), want the %s verdict", strings.SplitN(string(md), "\n", 2)[0], err, wantBadge)
	}
	if !strings.Contains(string(md), "`RAPID_SEED=7`") {
		t.Errorf("report.md does not give the property tests' seed:\n%.400s", md)
	}
	for _, p := range []string{"convergence.png", "ratios-fp32.png", "throughput.png"} {
		if st, err := os.Stat(filepath.Join(out, p)); err != nil || st.Size() < 10000 {
			t.Errorf("plot %s: %v", p, err)
		}
		if !strings.Contains(string(md), "]("+p+")") {
			t.Errorf("report.md does not link %s", p)
		}
	}
}

// TestSuiteEnvPinsRapidSeed: the suite's processes get the gate's seed,
// whatever the caller's environment held, and none for seed 0; a failing
// test's reproduce command carries it.
func TestSuiteEnvPinsRapidSeed(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		seed uint64
		want string // RAPID_SEED entries, joined
	}{
		{[]string{"HOME=/h"}, 1, "RAPID_SEED=1"},
		{[]string{"RAPID_SEED=99", "HOME=/h", "RAPID_SEED=98"}, 5, "RAPID_SEED=5"},
		{[]string{"RAPID_SEED=99", "HOME=/h"}, 0, ""},
		{[]string{"RAPID_SEEDS=3"}, 0, ""}, // another variable, kept below
	} {
		got := suiteEnv(tc.env, tc.seed)
		var seeds []string
		for _, kv := range got {
			if strings.HasPrefix(kv, "RAPID_SEED=") {
				seeds = append(seeds, kv)
			}
		}
		if strings.Join(seeds, ",") != tc.want {
			t.Errorf("suiteEnv(%q, %d) = %q, want RAPID_SEED entries %q", tc.env, tc.seed, got, tc.want)
		}
		if len(got) != len(tc.env)-strings.Count(strings.Join(tc.env, " "), "RAPID_SEED=")+len(seeds) {
			t.Errorf("suiteEnv(%q, %d) = %q: lost or added other variables", tc.env, tc.seed, got)
		}
	}
	cfg := Config{RapidSeed: 42}
	for _, bin := range []string{"", "carry"} {
		cfg.Bin = bin
		if r := reproduce(cfg, "verify", "TestAccuracy/stress", "/lib.so"); !strings.Contains(r, "RAPID_SEED=42 SSMK_LIB=/lib.so ") {
			t.Errorf("reproduce (bin %q) = %q, want the seed before the command", bin, r)
		}
	}
	if r := reproduce(Config{}, "verify", "TestAccuracy", "/lib.so"); strings.Contains(r, "RAPID_SEED") {
		t.Errorf("reproduce without a seed = %q, names one", r)
	}
}

// The gate reports the backward pass: its worst ratio per cell and per
// gradient as figures, and a table of them in report.md.
func TestBackwardFigures(t *testing.T) {
	vr := report.New(report.LibraryInfo{Path: "lib.so"})
	vr.AddBackward("TestBackwardAccuracy", ssm.FOH, ssm.F32, false, judge.GradComparison{
		Grads: []judge.GradWorst{{Name: "du", Ratio: 0.5, ULP: 3}, {Name: "dA", Ratio: 7, ULP: 900}}})
	figs := verifyFigures(vr, "t")
	got := map[string]float64{}
	for _, f := range figs {
		if f.Method == "foh" && f.DType == "fp32" && f.Kind == "real" {
			got[f.Name] = float64(f.Value)
		}
	}
	if got["backward max scaled error ratio"] != 7 || got["backward max scaled error ratio: du"] != 0.5 || got["backward max error: dA"] != 900 {
		t.Fatalf("backward figures: %v", got)
	}
	vr.Figures, vr.Verdict = figs, report.VerdictFail
	md := Markdown(vr)
	if !strings.Contains(md, "Backward: largest scaled error ratio") || !strings.Contains(md, "| foh | fp32 | real | **7 FAIL** |") {
		t.Fatalf("report.md has no backward table:\n%s", md)
	}
}

// TestDesignTestsSelectTheBindings: DesignTests selects every test of
// package kernels that forces or recognises a design (a test renamed or
// added there cannot drop out of the gate unnoticed), and names none that
// does not exist.
func TestDesignTestsSelectTheBindings(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "kernels", "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files of kernels: %v", err)
	}
	funcs := regexp.MustCompile(`(?m)^func (Test\w+)\(t \*testing\.T\)`)
	design := regexp.MustCompile(`^Test(Forward|Backward)\w*(Design|AutoChoice)|^TestForward(ComplexAngles|DeltaUOverflow)$|^TestBackwardSaved`)
	sel := regexp.MustCompile(DesignTests)
	found := map[string]bool{}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range funcs.FindAllStringSubmatch(string(src), -1) {
			name := m[1]
			found[name] = true
			if design.MatchString(name) != sel.MatchString(name) {
				t.Errorf("%s (%s): a design test %v, selected by DesignTests %v", name, filepath.Base(f), design.MatchString(name), sel.MatchString(name))
			}
		}
	}
	for _, name := range designTests {
		if !found[name] {
			t.Errorf("DesignTests names %s, which kernels does not have", name)
		}
	}
}

// TestGateBridged: the gate runs a bridged suite against the kernel
// SSMK_BRIDGE names (the numpy path with a slip planted: the initial
// states dropped) into its one report: the failure and its cause in
// report.md and junit.xml, the kernel named; and a Slurm merge of that
// task with an ABI task keeps both the library's cells and the kernel's.
func TestGateBridged(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test in subprocesses")
	}
	if err := exec.Command(bridge.FindPython(), "-c", "import numpy").Run(); err != nil {
		if os.Getenv("SSMK_REQUIRE_NUMPY") != "" {
			t.Fatalf("SSMK_REQUIRE_NUMPY is set but no python3 imports numpy: %v", err)
		}
		t.Skip("no python3 with NumPy: the bridged suites cannot start")
	}
	t.Setenv("SSMK_BRIDGE", "numpy_ssd slip=drop-init")
	out := t.TempDir()
	r := Run(Config{Out: filepath.Join(out, "bridged"), Root: "..", Packages: []string{"verify/mamba2"}, Task: "bridged", RapidSeed: 7, Log: io.Discard})
	if r.ExitCode != report.ExitFail || len(r.Bridged) != 1 || r.Bridged[0].Package != "verify/mamba2" {
		t.Fatalf("exit %d, bridged %+v, errors %v", r.ExitCode, r.Bridged, r.Errors)
	}
	md, err := os.ReadFile(filepath.Join(out, "bridged", "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	causes, _, _ := strings.Cut(string(md), "### Failures")
	for _, want := range []string{"❌ FAIL", "Behind the bridge, `verify/mamba2`: `numpy-ssd (chunked)`", "`init-state:dropped`"} {
		if !strings.Contains(causes, want) {
			t.Errorf("report.md lacks %q before its failures:\n%.1500s", want, md)
		}
	}
	if !strings.Contains(string(md), "SSMK_BRIDGE='numpy_ssd slip=drop-init'") {
		t.Errorf("report.md's reproduce commands do not name the kernel")
	}
	d := parseJUnit(t, filepath.Join(out, "bridged", "junit.xml"))
	failures := 0
	for _, s := range d.Suites {
		if strings.Contains(s.Name, "verify/mamba2") {
			failures += s.Failures
		}
	}
	if failures == 0 {
		t.Error("junit.xml has no failure of verify/mamba2")
	}
	t.Setenv("SSMK_BRIDGE", "")
	abi := Run(Config{Out: filepath.Join(out, "abi"), Root: "..", Packages: []string{"golden"}, Task: "abi", RapidSeed: 7, Log: io.Discard})
	m, err := MergeFiles(filepath.Join(out, "merged"), []string{filepath.Join(out, "abi", "report.json"), filepath.Join(out, "bridged", "report.json")})
	if err != nil {
		t.Fatal(err)
	}
	if m.ExitCode != report.ExitFail || len(m.Bridged) != 1 || len(m.Kernels) == 0 || len(m.Cells) != len(abi.Cells) || len(m.Tasks) != 2 {
		t.Errorf("merged: exit %d, %d bridged, %d kernel cells, %d cells (ABI %d), tasks %v", m.ExitCode, len(m.Bridged), len(m.Kernels), len(m.Cells), len(abi.Cells), m.Tasks)
	}
}

// TestBridgeFor: a suite's own SSMK_BRIDGE_MAMBA2 or _MAMBA3 comes before
// SSMK_BRIDGE, so that one gate judges upstream's two adapters.
func TestBridgeFor(t *testing.T) {
	t.Setenv("SSMK_BRIDGE", "common.py")
	t.Setenv("SSMK_BRIDGE_MAMBA3", "mamba3_upstream checkout=/m")
	t.Setenv("SSMK_BRIDGE_MAMBA2", "")
	if got := BridgeFor("verify/mamba2"); got != "common.py" {
		t.Errorf("mamba2: %q, want SSMK_BRIDGE's", got)
	}
	if got := BridgeFor("verify/mamba3"); got != "mamba3_upstream checkout=/m" {
		t.Errorf("mamba3: %q, want SSMK_BRIDGE_MAMBA3's", got)
	}
	if got := reproduce(Config{}, "verify/mamba3", "TestX", ""); !strings.HasPrefix(got, "SSMK_BRIDGE='mamba3_upstream checkout=/m' go test ./verify/mamba3") {
		t.Errorf("reproduce: %q", got)
	}
}

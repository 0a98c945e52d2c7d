package bridge

import (
	"errors"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"ssmverify/mamba2"
	"ssmverify/ssm"
)

// needPython skips where no python3 imports NumPy, unless CI requires it
// (SSMK_REQUIRE_NUMPY=1: there the bridge's tests must run).
func needPython(t *testing.T) {
	t.Helper()
	if err := exec3(FindPython()); err != nil {
		if requireNumPy() {
			t.Fatalf("SSMK_REQUIRE_NUMPY is set but no python3 imports numpy: %v", err)
		}
		t.Skip("no python3 with NumPy (Debian: apt-get install python3-numpy)")
	}
}

func smallProblem() *mamba2.Problem {
	return mamba2.Generate(mamba2.Options{Batch: 1, Seqlen: 8, Heads: 2, Headdim: 2, Groups: 1, Dstate: 2, Chunk: 4, DType: ssm.F32, StateDType: ssm.F32}, 1)
}

// TestWorkerSurvivesCrashes: every way a kernel can end its process ends
// the worker, not the suite — each call is reported with its cause and the
// next call runs in a fresh worker.
func TestWorkerSurvivesCrashes(t *testing.T) {
	needPython(t)
	w, err := Start(Spec{Adapter: "faulty", Timeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	k := &SSD{W: w}
	p := smallProblem()
	params, arrays := prefillMessage(p)
	for _, c := range []struct {
		do, want string
		crash    bool
	}{
		{"segv", "signal: segmentation fault", true},
		{"exit", "exit status 7", true},
		{"hang", "no answer within 3s", true},
		{"fault", "device fault: RuntimeError: CUDA error: an illegal memory access", true},
		{"raise", "error: ValueError: the adapter failed", false},
	} {
		params["do"] = c.do
		pid := w.Hello().PID
		_, err := w.Call("call", OpPrefill, params, arrays)
		var ce *CrashError
		var ke *KernelError
		switch {
		case c.crash && !errors.As(err, &ce):
			t.Errorf("%s: err = %v, want a CrashError", c.do, err)
		case !c.crash && !errors.As(err, &ke):
			t.Errorf("%s: err = %v, want a KernelError", c.do, err)
		case err != nil && !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: err = %v, want it to say %q", c.do, err, c.want)
		}
		params["do"] = "ok"
		if _, err := w.Call("call", OpPrefill, params, arrays); err != nil {
			t.Fatalf("after %s: the next call failed: %v", c.do, err)
		}
		if c.crash && w.Hello().PID == pid {
			t.Errorf("after %s: the same worker (pid %d) answered, want a fresh one", c.do, pid)
		}
	}
	if w.Crashes != 4 || w.Restarts != 4 {
		t.Errorf("crashes %d, restarts %d; want 4 and 4", w.Crashes, w.Restarts)
	}
	// A kernel's prints do not corrupt the protocol; a wrong shape is named.
	params["do"] = "print"
	if _, err := k.W.Call("call", OpPrefill, params, arrays); err != nil {
		t.Errorf("print: %v", err)
	}
	params["do"] = "shape"
	rep, err := k.W.Call("call", OpPrefill, params, arrays)
	if err == nil {
		_, err = outputs(rep, map[string]int{"y": p.XLen()})
	}
	if err == nil || !strings.Contains(err.Error(), "y of 16 elements, want 32") {
		t.Errorf("shape: err = %v, want the wrong length named", err)
	}
}

// TestArraysCrossBitForBit: every dtype's values come back from the worker
// bit for bit (the numpy adapter's sequential decode with A = 0, Δ = 0
// leaves the state pool as it was given).
func TestArraysCrossBitForBit(t *testing.T) {
	needPython(t)
	w, err := Start(Spec{Adapter: "numpy_ssd"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	k := &SSD{W: w}
	for _, dt := range ssm.AllDTypes() {
		s := mamba2.GenerateStep(mamba2.StepOptions{Batch: 2, Slots: 3, Heads: 2, Headdim: 2, Groups: 1, Dstate: 3, DType: dt, StateDType: dt, Indices: []int{-1, 2}}, 1).Rounded()
		// special values survive the crossing
		s.State[0], s.State[1], s.State[2] = 65504, 1e-7, math.Copysign(0, -1)
		s.State = (&mamba2.Step{State: s.State, StateDType: dt, DType: dt}).Rounded().State
		out, err := k.Step(s)
		if err != nil {
			t.Fatalf("%v: %v", dt, err)
		}
		for i := 0; i < 3*2*3; i++ { // slots 0 and 1: nobody's
			if math.Float64bits(out.State[i]) != math.Float64bits(s.State[i]) {
				t.Fatalf("%v: state[%d] = %g, sent %g", dt, i, out.State[i], s.State[i])
			}
		}
	}
}

func TestSpecFromEnv(t *testing.T) {
	t.Setenv("SSMK_BRIDGE", "mamba2_upstream checkout=/x")
	t.Setenv("SSMK_BRIDGE_TIMEOUT", "12")
	s, ok, err := SpecFromEnv()
	if !ok || err != nil || s.Adapter != "mamba2_upstream" || len(s.Args) != 1 || s.Timeout != 12*time.Second {
		t.Errorf("SpecFromEnv() = %+v, %t, %v", s, ok, err)
	}
	t.Setenv("SSMK_BRIDGE", "x checkout")
	if _, _, err := SpecFromEnv(); err == nil || !strings.Contains(err.Error(), "key=value") {
		t.Errorf("a bare argument: err = %v, want it named", err)
	}
	t.Setenv("SSMK_BRIDGE", "bridge/python/adapters/faulty.py") // from the repository's root
	if s, _, err := SpecFromEnv(); err != nil || !filepath.IsAbs(s.Adapter) {
		t.Errorf("a path from the root: %+v, %v", s, err)
	}
	t.Setenv("SSMK_BRIDGE", "nowhere/adapter.py")
	if _, _, err := SpecFromEnv(); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("a missing adapter file: err = %v", err)
	}
	t.Setenv("SSMK_BRIDGE", "x")
	t.Setenv("SSMK_BRIDGE_TIMEOUT", "-1")
	if _, _, err := SpecFromEnv(); err == nil || !strings.Contains(err.Error(), "SSMK_BRIDGE_TIMEOUT") {
		t.Errorf("a negative timeout: err = %v", err)
	}
}

// TestWorkerProfile: SSMK_BRIDGE_PROFILE=DIR leaves the worker's cProfile
// statistics in DIR when it exits, naming the adapter's operation.
func TestWorkerProfile(t *testing.T) {
	needPython(t)
	dir := t.TempDir()
	w, err := Start(Spec{Adapter: "numpy_ssd", Env: []string{"SSMK_BRIDGE_PROFILE=" + dir}, Timeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	k := &SSD{W: w}
	if _, err := k.Prefill(smallProblem()); err != nil {
		t.Fatal(err)
	}
	w.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "worker-*.prof"))
	if len(files) != 1 {
		t.Fatalf("profiles %v, want one worker-PID.prof", files)
	}
	out, err := exec.Command(FindPython(), "-c", "import pstats, sys; pstats.Stats(sys.argv[1]).print_stats('ssd_prefill')", files[0]).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ssd_prefill") {
		t.Fatalf("the profile does not name ssd_prefill: %v\n%s", err, out)
	}
}

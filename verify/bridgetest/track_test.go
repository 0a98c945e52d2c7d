package bridgetest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"ssmverify/bridge"
	"ssmverify/mamba2"
	"ssmverify/report"
	"ssmverify/ssm"
)

// TestTrackCheckpointsSubtests: a tracked subtest's verdict is on disk
// when it ends, before its parent ends (a run cut inside the parent keeps
// it).
func TestTrackCheckpointsSubtests(t *testing.T) {
	dir := t.TempDir()
	s := &Suite{Rep: report.New(report.LibraryInfo{Path: "x"}), dir: dir}
	t.Run("parent", func(t *testing.T) {
		t.Run("first", func(t *testing.T) { s.Track(t) })
		r, err := report.Load(filepath.Join(dir, "report.json"))
		if err != nil {
			t.Fatalf("no checkpoint after the first subtest: %v", err)
		}
		if len(r.Tests) != 1 || r.Tests[0].Name != "TestTrackCheckpointsSubtests/parent/first" || r.Tests[0].Outcome != report.Passed {
			t.Errorf("checkpointed %+v, want the first subtest passed", r.Tests)
		}
	})
}

// TestTrackCountsKernelCalls: a top-level test's verdict carries the calls
// of the kernel under test it made, its own workers' (Another) with the
// suite's, and none of a worker of another adapter (the numpy path's
// planted slips): zero for a test that launched nothing of it.
func TestTrackCountsKernelCalls(t *testing.T) {
	if err := exec.Command(bridge.FindPython(), "-c", "import numpy").Run(); err != nil {
		if os.Getenv("SSMK_REQUIRE_NUMPY") != "" {
			t.Fatalf("SSMK_REQUIRE_NUMPY is set but no python3 imports numpy: %v", err)
		}
		t.Skip("no python3 with NumPy")
	}
	spec := bridge.Spec{Adapter: "numpy_ssd"}
	w, err := bridge.Start(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s := &Suite{W: w, Spec: spec, Rep: report.New(report.LibraryInfo{Path: "x"})}
	p := mamba2.Generate(mamba2.Options{Batch: 1, Seqlen: 8, Heads: 2, Headdim: 2, Groups: 1, Dstate: 2, Chunk: 4, DType: ssm.F32, StateDType: ssm.F32}, 1)
	other, err := bridge.Start(bridge.Spec{Adapter: "numpy_ssd", Args: []string{"slip=no-reset"}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, c := range []struct {
		name string
		run  func(t *testing.T)
		want int64
	}{
		{"suite-and-another", func(t *testing.T) {
			for _, k := range []*bridge.SSD{{W: w}, {W: w}, {W: s.Another(t)}} {
				if _, err := k.Prefill(p); err != nil {
					t.Fatal(err)
				}
			}
		}, 3},
		{"another-adapter-only", func(t *testing.T) {
			if _, err := (&bridge.SSD{W: other}).Prefill(p); err != nil {
				t.Fatal(err)
			}
		}, 0},
	} {
		// a test of its own: only a top-level test's verdict is counted,
		// so the verdict is read from the report once t has ended
		s.Rep = report.New(report.LibraryInfo{Path: "x"})
		inner := testing.RunTests(func(string, string) (bool, error) { return true, nil }, []testing.InternalTest{{Name: "Test" + c.name, F: func(t *testing.T) {
			s.Track(t)
			c.run(t)
		}}})
		if !inner {
			t.Fatalf("%s: the inner test failed", c.name)
		}
		var got *int64
		for _, v := range s.Rep.Tests {
			if v.Name == "Test"+c.name {
				got = v.KernelCalls
			}
		}
		if got == nil || *got != c.want {
			t.Errorf("%s: kernel calls %v, want %d", c.name, got, c.want)
		}
	}
}

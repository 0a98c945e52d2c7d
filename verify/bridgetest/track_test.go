package bridgetest

import (
	"path/filepath"
	"testing"

	"ssmverify/report"
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

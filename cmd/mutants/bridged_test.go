package main

import (
	"strings"
	"testing"
)

// TestPyCandidates: the adapter's mutations are of its algorithm: none
// turns on or sits inside one of its planted slips, every one changes its
// line, and the operators reach the paths of the chunked algorithm (the
// decay, the quadratic form, the state passed on, the final states).
func TestPyCandidates(t *testing.T) {
	cands, err := pyCandidates("../..", pySources["mamba2"])
	if err != nil {
		t.Fatal(err)
	}
	if len(cands) < 100 {
		t.Fatalf("%d candidates, want at least 100", len(cands))
	}
	paths := map[string]int{}
	for _, g := range cands {
		if g.Before == g.After {
			t.Errorf("line %d: %s changes nothing", g.Line, g.Op)
		}
		if strings.Count(g.After, `ARGS["slip"] == "`) != strings.Count(g.Before, `ARGS["slip"] == "`) ||
			strings.Count(g.After, `ARGS["slip"] != "`) != strings.Count(g.Before, `ARGS["slip"] != "`) {
			t.Errorf("line %d: %s turns a planted slip's switch: %q", g.Line, g.Op, g.After)
		}
		if strings.Contains(g.Before, "np.broadcast_to(np.tril") || strings.Contains(g.Before, `tag = "bf16"`) {
			t.Errorf("line %d: inside a planted slip's branch: %q", g.Line, g.Before)
		}
		path, _ := bridgedGradeOf("mamba2", g, "")
		paths[path]++
	}
	t.Logf("%d candidates by path: %v", len(cands), paths)
	for _, p := range []string{"the cumulative decay (every path)", "the chunk's quadratic form", "the entering state's output", "the final states", "the state passed between chunks"} {
		if paths[p] == 0 {
			t.Errorf("no mutation of %s (paths %v)", p, paths)
		}
	}
}

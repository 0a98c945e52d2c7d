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

// TestSampleInParts: a population judged in parts is one sample: the
// first n and the next n of a seed are the first 2n, without overlap.
func TestSampleInParts(t *testing.T) {
	cands, err := pyCandidates("../..", pySources["mamba2"])
	if err != nil {
		t.Fatal(err)
	}
	ids := func(gs []Generated) map[int]bool {
		m := map[int]bool{}
		for _, g := range gs {
			m[g.ID] = true
		}
		return m
	}
	a, b, whole := ids(sampleFrom(cands, nil, 0, 20, 9)), ids(sampleFrom(cands, nil, 20, 20, 9)), ids(sample(cands, 40, 9))
	for id := range b {
		if a[id] {
			t.Errorf("mutant %d in both parts", id)
		}
		a[id] = true
	}
	if len(a) != 40 || len(whole) != 40 {
		t.Fatalf("parts %d, whole %d", len(a), len(whole))
	}
	for id := range whole {
		if !a[id] {
			t.Errorf("mutant %d of the whole in neither part", id)
		}
	}
}

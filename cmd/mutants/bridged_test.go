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
		if before, after := slipsAsArgs(g.Before), slipsAsArgs(g.After); strings.Count(after, `ARGS["slip"] == "`) != strings.Count(before, `ARGS["slip"] == "`) ||
			strings.Count(after, `ARGS["slip"] != "`) != strings.Count(before, `ARGS["slip"] != "`) {
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

// TestNamesCause: a backward's tag names a cause where one of its
// gradients has a relation or a location, not where every one is "none";
// a Mamba-2 backward mutant is graded by its gradients' parts alone, never
// by the unmutated kernel's forward finding they were judged past.
func TestNamesCause(t *testing.T) {
	for tag, want := range map[string]bool{
		"bwd:dx:none":                              false,
		"bwd:dx:none+bwd:dB:none":                  false,
		"bwd:dx:none+bwd:dB:in(heads-after-first)": true,
		"bwd:dA:lacks(Δ)":                          true,
		"bwd:missing":                              false,
		"fwd:varlen:no-reset+bwd:dx:none":          true,
		"fwd:none":                                 false,
		"op:in-chunk:unrelated":                    false,
	} {
		if got := namesCause(tag); got != want {
			t.Errorf("namesCause(%q) = %v, want %v", tag, got, want)
		}
	}
	g := Generated{File: "mamba_ssm/ops/triton/ssd_bmm.py", Func: "_bmm_chunk_bwd_kernel", Before: "x"}
	for tag, want := range map[string][2]bool{ // correct, related
		"fwd:narrow:tf32+bwd:dx:none":                  {false, false},
		"fwd:varlen:seq-states-no-init+bwd:dB:none":    {false, false},
		"fwd:narrow:tf32+bwd:dB:in(chunks(1 2))":       {true, false},
		"fwd:narrow:tf32+bwd:dC:offset(chunks)":        {true, true},
		"bwd:dx:offset(rows)+bwd:dB:in(heads(0 2))":    {true, false},
		"bwd:dx:in(rows-after-first)":                  {false, false}, // named, not at dB/dC's kernel
		"bwd:dx:lacks(Δ)":                              {false, false},
		"bwd:dC:wrong-group(+1)+bwd:dx:offset(chunks)": {true, true},
	} {
		r := bridgedResult{Generated: g, Tag: tag, Tags: map[string]int{tag: 1}}
		r.grade("mamba2-backward")
		if r.Correct != want[0] || r.Related != want[1] || r.Named != (len(gradientParts(tag)) > 0) {
			t.Errorf("%q graded named %v correct %v related %v, want correct %v related %v", tag, r.Named, r.Correct, r.Related, want[0], want[1])
		}
	}
}

// TestEveryPyCandidateHasARegion: every line the operators mutate in the
// numpy paths is mapped to the path it computes (pyRegions), so that an
// edit of an adapter that renames a line is caught here, not as a
// population graded wrong.
func TestEveryPyCandidateHasARegion(t *testing.T) {
	for family, src := range pySources {
		cands, err := pyCandidates("../..", src)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range cands {
			if path, _ := bridgedGradeOf(family, g, ""); path == "" {
				t.Errorf("%s %s:%d: no region for %q", family, g.File, g.Line, g.Before)
			}
		}
	}
}

package main

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"ssmverify/report"
	"ssmverify/ssm"
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

// A population judged in parts reads the unmutated kernel's verdicts from
// the first part's journal, and refuses a journal without them.
func TestLoadBaseline(t *testing.T) {
	dir := t.TempDir()
	ok := filepath.Join(dir, "generated-mamba2.jsonl")
	journal := `{"candidates":1095,"family":"mamba2","seed":20261202}
{"baseline_failing":{"TestMamba2Prefill/fp32/x":"narrow:tf32","TestMamba2Boundaries/y":""},"baseline_idle":["TestMamba2ScaleMachinery"]}
{"id":35,"outcome":"killed"}
`
	if err := os.WriteFile(ok, []byte(journal), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := loadBaseline(ok)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.failed) != 2 || b.failed["TestMamba2Prefill/fp32/x"] != "narrow:tf32" {
		t.Fatalf("baseline %v, want the journal's two subtests", b.failed)
	}
	if len(b.idle) != 1 || b.idle[0] != "TestMamba2ScaleMachinery" {
		t.Fatalf("idle %v, want the journal's one", b.idle)
	}
	own := b.against(map[string]string{"TestMamba2Prefill/fp32/x": "narrow:tf32", "TestMamba2Boundaries/y": "op:far:zero", "TestMamba2Step/z": ""})
	if len(own) != 2 || own["TestMamba2Boundaries/y"] != "op:far:zero" {
		t.Fatalf("the mutant's own subtests %v, want the changed diagnosis and the new failure", own)
	}
	bad := filepath.Join(dir, "part.jsonl")
	if err := os.WriteFile(bad, []byte(`{"family":"mamba2"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadBaseline(bad); err == nil || !strings.Contains(err.Error(), "baseline_failing") {
		t.Fatalf("a journal without the baseline: error %v, want one naming baseline_failing", err)
	}
	if _, err := loadBaseline(filepath.Join(dir, "absent.jsonl")); err == nil {
		t.Fatal("a missing journal: no error")
	}
}

// The unmutated kernel judged in shards gives the one run's verdicts: each
// top-level test runs in exactly one shard, and the failing leaves of every
// shard are merged. A fake suite binary stands in for verify/mamba2's.
func TestBaselineInShards(t *testing.T) {
	root := t.TempDir()
	ran := filepath.Join(root, "ran.txt")
	bin := filepath.Join(root, "suite.test")
	script := `#!/bin/sh
case "$*" in *-test.list*) printf 'TestA\nTestB\nTestC\nFuzzD\nBenchmarkE\nok\n'; exit 0;; esac
run="" rep=""
while [ $# -gt 0 ]; do case "$1" in -test.run) run=$2; shift;; -report) rep=$2; shift;; esac; shift; done
tests=""
for t in TestA TestB TestC FuzzD; do
	if [ -z "$run" ] || echo "$t" | grep -Eq "$run"; then
		echo "$t" >> ` + ran + `
		calls=5; [ $t = TestA ] && calls=0
		tests="$tests${tests:+,}{\"name\":\"$t\",\"passed\":true,\"outcome\":\"pass\",\"kernel_calls\":$calls}"
		case $t in
		TestB) echo "--- FAIL: TestB (0.00s)"; echo "    --- FAIL: TestB/x (0.00s)";;
		FuzzD) echo "--- FAIL: FuzzD (0.00s)"; echo "    --- FAIL: FuzzD/seed#0 (0.00s)";;
		*) echo "--- PASS: $t (0.00s)";;
		esac
	fi
done
mkdir -p "$rep" && echo "{\"schema\":\"ssmverify.report/v2\",\"tests\":[$tests]}" > "$rep/report.json"
echo FAIL
`
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "verify", "mamba2"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	for _, shards := range []int{1, 3, 8} {
		_ = os.Remove(ran)
		b, err := judgeBaseline("mamba2", filepath.Join(root, "out"), bin, root, shards)
		if err != nil {
			t.Fatalf("%d shards: %v", shards, err)
		}
		if len(b.failed) != 2 || b.failed["TestB/x"] != "" || b.failed["FuzzD/seed#0"] != "" {
			t.Fatalf("%d shards: baseline %v, want TestB/x and FuzzD/seed#0", shards, b.failed)
		}
		log, _ := os.ReadFile(ran)
		if got := strings.Fields(string(log)); len(got) != 4 {
			t.Fatalf("%d shards: the tests ran %v, want each of the four once", shards, got)
		}
		// TestA made no kernel call: every mutant's run leaves it out,
		// as it leaves out the timing tests
		if got := strings.Join(b.skipArgs(), " "); got != `-test.skip ^(Test\w*Timing|TestA)$` {
			t.Errorf("%d shards: the mutants' skip %q, want TestA's", shards, got)
		}
	}
	if got := dealTests([]string{"a", "b", "c"}, 8); len(got) != 3 {
		t.Fatalf("three tests dealt among 8 shards: %d parts, want 3 (none empty)", len(got))
	}
}

// A population judged in parts: a later part leaves out what an earlier
// judged (-skip-judged), and the parts are graded as one (-regrade
// J1,J2), a mutant judged in both by the later part, one a part did not
// reach by the part that did.
func TestPopulationInParts(t *testing.T) {
	dir := t.TempDir()
	p1, p2 := filepath.Join(dir, "generated-mamba2.jsonl"), filepath.Join(dir, "part2.jsonl")
	head := `{"candidates":1095,"family":"mamba2","seed":20261202}`
	write := func(path string, lines ...string) {
		if err := os.WriteFile(path, []byte(strings.Join(append([]string{head}, lines...), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(p1, `{"baseline_failing":{"TestX/y":""}}`,
		`{"id":11,"file":"f.py","line":3,"outcome":"survived","seconds":40}`,
		`{"id":12,"file":"f.py","line":4,"outcome":"not run","seconds":0}`,
		`{"id":13,"file":"f.py","line":5,"outcome":"stillborn","seconds":20}`)
	write(p2, `{"id":12,"file":"f.py","line":4,"outcome":"stillborn","seconds":21}`,
		`{"id":13,"file":"f.py","line":5,"outcome":"survived","seconds":30}`,
		`{"id":11,"file":"f.py","line":3,"outcome":"not run","seconds":0}`)
	done, err := judgedIn([]string{p1})
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != 2 || !done[11] || !done[13] || done[12] {
		t.Fatalf("judged in part 1: %v, want 11 and 13 (12 was not run)", done)
	}
	if err := regradeParts([]string{p1, p2}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "generated-mamba2-parts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var merged struct {
		Mutants []bridgedResult `json:"mutants"`
	}
	if err := json.Unmarshal(b, &merged); err != nil {
		t.Fatal(err)
	}
	want := map[int]Outcome{11: Survived, 12: Stillborn, 13: Survived}
	if len(merged.Mutants) != 3 {
		t.Fatalf("merged %d mutants, want 3", len(merged.Mutants))
	}
	for _, r := range merged.Mutants {
		if r.Outcome != want[r.ID] {
			t.Errorf("mutant %d: %s, want %s", r.ID, r.Outcome, want[r.ID])
		}
	}
	if err := regradeParts([]string{p1, filepath.Join(dir, "x.json")}); err == nil {
		t.Error("a part that is not a .jsonl journal: no error")
	}
}

// A planted slip's branch is left out of the population whole, a comment
// after its colon included: its lines run only with the slip planted, so
// a mutation there is equivalent (numpy_mamba3's past-size branch was
// sampled once as mutant 139, 2026-12-04).
func TestPySlipBranchSkipped(t *testing.T) {
	dir := t.TempDir()
	src := `def _common(y, step):
    y = y + 1
    if ARGS["slip"] == "past-size":  # the outputs from 512 on corrupted
        if step:
            y[512:] += 1
    elif ARGS["mode"] == "sequential":
        y = y * 2
    return y - 1
`
	if err := os.WriteFile(filepath.Join(dir, "a.py"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cands, err := pyCandidates(dir, pySource{file: "a.py", funcs: []string{"_common"}})
	if err != nil {
		t.Fatal(err)
	}
	lines := map[int]bool{}
	for _, g := range cands {
		lines[g.Line] = true
	}
	for _, n := range []int{3, 4, 5, 6, 7} {
		if lines[n] {
			t.Errorf("line %d, inside a planted slip's or mode's branch, is mutated", n)
		}
	}
	if !lines[2] || !lines[8] {
		t.Errorf("the lines outside the branches are not mutated (lines %v)", lines)
	}
}

// Triton's compile errors as a suite's log shows them (upstream e9594ce's
// angle kernel refusing a head dimension without pairs to rotate, and a
// mutant's pointer divided by a stride), each error's place and message
// the signature the unmutated kernel's are matched by.
const (
	refusalOfTheKernel = `    forward_test.go:161: mamba3_fwd: bridge: mamba3_fwd: error: CompilationError: at 50:16:
                seq_offset = 0
        
            dim_range = tl.arange(0, BLOCK_D)
                        ^
        arange's end argument must be greater than the start argument
`
	refusalOfTheMutant = `    prefill_test.go:88: ssd_prefill: bridge: ssd_prefill: error: CompilationError: at 17:4:
            pid_h = tl.program_id(axis=2)
            x_ptr += pid_b / stride_x_batch + pid_c * chunk_size * stride_x_seqlen + pid_h * stride_x_head
            ^
        IncompatibleTypeErrorImpl('invalid operands of type pointer<fp32> and triton.language.float32')
`
)

func TestTritonRefusals(t *testing.T) {
	for _, c := range []struct {
		name, log string
		want      []string
	}{
		{"the kernel's", "=== RUN   TestMamba3Forward\n" + refusalOfTheKernel + "--- FAIL: TestMamba3Forward\n",
			[]string{"at 50:16: arange's end argument must be greater than the start argument"}},
		{"twice, one signature", refusalOfTheKernel + refusalOfTheKernel,
			[]string{"at 50:16: arange's end argument must be greater than the start argument"}},
		{"two", refusalOfTheKernel + refusalOfTheMutant, []string{
			"at 17:4: IncompatibleTypeErrorImpl('invalid operands of type pointer<fp32> and triton.language.float32')",
			"at 50:16: arange's end argument must be greater than the start argument"}},
		{"without its place", "error: triton.compiler.errors.CompileTimeAssertionFailure\n", []string{"a compile error without its place"}},
		{"none", "--- FAIL: TestMamba2Prefill\n    ratio 3.2 at y[4]\n", nil},
	} {
		got := slices.Sorted(maps.Keys(tritonRefusals([]byte(c.log))))
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: refusals %q, want %q", c.name, got, c.want)
		}
	}
}

// A mutant is stillborn by a compile error the unmutated kernel does not
// raise, never by one it does (upstream's Mamba-3 kernels refuse some of the
// suite's shapes unmutated: a mutant that meets the same refusals and
// computes wrong numbers elsewhere is killed, not stillborn), and a mutant's
// diagnosis is graded without the finding the unmutated kernel's diagnosis
// of the same subtest led with.
func TestGradeRunAgainstBaseline(t *testing.T) {
	dir := t.TempDir()
	rep := filepath.Join(dir, "report.json")
	r := report.New(report.LibraryInfo{})
	r.AddKernelDiagnosis("TestMamba3Forward/bf16/no_rotation", "mamba3_fwd", ssm.BF16, ssm.BF16,
		report.Finding{Tag: "raises", Cause: "the kernel raised"})
	r.AddKernelDiagnosis("TestMamba3Backward/bf16/plain", "mamba3_bwd", ssm.BF16, ssm.BF16,
		report.Finding{Tag: "fwd:m3:angle-stored-bf16+bwd:dK:none", Cause: "dK wrong, no relation"})
	r.AddKernelDiagnosis("TestMamba3Boundaries/bf16/starts-at-last", "mamba3_fwd", ssm.BF16, ssm.BF16,
		report.Finding{Tag: "op:state-in-chunk:passed-state-decayed-twice", Cause: "the passed state decayed twice"})
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	base := &baseline{
		failed:   map[string]string{"TestMamba3Forward/bf16/no_rotation": "raises", "TestMamba3Backward/bf16/plain": "fwd:m3:angle-stored-bf16"},
		refusals: slices.Sorted(maps.Keys(tritonRefusals([]byte(refusalOfTheKernel)))),
	}
	g := Generated{ID: 201, File: "mamba_ssm/ops/triton/mamba3/mamba3_siso_fwd.py", Line: 220, Op: "plus-to-minus", Func: "mamba3_siso_fwd_kernel"}
	killed := "=== RUN   TestMamba3Forward/bf16/no_rotation\n" + refusalOfTheKernel +
		"    --- FAIL: TestMamba3Forward/bf16/no_rotation (0.04s)\n" +
		"    --- FAIL: TestMamba3Backward/bf16/plain (9.75s)\n" +
		"    --- FAIL: TestMamba3Boundaries/bf16/starts-at-last (0.34s)\nFAIL\n"
	got := gradeRun("mamba3", g, []byte(killed), true, rep, true, base)
	if got.Outcome != Killed || !slices.Equal(got.KilledBy, []string{"TestMamba3Backward", "TestMamba3Boundaries"}) {
		t.Fatalf("a mutant meeting the kernel's own refusal: %s by %v, want killed by the two tests it changed", got.Outcome, got.KilledBy)
	}
	if _, ok := got.Tags["fwd:m3:angle-stored-bf16+bwd:dK:none"]; ok || got.Tags["bwd:dK:none"] != 1 {
		t.Fatalf("tags %v: want the backward's own part, without the unmutated kernel's forward finding", got.Tags)
	}
	if got.Tag != "op:state-in-chunk:passed-state-decayed-twice" {
		t.Fatalf("diagnosis %q, want the one that names a cause", got.Tag)
	}
	if s := gradeRun("mamba3", g, []byte(killed+refusalOfTheMutant), true, rep, true, base); s.Outcome != Stillborn {
		t.Fatalf("a compile error of the mutant's own: %s, want stillborn", s.Outcome)
	}
	if s := gradeRun("mamba3", g, []byte(killed), true, rep, true, nil); s.Outcome != Stillborn {
		t.Fatalf("any compile error without a baseline: %s, want stillborn", s.Outcome)
	}
	if s := gradeRun("mamba3", g, []byte(killed), true, rep, false, base); s.Outcome == Stillborn {
		t.Fatal("the numpy path (no Triton): stillborn by a compile error's text")
	}
	// a mutant failing only a timing test computes the unmutated numbers:
	// judged several at once on one GPU, its times are the others' too
	slow := "=== RUN   TestMamba2Timing\n    timing_test.go:96: prefill, half the tokens takes 10.7× the full scan's time\n--- FAIL: TestMamba2Timing (1.52s)\nFAIL\n"
	for _, b := range []*baseline{base, nil} {
		if s := gradeRun("mamba2", g, []byte(slow), true, rep, true, b); s.Outcome != Survived || len(s.KilledBy) != 0 {
			t.Errorf("baseline %v: failing TestMamba2Timing alone: %s by %v, want survived", b != nil, s.Outcome, s.KilledBy)
		}
	}
	if s := gradeRun("mamba2", g, []byte(slow+"--- FAIL: TestMamba2Prefill (0.1s)\n"), true, rep, true, nil); s.Outcome != Killed || !slices.Equal(s.KilledBy, []string{"TestMamba2Prefill"}) {
		t.Errorf("a timing test and a numeric one: %s by %v, want killed by the numeric one", s.Outcome, s.KilledBy)
	}
	for _, c := range []struct{ tag, was, want string }{
		{"fwd:narrow:tf32+bwd:dB:offset(steps)", "fwd:narrow:tf32", "bwd:dB:offset(steps)"},
		{"fwd:narrow:tf32", "", "fwd:narrow:tf32"},
		{"op:in-chunk+next-chunk:decay", "op:in-chunk", "op:in-chunk+next-chunk:decay"},
		{"narrow:tf32+dt:no-limit", "narrow:tf32+dt", "narrow:tf32+dt:no-limit"},
	} {
		if got := beyondBaseline(c.tag, c.was); got != c.want {
			t.Errorf("beyondBaseline(%q, %q) = %q, want %q", c.tag, c.was, got, c.want)
		}
	}
}

// A part judged before the unmutated kernel's refusals were recorded is
// graded again from the logs it left: its baseline's refusals read from
// its baseline/ logs (or -baseline-logs), the mutant once stillborn by the
// kernel's own refusal then killed.
func TestRegradeRuns(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "generated-mamba3")
	g := Generated{ID: 201, File: "mamba_ssm/ops/triton/mamba3/mamba3_siso_fwd.py", Line: 220, Op: "plus-to-minus", Func: "mamba3_siso_fwd_kernel"}
	old, _ := json.Marshal(bridgedResult{Generated: g, Outcome: Stillborn, Seconds: 68})
	journal := `{"candidates":696,"family":"mamba3","seed":20261202}
{"baseline_failing":{"TestMamba3Forward/bf16/no_rotation":"raises"},"baseline_idle":[]}
` + string(old) + "\n"
	r := report.New(report.LibraryInfo{})
	r.AddKernelDiagnosis("TestMamba3Forward/bf16/no_rotation", "mamba3_fwd", ssm.BF16, ssm.BF16, report.Finding{Tag: "raises"})
	r.AddKernelDiagnosis("TestMamba3Boundaries/bf16/starts-at-last", "mamba3_fwd", ssm.BF16, ssm.BF16,
		report.Finding{Tag: "op:state-in-chunk:passed-state-decayed-twice"})
	log := refusalOfTheKernel + "    --- FAIL: TestMamba3Forward/bf16/no_rotation (0.04s)\n    --- FAIL: TestMamba3Boundaries/bf16/starts-at-last (0.34s)\nFAIL\n"
	for path, text := range map[string]string{
		filepath.Join(dir, "generated-mamba3.jsonl"): journal,
		filepath.Join(runs, "g201", "suite.log"):     log,
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Write(filepath.Join(runs, "g201", "report")); err != nil {
		t.Fatal(err)
	}
	if err := regradeRuns([]string{dir}, ""); err == nil || !strings.Contains(err.Error(), "-baseline-logs") {
		t.Fatalf("no refusals recorded and no baseline logs: error %v, want one naming -baseline-logs", err)
	}
	base := filepath.Join(dir, "earlier-baseline")
	if err := os.MkdirAll(base, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(base, "suite-2.log"), []byte(refusalOfTheKernel), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := regradeRuns([]string{dir}, base); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "generated-mamba3-regraded.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var got bridgedResult
	if len(lines) != 3 || json.Unmarshal([]byte(lines[2]), &got) != nil {
		t.Fatalf("regraded journal:\n%s\nwant its header, the baseline and the one mutant", b)
	}
	if got.Outcome != Killed || got.Tag != "op:state-in-chunk:passed-state-decayed-twice" || got.Seconds != 68 {
		t.Fatalf("regraded %+v: want killed, diagnosed by its own finding, its time kept", got)
	}
	if !strings.Contains(lines[1], `"baseline_refusals":["at 50:16:`) {
		t.Fatalf("the regraded journal's baseline %s: want the refusals it was graded against", lines[1])
	}
}

package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"ssmverify/report"
)

// The generated population of a kernel launched from Python: the mutation
// operators applied mechanically to an adapter's source (the numpy path of
// Mamba-2, bridge/python/adapters/numpy_ssd.py, by default), each mutant a
// copy of the file that SSMK_BRIDGE names, judged by the whole bridged suite
// as a user runs it (every test, no stop at the first failure), its
// diagnoses read from the suite's report.json. A mutant whose file does
// not parse is stillborn; a mutant that raises is killed with the cause
// "raises" (the kernel's own exception, which names itself); the others are
// the diagnosis' test: whether it names the mutated path (pyRegions).

// pySource is one adapter file the operators mutate and the functions of it
// they mutate: the arithmetic, not the argument handling.
type pySource struct {
	file  string
	funcs []string
}

var pySources = map[string]pySource{
	"mamba2": {"bridge/python/adapters/numpy_ssd.py", []string{"_delta", "_state_round", "ssd_prefill", "_finish"}},
}

// pyOperators are the classic operators for Python: those of the C++
// population where the syntax is shared, and Python's own (e^x as 2^x, a
// strict triangle, an assignment negated).
var pyOperators = []operator{
	{"plus-to-minus", regexp.MustCompile(` \+ `), " - ", 0},
	{"minus-to-plus", regexp.MustCompile(` - `), " + ", 0},
	{"times-to-divide", regexp.MustCompile(` \* `), " / ", 0},
	{"less-equal-to-less", regexp.MustCompile(` <= `), " < ", 0},
	{"equal-to-not-equal", regexp.MustCompile(` == `), " != ", 0},
	{"not-equal-to-equal", regexp.MustCompile(` != `), " == ", 0},
	{"accumulate-to-assign", regexp.MustCompile(` \+= `), " = ", 0},
	{"drop-factor", regexp.MustCompile(` \* [A-Za-z_][A-Za-z_0-9.]*(\[[^\]]*\])?`), "", 0},
	{"exp-to-exp2", regexp.MustCompile(`\bnp\.exp\(`), "np.exp2(", 0},
	{"strict-triangle", regexp.MustCompile(`np\.tril\(([^()]*\([^()]*\)[^()]*)\)`), "np.tril(${1}, -1)", 0},
	{"negate-assigned", regexp.MustCompile(`^(\s+[A-Za-z_][\w\[\], :]* = )(.+)$`), "${1}-(${2})", 0},
	{"index-minus-one", regexp.MustCompile(`\[(-?[0-9]+):`), "", -1},
	{"constant-plus-one", regexp.MustCompile(`\b([0-9])\b([^.0-9eE]|$)`), "", 1},
}

var pyDef = regexp.MustCompile(`^def ([A-Za-z_]\w*)\(`)

// The adapter's own planted slips (ARGS["slip"], for the suite's tests of
// its diagnosis) and its modes (ARGS["mode"]: the sequential recurrence)
// are not the algorithm: a mutation of their switch turns on a catalogued
// slip or the other correct mode, and one inside a branch taken only
// under a slip changes nothing. Both are left out of the population.
var (
	pySlipTest   = regexp.MustCompile(`\(?ARGS\["(slip|mode)"\] (==|!=) "[^"]*"\)?`)
	pySlipBranch = regexp.MustCompile(`^(\s*)(if|elif) .*ARGS\["(slip|mode)"\] == "[^"]*"[^:]*:\s*$`)
)

func indentOf(line string) int { return len(line) - len(strings.TrimLeft(line, " ")) }

// pyCandidates lists every mechanical mutation of the source, in order.
func pyCandidates(root string, src pySource) ([]Generated, error) {
	b, err := os.ReadFile(filepath.Join(root, src.file))
	if err != nil {
		return nil, err
	}
	var out []Generated
	fn := ""
	skipBelow := -1 // the indentation of a slip's branch being skipped
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := pyDef.FindStringSubmatch(line); m != nil {
			fn = m[1]
			continue
		}
		if strings.TrimSpace(line) != "" {
			if skipBelow >= 0 && indentOf(line) > skipBelow {
				continue
			}
			skipBelow = -1
			if m := pySlipBranch.FindStringSubmatch(line); m != nil {
				skipBelow = len(m[1])
				continue
			}
		}
		if len(line) > 0 && line[0] != ' ' {
			fn = ""
		}
		trim := strings.TrimSpace(line)
		if fn == "" || !slices.Contains(src.funcs, fn) || trim == "" || strings.HasPrefix(trim, "#") || strings.HasPrefix(trim, "raise ") || strings.Contains(line, "Unsupported(") {
			continue
		}
		code := line
		if i := strings.Index(code, "  #"); i >= 0 {
			code = code[:i]
		}
		for _, m := range mutate(pyOperators, line, code, pySlipTest.FindAllStringIndex(code, -1)) {
			out = append(out, Generated{File: src.file, Line: n, Func: fn, Op: m.op, Before: line, After: m.after})
		}
	}
	return out, nil
}

// pyRegion maps the lines of an adapter's algorithm to the tags that name
// the path they implement: the regions of the kernel's operator they feed
// (diagnose's op:REGIONS:RELATION tags) or the catalogue's names of the
// same path. The map follows the chunked algorithm's structure, line by
// line of the source, not any mutant.
type pyRegion struct {
	line *regexp.Regexp // the unmutated line
	tags *regexp.Regexp // a diagnosis tag that names its path
	path string
}

var pyRegions = map[string][]pyRegion{"mamba2": {
	{regexp.MustCompile(`^\s*(v = |if softplus|elif softplus|lo, hi|if ARGS\["slip"\] != "no-dt-limit"|v = np\.minimum)|_delta\(|def _limits`), regexp.MustCompile(`^dt:|^op:`), "Δ (bias, softplus, clamp)"},
	{regexp.MustCompile(`dA = |cs = np\.cumsum`), regexp.MustCompile(`^op:|^dt:`), "the cumulative decay (every path)"},
	{regexp.MustCompile(`same = |decay = np\.exp|CB = |Lm = |yc = np\.einsum\("bhts`), regexp.MustCompile(`^op:(diagonal|in-chunk|cross-sequence|upper)(\+(diagonal|in-chunk|cross-sequence|upper))*:`), "the chunk's quadratic form"},
	{regexp.MustCompile(`from_prev = |yc \+= np\.exp\(cs\)`), regexp.MustCompile(`^op:[^:]*(next-chunk|far|initial-state|cross-sequence)|^varlen:|^init-state:`), "the entering state's output"},
	{regexp.MustCompile(`if t \+ 1 == L or seq|s_id = seq|k = t - c0|m = \(sq\[bb|w = np\.exp\(cs\[bb|st = np\.einsum\("sh,|skip = |if \(s_id == prev_seq|st = st \+ np\.exp\(cs\[bb|idx = s_id|seq_states\[idx\]|final = `), regexp.MustCompile(`^op:[^:]*state|^varlen:|^init-state:`), "the final states"},
	{regexp.MustCompile(`last = sq\[|m = \(sq == last|m = np\.ones_like|w = np\.exp\(cs\[:, -1:|st = np\.einsum\("bsh|keep = |st = st \+ \(np\.exp|prev = _state_round\(st|prev_seq = last`), regexp.MustCompile(`^op:[^:]*(next-chunk|far|state-passed|initial-state|state-initial)|^init-state:|^varlen:`), "the state passed between chunks"},
	{regexp.MustCompile(`prev = np\.zeros|prev_seq = np\.zeros`), regexp.MustCompile(`^op:[^:]*(initial-state|state-initial)|^init-state:`), "the initial state"},
	{regexp.MustCompile(`heads_group = |Bh, Ch = `), regexp.MustCompile(`^groups:|^op:`), "heads to groups"},
	{regexp.MustCompile(`seq\[:, cu\[i\]|nseq = |seq = np\.zeros`), regexp.MustCompile(`^varlen:|^op:[^:]*(cross-sequence|state)`), "the sequences' boundaries"},
	{regexp.MustCompile(`y = y \+ D|if D is not None`), regexp.MustCompile(`^no-D|^op:diagonal:`), "the skip term D"},
	{regexp.MustCompile(`y = y \* \(z|if z is not None`), regexp.MustCompile(`^no-z|^op:`), "the gate"},
	{regexp.MustCompile(`_state_round|tag = "bf16"|to_float\(tag`), regexp.MustCompile(`^narrow:|^op:`), "the state's rounding"},
	{regexp.MustCompile(`Q = int\(params|for c0 in range|c1 = min\(c0|y\[:, c0:c1\] = yc|y = np\.zeros`), regexp.MustCompile(`^op:`), "the chunking"},
	{regexp.MustCompile(`sq = seq\[|for i in range\(len\(cu\)|cu = arrays`), regexp.MustCompile(`^varlen:|^op:`), "the sequences' boundaries"},
	{regexp.MustCompile(`tag = arrays|ct = compute_dtype|stag = params|out = \{"y"|seq_states = np\.zeros`), regexp.MustCompile(`^narrow:|^op:`), "the dtypes"},
	{regexp.MustCompile(`= get\(arrays|= x\.shape|= B\.shape`), regexp.MustCompile(`^op:|^dt:|^no-D|^no-z|^init-state:|^groups:`), "the arguments"},
}}

// bridgedGradeOf says whether tag names the path of g's line. An
// accumulation made an assignment (+= as =) drops what the earlier lines
// accumulated, not the line's own term: any path the operator names is
// its path.
func bridgedGradeOf(family string, g Generated, tag string) (path string, correct bool) {
	for _, r := range pyRegions[family] {
		if r.line.MatchString(g.Before) {
			if g.Op == "accumulate-to-assign" {
				return r.path + " (and what was accumulated before it)", r.tags.MatchString(tag) || strings.HasPrefix(tag, "op:")
			}
			return r.path, r.tags.MatchString(tag)
		}
	}
	return "", false
}

// bridgedResult is one generated mutant of an adapter, judged.
type bridgedResult struct {
	Generated
	Outcome  Outcome        `json:"outcome"`
	KilledBy []string       `json:"killed_by,omitempty"`
	Tag      string         `json:"diagnosis,omitempty"`
	Tags     map[string]int `json:"diagnosis_tags,omitempty"`
	Path     string         `json:"path,omitempty"` // the mutated line's path (pyRegions)
	Raises   bool           `json:"raises"`         // the diagnosis is the kernel's own exception
	Named    bool           `json:"named"`
	Correct  bool           `json:"correct"` // one of the run's causes names the mutated path
	Strict   bool           `json:"strict"`  // its most frequent cause does
	Seconds  float64        `json:"seconds"`
}

// runBridgedGenerated samples n mutants of the family's adapter by seed and
// judges each with the whole bridged suite (the test binary suiteBin, run
// in the suite's folder), jobs at once; out/generated-FAMILY.json.
func runBridgedGenerated(family string, from, n int, seed uint64, jobs int, suiteBin string) error {
	src, ok := pySources[family]
	if !ok {
		return fmt.Errorf("-bridged %q: want one of mamba2", family)
	}
	cands, err := pyCandidates(".", src)
	if err != nil {
		return err
	}
	ms := sampleFrom(cands, nil, from, n, seed)
	fmt.Printf("generated: %d candidate mutations of %s; sampling %d with seed %d (from the seeded order's %d on); each judged by the whole suite verify/%s\n", len(cands), src.file, len(ms), seed, from, family)
	dir, _ := filepath.Abs(filepath.Join(*out, "generated-"+family))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bin, err := filepath.Abs(suiteBin)
	if err != nil {
		return err
	}
	results := make([]bridgedResult, len(ms))
	var wg sync.WaitGroup
	var mu sync.Mutex
	sem := make(chan struct{}, max(1, jobs))
	for i, g := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := judgeBridged(family, g, dir, bin)
			results[i] = r
			mu.Lock()
			fmt.Printf("[%4d] %-22s %s:%d %-12s %-9s %-40s %s\n", g.ID, g.Op, filepath.Base(g.File), g.Line, g.Func, r.Outcome, r.Tag, map[bool]string{true: "named the path", false: ""}[r.Correct])
			mu.Unlock()
		}()
	}
	wg.Wait()
	name := "generated-" + family + ".json"
	if from > 0 {
		name = fmt.Sprintf("generated-%s-from-%d.json", family, from)
	}
	return summarizeBridged(family, results, len(cands), seed, filepath.Join(*out, name))
}

// judgeBridged writes g's copy of the adapter and runs the suite on it.
func judgeBridged(family string, g Generated, dir, bin string) bridgedResult {
	t0 := time.Now()
	r := bridgedResult{Generated: g}
	mdir := filepath.Join(dir, fmt.Sprintf("g%d", g.ID))
	_ = os.RemoveAll(mdir)
	if err := os.MkdirAll(mdir, 0o755); err != nil {
		r.Outcome = RunError
		return r
	}
	b, err := os.ReadFile(g.File)
	if err != nil {
		r.Outcome = RunError
		return r
	}
	lines := strings.Split(string(b), "\n")
	lines[g.Line-1] = g.After
	file := filepath.Join(mdir, filepath.Base(g.File))
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		r.Outcome = RunError
		return r
	}
	if out, err := exec.Command("python3", "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read())", file).CombinedOutput(); err != nil {
		_ = os.WriteFile(filepath.Join(mdir, "parse.log"), out, 0o644)
		r.Outcome = Stillborn
		return r
	}
	rep := filepath.Join(mdir, "report")
	cmd := exec.Command(bin, "-test.v", "-test.timeout", "900s", "-report", rep)
	cmd.Dir = filepath.Join("verify", family)
	cmd.Env = append(os.Environ(), "SSMK_BRIDGE="+file, "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", "MKL_NUM_THREADS=1")
	log, err := cmd.CombinedOutput()
	_ = os.WriteFile(filepath.Join(mdir, "suite.log"), log, 0o644)
	failed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^--- FAIL: (\w+)`).FindAllStringSubmatch(string(log), -1) {
		failed[m[1]] = true
	}
	for t := range failed {
		r.KilledBy = append(r.KilledBy, t)
	}
	sort.Strings(r.KilledBy)
	r.Outcome, r.Seconds = classify(r.KilledBy, err, log), time.Since(t0).Seconds()
	if r.Outcome == Killed {
		r.Tags, r.Tag = bridgedDiagnoses(filepath.Join(rep, "report.json"))
		r.grade(family)
	}
	return r
}

// bridgedDiagnoses counts a report's diagnosis tags and returns the most
// frequent that names a cause (a run whose decode steps say "none" and
// whose prefills name the slip is the slip's; a kernel that raises on some
// problems and computes wrong numbers on others is diagnosed by its
// numbers), else the most frequent.
func bridgedDiagnoses(path string) (map[string]int, string) {
	rp, err := report.Load(path)
	if err != nil {
		return nil, ""
	}
	counts, best := mostFrequent(rp.Diagnoses, func(d report.Diagnosis) string { return d.Tag })
	return counts, namedOf(counts, best)
}

// namesCause reports whether a diagnosis tag names a cause.
func namesCause(tag string) bool {
	return tag != "" && tag != "none" && tag != "error" && tag != "not-reproduced" && !strings.HasSuffix(tag, ":unrelated")
}

// numericCause reports whether tag names the cause of wrong numbers (not
// a kernel's own exception or its worker's end).
func numericCause(tag string) bool { return namesCause(tag) && tag != "raises" && tag != "crash" }

// grade sets Raises, Named, Path and Correct: the run names the mutated
// path where one of its causes is a tag of that path (pyRegions).
func (r *bridgedResult) grade(family string) {
	r.Raises = r.Tag == "raises" || r.Tag == "crash"
	r.Named = numericCause(r.Tag)
	r.Path, _ = bridgedGradeOf(family, r.Generated, "")
	_, ok := bridgedGradeOf(family, r.Generated, r.Tag)
	r.Strict = ok && r.Named
	r.Correct = false
	for tag := range r.Tags {
		if _, ok := bridgedGradeOf(family, r.Generated, tag); ok && numericCause(tag) {
			r.Correct = true
		}
	}
}

// regradeBridged grades a generated-FAMILY.json's diagnoses again (after a
// change of the grading) and prints its summary.
func regradeBridged(b []byte, path string) error {
	var saved struct {
		Family     string          `json:"family"`
		Seed       uint64          `json:"seed"`
		Candidates int             `json:"candidates"`
		Mutants    []bridgedResult `json:"mutants"`
	}
	if err := json.Unmarshal(b, &saved); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for i := range saved.Mutants {
		r := &saved.Mutants[i]
		if r.Outcome == Killed {
			r.Tag = namedOf(r.Tags, r.Tag)
			r.grade(saved.Family)
		}
	}
	return summarizeBridged(saved.Family, saved.Mutants, saved.Candidates, saved.Seed, path)
}

// namedOf is bridgedDiagnoses' choice among counted tags.
func namedOf(counts map[string]int, fallback string) string {
	named := ""
	for tag, c := range counts {
		if !numericCause(tag) {
			continue
		}
		if named == "" || c > counts[named] || (c == counts[named] && tag < named) {
			named = tag
		}
	}
	if named == "" {
		return fallback
	}
	return named
}

func summarizeBridged(family string, rs []bridgedResult, candidates int, seed uint64, path string) error {
	var viable, killed, survived, raises, numeric, named, correct, strict, stillborn int
	for _, r := range rs {
		switch r.Outcome {
		case Stillborn:
			stillborn++
			continue
		case Killed:
			killed++
			if r.Raises {
				raises++
			} else {
				numeric++
				if r.Named {
					named++
				}
				if r.Correct {
					correct++
				}
				if r.Strict {
					strict++
				}
			}
		case Survived:
			survived++
		}
		viable++
	}
	b, err := json.MarshalIndent(map[string]any{"family": family, "seed": seed, "candidates": candidates, "mutants": rs}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return err
	}
	fmt.Printf("\n%d mutants of %d candidates (seed %d): %d stillborn, %d viable; %d killed (%.0f%%), %d survived\n", len(rs), candidates, seed, stillborn, viable, killed, pct(killed, viable), survived)
	fmt.Printf("killed: %d raise (the kernel's own exception, named so), %d compute wrong numbers: %d named (%.0f%%), %d with a cause at the mutated path (%.0f%%), %d whose most frequent cause is (%.0f%%)\n",
		raises, numeric, named, pct(named, numeric), correct, pct(correct, numeric), strict, pct(strict, numeric))
	fmt.Printf("matrix in %s\n", path)
	return nil
}

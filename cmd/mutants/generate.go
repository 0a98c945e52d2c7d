package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The generated population: mutation operators applied mechanically to the
// CPU library's sources, a random sample of them judged by the suite as the
// catalogue's mutants are (make mutants-generated). The catalogue was
// written beside the diagnosis, and the diagnosis names its bugs; bugs
// nobody planted for it measure how far the diagnosis generalizes. A
// generated mutant that does not compile is stillborn and left out; one that
// survives may be equivalent (it changes nothing observable) or a hole in
// the suite, which only reading it tells: the report lists them.

// generatedSources are the files the operators mutate: the CPU build's
// forward and backward, the method arithmetic and the derivatives it
// shares with the CUDA build.
var generatedSources = []string{"kernels/src/cpu.cpp", "kernels/src/cpu_backward.cpp", "kernels/src/ssmk_methods.h", "kernels/src/ssmk_derivs.h"}

// Generated is one mechanical mutation: line Line of File, in function
// Func, with Before replaced by After by operator Op.
type Generated struct {
	ID     int    `json:"id"`
	File   string `json:"file"`
	Line   int    `json:"line"`
	Func   string `json:"func"`
	Op     string `json:"op"`
	Before string `json:"before"`
	After  string `json:"after"`
}

// operator is a mutation of a source line: each match of re is one
// candidate, replaced by repl (regexp.Expand syntax).
type operator struct {
	name string
	re   *regexp.Regexp
	repl string
	// shift, where set, replaces the integer of re's first group by itself
	// plus shift instead (a constant or an index off by one)
	shift int
}

// mutation is one operator's edit of a line.
type mutation struct{ op, after string }

// mutate lists every edit of line by ops, each match found in code (the
// line less its comment) and none overlapping skip; an edit that changes
// nothing is left out.
func mutate(ops []operator, line, code string, skip [][]int) []mutation {
	var out []mutation
	for _, op := range ops {
		for _, loc := range op.re.FindAllStringSubmatchIndex(code, -1) {
			if overlaps(loc[0], loc[1], skip) {
				continue
			}
			var after string
			if op.shift != 0 {
				d, _ := strconv.Atoi(line[loc[2]:loc[3]])
				after = line[:loc[2]] + strconv.Itoa(d+op.shift) + line[loc[3]:]
			} else {
				after = line[:loc[0]] + string(op.re.ExpandString(nil, op.repl, line, loc)) + line[loc[1]:]
			}
			if after != line {
				out = append(out, mutation{op.name, after})
			}
		}
	}
	return out
}

// overlaps reports whether [a, b) meets any of spans.
func overlaps(a, b int, spans [][]int) bool {
	for _, s := range spans {
		if a < s[1] && s[0] < b {
			return true
		}
	}
	return false
}

// operators are the classic mutation operators, on clang-formatted code
// (binary operators stand between spaces, unary ones do not).
var operators = []operator{
	{"plus-to-minus", regexp.MustCompile(` \+ `), " - ", 0},
	{"minus-to-plus", regexp.MustCompile(` - `), " + ", 0},
	{"times-to-divide", regexp.MustCompile(` \* `), " / ", 0},
	{"divide-to-times", regexp.MustCompile(` / `), " * ", 0},
	{"less-to-less-equal", regexp.MustCompile(` < `), " <= ", 0},
	{"less-equal-to-less", regexp.MustCompile(` <= `), " < ", 0},
	{"greater-to-greater-equal", regexp.MustCompile(` > `), " >= ", 0},
	{"greater-equal-to-greater", regexp.MustCompile(` >= `), " > ", 0},
	{"equal-to-not-equal", regexp.MustCompile(` == `), " != ", 0},
	{"not-equal-to-equal", regexp.MustCompile(` != `), " == ", 0},
	{"accumulate-to-assign", regexp.MustCompile(` \+= `), " = ", 0},
	{"drop-factor", regexp.MustCompile(` \* [A-Za-z_][A-Za-z_0-9.]*(->[A-Za-z_][A-Za-z_0-9]*)*(\[[^\]]*\])?\b`), "", 0},
	{"negate-assigned", regexp.MustCompile(`( = )([^=;][^;]*);$`), "${1}-(${2});", 0},
	{"negate-returned", regexp.MustCompile(`(return )([^;]+);`), "${1}-(${2});", 0},
	{"index-plus-one", regexp.MustCompile(`\[([a-z_][a-z_0-9]*)\]`), "[${1} + 1]", 0},
	{"constant-plus-one", regexp.MustCompile(`\b([0-9])\b([^.0-9eExf]|$)`), "", 1},
}

// skipLine is a line no operator touches: comments, the preprocessor,
// declarations of the ABI, the messages of argument errors (a mutant there
// changes a string, which no numerical test should be asked to see), and
// inline assembly (the CUDA build's, which the CPU build does not compile).
var skipLine = regexp.MustCompile(`^\s*(//|/\*|\*|#)|fail\(|snprintf|static_assert|template\s*<|asm\(|^\S`)

// codeOf is line without its trailing comment.
func codeOf(line string) string {
	for _, c := range []string{"/*", "//"} {
		if i := strings.Index(line, c); i >= 0 {
			line = line[:i]
		}
	}
	return line
}

// funcStart is a line that opens a function at column 0.
var funcStart = regexp.MustCompile(`^(?:[A-Za-z_][\w:<>,\s\*&]*\s+)?\**&?([A-Za-z_]\w*)\s*\(`)

// plumbing reports whether fn is the ABI's plumbing rather than the
// kernel's arithmetic: its entry points (ssmk_*: argument validation, plans,
// timers, the device's name) and the clock. Their bugs are judged by the
// argument-validation test and the seven checks, whose failures need no
// diagnosis of a formula, and most of their mutations change nothing the
// suite can observe (a message, a timer's unit): they are left out of the
// population by argument, so that it measures the diagnosis.
func plumbing(fn string) bool { return strings.HasPrefix(fn, "ssmk_") || fn == "now_ms" }

// candidates lists every mechanical mutation of the generated sources
// under root, in a fixed order.
func candidates(root string) ([]Generated, error) {
	var out []Generated
	for _, file := range generatedSources {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			return nil, err
		}
		fn := ""
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if m := funcStart.FindStringSubmatch(line); m != nil && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "//") {
				fn = m[1]
			}
			if fn == "" || skipLine.MatchString(line) || strings.TrimSpace(line) == "" || plumbing(fn) {
				continue
			}
			code := codeOf(line) // a mutation inside a comment changes nothing
			for _, m := range mutate(operators, line, code, nil) {
				out = append(out, Generated{File: file, Line: n, Func: fn, Op: m.op, Before: line, After: m.after})
			}
		}
	}
	return out, nil
}

// sample draws n of the candidates without replacement, by seed; a
// mutant's ID is its index among all candidates.
func sample(cands []Generated, n int, seed uint64) []Generated {
	return sampleOf(cands, nil, n, seed)
}

// sampleOf draws n of the candidates whose source line matches lines (all
// of them where lines is nil) without replacement, by seed. The IDs stay
// indices among all candidates, so that a focused run names the same
// mutants as the whole population's.
func sampleOf(cands []Generated, lines *regexp.Regexp, n int, seed uint64) []Generated {
	return sampleFrom(cands, lines, 0, n, seed)
}

// sampleFrom is sampleOf's draw from position from of the seeded order on:
// a second sample of the same seed that continues the first (the first n
// of from = 0, then the next), so that populations judged in parts are one.
func sampleFrom(cands []Generated, lines *regexp.Regexp, from, n int, seed uint64) []Generated {
	var pool []int
	for i, g := range cands {
		if lines == nil || lines.MatchString(codeOf(g.Before)) {
			pool = append(pool, i)
		}
	}
	r := rand.New(rand.NewPCG(seed, 0x55aa))
	idx := r.Perm(len(pool))
	var out []Generated
	from = min(from, len(idx))
	for _, j := range idx[from:min(from+n, len(idx))] {
		g := cands[pool[j]]
		g.ID = pool[j]
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b Generated) int { return a.ID - b.ID })
	return out
}

// Patch is g as a unified diff of its one line (for reading: the runner
// applies it by line number, as identical lines occur in a file's float and
// double overloads).
func (g Generated) Patch() string {
	return fmt.Sprintf("--- a/%s\n+++ b/%s\n@@ -%d,1 +%d,1 @@\n-%s\n+%s\n", g.File, g.File, g.Line, g.Line, g.Before, g.After)
}

// write copies the kernels' sources (sourceTree) into dir and applies g at its line, which must
// still read g.Before.
func (g Generated) write(dir string) error {
	if err := sourceTree(".", dir, ""); err != nil {
		return err
	}
	p := filepath.Join(dir, g.File)
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	if g.Line < 1 || g.Line > len(lines) || lines[g.Line-1] != g.Before {
		return fmt.Errorf("%s:%d no longer reads %q", g.File, g.Line, g.Before)
	}
	lines[g.Line-1] = g.After
	return os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644)
}

// regionTags are, per function of the mutated sources, the diagnosis tags
// that name the right place: a diagnosis is graded correct when its tag
// starts with one of them. The regions follow the diagnosis' own
// vocabulary (docs/diagnosis.md): the method's discretization, softplus
// and the bias, the output's D and gate, the complex output, the groups,
// the initial state, the backward, and the binding's memory guards (an
// index slip that writes out of a buffer is named at its place).
func regionTags(g Generated) []string {
	discretize := []string{"method:", "bilinear-sign", "g-term", "g-not-of-x", "g-unknown", "phi1-", "exp-scaled", "subnormal-x",
		"abar-unknown", "delta-power", "phase-scaled", "input-without-u", "euler", "factor", "narrow:"}
	switch {
	case strings.HasSuffix(g.File, "cpu_backward.cpp"), strings.HasSuffix(g.File, "ssmk_derivs.h"):
		return []string{"bwd-", "memory:"}
	case g.Func == "discretize_t" || g.Func == "run_discretize":
		// ssmk_discretize's arithmetic: Ā and B̄ of each element
		return discretize
	case g.Func == "step_dt" || strings.Contains(g.Func, "softplus"):
		return []string{"softplus-", "no-softplus", "no-bias", "delta-"}
	case g.Func == "finish_output" || g.Func == "store_output":
		return []string{"no-D", "gate-", "no-gate", "output-", "memory:", "offset:"}
	case g.Func == "complex_output" || g.Func == "c_times_h":
		return []string{"conj-C", "complex-factor-2"}
	case g.Func == "group_of" || strings.HasPrefix(g.Func, "bc_"):
		return []string{"group-index", "memory:", "offset:"}
	case g.Func == "initial_of":
		return []string{"h0-", "memory:", "offset:"}
	case strings.HasSuffix(g.File, "ssmk_methods.h"):
		return discretize
	case g.Func == "scan_row":
		return append([]string{"output-before-update", "h0-", "state-", "input-without-u", "no-D", "memory:", "conj-C",
			"complex-factor-2", "offset:"}, discretize...)
	}
	return []string{"refusal", "memory:"} // the host code: validation, plans, threads
}

// generatedResult is one generated mutant's judgement.
type generatedResult struct {
	Generated
	Outcome  Outcome  `json:"outcome"` // killed, survived, crashed, error; "stillborn" when it does not compile
	KilledBy []string `json:"killed_by,omitempty"`
	Tag      string   `json:"diagnosis,omitempty"`
	Named    bool     `json:"named"`   // a non-empty diagnosis (not none, not blank)
	Correct  bool     `json:"correct"` // its tag names the mutated region (regionTags)
	Seconds  float64  `json:"seconds"`
}

// Stillborn is a generated mutant that does not compile.
const Stillborn Outcome = "stillborn"

// NotRun is a sampled mutant a population's time budget left unjudged.
const NotRun Outcome = "not run"

// runGenerated samples n generated mutants by seed, builds each (-O1, the
// accuracy mutants' level) and runs the suite less its timed checks against
// it until a test kills it, and writes out/generated.json with the kill
// rate and the share diagnosed at the right place.
func runGenerated(n int, seed uint64, lines *regexp.Regexp, jobs int) error {
	cands, err := candidates(".")
	if err != nil {
		return err
	}
	ms := sampleOf(cands, lines, n, seed)
	focus := ""
	if lines != nil {
		if len(ms) == 0 {
			return fmt.Errorf("-generate-lines %q matches no mutated line of %v", lines, generatedSources)
		}
		focus = fmt.Sprintf(" of those whose line matches %q", lines)
	}
	fmt.Printf("generated: %d candidate mutations in %v; sampling %d%s with seed %d\n", len(cands), generatedSources, len(ms), focus, seed)
	dir := filepath.Join(*out, "generated")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	results := make([]generatedResult, len(ms))
	var wg sync.WaitGroup
	sem := make(chan struct{}, jobs)
	var mu sync.Mutex
	for i, g := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := judgeGenerated(g, dir)
			results[i] = r
			mu.Lock()
			fmt.Printf("[%4d] %-28s %s:%d %-14s %-9s %s\n", g.ID, g.Op, filepath.Base(g.File), g.Line, g.Func, r.Outcome, r.Tag)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return summarizeGenerated(results, len(cands), seed, filepath.Join(*out, "generated.json"))
}

// judgeGenerated builds and judges one generated mutant.
func judgeGenerated(g Generated, dir string) generatedResult {
	t0 := time.Now()
	r := generatedResult{Generated: g}
	tree := filepath.Join(dir, fmt.Sprintf("tree-%d", g.ID))
	lib, _ := filepath.Abs(filepath.Join(dir, fmt.Sprintf("libssmk_cpu_g%d.so", g.ID)))
	defer os.RemoveAll(tree)
	if err := g.write(tree); err != nil {
		r.Outcome = RunError
		return r
	}
	src := func(f string) string { return filepath.Join(tree, "kernels/src", f) }
	// Warnings are not errors here: a mutation may leave a variable unused.
	build := exec.Command("g++", "-O1", "-std=c++17", "-fPIC", "-fopenmp", "-fvisibility=hidden", "-I"+filepath.Join(tree, "cudalib/include"),
		"-shared", "-o", lib, src("cpu.cpp"), src("cpu_backward.cpp"), "-Wl,--version-script="+src("ssmk.map"), "-Wl,--no-undefined")
	if b, err := build.CombinedOutput(); err != nil {
		_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("build-%d.log", g.ID)), b, 0o644)
		r.Outcome = Stillborn
		return r
	}
	defer os.Remove(lib)
	report := filepath.Join(dir, fmt.Sprintf("g%d", g.ID))
	failed, log, err := suite(lib, "./verify", "", timedChecks, filepath.Join(dir, fmt.Sprintf("g%d.log", g.ID)), report,
		[]string{"OMP_NUM_THREADS=1"}, true)
	r.KilledBy, r.Outcome, r.Seconds = failed, classify(failed, err, log), time.Since(t0).Seconds()
	if r.Outcome == Killed {
		_, r.Tag = diagnoses(filepath.Join(report, "report.json"))
		r.grade()
	}
	return r
}

// grade sets Named and Correct from the diagnosis' tag and the mutated
// region (regionTags).
func (r *generatedResult) grade() {
	r.Named = namesCause(r.Tag)
	r.Correct = false
	for _, p := range regionTags(r.Generated) {
		r.Correct = r.Correct || (r.Named && strings.HasPrefix(r.Tag, p))
	}
}

// regradeGenerated reads a generated.json, grades its diagnoses again with
// today's regionTags, and prints its summary (the judgement itself is not
// run again).
func regradeGenerated(path string) error {
	if parts := strings.Split(path, ","); len(parts) > 1 {
		return regradeParts(parts)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var family struct {
		Family string `json:"family"`
	}
	if strings.HasSuffix(path, ".jsonl") {
		return regradeBridged(b, path)
	}
	if err := json.Unmarshal(b, &family); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if family.Family != "" {
		return regradeBridged(b, path)
	}
	var saved struct {
		Seed       uint64            `json:"seed"`
		Candidates int               `json:"candidates"`
		Mutants    []generatedResult `json:"mutants"`
	}
	if err := json.Unmarshal(b, &saved); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for i := range saved.Mutants {
		if saved.Mutants[i].Outcome == Killed {
			saved.Mutants[i].grade()
		}
	}
	return summarizeGenerated(saved.Mutants, saved.Candidates, saved.Seed, path)
}

// summarizeGenerated prints and writes the population's figures.
func summarizeGenerated(rs []generatedResult, candidates int, seed uint64, path string) error {
	count := map[Outcome]int{}
	named, correct := 0, 0
	for _, r := range rs {
		count[r.Outcome]++
		if r.Outcome == Killed {
			if r.Named {
				named++
			}
			if r.Correct {
				correct++
			}
		}
	}
	viable := len(rs) - count[Stillborn]
	killed := count[Killed]
	fmt.Printf("\ngenerated population, seed %d: %d sampled of %d candidates, %d stillborn (do not compile), %d viable\n", seed, len(rs), candidates, count[Stillborn], viable)
	fmt.Printf("killed %d of %d viable (%.0f%%); survived %d, crashed %d, error %d\n", killed, viable, pct(killed, viable), count[Survived], count[Crashed], count[RunError])
	fmt.Printf("diagnosis: %d of %d killed named (%.0f%%), %d at the mutated region (%.0f%%)\n", named, killed, pct(named, killed), correct, pct(correct, killed))
	if count[Survived] > 0 {
		fmt.Println("survivors (equivalent, or a hole in the suite: read each):")
		for _, r := range rs {
			if r.Outcome == Survived {
				fmt.Printf("  %s:%d (%s) %s: %q → %q\n", r.File, r.Line, r.Func, r.Op, strings.TrimSpace(r.Before), strings.TrimSpace(r.After))
			}
		}
	}
	b, err := json.MarshalIndent(map[string]any{"seed": seed, "candidates": candidates, "sampled": len(rs), "stillborn": count[Stillborn],
		"killed": killed, "survived": count[Survived], "named": named, "correct_location": correct, "mutants": rs}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// generatedJobs is the default number of generated mutants judged at once.
func generatedJobs() int { return max(1, runtime.NumCPU()) }

// pct is 100·a/b (0 for b = 0).
func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

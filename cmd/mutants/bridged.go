package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
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
	"mamba3": {"bridge/python/adapters/numpy_mamba3.py", []string{"_rotate", "_run", "_common"}},
	// the hand-written adjoint of Mamba-2's prefill, judged by the
	// suite's backward tests (suiteRun)
	"mamba2-backward": {"bridge/python/adapters/numpy_ssd.py", []string{"ssd_bwd"}},
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
// its diagnosis) and its modes (ARGS["mode"]: the sequential recurrence;
// ARGS["layout"]: the engines' stream of tokens) are not the algorithm: a mutation of their switch turns on a catalogued
// slip or the other correct mode, and one inside a branch taken only
// under a slip changes nothing. Both are left out of the population.
// numpy_ssd asks for its slips by _slip("NAME") (several may be planted
// at once), which reads as ARGS["slip"] == "NAME" here, and not
// _slip("NAME") as ARGS["slip"] != "NAME".
var (
	pySlipTest   = regexp.MustCompile(`\(?ARGS\["(slip|mode|layout)"\] (==|!=) "[^"]*"\)?|(not )?_slip\("[^"]*"\)`)
	pySlipBranch = regexp.MustCompile(`^(\s*)(if|elif) .*ARGS\["(slip|mode|layout)"\] == "[^"]*"[^:]*:\s*(#.*)?$`)
	pySlipCall   = regexp.MustCompile(`(not )?_slip\(("[^"]*")\)`)
)

// slipsAsArgs writes a line's _slip calls as the ARGS["slip"] tests they
// stand for, for pySlipBranch and the regions' patterns.
func slipsAsArgs(line string) string {
	return pySlipCall.ReplaceAllStringFunc(line, func(c string) string {
		m := pySlipCall.FindStringSubmatch(c)
		if m[1] != "" {
			return `ARGS["slip"] != ` + m[2]
		}
		return `ARGS["slip"] == ` + m[2]
	})
}

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
	inDoc := false  // inside a docstring: prose, which no operator touches
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if m := pyDef.FindStringSubmatch(line); m != nil {
			fn = m[1]
			continue
		}
		if d := len(pyDocDelim.FindAllString(line, -1)); d > 0 || inDoc {
			if d%2 == 1 {
				inDoc = !inDoc
			}
			continue
		}
		if strings.TrimSpace(line) != "" {
			if skipBelow >= 0 && indentOf(line) > skipBelow {
				continue
			}
			skipBelow = -1
			if m := pySlipBranch.FindStringSubmatch(slipsAsArgs(line)); m != nil {
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
	{regexp.MustCompile(`^\s*(v = |if softplus|elif softplus|lo, hi|if ARGS\["slip"\] != "no-dt-limit"|v = np\.minimum|dsp = |clamped = |return \(v, np\.where\(clamped)|_delta\(|def _limits`), regexp.MustCompile(`^dt:|^op:`), "Δ (bias, softplus, clamp)"},
	{regexp.MustCompile(`dA = |cs = np\.cumsum`), regexp.MustCompile(`^op:|^dt:`), "the cumulative decay (every path)"},
	{regexp.MustCompile(`same = |decay = np\.exp|CB = |Lm = |ys = np\.einsum\("bhts`), regexp.MustCompile(`^op:(diagonal|in-chunk|cross-sequence|upper)(\+(diagonal|in-chunk|cross-sequence|upper))*:`), "the chunk's quadratic form"},
	{regexp.MustCompile(`from_prev = |entering = |ys = ys \+ np\.where\(from_prev`), regexp.MustCompile(`^op:[^:]*(next-chunk|far|initial-state|cross-sequence)|^varlen:|^init-state:`), "the entering state's output"},
	{regexp.MustCompile(`if own\[bb, t - c0\] and \(t \+ 1 == L|s_id = seq|k = t - c0|m = own\[bb|w = np\.where\(m\[:, None\]|st = np\.einsum\("sh,|skip = |if \(s_id == prev_seq|st = st \+ np\.exp\(cs\[bb|idx = s_id|seq_states\[idx\]|final = `), regexp.MustCompile(`^op:[^:]*state|^varlen:|^init-state:`), "the final states"},
	{regexp.MustCompile(`last = sq\[|if sid is None or np\.all|w = np\.where\(own\[:, :, None\]|st = np\.einsum\("bsh|keep = |st = st \+ np\.where\(keep|passed = _state_round|prev = passed|prev_seq = sq\[:, -1\]`), regexp.MustCompile(`^op:[^:]*(next-chunk|far|state-passed|initial-state|state-initial)|^init-state:|^varlen:`), "the state passed between chunks"},
	{regexp.MustCompile(`prev = np\.zeros|prev_seq = np\.zeros`), regexp.MustCompile(`^op:[^:]*(initial-state|state-initial)|^init-state:`), "the initial state"},
	{regexp.MustCompile(`heads_group = |Bh, Ch = `), regexp.MustCompile(`^groups:|^op:`), "heads to groups"},
	{regexp.MustCompile(`seq\[:, cu\[i\]|nseq = |seq = np\.zeros|for sid in|own = |xs = np\.where|ds = np\.where|Bs, Cs = np\.where|yc = np\.where\(own|yc = np\.zeros`), regexp.MustCompile(`^varlen:|^op:[^:]*(cross-sequence|state)`), "the sequences' boundaries"},
	{regexp.MustCompile(`y = y \+ (_per_channel\()?D|if D is not None`), regexp.MustCompile(`^no-D|^op:diagonal:`), "the skip term D"},
	{regexp.MustCompile(`y = y \* \(z|if z is not None`), regexp.MustCompile(`^no-z|^op:`), "the gate"},
	{regexp.MustCompile(`_state_round|tag = "bf16"|to_float\(tag`), regexp.MustCompile(`^narrow:|^op:`), "the state's rounding"},
	{regexp.MustCompile(`Q = int\(params|for c0 in range|c1 = min\(c0|y\[:, c0:c1\] = yc|y = np\.zeros`), regexp.MustCompile(`^op:`), "the chunking"},
	{regexp.MustCompile(`sq = seq\[|for i in range\(len\(cu\)|cu = arrays`), regexp.MustCompile(`^varlen:|^op:`), "the sequences' boundaries"},
	{regexp.MustCompile(`tag = arrays|ct = compute_dtype|stag = params|out = \{"y"|seq_states = np\.zeros`), regexp.MustCompile(`^narrow:|^op:`), "the dtypes"},
	{regexp.MustCompile(`= get\(arrays|= x\.shape|= B\.shape|_prefill_inputs\(`), regexp.MustCompile(`^op:|^dt:|^no-D|^no-z|^init-state:|^groups:`), "the arguments"},
},
	// the lines of ssd_bwd, by the gradients each forms (bwdParts: a
	// gradient's relation or location); the forward it recomputes first
	"mamba2-backward": {
		{regexp.MustCompile(`hs\[k \+ 1\] = |hs\[0\] = |hs = np\.zeros|a = np\.exp|pre = |y\[bb, s0:s1\] = |seq_states\[si`), regexp.MustCompile(`^fwd:|` + bwdParts(`[a-zA-Z_]+`)), "the forward it recomputes (and every gradient through it)"},
		{regexp.MustCompile(`g\["dz"\]`), regexp.MustCompile(bwdParts(`dz`)), "dz"},
		{regexp.MustCompile(`dyt = dyt \* zt|sg = 1 / |zt = z\[`), regexp.MustCompile(bwdParts(`dx|dB|dC|ddt|dA|dD|dz|ddt_bias|dinitial_states`)), "the cotangent through the gate"},
		{regexp.MustCompile(`g\["dD"\]`), regexp.MustCompile(bwdParts(`dD`)), "dD"},
		{regexp.MustCompile(`g\["dx"\]\[bb, s0:s1\] \+= dyt`), regexp.MustCompile(bwdParts(`dx`)), "dx's skip term"},
		{regexp.MustCompile(`g\["dC"\]\[bb, t\]|dC\[:, :, grp|"dC": `), regexp.MustCompile(bwdParts(`dC`)), "dC"},
		{regexp.MustCompile(`hh = hh \+ dyt|hh = hh \* a|hh = np\.zeros|hh = hh \+ d(seq|fin)`), regexp.MustCompile(bwdParts(`dx|dB|ddt|dA|ddt_bias|dinitial_states`)), "the state's cotangent carried back"},
		{regexp.MustCompile(`dec = |g\["dA"\]|"dA": `), regexp.MustCompile(bwdParts(`ddt|dA|ddt_bias`)), "the decay's cotangent, dA"},
		{regexp.MustCompile(`gdelta|ddt = gdelta|"ddt": |ddt_bias|d, chain = _delta`), regexp.MustCompile(bwdParts(`ddt|ddt_bias|dA`)), "Δ's cotangent, ddt and ddt_bias"},
		{regexp.MustCompile(`g\["dB"\]\[bb, t\]|dB\[:, :, grp|"dB": `), regexp.MustCompile(bwdParts(`dB`)), "dB"},
		{regexp.MustCompile(`g\["dx"\]\[bb, t\]|"dx": `), regexp.MustCompile(bwdParts(`dx`)), "dx"},
		{regexp.MustCompile(`dinitial_states`), regexp.MustCompile(bwdParts(`dinitial_states`)), "the initial states' gradient"},
		{regexp.MustCompile(`.`), regexp.MustCompile(`^fwd:|` + bwdParts(`[a-zA-Z_]+`)), "the rest of the backward"},
	},
	"mamba3": {
		{regexp.MustCompile(`q = _rotate|kraw = |k = _rotate`), regexp.MustCompile(`^op:[^:]*:(angle|unrotated|swapped|times|row-factor|column-factor|zero|q-bias|k-bias|no-q-bias|no-k-bias)|^m3:(angle|rotate|prev-key)`), "the query and key"},
		{regexp.MustCompile(`c, s = np\.cos|x0, x1 = x\[|x\[\.\.\., 0:2|_rotate\(|ang = |a = phi\.shape|x = x\.copy`), regexp.MustCompile(`^op:[^:]*:(angle|unrotated|swapped)|^m3:(angle|rotate|prev-key)`), "the rotation"},
		{regexp.MustCompile(`inc = |phi = phi|two_pi`), regexp.MustCompile(`^op:[^:]*:(angle|unrotated)|^m3:angle`), "the accumulated angle"},
		{regexp.MustCompile(`alpha = np\.exp`), regexp.MustCompile(`^op:[^:]*:(decay|exp|undecayed|entering|chunk-state|passed|exclusive|previous|times|zero)`), "the decay α"},
		{regexp.MustCompile(`lam = |beta = |gamma = `), regexp.MustCompile(`^op:[^:]*:(no-current|no-previous|previous|lambda|gamma|beta|times|column-factor|zero)|^m3:(no-previous|lambda|beta|gamma)`), "the trapezoid's weights λ, β and γ"},
		{regexp.MustCompile(`kp = |vp = |kprev = |kraw = `), regexp.MustCompile(`^op:[^:]*:(no-previous|previous|prev-key|zero|times)|^m3:(no-previous|prev-key)`), "the previous input handed to the next step"},
		{regexp.MustCompile(`yt = yt \+ D|if D is not None`), regexp.MustCompile(`^op:diagonal:|^op:[^:]*:(no-D|D-twice)`), "the skip term D"},
		{regexp.MustCompile(`yt = yt \* \(Z|if Z is not None`), regexp.MustCompile(`^op:[^:]*:(row-factor|times-with-D)`), "the gate"},
		{regexp.MustCompile(`S = \(alpha|Sprev|yt = np\.einsum|y\[t\] = yt|phi, S, kp, vp`), regexp.MustCompile(`^op:`), "the recurrence and the output"},
		{regexp.MustCompile(`.`), regexp.MustCompile(`^op:`), "the sequences, states and dtypes"},
	},
}

// bridgedGradeOf says whether tag names the path of g's line. An
// accumulation made an assignment (+= as =) drops what the earlier lines
// accumulated, not the line's own term: any path the operator names is
// its path.
func bridgedGradeOf(family string, g Generated, tag string) (path string, correct bool) {
	if strings.HasPrefix(g.File, "mamba_ssm/") {
		return tritonGradeOf(family, g, tag)
	}
	for _, r := range pyRegions[family] {
		if r.line.MatchString(slipsAsArgs(g.Before)) {
			if g.Op == "accumulate-to-assign" {
				return r.path + " (and what was accumulated before it)", r.tags.MatchString(tag) || strings.HasPrefix(tag, "op:")
			}
			return r.path, r.tags.MatchString(tag)
		}
	}
	return "", false
}

// suiteOf is the folder of verify/ (and the adapter's family) that judges
// a population: mamba2-backward, upstream's backward kernels, is judged by
// the Mamba-2 suite.
func suiteOf(family string) string { return strings.TrimSuffix(family, "-backward") }

// suiteRun is the test selection a population's mutants are judged by:
// all of the suite, but for the backward's kernels, which only ssd_bwd
// launches and only the suite's backward tests call (the forward's tests
// cannot observe a mutant there, and would spend the lease recompiling);
// -suite-run chooses another.
func suiteRun(family string) []string {
	if *suiteRunF != "" {
		return []string{"-test.run", *suiteRunF}
	}
	if strings.HasSuffix(family, "-backward") {
		return []string{"-test.run", "Backward"}
	}
	return nil
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
	// Related: a backward's cause at the mutated path states a relation
	// of the gradient to the reference, not only where it fails ("in(…)")
	Related bool    `json:"related,omitempty"`
	Seconds float64 `json:"seconds"`
}

// runBridgedGenerated samples n mutants of the family's adapter by seed and
// judges each with the whole bridged suite (the test binary suiteBin, run
// in the suite's folder), jobs at once; out/generated-FAMILY.json.
//
// With checkout (a folder holding upstream's mamba_ssm), the population is
// of upstream's Triton kernels instead (tritonSources), each mutant a copy
// of the checkout's mamba_ssm judged through FAMILY_upstream; budget, if
// positive, stops starting mutants once it has passed (those left are
// recorded as not run), so that a population fits a GPU lease.
func runBridgedGenerated(family string, from, n int, seed uint64, jobs int, suiteBin, checkout string, budget time.Duration, lines *regexp.Regexp) error {
	var cands []Generated
	what := ""
	if checkout != "" {
		srcs, ok := tritonSources[family]
		if !ok {
			return fmt.Errorf("-bridged %q with -checkout: want mamba2, mamba2-backward or mamba3", family)
		}
		for _, src := range srcs {
			c, err := tritonCandidates(checkout, src)
			if err != nil {
				return fmt.Errorf("-checkout %s: %w", checkout, err)
			}
			cands = append(cands, c...)
			what += " " + src.file
		}
	} else {
		src, ok := pySources[family]
		if !ok {
			return fmt.Errorf("-bridged %q: want mamba2 or mamba3", family)
		}
		c, err := pyCandidates(".", src)
		if err != nil {
			return err
		}
		cands, what = c, " "+src.file
	}
	ms := sampleFrom(cands, lines, from, n, seed)
	if *only != "" {
		// -only: the sample's mutants of these IDs alone (a part of a
		// population judged again, say after the suite has grown)
		ms = slices.DeleteFunc(ms, func(g Generated) bool { return !selected(g.ID) })
	}
	if *skipJudged != "" {
		done, err := judgedIn(strings.Split(*skipJudged, ","))
		if err != nil {
			return fmt.Errorf("-skip-judged: %w", err)
		}
		ms = slices.DeleteFunc(ms, func(g Generated) bool { return done[g.ID] })
	}
	fmt.Printf("generated: %d candidate mutations of%s; sampling %d with seed %d (from the seeded order's %d on); each judged by the suite verify/%s%s\n", len(cands), what, len(ms), seed, from, suiteOf(family), strings.Join(append([]string{""}, suiteRun(family)...), " "))
	dir, _ := filepath.Abs(filepath.Join(*out, "generated-"+family))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bin, err := filepath.Abs(suiteBin)
	if err != nil {
		return err
	}
	name := "generated-" + family + ".json"
	if from > 0 {
		name = fmt.Sprintf("generated-%s-from-%d.json", family, from)
	}
	// a journal of the results as they come (a run cut short by its
	// lease keeps what it judged: -regrade FILE.jsonl summarizes it)
	journal, err := os.Create(filepath.Join(*out, name+"l"))
	if err != nil {
		return err
	}
	defer journal.Close()
	head, _ := json.Marshal(map[string]any{"family": family, "seed": seed, "candidates": len(cands)})
	fmt.Fprintf(journal, "%s\n", head)
	// the unmutated kernel's verdicts: read from an earlier run's journal
	// (-baseline), or judged first (in shards), which leaves Triton's
	// cache warm for the mutants: each then compiles its mutated kernel
	// alone
	var base *baseline
	if checkout != "" {
		if *baselineF != "" {
			if base, err = loadBaseline(*baselineF); err != nil {
				return fmt.Errorf("-baseline %s: %w", *baselineF, err)
			}
			fmt.Printf("the unmutated kernel: %d subtests fail (read from %s)\n", len(base.failed), *baselineF)
		} else {
			t0 := time.Now()
			if base, err = judgeBaseline(family, dir, bin, checkout, *baselineShards); err != nil {
				return err
			}
			fmt.Printf("the unmutated kernel: %d subtests fail (%.0f s, %d shards); a mutant is killed by another, or by one of those diagnosed otherwise\n", len(base.failed), time.Since(t0).Seconds(), *baselineShards)
		}
		line, _ := json.Marshal(map[string]any{"baseline_failing": base.failed, "baseline_idle": base.idle, "baseline_refusals": base.refusals})
		fmt.Fprintf(journal, "%s\n", line)
		if len(base.idle) > 0 {
			fmt.Printf("left out of each mutant's run: %d tests that launched no kernel unmutated (%s)\n", len(base.idle), strings.Join(base.idle, ", "))
		}
	}
	results := make([]bridgedResult, len(ms))
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	sem := make(chan struct{}, max(1, jobs))
	// launched in a seeded order, not the files': a budget that stops
	// the launches leaves a sample of the sample, not its last files
	for _, i := range rand.New(rand.NewPCG(seed, 2)).Perm(len(ms)) {
		g := ms[i]
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if budget > 0 && time.Since(start) > budget {
				results[i] = bridgedResult{Generated: g, Outcome: NotRun}
				return
			}
			r := judgeBridged(family, g, dir, bin, checkout, base)
			results[i] = r
			mu.Lock()
			if line, err := json.Marshal(r); err == nil {
				fmt.Fprintf(journal, "%s\n", line)
			}
			fmt.Printf("[%4d] %-22s %s:%d %-12s %-9s %-40s %s\n", g.ID, g.Op, filepath.Base(g.File), g.Line, g.Func, r.Outcome, r.Tag, map[bool]string{true: "named the path", false: ""}[r.Correct])
			mu.Unlock()
		}()
	}
	wg.Wait()
	return summarizeBridged(family, results, len(cands), seed, filepath.Join(*out, name))
}

// loadBaseline reads the unmutated kernel's verdicts from an earlier run's
// journal (generated-FAMILY.jsonl, its "baseline_failing" line), so that a
// population judged in parts over several leases judges the unmutated
// kernel once. The caller must pass a journal of the same family, checkout
// and suite selection: the verdicts are taken as they are.
func loadBaseline(path string) (*baseline, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		var rec struct {
			Failing  map[string]string `json:"baseline_failing"`
			Idle     []string          `json:"baseline_idle"`
			Refusals []string          `json:"baseline_refusals"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Failing != nil {
			return &baseline{failed: rec.Failing, idle: rec.Idle, refusals: rec.Refusals}, nil
		}
	}
	return nil, fmt.Errorf("no baseline_failing line: want the .jsonl journal of a run with -checkout")
}

// baseline is the whole suite's verdict on the unmutated kernel: the
// subtests that fail, with the diagnosis of each. Upstream's kernels fail
// some of the suite unmutated (their findings: TF32 products in fp32, a
// packed row's first state without the initial state): a mutant is then
// killed by a subtest that passes unmutated or by a failing one whose
// diagnosis changes, and only those subtests' diagnoses are its own.
type baseline struct {
	failed map[string]string // subtest → its diagnosis tag ("" without one)
	// idle are the top-level tests that made no call of the kernel (the
	// report's kernel_calls 0: the suite's own checks on the numpy path):
	// a mutant's run leaves them out, since they give every kernel the
	// verdict they gave the unmutated one
	idle []string
	// refusals is the compile errors the unmutated kernel raises
	// (tritonRefusals), which make no mutant stillborn
	refusals []string
}

// idleTests is the top-level tests a report counts no kernel call for.
func idleTests(reportJSON string) []string {
	rp, err := report.Load(reportJSON)
	if err != nil {
		return nil
	}
	var out []string
	for _, v := range rp.Tests {
		if v.KernelCalls != nil && *v.KernelCalls == 0 && !strings.Contains(v.Name, "/") {
			out = append(out, v.Name)
		}
	}
	return out
}

// timingTest is the suite's performance checks (TestMamba2Timing): their
// verdict is a ratio of times, and mutants are judged several at once on
// one GPU, where one process's kernels wait on the others' — a mutant
// that computes the same numbers failed TestMamba2Timing alone (half the
// tokens 10.7× slower, 2026-12-04). A mutant is judged by its numbers:
// its runs leave these tests out and its grade ignores their failures.
var timingTest = regexp.MustCompile(`^Test\w*Timing$`)

// skipArgs is the go test flag that leaves the idle tests and the timing
// tests out of a mutant's run.
func (b *baseline) skipArgs() []string {
	skip := []string{`Test\w*Timing`}
	if b != nil {
		skip = append(skip, b.idle...)
	}
	return []string{"-test.skip", "^(" + strings.Join(skip, "|") + ")$"}
}

var subtestFail = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)

// verdicts reads a run's failing subtests (the leaves: a parent fails with
// its children) and the diagnosis of each from its report.
func verdicts(log []byte, reportJSON string) map[string]string {
	out := map[string]string{}
	names := subtestFail.FindAllSubmatch(log, -1)
	for _, m := range names {
		out[string(m[1])] = ""
	}
	for name := range out {
		for other := range out {
			if strings.HasPrefix(other, name+"/") {
				delete(out, name)
				break
			}
		}
	}
	if rp, err := report.Load(reportJSON); err == nil {
		for _, d := range rp.Diagnoses {
			if _, ok := out[d.Test]; ok {
				out[d.Test] = d.Tag
			}
		}
	}
	return out
}

// against returns the subtests of run (verdicts) that are the mutant's:
// failing where the unmutated kernel passes, or diagnosed otherwise.
func (b *baseline) against(run map[string]string) map[string]string {
	own := map[string]string{}
	for t, tag := range run {
		if was, ok := b.failed[t]; !ok || was != tag {
			own[t] = tag
		}
	}
	return own
}

// streamed runs cmd with its output written to path as it comes (a run
// its lease cuts short leaves what it printed) and returns that output.
func streamed(cmd *exec.Cmd, path string) ([]byte, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	runErr := cmd.Run()
	f.Close()
	log, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return log, runErr
}

// judgeBaseline runs the suite on the unmutated checkout, its top-level
// tests dealt out among shards processes run at once (one where the
// family's suite is a selection): every mutant's grade waits for it, and
// on a cold Triton cache one process compiles every kernel's
// specializations one after another (docs/mutants.md), where shards
// compile theirs side by side and leave the cache warm for the mutants.
// The shards' verdicts are the one run's: each top-level test runs in
// exactly one of them, and the suite's tests do not depend on one
// another's order.
func judgeBaseline(family, dir, bin, checkout string, shards int) (*baseline, error) {
	mdir := filepath.Join(dir, "baseline")
	_ = os.RemoveAll(mdir)
	if err := os.MkdirAll(mdir, 0o755); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(checkout)
	if err != nil {
		return nil, err
	}
	suiteDir := filepath.Join("verify", suiteOf(family))
	selections := [][]string{suiteRun(family)}
	if shards > 1 && len(suiteRun(family)) == 0 {
		names, err := listTests(bin, suiteDir)
		if err != nil {
			return nil, err
		}
		selections = nil
		for _, part := range dealTests(names, shards) {
			selections = append(selections, []string{"-test.run", "^(" + strings.Join(part, "|") + ")$"})
		}
	}
	type shard struct {
		log []byte
		rep string
	}
	runs := make([]shard, len(selections))
	var wg sync.WaitGroup
	for k, sel := range selections {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name, rep := "suite.log", filepath.Join(mdir, "report")
			if len(selections) > 1 {
				name, rep = fmt.Sprintf("suite-%d.log", k), filepath.Join(mdir, fmt.Sprintf("report-%d", k))
			}
			cmd := exec.Command(bin, append([]string{"-test.v", "-test.timeout", "900s", "-report", rep}, sel...)...)
			cmd.Dir = suiteDir
			cmd.Env = append(os.Environ(), "SSMK_BRIDGE="+strings.TrimSpace(suiteOf(family)+"_upstream checkout="+abs+" commit=unmutated "+*adapterArgs))
			log, _ := streamed(cmd, filepath.Join(mdir, name))
			runs[k] = shard{log, filepath.Join(rep, "report.json")}
		}()
	}
	wg.Wait()
	b := &baseline{failed: map[string]string{}}
	for k, run := range runs {
		if !regexp.MustCompile(`(?m)^(ok|FAIL|PASS)\b`).Match(run.log) {
			return nil, fmt.Errorf("the unmutated kernel's suite did not finish (shard %d of %d, in %s)", k+1, len(runs), mdir)
		}
		maps.Copy(b.failed, verdicts(run.log, run.rep))
		b.idle = append(b.idle, idleTests(run.rep)...)
		for sig := range tritonRefusals(run.log) {
			if !slices.Contains(b.refusals, sig) {
				b.refusals = append(b.refusals, sig)
			}
		}
	}
	sort.Strings(b.idle)
	sort.Strings(b.refusals)
	return b, nil
}

var testName = regexp.MustCompile(`^(Test|Fuzz|Example)\w*$`)

// listTests is the top-level tests and fuzz targets of the suite binary
// bin (its -test.list), run in dir.
func listTests(bin, dir string) ([]string, error) {
	cmd := exec.Command(bin, "-test.list", ".")
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing the suite's tests (%s -test.list .): %w", bin, err)
	}
	var names []string
	for _, line := range strings.Fields(string(out)) {
		if testName.MatchString(line) {
			names = append(names, line)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s -test.list . lists no tests", bin)
	}
	return names, nil
}

// dealTests deals names out among k parts in turn, none empty: the
// listing keeps a file's tests together, and a file's tests are alike in
// weight (the backward's, the engines'), so dealt in turn they spread.
func dealTests(names []string, k int) [][]string {
	k = max(1, min(k, len(names)))
	parts := make([][]string, k)
	for i, n := range names {
		parts[i%k] = append(parts[i%k], n)
	}
	return parts
}

// judgeBridged writes g's copy of the adapter and runs the suite on it
// (judged against base where the unmutated kernel fails some of it).
func judgeBridged(family string, g Generated, dir, bin, checkout string, base *baseline) bridgedResult {
	t0 := time.Now()
	r := bridgedResult{Generated: g}
	mdir := filepath.Join(dir, fmt.Sprintf("g%d", g.ID))
	_ = os.RemoveAll(mdir)
	if err := os.MkdirAll(mdir, 0o755); err != nil {
		r.Outcome = RunError
		return r
	}
	orig, file, bridgeSpec := g.File, filepath.Join(mdir, filepath.Base(g.File)), ""
	if checkout != "" {
		// the mutant's own copy of the checkout's package
		copyDir := filepath.Join(mdir, "checkout")
		if err := os.MkdirAll(copyDir, 0o755); err != nil {
			r.Outcome = RunError
			return r
		}
		if out, err := exec.Command("cp", "-r", filepath.Join(checkout, "mamba_ssm"), copyDir+"/").CombinedOutput(); err != nil {
			_ = os.WriteFile(filepath.Join(mdir, "copy.log"), out, 0o644)
			r.Outcome = RunError
			return r
		}
		orig, file = filepath.Join(checkout, g.File), filepath.Join(copyDir, g.File)
		bridgeSpec = strings.TrimSpace(suiteOf(family) + "_upstream checkout=" + copyDir + " commit=mutant-" + fmt.Sprint(g.ID) + " " + *adapterArgs)
	}
	b, err := os.ReadFile(orig)
	if err != nil {
		r.Outcome = RunError
		return r
	}
	lines := strings.Split(string(b), "\n")
	lines[g.Line-1] = g.After
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
	args := append([]string{"-test.v", "-test.timeout", "900s", "-report", rep}, suiteRun(family)...)
	cmd := exec.Command(bin, append(args, base.skipArgs()...)...)
	cmd.Dir = filepath.Join("verify", suiteOf(family))
	if bridgeSpec == "" {
		bridgeSpec = file
	}
	cmd.Env = append(os.Environ(), "SSMK_BRIDGE="+bridgeSpec, "OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", "MKL_NUM_THREADS=1")
	log, err := streamed(cmd, filepath.Join(mdir, "suite.log"))
	if checkout != "" {
		_ = os.RemoveAll(filepath.Join(mdir, "checkout"))
	}
	r = gradeRun(family, g, log, err != nil, filepath.Join(rep, "report.json"), checkout != "", base)
	r.Seconds = time.Since(t0).Seconds()
	return r
}

// gradeRun judges one mutant's finished suite run: its log, whether the
// suite exited with an error, its report.json, and the unmutated kernel's
// verdicts (base; nil where none was judged). Against a checkout, a
// Triton compile error the unmutated kernel does not raise makes the
// mutant stillborn (base.refusedBy).
func gradeRun(family string, g Generated, log []byte, exitErr bool, reportJSON string, triton bool, base *baseline) bridgedResult {
	r := bridgedResult{Generated: g}
	if triton && base.refusedBy(log) {
		// Triton did not compile the kernel: not a program, as a file
		// Python cannot parse is not
		r.Outcome = Stillborn
		return r
	}
	failed := map[string]bool{}
	var own map[string]string // the subtests that are the mutant's (nil: all)
	if base != nil {
		own = base.against(verdicts(log, reportJSON))
		for t := range own {
			failed[strings.SplitN(t, "/", 2)[0]] = true
		}
	} else {
		for _, m := range regexp.MustCompile(`(?m)^--- FAIL: (\w+)`).FindAllStringSubmatch(string(log), -1) {
			failed[m[1]] = true
		}
	}
	for t := range failed {
		if timingTest.MatchString(t) {
			continue // not a verdict on the numbers (timingTest)
		}
		r.KilledBy = append(r.KilledBy, t)
	}
	sort.Strings(r.KilledBy)
	var err error
	if exitErr {
		err = errors.New("the suite failed")
	}
	onlyTiming := len(failed) > 0 && len(r.KilledBy) == 0
	if (onlyTiming || base != nil && len(failed) == 0) && err != nil && regexp.MustCompile(`(?m)^FAIL\b`).Match(log) {
		err = nil // failing only where the unmutated kernel fails, as it does
	}
	r.Outcome = classify(r.KilledBy, err, log)
	if r.Outcome == Killed {
		var failedBefore map[string]string
		if base != nil {
			failedBefore = base.failed
		}
		r.Tags, r.Tag = bridgedDiagnoses(reportJSON, own, failedBefore)
		r.grade(family)
	}
	return r
}

// tritonRefused is what a kernel that does not compile raises: Triton's
// CompilationError names the place in the kernel's source ("at 142:16:"),
// shows the lines above it with a caret under the place, then the error.
var tritonRefused = regexp.MustCompile(`(?:CompilationError|triton\.compiler\.errors\.\w+):? at (\d+:\d+):\n((?:[^\n]*\n){0,40}?)[ \t]*\^[ \t]*\n[ \t]*([^\n]*)`)

// tritonRefusals is the compile errors a suite's log holds, each as
// "at LINE:COL: ERROR" (the kernel's line and column, the error's own
// line): one signature for every case that raises the same error at the
// same place. A mutant replaces one line, so the unmutated kernel's
// errors keep their places in a mutant's copy.
func tritonRefusals(log []byte) map[string]bool {
	out := map[string]bool{}
	for _, m := range tritonRefused.FindAllSubmatch(log, -1) {
		out["at "+string(m[1])+": "+strings.TrimSpace(string(m[3]))] = true
	}
	if len(out) == 0 && bareRefusal.Match(log) {
		out["a compile error without its place"] = true
	}
	return out
}

// bareRefusal is a compile error printed without the caret excerpt.
var bareRefusal = regexp.MustCompile(`CompilationError|triton\.compiler\.errors`)

// refusedBy reports whether log holds a Triton compile error that the
// unmutated kernel does not raise (any, without a baseline): upstream's
// kernels refuse some of the suite's shapes unmutated (a head dimension
// of the rotation that rounds to an empty range), and a mutant whose run
// meets those errors too is a program for every other case.
func (b *baseline) refusedBy(log []byte) bool {
	for sig := range tritonRefusals(log) {
		if b == nil || !slices.Contains(b.refusals, sig) {
			return true
		}
	}
	return false
}

// bridgedDiagnoses counts a report's diagnosis tags and returns the most
// frequent that names a cause (a run whose decode steps say "none" and
// whose prefills name the slip is the slip's; a kernel that raises on some
// problems and computes wrong numbers on others is diagnosed by its
// numbers), else the most frequent.
//
// With own (a baseline's), only the diagnoses of those subtests count,
// each without the finding the unmutated kernel's diagnosis of the same
// subtest (base) already led with (beyondBaseline).
func bridgedDiagnoses(path string, own, base map[string]string) (map[string]int, string) {
	rp, err := report.Load(path)
	if err != nil {
		return nil, ""
	}
	ds := rp.Diagnoses
	if own != nil {
		ds = nil
		for _, d := range rp.Diagnoses {
			if _, ok := own[d.Test]; ok {
				d.Tag = beyondBaseline(d.Tag, base[d.Test])
				ds = append(ds, d)
			}
		}
	}
	counts, best := mostFrequent(ds, func(d report.Diagnosis) string { return d.Tag })
	return counts, namedOf(counts, best)
}

// beyondBaseline is a mutant's diagnosis of a subtest without the part the
// unmutated kernel's diagnosis of it (was) already led with: a backward
// judged past the forward's own finding ("fwd:m3:angle-stored-bf16+bwd:dK:
// none", the unmutated kernel's "fwd:m3:angle-stored-bf16") is the
// mutant's "bwd:dK:none", so that a property the kernel has without the
// mutant is never graded as the mutant's cause. Only a backward's parts
// are cut from the forward's finding so: "+" also joins an operator
// diagnosis' regions ("op:in-chunk+next-chunk:…"), which stay whole, as
// does a tag that does not extend was.
func beyondBaseline(tag, was string) string {
	if rest, ok := strings.CutPrefix(tag, was+"+"); ok && was != "" && strings.HasPrefix(rest, "bwd:") {
		return rest
	}
	return tag
}

// namesCause reports whether a diagnosis tag names a cause.
// A backward's tag ("fwd:CAUSE+bwd:…") names one only where its forward
// part does: a backward diagnosed under a forward it could not explain
// has not found the slip.
func namesCause(tag string) bool {
	if rest, ok := strings.CutPrefix(tag, "fwd:"); ok {
		if i := strings.Index(rest, "+bwd:"); i >= 0 {
			rest = rest[:i]
		}
		return namesCause(rest)
	}
	if strings.HasPrefix(tag, "bwd:") {
		return len(gradientParts(tag)) > 0
	}
	return tag != "" && tag != "none" && tag != "error" && tag != "not-reproduced" && !strings.HasSuffix(tag, ":unrelated")
}

// bwdParts is the pattern of a backward tag's part for the gradients
// names (a regular expression's alternatives), matched against the parts
// that name a relation or a location (gradientParts).
func bwdParts(names string) string { return `(^|\+)bwd:(` + names + `):` }

// gradientParts are the parts of a backward's tag that name a gradient's
// relation or location ("bwd:dA:lacks(Δ)", "bwd:dx:in(…)"): not the
// forward's finding a Mamba-2 backward was judged past
// (diagnose.SSDBackward: "fwd:narrow:tf32+bwd:…"), not a gradient no
// relation explains ("bwd:dx:none"), not a missing one.
func gradientParts(tag string) []string {
	var out []string
	for _, part := range strings.Split(tag, "+") {
		if strings.HasPrefix(part, "bwd:") && !strings.HasSuffix(part, ":none") && part != "bwd:missing" {
			out = append(out, part)
		}
	}
	return out
}

// numericCause reports whether tag names the cause of wrong numbers (not
// a kernel's own exception or its worker's end).
func numericCause(tag string) bool { return namesCause(tag) && tag != "raises" && tag != "crash" }

// grade sets Raises, Named, Path and Correct: the run names the mutated
// path where one of its causes is a tag of that path (pyRegions).
func (r *bridgedResult) grade(family string) {
	if strings.HasSuffix(family, "-backward") {
		r.gradeBackward(family)
		return
	}
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

// gradeBackward grades a mutant of a backward's kernels by its gradients'
// parts alone (gradientParts): the forward's finding the gradients were
// judged past is the unmutated kernel's, and names nothing of the mutant.
func (r *bridgedResult) gradeBackward(family string) {
	r.Raises = r.Tag == "raises" || r.Tag == "crash"
	r.Path, _ = bridgedGradeOf(family, r.Generated, "")
	// the backward's own forward found wrong ("fwd:recomputed", where the
	// kernel's prefill is right), or a forward's finding alone (no gradient
	// judged past it), names the mutant where a line of the forward it
	// recomputes was mutated
	forwardOnly := func(tag string) bool {
		return strings.HasPrefix(tag, "fwd:recomputed") || (!strings.Contains(tag, "bwd:") && strings.HasPrefix(tag, "fwd:") && namesCause(tag))
	}
	// atPath: a part of tag at the mutated path; related: one that states
	// a relation (a forward's finding, or a gradient's other than in(…))
	atPath := func(tag string) (at, related bool) {
		parts := gradientParts(tag)
		if forwardOnly(tag) {
			parts = append(parts, strings.SplitN(tag, "+", 2)[0])
		}
		for _, part := range parts {
			if _, ok := bridgedGradeOf(family, r.Generated, part); ok {
				at = true
				related = related || !strings.Contains(part, ":in(")
			}
		}
		return at, related
	}
	names := func(tag string) bool { return len(gradientParts(tag)) > 0 || forwardOnly(tag) }
	// the run's tag: its most frequent that names a gradient's relation or location
	best := 0
	for tag, n := range r.Tags {
		if names(tag) && (n > best || (n == best && tag < r.Tag)) {
			r.Tag, best = tag, n
		}
	}
	r.Named = names(r.Tag)
	r.Strict, _ = atPath(r.Tag)
	r.Correct, r.Related = false, false
	for tag := range r.Tags {
		at, rel := atPath(tag)
		r.Correct, r.Related = r.Correct || at, r.Related || rel
	}
}

// regradeBridged grades a generated-FAMILY.json's diagnoses again (after a
// change of the grading) and prints its summary.
//
// A journal (FILE.jsonl: a header, then one result a line) is summarized
// into FILE.json.
func regradeBridged(b []byte, path string) error {
	var saved struct {
		Family     string          `json:"family"`
		Seed       uint64          `json:"seed"`
		Candidates int             `json:"candidates"`
		Mutants    []bridgedResult `json:"mutants"`
	}
	if strings.HasSuffix(path, ".jsonl") {
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if err := json.Unmarshal([]byte(lines[0]), &saved); err != nil {
			return fmt.Errorf("%s: line 1: %w", path, err)
		}
		byID := map[int]bridgedResult{}
		if err := journalResults(byID, lines[1:], path); err != nil {
			return err
		}
		for _, r := range byID {
			saved.Mutants = append(saved.Mutants, r)
		}
		sort.Slice(saved.Mutants, func(i, j int) bool { return saved.Mutants[i].ID < saved.Mutants[j].ID })
		path = strings.TrimSuffix(path, "l")
	} else if err := json.Unmarshal(b, &saved); err != nil {
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

// regradeParts grades the journals of a population judged in parts (over
// several leases, each its own .jsonl) as one: the first journal's header,
// every part's results, a mutant judged in two parts by the later's. The
// summary goes to the first journal's name with -parts.json.
func regradeParts(paths []string) error {
	var all []string
	for k, path := range paths {
		if !strings.HasSuffix(path, ".jsonl") {
			return fmt.Errorf("-regrade %s: the parts of a population are its .jsonl journals", path)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if k > 0 {
			lines = lines[1:] // each part's header: the first's is the population's
		}
		all = append(all, lines...)
	}
	merged := strings.TrimSuffix(paths[0], ".jsonl") + "-parts.jsonl"
	return regradeBridged([]byte(strings.Join(all, "\n")), merged)
}

// journalResults adds the result lines of a journal (after its header;
// the baseline's line, of no ID, left out) to byID: a mutant a later line
// judged again by that line, one a later part did not reach by the part
// that judged it.
func journalResults(byID map[int]bridgedResult, lines []string, path string) error {
	for i, l := range lines {
		var r bridgedResult
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			return fmt.Errorf("%s: line %d: %w", path, i+2, err)
		}
		if r.ID == 0 {
			continue // the baseline's line
		}
		if old, ok := byID[r.ID]; ok && r.Outcome == NotRun && old.Outcome != NotRun {
			continue // a later part that did not judge it again
		}
		byID[r.ID] = r // a later part's judgement over an earlier's
	}
	return nil
}

// judgedIn is the IDs the journals hold a judgement of (not "not run"):
// -skip-judged leaves them out of a part judged after them.
func judgedIn(paths []string) (map[int]bool, error) {
	byID := map[int]bridgedResult{}
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if err := journalResults(byID, strings.Split(strings.TrimSpace(string(b)), "\n")[1:], path); err != nil {
			return nil, err
		}
	}
	out := map[int]bool{}
	for id, r := range byID {
		if r.Outcome != "" && r.Outcome != NotRun {
			out[id] = true
		}
	}
	return out, nil
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
	var viable, killed, survived, raises, numeric, named, correct, strict, related, stillborn, notRun int
	for _, r := range rs {
		switch r.Outcome {
		case Stillborn:
			stillborn++
			continue
		case NotRun:
			notRun++
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
				if r.Related {
					related++
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
	fmt.Printf("\n%d mutants of %d candidates (seed %d): %d stillborn, %d not run (the time budget), %d viable; %d killed (%.0f%%), %d survived\n", len(rs), candidates, seed, stillborn, notRun, viable, killed, pct(killed, viable), survived)
	fmt.Printf("killed: %d raise (the kernel's own exception, named so), %d compute wrong numbers: %d named (%.0f%%), %d with a cause at the mutated path (%.0f%%), %d whose most frequent cause is (%.0f%%)\n",
		raises, numeric, named, pct(named, numeric), correct, pct(correct, numeric), strict, pct(strict, numeric))
	if strings.HasSuffix(family, "-backward") {
		fmt.Printf("backward: %d of the %d at the mutated path by a relation of the gradient (%.0f%%), the others by where it fails alone\n", related, correct, pct(related, correct))
	}
	fmt.Printf("matrix in %s\n", path)
	return nil
}

// regradeRuns judges again, from what they left, the runs whose -out
// folders are dirs (each a population's part: its generated-FAMILY.jsonl
// journal, and for each mutant it judged generated-FAMILY/gID/suite.log
// and report/report.json): the same suite output graded by the runner's
// present rules (gradeRun), the device's time not spent again. A part
// whose journal records no refusals of the unmutated kernel (a run before
// they were recorded) takes them from its own baseline/ logs, else from
// baseLogs (a folder of an earlier part's baseline/suite*.log: the same
// checkout and suite). Each part's regraded journal is written beside
// its own (-regraded.jsonl) and the parts are summarized as one
// (regradeParts).
func regradeRuns(dirs []string, baseLogs string) error {
	var parts []string
	for _, dir := range dirs {
		js, _ := filepath.Glob(filepath.Join(dir, "generated-*.jsonl"))
		js = slices.DeleteFunc(js, func(p string) bool {
			return strings.HasSuffix(p, "-regraded.jsonl") || strings.HasSuffix(p, "-parts.jsonl")
		})
		if len(js) != 1 {
			return fmt.Errorf("-regrade-runs %s: want one generated-FAMILY.jsonl journal there, found %d", dir, len(js))
		}
		b, err := os.ReadFile(js[0])
		if err != nil {
			return err
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		var head struct {
			Family string `json:"family"`
		}
		if err := json.Unmarshal([]byte(lines[0]), &head); err != nil || head.Family == "" {
			return fmt.Errorf("%s: line 1: want the journal's header (its family)", js[0])
		}
		base, err := loadBaseline(js[0])
		if err != nil {
			return fmt.Errorf("%s: %w (a run against a checkout)", js[0], err)
		}
		runs := filepath.Join(dir, strings.TrimSuffix(filepath.Base(js[0]), ".jsonl"))
		if len(base.refusals) == 0 {
			logs, _ := filepath.Glob(filepath.Join(runs, "baseline", "suite*.log"))
			if len(logs) == 0 && baseLogs != "" {
				logs, _ = filepath.Glob(filepath.Join(baseLogs, "suite*.log"))
			}
			if len(logs) == 0 {
				return fmt.Errorf("%s: no refusals of the unmutated kernel recorded, and no baseline/suite*.log under %s (-baseline-logs DIR names an earlier part's)", js[0], runs)
			}
			for _, l := range logs {
				lb, err := os.ReadFile(l)
				if err != nil {
					return err
				}
				for sig := range tritonRefusals(lb) {
					if !slices.Contains(base.refusals, sig) {
						base.refusals = append(base.refusals, sig)
					}
				}
			}
			sort.Strings(base.refusals)
		}
		out := []string{lines[0]}
		bl, _ := json.Marshal(map[string]any{"baseline_failing": base.failed, "baseline_idle": base.idle, "baseline_refusals": base.refusals})
		out = append(out, string(bl))
		changed := 0
		for i, l := range lines[1:] {
			var r bridgedResult
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				return fmt.Errorf("%s: line %d: %w", js[0], i+2, err)
			}
			if r.ID == 0 {
				continue // the baseline's line, written anew above
			}
			mdir := filepath.Join(runs, fmt.Sprintf("g%d", r.ID))
			if log, err := os.ReadFile(filepath.Join(mdir, "suite.log")); err == nil && r.Outcome != NotRun {
				n := gradeRun(head.Family, r.Generated, log, !suitePassed.Match(log), filepath.Join(mdir, "report", "report.json"), true, base)
				n.Seconds = r.Seconds
				if n.Outcome != r.Outcome || n.Tag != r.Tag {
					changed++
					fmt.Printf("[%4d] %-22s %s:%d %s -> %s %s\n", r.ID, r.Op, filepath.Base(r.File), r.Line, r.Outcome, n.Outcome, n.Tag)
				}
				r = n
			}
			nl, _ := json.Marshal(r)
			out = append(out, string(nl))
		}
		path := strings.TrimSuffix(js[0], ".jsonl") + "-regraded.jsonl"
		if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
			return err
		}
		fmt.Printf("%s: %d of %d judged anew differ; %s\n", js[0], changed, len(out)-2, path)
		parts = append(parts, path)
	}
	return regradeParts(parts)
}

// suitePassed is the last line of a test binary's run that passed.
var suitePassed = regexp.MustCompile(`(?m)^PASS$`)

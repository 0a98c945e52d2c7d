// Command mutants proves that the verification suite catches kernel bugs.
// It builds the CPU backend once per entry of the mutation catalogue
// (the patch cmd/mutants/patches/K-name.patch plants one realistic bug in
// a copy of kernels/src: ssmk_methods.h, cpu.cpp, …), runs the suite (go test ./verify; ./golden tests the golden
// files, not the library) against each mutant through SSMK_LIB, and prints
// which test killed which mutant. It fails when the unmutated build does
// not pass, when the build declaring an engine's features (engineLib) does
// not, or when any mutant survives. A mutant's run stops at its first
// failing test, whose diagnosis must name the bug (-matrix runs every test
// against every mutant, for the whole kill matrix). The accuracy mutants
// are judged one per CPU at a time (-j), with the checks that time the
// library left out of their runs; the check faults after them, alone. Run
// it from the repository root: make mutants.
//
// With -cuda it does the same for the CUDA library on a GPU machine: its
// own paths (the time-parallel composition, the fast paths, foh's near
// branch, the rescan, the backward's chunks; CUDACatalogue, planted in
// kernels/src/cuda/) and the catalogue's bugs planted in the headers its
// kernels compile too (DeviceShared), so that the suite is shown to catch
// those in the device's code as well as the CPU build's. The mutants are
// built with nvcc in parallel, the suite runs from prebuilt test binaries
// (-bin, as scripts/gpu.sh carries them; no Go there) and stops at a
// mutant's first failing test (-failfast: a kill needs one).
// scripts/gpu.sh mutants runs it.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"ssmverify/cmd/mutants/patch"
	"ssmverify/report"
	"ssmverify/testrun"
)

// Mutant is one planted bug and the cause its diagnosis must name. A
// check fault (Check > 0) is a planted fault of what a performance check
// decides (a lying timer, device-side input corruption, …): the seven
// checks alone run against it, and it is killed only when check Check, and
// no other, fails.
type Mutant struct {
	K           int    `json:"k"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Cause       string `json:"cause,omitempty"`
	Check       int    `json:"check,omitempty"`
	// Run restricts the suite to the tests that judge this bug's feature
	// (a -run pattern over ./verify; "" runs the whole suite).
	Run string `json:"run,omitempty"`
}

// MinDiagnosed is the fraction of mutants whose diagnosis must name their
// cause.
const MinDiagnosed = 0.9

// Catalogue lists the mutants; each K is the patch
// cmd/mutants/patches/K-name.patch (TestPatchesApply checks that each
// applies to today's sources).
var Catalogue = []Mutant{
	{1, "bilinear-sign", "bilinear with the sign flipped, Ā = (1 − x/2)/(1 + x/2), as in the original notes", "bilinear-sign", 0, ""},
	{2, "rk4-factor", "rk4's x³ term divided by 12 instead of 24", "g-term:x^3", 0, ""},
	{3, "foh-no-guard", "foh's φ1 as (e^x − 1)/x everywhere: no small-x guard (0/0 at x = 0, cancellation near it)", "phi1-no-guard", 0, ""},
	{4, "log2e", "float exp2f(x·log2e) with log2(e) = 1.4427 (wrong in the 5th digit)", "exp-scaled", 0, ""},
	{5, "poly-term", "poly without its x²/6 term", "method:highorder", 0, ""},
	{6, "complex-fallback", "rk4 with complex A silently computes zoh (undeclared fallback)", "method:zoh", 0, ""},
	{7, "no-D", "the D·u skip term dropped", "no-D", 0, ""},
	{8, "softplus-order", "softplus applied before delta_bias is added", "softplus-before-bias", 0, ""},
	{9, "group-index", "variable B/C read from group d mod n_groups instead of d/(dim/n_groups)", "group-index", 0, ""},
	{10, "conj-C", "C conjugated in the complex output", "conj-C", 0, ""},
	{11, "output-before-update", "y accumulated from the state before this step's update", "output-before-update", 0, ""},
	{12, "complex-factor-2", "complex output Re(Σ C·h) without the factor 2", "complex-factor-2", 0, ""},
	{13, "gate-no-z", "the SiLU gate as y·sigmoid(z) without the z factor", "gate-no-z", 0, ""},
	{14, "foh-narrow-guard", "foh's series guard at |x| < 0.03 instead of 1/2: (e^x − 1)/x cancels by up to 20u for 0.03 ≤ |x| < 1/2", "phi1-narrow-guard", 0, ""},
	{15, "device-inputs", "a plan folds delta_bias into its own copy of delta in place after its first launch, which the scan still adds: every later launch sees delta + 2·bias", "", 1, ""},
	{16, "timer-lies", "ssmk_plan_time reports half the elapsed time (events around half the work)", "", 2, ""},
	{17, "thread-result", "with more than one thread, y sums the states in reverse order: the result depends on the thread count", "", 3, ""},
	{18, "autotune-warmup", "an autotuner: the first 16 launches of a plan also run a slower variant (the harness warms up 10)", "", 5, ""},
	{19, "no-z-slow", "a scan without z takes an unfused path that does the scan twice: less work costs more", "", 6, ""},
	{20, "foh-slow", "foh's plans run three extra passes: 4× zoh, beyond Check7's limit", "", 7, ""},
	{21, "h0-ignored", "ssmk_scan_fwd_state ignores the initial state: every piece starts from 0", "h0-ignored", 0, resumeRun},
	{22, "h0-late", "the initial state added after the first step's update instead of before it", "h0-late", 0, resumeRun},
	{23, "h0-batch", "the initial state read from batch entry 0 for every batch row", "h0-batch", 0, resumeRun},
	{24, "h0-16bit", "the initial state kept in 16 bits (bfloat16) when it is read", "h0-16bit", 0, resumeRun},
	{25, "state-16bit", "fp16/bf16 inputs: the state kept in bfloat16 between steps instead of float32", "state-16bit", 0, narrowRun},
	{26, "output-truncated", "fp16/bf16 inputs: each output truncated to the 16-bit type instead of rounded to nearest", "output-truncated", 0, narrowRun},
	{27, "delta-16bit", "fp16/bf16 inputs: Δ rounded to the input type after the bias and softplus", "delta-16bit", 0, narrowRun},
	{28, "dA-16bit", "fp16/bf16 inputs: Δ·A rounded to bfloat16 before the exponential", "dA-16bit", 0, narrowRun},
	{29, "bwd-zoh", "the backward differentiates zoh whatever the method (the fork's autograd ran zoh's backward for all)", "bwd-method:zoh", 0, backwardRun},
	{30, "bwd-no-softplus", "the backward drops softplus' derivative σ(v) from ddelta and ddelta_bias", "bwd-no-softplus", 0, backwardRun},
	{31, "bwd-no-dt-chain", "the backward forgets the chain through Δ in Ā: Ā'(x)·a missing from ddelta (dA keeps it)", "bwd-delta-chain", 0, backwardRun},
	{32, "bwd-padded-tail", "the backward sweeps the padded tail of a partial chunk as input: Δ = softplus(bias) where there is none, dlast_state entering at the padded end", "bwd-padded-tail", 0, backwardRun},
	{33, "foh-half-angle", "complex foh's cos b and sin b from sin and cos of b/2: inexact where Im z is subnormal (φ1 28/27 of 1), e^z's error larger", "subnormal-x", 0, ""},
	{34, "bwd-chunk-adjoint", "the backward drops the adjoint carried back into a chunk of the sweep from the chunk after it (each of its 64-step chunks starts from λ = 0)", "bwd-chunk", 0, backwardRun},
	{35, "bwd-16bit-truncated", "fp16/bf16 backward: du, ddelta, dz and variable dB/dC truncated to the 16-bit type instead of rounded to nearest", "bwd-truncated", 0, narrowBackwardRun},
	{36, "bwd-16bit-weights", "fp16/bf16 backward: the gradients of the float weights (dA, dD, ddelta_bias) rounded to the 16-bit input type", "bwd-weights-16bit", 0, narrowBackwardRun},
	{37, "bwd-16bit-y", "fp16/bf16 backward: dz from y rounded to the input type (as if read back from a 16-bit out): a second rounding", "bwd-y-16bit", 0, narrowBackwardRun},
	{38, "bwd-16bit-group-sum", "fp16/bf16 backward: variable dB and dC summed over a group's channels in the 16-bit type (as 16-bit atomics would), not in float", "bwd-16bit-sum", 0, narrowBackwardRun},
	{39, "out-overrun", "the outputs stored in whole vectors of 4: the last row's padding written past the end of out (a seqlen not a multiple of 4)", "memory:overrun:out", 0, ""},
	{40, "delta-in-place", "Δ after the bias and softplus written back into the input delta", "memory:input:delta", 0, ""},
	{41, "no-bias-and-output-early", "two slips in one build: delta_bias ignored, and y read from the state before this step's update (a shrunk case keeps only the one its failure needs)", "no-bias+output-before-update", 0, ""},
	{42, "bwd-saved-unsaved", "plans on saved states (ssmk_plan_create_bwd_saved): the creation saves no states, so every chunk after a row's first starts the sweep from 0", "bwd-saved-states", 0, backwardRun},
}

// engineLib is the CPU build declaring an engine's features
// (SSMK_CPU_ENGINE: no z, variable B/C only, refusing the rest), which the
// suite must pass with what it does not take listed as not supported.
const engineLib = "build/libssmk_cpu_engine.so"

// backwardRun is the suite's tests of the backward pass.
const backwardRun = "^TestBackward"

// resumeRun is the suite's test of scans that resume from a state.
const resumeRun = "^TestResumption$"

// narrowRun is the suite's tests of the 16-bit input types (verify's
// TestNarrow…), the only ones that scan in them.
const narrowRun = "^TestNarrow"

// forwardOnly is what a forward kernel bug's run leaves out: the tests of
// the backward, of the 16-bit types and the gradients' error table.
const forwardOnly = "^TestBackward|^TestNarrow|^TestGradErrorByDType$"

// narrowBackwardRun is the suite's tests of the backward in the 16-bit
// input types.
const narrowBackwardRun = "^TestNarrowBackward"

// kindOf is the catalogue's class of m, as make mutants and the documents
// count them: "check" (a fault of a performance check), "narrow" (a bug of
// the 16-bit types, forward or backward), "backward", "resume" (a scan
// from a state), "kernel" (the scan's arithmetic, judged by the whole
// suite).
func kindOf(m Mutant) string {
	switch {
	case m.Check > 0:
		return "check"
	case m.Run == narrowRun || m.Run == narrowBackwardRun:
		return "narrow"
	case m.Run == backwardRun:
		return "backward"
	case m.Run != "":
		return "resume"
	}
	return "kernel"
}

// CUDACatalogue lists the mutants of the CUDA library's own code, which
// the CPU build does not have; each K's patch changes kernels/src/cuda/
// alone.
var CUDACatalogue = []Mutant{
	{101, "scan-level", "time-parallel composition: the lanes' scan of affine maps leaves out the product of level 8 (Kogge–Stone)", "", 0, ""},
	{102, "carry-dropped", "time-parallel composition: the state entering a tile is not composed into lane 0's map (lanes 1–31 start from 0)", "", 0, ""},
	{103, "expsum-window", "fast path (e^{a·ΣΔ} windows): the ΣΔ of each scan level summed over the wrong runs", "", 0, ""},
	{104, "near-range", "foh's near branch: the degree-5 series taken up to |x| < 1.5, twice its interval", "", 0, ""},
	{105, "rescan-skipped", "the rescan: a tile whose products of Ā overflow is never rescanned sequentially (∞·0 = NaN stays)", "", 0, ""},
	{106, "dpoly-power", "fast path (Taylor methods' Δ·g as a polynomial in Δ): coefficients c_k·a^(k+1), one power too many", "", 0, ""},
	{107, "bilinear-du", "fast path (input term from Δ·u): bilinear's B·(Δ·u·g) as zoh's B·(Δ·u), g dropped", "", 0, ""},
	{108, "bwd-padded-tail", "backward: the padded steps past seqlen of a row's last chunk take Δ = softplus(bias) instead of 0 (Ā ≠ 1 between dlast_state and the last step)", "", 0, ""},
	{109, "bwd-chunk-adjoint", "backward: the adjoint entering a chunk from the one after it dropped (each chunk starts from λ = 0)", "", 0, ""},
	{110, "chan-state-dropped", "channel-sequential forward: a lane's states not carried from one tile of 16 steps to the next (each tile starts from the initial state)", "", 0, ""},
	{111, "chan-scatter", "channel-sequential forward: the lanes of a channel finish each other's steps (lane s writes its sums at the mirrored block of steps)", "", 0, ""},
	{112, "chan-b-row", "channel-sequential forward: every state of a lane updated with its first state's row of B", "", 0, ""},
	{113, "bwd-chan-adjoint-carry", "channel-sequential backward: a lane's adjoint not carried from one tile of 16 steps to the one before it (each tile starts from dlast_state)", "", 0, ""},
	{114, "bwd-chan-round-sum", "channel-sequential backward: variable dB and dC summed over half of a warp's channels (two of the four each lane of a round's sum adds)", "", 0, ""},
	{115, "bwd-chan-entering-state", "channel-sequential backward: every tile's states recomputed from the initial state, not from phase 1's state entering the tile", "", 0, ""},
	{116, "chan-cplx-quadrant", "channel-sequential forward, complex A: cos θ's sign taken from sin θ's quadrant bit (wrong in quadrants 1 and 3)", "", 0, ""},
	{117, "chan-cplx-du-vote", "channel-sequential forward, complex A: zoh's fast tiles take B·(Δ·u) without the vote that Δ·u is finite (∞ where Δ·B·u is not)", "", 0, ""},
	{118, "bwd-saved-unsaved", "plans on saved states (ssmk_plan_create_bwd_saved): the creation saves no states (the scratch's, a chunk or tile apart, never written)", "", 0, ""},
	{119, "bwd-saved-design", "plans on saved states: each launch chooses its backward design afresh instead of the one its states were saved for (row states a chunk apart read as tiles)", "", 0, ""},
}

// designFirst are the CUDA library's own mutants in code that the suite's
// own shapes never reach: the channel designs, which the library takes for
// many channels, and the saved plans' choice of design, which only a change
// of SSMK_BACKWARD between a plan's creation and its launch exercises. Only
// package kernels' design tests (each design forced in turn) kill them, so
// their runs take kernels before verify: killed in seconds, not after verify's
// whole suite (113–115 took 141–156 s that way on the H200).
var designFirst = []int{110, 111, 112, 113, 114, 115, 116, 117, 119}

// bindingFirst is pkgs with ./kernels moved to the front.
func bindingFirst(pkgs string) string {
	fs := strings.Fields(pkgs)
	if i := slices.Index(fs, "./kernels"); i > 0 {
		fs = append([]string{"./kernels"}, slices.Delete(fs, i, i+1)...)
	}
	return strings.Join(fs, " ")
}

// cudaOwn reports whether m is of CUDACatalogue.
func cudaOwn(m Mutant) bool {
	return slices.ContainsFunc(CUDACatalogue, func(c Mutant) bool { return c.K == m.K })
}

// DeviceShared lists the catalogue's mutants planted in the headers that
// the CUDA build's kernels compile (ssmk_methods.h: the methods'
// coefficients, softplus, the output's terms, the group index;
// ssmk_narrow.h: the 16-bit rounding): -cuda builds them into the CUDA
// library too. The others sit in the CPU build's own files.
var DeviceShared = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 13, 14, 26, 33}

// cudaMutants is the catalogue of -cuda: the catalogue's DeviceShared
// bugs, then the CUDA library's own.
func cudaMutants() []Mutant {
	var ms []Mutant
	for _, k := range DeviceShared {
		ms = append(ms, Catalogue[k-1])
	}
	return append(ms, CUDACatalogue...)
}

// checkRun selects the seven checks (not their decision tests, which use
// no library).
const checkRun = "^TestCheck[1-7][A-Z]"

// checkTest is the test function of performance check n.
func checkTest(n int) string {
	return map[int]string{1: "TestCheck1IdenticalInputs", 2: "TestCheck2Synchronisation", 3: "TestCheck3Threading",
		4: "TestCheck4CodePaths", 5: "TestCheck5Warmup", 6: "TestCheck6MicroBenchmarks", 7: "TestCheck7MethodComparison"}[n]
}

type result struct {
	Mutant
	Outcome  Outcome  `json:"outcome"`
	Killed   bool     `json:"killed"`
	KilledBy []string `json:"killed_by"`
	Seconds  float64  `json:"seconds"`
	// Diagnosed is the most frequent diagnosis tag of the suite's failures
	// (report.json's diagnoses); Correct when it is Cause.
	Diagnosed string         `json:"diagnosed"`
	Tags      map[string]int `json:"diagnosis_tags"`
	Correct   bool           `json:"diagnosis_correct"`
}

var (
	pkgs           = flag.String("pkgs", "./verify", "packages of the suite to run against each mutant (-cuda: ./verify ./kernels)")
	cuda           = flag.Bool("cuda", false, "the CUDA library's mutants (DeviceShared and CUDACatalogue), built with nvcc; needs a GPU")
	arch           = flag.String("arch", "90", "-cuda: the compute capability to build for")
	bin            = flag.String("bin", "", "a folder of prebuilt test binaries <pkg>.test to run instead of go test (scripts/gpu.sh build)")
	out            = flag.String("out", "out", "folder for mutants.json and the logs")
	only           = flag.String("only", "", "comma-separated mutant numbers to run (default: all; -bridged -generate: the IDs of the sample's generated mutants)")
	matrix         = flag.Bool("matrix", false, "run every test against every mutant, for the whole kill matrix (default: stop at a mutant's first failing test)")
	jobs           = flag.Int("j", 0, "accuracy mutants judged at once (0: one per CPU for the CPU build, 1 with -cuda)")
	gen            = flag.Int("generate", 0, "judge a sample of this many generated mutants (mutation operators applied mechanically to the CPU build's sources) instead of the catalogue")
	seed           = flag.Uint64("seed", 1, "-generate: the sample's seed")
	bridgedF       = flag.String("bridged", "", "-generate: mutate the adapter of this bridged family (mamba2: bridge/python/adapters/numpy_ssd.py) and judge each mutant with its whole suite instead")
	genFrom        = flag.Int("generate-from", 0, "-bridged: draw the sample from this position of the seeded order on (a population judged in parts: 0 for the first N, N for the next)")
	suiteBin       = flag.String("suite-bin", "", "-bridged: the suite's prebuilt test binary (go test -c ./verify/FAMILY); empty: built into build/mutants")
	checkoutF      = flag.String("checkout", "", "-bridged: mutate upstream's Triton kernels in this checkout of state-spaces/mamba (mamba2: the chunked prefill's, mamba2-backward: its backward's, mamba3: the SISO forward's) and judge each through FAMILY_upstream on the GPU")
	suiteRunF      = flag.String("suite-run", "", "-bridged: the suite's -test.run selection for the unmutated kernel and each mutant (default: all of it; mamba2-backward: its backward tests)")
	baselineF      = flag.String("baseline", "", "-bridged -checkout: the unmutated kernel's verdicts from an earlier run's journal (OUT/generated-FAMILY*.jsonl) instead of judging it again (a population judged in parts over several leases)")
	baselineShards = flag.Int("baseline-shards", 1, "-bridged -checkout: judge the unmutated kernel in this many processes at once, the suite's top-level tests dealt out among them (a cold Triton cache compiled side by side)")
	adapterArgs    = flag.String("adapter-args", "", "-bridged -checkout: more key=value arguments of the upstream adapter, the unmutated kernel's and every mutant's (pin=1: one configuration an autotuner key, docs/mutants.md)")
	skipJudged     = flag.String("skip-judged", "", "-bridged: comma-separated .jsonl journals of earlier parts: the sample's mutants they judged are left out (a population judged over several leases; -regrade J1,J2,… grades the parts as one)")
	budgetF        = flag.Duration("budget", 0, "-bridged: start no mutant after this long (those left are recorded as not run), so that a population fits a lease")
	genLine        = flag.String("generate-lines", "", "-generate (-bridged too): draw only from the mutations of source lines matching this regular expression (e.g. 'saved|starts|w\\.states|w\\.grads', the backward's saved states); -generate at least their number judges them all")
	regradeRunsF   = flag.String("regrade-runs", "", "-bridged: comma-separated -out folders of earlier runs (the parts of one population): each mutant graded again from its suite.log and report.json by the present rules, the parts summarized as one")
	baselineLogs   = flag.String("baseline-logs", "", "-regrade-runs: a folder of an earlier part's baseline/suite*.log, for a part that read its baseline from a journal recording no compile errors")
	regrade        = flag.String("regrade", "", "grade the diagnoses of a generated.json again (after a change of the regions' tags) and print its summary; comma-separated .jsonl journals: the parts of one population, graded as one")
	buildOnly      = flag.Bool("build-only", false, "-cuda: build the unmutated library and the mutants (through the object cache) and stop: that every patch still compiles, checked with nvcc before a GPU's time is spent (make mutants-cuda-build)")
	tree           = flag.Int("tree", 0, "write the sources of mutant K, a copy of kernels/ (and the ABI header) with its patch applied, into the folder given as the argument, and exit (the Makefile's mutant builds)")
)

func main() {
	flag.Parse()
	if *tree != 0 {
		if flag.NArg() != 1 {
			fatal(fmt.Errorf("-tree %d: want one folder to write the mutant's sources into", *tree))
		}
		if err := mutantTree(*tree, flag.Arg(0)); err != nil {
			fatal(err)
		}
		return
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fatal(err)
	}
	if *regradeRunsF != "" {
		if err := regradeRuns(strings.Split(*regradeRunsF, ","), *baselineLogs); err != nil {
			fatal(err)
		}
		return
	}
	if *regrade != "" {
		if err := regradeGenerated(*regrade); err != nil {
			fatal(err)
		}
		return
	}
	if *buildOnly && !*cuda {
		fatal(errors.New("-build-only: needs -cuda (the CPU build's mutants compile in seconds as they are judged)"))
	}
	if *genLine != "" && *gen <= 0 {
		fatal(fmt.Errorf("-generate-lines %q: needs -generate N, the number of its mutations to judge", *genLine))
	}
	var lines *regexp.Regexp // -generate-lines
	if *genLine != "" {
		re, err := regexp.Compile(*genLine)
		if err != nil {
			fatal(fmt.Errorf("-generate-lines %q: not a regular expression: %w", *genLine, err))
		}
		lines = re
	}
	if *gen > 0 && *bridgedF != "" {
		bin := *suiteBin
		if bin == "" {
			bin = filepath.Join("build", "mutants", *bridgedF+".test")
			if b, err := exec.Command("go", "test", "-c", "-o", bin, "./verify/"+suiteOf(*bridgedF)).CombinedOutput(); err != nil {
				fatal(fmt.Errorf("building the suite verify/%s: %v\n%s", suiteOf(*bridgedF), err, b))
			}
		}
		j := *jobs
		if j == 0 {
			j = generatedJobs()
		}
		if err := runBridgedGenerated(*bridgedF, *genFrom, *gen, *seed, j, bin, *checkoutF, *budgetF, lines); err != nil {
			fatal(err)
		}
		return
	}
	if *gen > 0 {
		j := *jobs
		if j == 0 {
			j = generatedJobs()
		}
		if err := runGenerated(*gen, *seed, lines, j); err != nil {
			fatal(err)
		}
		return
	}
	start := time.Now()
	catalogue, libOf := Catalogue, func(k int) string { return fmt.Sprintf("build/mutants/libssmk_cpu_m%d.so", k) }
	base, _ := filepath.Abs("build/libssmk_cpu.so")
	explicit := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if *cuda {
		catalogue, libOf = cudaMutants(), func(k int) string { return fmt.Sprintf("build/mutants/libssmk_cuda_m%d.so", k) }
		base, _ = filepath.Abs("build/mutants/libssmk_cuda_m0.so")
		if !explicit["pkgs"] {
			*pkgs = "./verify ./kernels"
		}
		var ks []int
		for _, m := range catalogue {
			if selected(m.K) {
				ks = append(ks, m.K)
			}
		}
		fmt.Printf("mutants: building the CUDA library (sm_%s) and %d mutants with nvcc, in parallel\n", *arch, len(ks))
		if err := buildCUDA(append([]int{0}, ks...), libOf); err != nil {
			fatal(err)
		}
		if *buildOnly {
			fmt.Printf("mutants: the unmutated library and %d mutants compile for sm_%s (build/mutants/)\n", len(ks), *arch)
			return
		}
	} else {
		fmt.Println("mutants: building the CPU library, its engine declaration and", len(catalogue), "mutants")
		if err := run("make", "-s", "lib"); err != nil {
			fatal(fmt.Errorf("make lib: %w", err))
		}
	}
	var sel []Mutant
	for _, m := range catalogue {
		if selected(m.K) {
			sel = append(sel, m)
		}
	}
	workers := *jobs
	if workers < 1 {
		workers = runtime.NumCPU()
		if *cuda {
			workers = 1
		}
	}
	skip := ""
	switch {
	case *cuda:
		skip = cudaSkip
	case workers > 1:
		skip = timedChecks
	}
	// The runs that no timing decides share the machine, `workers` at a
	// time, in this order: the unmutated build (its timed checks left out
	// when several run at once), the engine declaration, the accuracy
	// mutants. Each suite then gets one OpenMP thread: the library's team
	// would spin at its barriers on the core the other run needs. The
	// engine declaration is a control, not a mutant: the suite must pass
	// against it, fitting its problems to what the library declares it
	// takes. After them, alone and with the library's whole team, the
	// unmutated build's timed checks and the check faults, which timings
	// decide.
	var poolEnv []string
	if workers > 1 && !*cuda {
		poolEnv = []string{"OMP_NUM_THREADS=1"}
	}
	control := !*cuda && *only == ""
	results := make([]result, len(sel))
	ready := make([]chan struct{}, len(sel))
	for i := range ready {
		ready[i] = make(chan struct{})
	}
	type outcome struct {
		failed []string
		err    error
	}
	var baseline, engine outcome
	baseDone, engineDone, checksDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var baseFailed atomic.Bool
	jobs := make(chan func(), 2*len(sel)+2)
	jobs <- func() {
		baseline.failed, _, baseline.err = suite(base, *pkgs, "", skip, filepath.Join(*out, "mutant-0.log"), filepath.Join(*out, "mutant-0"), poolEnv, false)
		baseFailed.Store(baseline.err != nil || len(baseline.failed) > 0)
		close(baseDone)
	}
	if control {
		jobs <- func() {
			if err := run("make", "-s", engineLib); err != nil {
				fatal(fmt.Errorf("make %s: %w", engineLib, err))
			}
			abs, _ := filepath.Abs(engineLib)
			engine.failed, _, engine.err = suite(abs, *pkgs, "", skip, filepath.Join(*out, "engine.log"), filepath.Join(*out, "engine"), poolEnv, false)
			close(engineDone)
		}
	} else {
		close(engineDone)
	}
	for i, m := range sel {
		if m.Check == 0 {
			jobs <- func() {
				if !(*cuda && baseFailed.Load()) { // a GPU's time is not spent on mutants of a failing build
					results[i] = judge(m, libOf(m.K), skip, poolEnv)
					if *cuda {
						// The report waits for the unmutated build's whole suite; a
						// device call cut short still shows which mutants died.
						fmt.Fprintf(os.Stderr, "mutants: %d %s judged: %s (%.0f s)\n", m.K, m.Name, results[i].Outcome, results[i].Seconds)
					}
				}
				close(ready[i])
			}
		}
	}
	if !*cuda {
		for _, m := range sel {
			if m.Check > 0 { // built while the pool runs, judged alone after it
				jobs <- func() { build(m, libOf(m.K)) }
			}
		}
	}
	close(jobs)
	go func() {
		var wg sync.WaitGroup
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for job := range jobs {
					job()
				}
			}()
		}
		wg.Wait()
		if skip == timedChecks && !baseFailed.Load() {
			failed, _, err := suite(base, "./verify", timedChecks, "", filepath.Join(*out, "mutant-0-checks.log"), filepath.Join(*out, "mutant-0-checks"), nil, false)
			baseline.failed, baseline.err = failed, err
			baseFailed.Store(err != nil || len(failed) > 0)
		}
		close(checksDone)
		for i, m := range sel {
			if m.Check > 0 {
				if !baseFailed.Load() {
					results[i] = judge(m, libOf(m.K), "", nil)
				}
				close(ready[i])
			}
		}
	}()
	<-baseDone
	fmt.Printf("[baseline] %s ... ", base)
	if baseFailed.Load() {
		fmt.Println("FAIL")
		fatal(fmt.Errorf("the unmutated build must pass the suite: failed %v (%v); see %s/mutant-0.log", baseline.failed, baseline.err, *out))
	}
	if skip == timedChecks {
		fmt.Println("pass (its timed checks run alone, before the check faults)")
	} else {
		fmt.Println("pass")
	}
	for i := range sel {
		if sel[i].Check > 0 {
			<-checksDone
			if baseFailed.Load() {
				fatal(fmt.Errorf("the unmutated build must pass the timed checks, run alone: failed %v (%v); see %s/mutant-0-checks.log", baseline.failed, baseline.err, *out))
			}
		}
		<-ready[i]
		printResult(results[i], len(catalogue))
	}
	printMatrix(results)
	js, _ := json.MarshalIndent(results, "", "  ")
	if err := os.WriteFile(filepath.Join(*out, "mutants.json"), append(js, '\n'), 0o644); err != nil {
		fatal(err)
	}
	survivors, correct, kernel, resume, narrow, backward, diagnosable := 0, 0, 0, 0, 0, 0, 0
	for _, r := range results {
		if !r.Killed {
			survivors++
		}
		switch kindOf(r.Mutant) {
		case "narrow":
			narrow++
		case "backward":
			backward++
		case "resume":
			resume++
		case "kernel":
			kernel++
		}
		if r.Cause != "" {
			diagnosable++
		}
		if r.Correct {
			correct++
		}
	}
	fmt.Printf("\n%d of %d mutants killed in %.0f s (%d kernel bugs; %d resumption bugs; %d mixed-precision bugs; %d backward bugs; %d check faults, each by its check alone); matrix in %s/mutants.json\n",
		len(results)-survivors, len(results), time.Since(start).Seconds(), kernel, resume, narrow, backward, len(results)-kernel-resume-narrow-backward, *out)
	acc := float64(correct) / float64(max(1, diagnosable))
	if diagnosable > 0 {
		fmt.Printf("diagnosis: %d of %d kernel, resumption, mixed-precision and backward bugs diagnosed with their cause (%.0f%%; at least %.0f%% required)\n", correct, diagnosable, 100*acc, 100*MinDiagnosed)
	}
	status := 0
	<-engineDone
	if control {
		if engine.err != nil || len(engine.failed) > 0 {
			fmt.Printf("FAIL: the CPU build declaring an engine's features (%s) must pass the suite: failed %v (%v); see %s/engine.log\n",
				engineLib, engine.failed, engine.err, *out)
			status = 1
		} else {
			fmt.Printf("the CPU build declaring an engine's features (%s: no z, variable B/C only) passes the suite\n", engineLib)
		}
	}
	if survivors > 0 {
		fmt.Printf("FAIL: %d mutants not killed (survived, crashed, or the suite could not run): see the lines above\n", survivors)
		status = 1
	}
	if acc < MinDiagnosed && *only == "" && diagnosable > 0 {
		fmt.Printf("FAIL: diagnosis accuracy %.0f%% below %.0f%%\n", 100*acc, 100*MinDiagnosed)
		status = 1
	}
	os.Exit(status)
}

// judge builds mutant m (the CPU build; -cuda built them all before),
// runs the suite against it with the tests matching skip left out and env
// added to its environment, and classifies the outcome.
func judge(m Mutant, lib, skip string, env []string) result {
	t0 := time.Now()
	if !*cuda {
		build(m, lib)
	}
	abs, _ := filepath.Abs(lib)
	dir := filepath.Join(*out, fmt.Sprintf("mutant-%d", m.K))
	pkgs, tests := *pkgs, ""
	switch {
	case m.Check > 0:
		pkgs, tests = "./verify", checkRun
	case m.Run != "":
		pkgs, tests = "./verify", m.Run
		if m.Run == narrowRun {
			// a bug of the 16-bit forward: its tests judge it (one in the
			// shared rounding reaches the 16-bit backward's too, whose
			// diagnosis would name the gradients' truncation instead)
			skip = strings.TrimPrefix(skip+"|"+narrowBackwardRun, "|")
		}
	case cudaOwn(m):
		// A bug of the CUDA library's own paths, the forward's (101–107)
		// or the backward's (108, 109; and the backward's first phase runs
		// the forward's kernel): the whole suite judges it, less the
		// 16-bit backward's tests and the gradients' error table, which
		// recompute what TestBackward… judge.
		skip = strings.TrimPrefix(skip+"|"+narrowBackwardRun+"|^TestGradErrorByDType$", "|")
		if slices.Contains(designFirst, m.K) {
			pkgs = bindingFirst(pkgs)
		}
	default:
		// A bug of the forward scan's arithmetic: the forward's tests judge
		// it. The backward's and the 16-bit types' tests recompute that
		// arithmetic on their way (the backward differentiates the same
		// coefficients), but their diagnoses name the gradient or the
		// rounding, not the bug, and they would add time, not kills: the
		// backward and 16-bit mutants are judged by them.
		skip = strings.TrimPrefix(skip+"|"+forwardOnly, "|")
	}
	// A kill needs one failing test, and the diagnosis is that test's:
	// the run stops there unless the whole kill matrix is asked for. A check
	// fault's run goes on, since it is killed only when its check alone
	// fails.
	failfast := m.Check == 0 && (*cuda || !*matrix)
	failed, log, err := suite(abs, pkgs, tests, skip, filepath.Join(*out, fmt.Sprintf("mutant-%d.log", m.K)), dir, env, failfast)
	outcome := classify(failed, err, log)
	if m.Check > 0 && outcome == Killed && !onlyCheck(failed, m.Check) {
		// The timing checks decide from medians of a few launches on a
		// shared machine: another check's verdict can turn on one slow
		// round (on CI's 2 cores, 1 run in 3 for one fault or another). A
		// fault is imprecise when a second run agrees; its check must fail
		// alone in that run to kill it.
		failed, log, err = suite(abs, pkgs, tests, skip, filepath.Join(*out, fmt.Sprintf("mutant-%d-again.log", m.K)), dir, env, failfast)
		outcome = classify(failed, err, log)
		if outcome == Killed && !onlyCheck(failed, m.Check) {
			outcome = Imprecise
		}
	}
	r := result{Mutant: m, KilledBy: failed, Outcome: outcome, Seconds: time.Since(t0).Seconds()}
	r.Killed = r.Outcome == Killed
	if m.Cause != "" {
		r.Tags, r.Diagnosed = diagnoses(filepath.Join(dir, "report.json"))
		r.Correct = r.Diagnosed == m.Cause
	}
	return r
}

// build builds CPU mutant m into lib: an accuracy mutant at -O1 (half the
// compile time, the same arithmetic: the Makefile's MUTANT_OPT), a check
// fault, which timings decide, at the base build's -O3.
func build(m Mutant, lib string) {
	opt := "MUTANT_OPT=-O1"
	if m.Check > 0 {
		opt = "MUTANT_OPT=-O3"
	}
	if err := run("make", "-s", opt, lib); err != nil {
		fatal(fmt.Errorf("building mutant %d: %w", m.K, err))
	}
}

// printResult prints one mutant's line of the progress report.
func printResult(r result, n int) {
	fmt.Printf("[%2d/%d] %-22s ... ", r.K, n, r.Name)
	switch {
	case r.Outcome == Imprecise:
		fmt.Printf("IMPRECISE: want %s alone to fail, failed %v (%.0f s)\n", checkTest(r.Check), r.KilledBy, r.Seconds)
	case r.Killed && r.Check > 0:
		fmt.Printf("killed by %s alone (%.0f s)\n", checkTest(r.Check), r.Seconds)
	case r.Killed && r.Cause == "":
		fmt.Printf("killed by %s (%.0f s)\n", strings.Join(r.KilledBy, ", "), r.Seconds)
	case r.Outcome != Killed && r.Outcome != Survived:
		fmt.Printf("%s, not a kill (%.0f s): see %s/mutant-%d.log\n", strings.ToUpper(string(r.Outcome)), r.Seconds, *out, r.K)
	case r.Killed:
		mark := "diagnosed"
		if !r.Correct {
			mark = fmt.Sprintf("MISDIAGNOSED (want %s)", r.Cause)
		}
		by := fmt.Sprintf("%d tests", len(r.KilledBy))
		if len(r.KilledBy) == 1 {
			by = r.KilledBy[0]
		}
		fmt.Printf("killed by %s (%.0f s); diagnosis %s: %s\n", by, r.Seconds, r.Diagnosed, mark)
	default:
		fmt.Printf("SURVIVED (%.0f s)\n", r.Seconds)
	}
}

func selected(k int) bool {
	return *only == "" || strings.Contains(","+*only+",", fmt.Sprintf(",%d,", k))
}

// objCache is where the CUDA builds keep their objects (build-cuda.sh's
// SSMK_OBJ_CACHE) unless the environment names another: a mutant patches
// one file, and the units that do not include it are the unmutated build's.
const objCache = "build/mutants/objcache"

// buildCUDA builds the CUDA library once per k (0: unmutated) from a copy
// of kernels/ with mutant k's patch applied (mutantTree), half the CPUs at a
// time (nvcc is single-threaded and memory-hungry); each build's log is
// out/build-k.log. The first of ks builds alone, filling the object cache
// that the others then draw on.
func buildCUDA(ks []int, libOf func(int) string) error {
	t0 := time.Now()
	if os.Getenv("SSMK_OBJ_CACHE") == "" {
		abs, err := filepath.Abs(objCache)
		if err != nil {
			return err
		}
		os.Setenv("SSMK_OBJ_CACHE", abs)
	}
	sem := make(chan struct{}, max(1, runtime.NumCPU()/2))
	errs := make([]error, len(ks))
	var wg sync.WaitGroup
	first := make(chan struct{})
	for i, k := range ks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i == 0 {
				defer close(first)
			} else {
				<-first
			}
			sem <- struct{}{}
			defer func() { <-sem }()
			script := "kernels/build-cuda.sh"
			if k != 0 {
				dir := fmt.Sprintf("build/mutants/tree-cuda-m%d", k)
				if err := mutantTree(k, dir); err != nil {
					errs[i] = err
					return
				}
				script = filepath.Join(dir, script)
			}
			c := exec.Command(script, libOf(k), *arch)
			logPath := filepath.Join(*out, fmt.Sprintf("build-%d.log", k))
			b, err := c.CombinedOutput()
			_ = os.WriteFile(logPath, b, 0o644)
			if err != nil {
				errs[i] = fmt.Errorf("building CUDA mutant %d: %w (see %s)", k, err, logPath)
			}
		}()
	}
	wg.Wait()
	fmt.Printf("mutants: %d CUDA builds in %.0f s\n", len(ks), time.Since(t0).Seconds())
	return errors.Join(errs...)
}

func run(name string, args ...string) error {
	c := exec.Command(name, args...)
	c.Stdout, c.Stderr = os.Stderr, os.Stderr
	return c.Run()
}

// suite runs the suite's packages against lib, with verify's report
// written into reportDir, and returns the top-level tests that failed
// (`--- FAIL: TestX` at the start of a line). With -bin it runs the
// prebuilt <pkg>.test in each package's folder, as go test would; with
// failfast it stops at the first failing test and package, and with
// extraEnv it adds to the environment.
func suite(lib, pkgs, run, skip, logPath, reportDir string, extraEnv []string, failfast bool) ([]string, []byte, error) {
	abs, _ := filepath.Abs(reportDir)
	env := append(append(os.Environ(), "SSMK_LIB="+lib, "SSMK_REPORT_DIR="+abs), extraEnv...)
	var log bytes.Buffer
	var failed []string
	var err error
	// One package at a time (testrun): a stop is the run's end; one GPU.
	for _, pkg := range strings.Fields(pkgs) {
		res, e := testrun.Run(testrun.Spec{Root: ".", Package: strings.TrimPrefix(pkg, "./"), Bin: *bin, Run: run, Skip: skip,
			Failfast: failfast, Timeout: 10 * time.Minute, Env: env}, nil)
		if e != nil {
			err = e
			break
		}
		log.Write(res.Output)
		failed = append(failed, testrun.FailedTopLevel(res.Tests)...)
		if res.Err != nil {
			err = res.Err
			if failfast || *cuda {
				break
			}
		}
	}
	_ = os.WriteFile(logPath, log.Bytes(), 0o644)
	sort.Strings(failed)
	return failed, log.Bytes(), err
}

// cudaSkip leaves the seven performance checks out of the CUDA mutants'
// runs: the CUDA mutants are accuracy bugs, and a timing check that a busy
// GPU fails by noise must not count as a kill.
const cudaSkip = "^TestCheck[1-7][A-Z]"

// timedChecks are the checks that time the library (2, 3, 5, 6, 7), left
// out of the accuracy mutants' runs when several share the machine; the
// other two (1, 4) compare results and still run.
const timedChecks = "^TestCheck[23567][A-Z]"

// Outcome is what one run of the suite against a mutant shows.
type Outcome string

const (
	Killed    Outcome = "killed"     // a test failed
	Survived  Outcome = "survived"   // every test passed
	Crashed   Outcome = "crashed"    // the process died (a signal, a Go panic) before a test failed
	NotLoaded Outcome = "not loaded" // the suite could not open the library
	RunError  Outcome = "error"      // it exited non-zero for another reason (a build error, a timeout)
	Imprecise Outcome = "imprecise"  // a check fault made another test fail than its check, or more
)

// onlyCheck reports whether failed is exactly check n's test.
func onlyCheck(failed []string, n int) bool {
	return len(failed) == 1 && failed[0] == checkTest(n)
}

// classify tells a kill (a test failed) from the ways a run can end
// without one: only a failed test proves the suite caught the bug.
func classify(failed []string, err error, log []byte) Outcome {
	text := string(log)
	switch {
	case len(failed) > 0:
		return Killed
	case err == nil:
		return Survived
	case strings.Contains(text, "cannot open the library under test"):
		return NotLoaded
	case strings.Contains(text, "signal SIG") || strings.Contains(text, "signal arrived during") || strings.Contains(text, "panic: ") || strings.Contains(text, "fatal error: "):
		return Crashed
	}
	return RunError
}

// diagnoses counts the diagnosis tags of a report.json and returns the
// most frequent ("" when there is none; ties go to the tag seen first).
func diagnoses(path string) (map[string]int, string) {
	r, err := report.Load(path)
	if err != nil {
		return nil, ""
	}
	return mostFrequent(r.Diagnoses, func(d report.Diagnosis) string { return d.Tag })
}

func mostFrequent[T any](items []T, key func(T) string) (map[string]int, string) {
	counts := map[string]int{}
	best := ""
	for _, it := range items {
		k := key(it)
		counts[k]++
		if best == "" || counts[k] > counts[best] {
			best = k
		}
	}
	return counts, best
}

func printMatrix(results []result) {
	var tests []string
	seen := map[string]bool{}
	for _, r := range results {
		for _, t := range r.KilledBy {
			if !seen[t] {
				seen[t] = true
				tests = append(tests, t)
			}
		}
	}
	sort.Strings(tests)
	if *matrix {
		fmt.Println("\nkill matrix (x: the test failed against the mutant)")
	} else {
		fmt.Println("\nfirst kills (x: the test that failed first against the mutant; -matrix runs every test)")
	}
	for i, t := range tests {
		fmt.Printf("  T%-2d %s\n", i+1, t)
	}
	fmt.Printf("\n%-3s %-22s", "k", "mutant")
	for i := range tests {
		fmt.Printf(" T%-2d", i+1)
	}
	fmt.Println("  killed")
	for _, r := range results {
		fmt.Printf("%-3d %-22s", r.K, r.Name)
		for _, t := range tests {
			mark := " . "
			for _, k := range r.KilledBy {
				if k == t {
					mark = " x "
				}
			}
			fmt.Printf(" %s", mark)
		}
		if r.Killed {
			fmt.Println("  yes")
		} else {
			fmt.Println("  NO")
		}
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "mutants:", err)
	os.Exit(1)
}

// patchDir holds the mutants' patches, one per K: K-name.patch, K in three
// digits.
const patchDir = "cmd/mutants/patches"

// patchOf is mutant k's patch, read from root's patchDir.
func patchOf(root string, k int) (string, error) {
	files, _ := filepath.Glob(filepath.Join(root, patchDir, fmt.Sprintf("%03d-*.patch", k)))
	if len(files) != 1 {
		return "", fmt.Errorf("mutant %d: %d patches %s/%03d-*.patch, want one", k, len(files), patchDir, k)
	}
	b, err := os.ReadFile(files[0])
	return string(b), err
}

// mutantTree writes into dir the kernels' sources with mutant k's patch
// applied (sourceTree), so that the shipped sources carry no planted bug.
func mutantTree(k int, dir string) error {
	diff, err := patchOf(".", k)
	if err != nil {
		return err
	}
	if err := sourceTree(".", dir, diff); err != nil {
		return fmt.Errorf("mutant %d: %w", k, err)
	}
	return nil
}

// sourceTree writes into dir what a build of our kernels reads: a copy of
// root's kernels/ (build-cuda.sh included) with diff applied, and beside it the
// ABI's header, cudalib/include, unpatched: dir/kernels/build-cuda.sh finds
// it where it finds the shipped one.
func sourceTree(root, dir, diff string) error {
	if err := patch.Tree(root, "kernels", dir, diff); err != nil {
		return err
	}
	return patch.Copy(root, filepath.Join("cudalib", "include"), dir)
}

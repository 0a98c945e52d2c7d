// Command mutants proves that the verification suite catches kernel bugs.
// It builds the CPU backend once per entry of the mutation catalogue
// (-DSSMK_MUTANT=k plants one realistic bug in cudalib/src/ssmk_methods.h or
// cpu.cpp), runs the suite (go test ./verify ./golden) against each mutant
// through SSMK_LIB, and prints a kill matrix: which tests killed which
// mutant. It fails when the unmutated build does not pass or any mutant
// survives. Run it from the repository root: make mutants.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Mutant is one planted bug and the cause its diagnosis must name.
type Mutant struct {
	K           int    `json:"k"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Cause       string `json:"cause"`
}

// MinDiagnosed is the fraction of mutants whose diagnosis must name their
// cause.
const MinDiagnosed = 0.9

// Catalogue lists the mutants; each K appears as SSMK_MUTANT == K in the
// C sources (TestCatalogueMatchesSources checks it).
var Catalogue = []Mutant{
	{1, "bilinear-sign", "bilinear with the sign flipped, Ā = (1 − x/2)/(1 + x/2), as in the original notes", "bilinear-sign"},
	{2, "rk4-factor", "rk4's x³ term divided by 12 instead of 24", "g-term:x^3"},
	{3, "foh-no-guard", "foh's φ1 as (e^x − 1)/x everywhere: no small-x guard (0/0 at x = 0, cancellation near it)", "phi1-no-guard"},
	{4, "log2e", "float exp2f(x·log2e) with log2(e) = 1.4427 (wrong in the 5th digit)", "exp-scaled"},
	{5, "poly-term", "poly without its x²/6 term", "method:highorder"},
	{6, "complex-fallback", "rk4 with complex A silently computes zoh (undeclared fallback)", "method:zoh"},
	{7, "no-D", "the D·u skip term dropped", "no-D"},
	{8, "softplus-order", "softplus applied before delta_bias is added", "softplus-before-bias"},
	{9, "group-index", "variable B/C read from group d mod n_groups instead of d/(dim/n_groups)", "group-index"},
	{10, "conj-C", "C conjugated in the complex output", "conj-C"},
	{11, "output-before-update", "y accumulated from the state before this step's update", "output-before-update"},
	{12, "complex-factor-2", "complex output Re(Σ C·h) without the factor 2", "complex-factor-2"},
	{13, "gate-no-z", "the SiLU gate as y·sigmoid(z) without the z factor", "gate-no-z"},
	{14, "foh-narrow-guard", "foh's series guard at |x| < 1e-3 instead of 1/2: (e^x − 1)/x cancels for 1e-3 ≤ |x| ≪ 1", "phi1-narrow-guard"},
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
	pkgs   = flag.String("pkgs", "./verify ./golden", "packages of the suite to run against each mutant")
	out    = flag.String("out", "out", "folder for mutants.json and the logs")
	only   = flag.String("only", "", "comma-separated mutant numbers to run (default: all)")
	gotest = flag.String("go", "go", "the go command")
)

func main() {
	flag.Parse()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fatal(err)
	}
	start := time.Now()
	fmt.Println("mutants: building the CPU library and", len(Catalogue), "mutants")
	if err := run("make", "-s", "lib"); err != nil {
		fatal(fmt.Errorf("make lib: %w", err))
	}
	base, _ := filepath.Abs("build/libssmk_cpu.so")
	fmt.Printf("[baseline] %s ... ", base)
	failed, _, err := suite(base, filepath.Join(*out, "mutant-0.log"), filepath.Join(*out, "mutant-0"))
	if err != nil || len(failed) > 0 {
		fmt.Println("FAIL")
		fatal(fmt.Errorf("the unmutated build must pass the suite: failed %v (%v); see %s/mutant-0.log", failed, err, *out))
	}
	fmt.Println("pass")
	var results []result
	for _, m := range Catalogue {
		if *only != "" && !strings.Contains(","+*only+",", fmt.Sprintf(",%d,", m.K)) {
			continue
		}
		t0 := time.Now()
		lib := fmt.Sprintf("build/mutants/libssmk_cpu_m%d.so", m.K)
		if err := run("make", "-s", lib); err != nil {
			fatal(fmt.Errorf("building mutant %d: %w", m.K, err))
		}
		abs, _ := filepath.Abs(lib)
		fmt.Printf("[%2d/%d] %-22s ... ", m.K, len(Catalogue), m.Name)
		dir := filepath.Join(*out, fmt.Sprintf("mutant-%d", m.K))
		failed, log, err := suite(abs, filepath.Join(*out, fmt.Sprintf("mutant-%d.log", m.K)), dir)
		r := result{Mutant: m, KilledBy: failed, Outcome: classify(failed, err, log), Seconds: time.Since(t0).Seconds()}
		r.Killed = r.Outcome == Killed
		r.Tags, r.Diagnosed = diagnoses(filepath.Join(dir, "report.json"))
		r.Correct = r.Diagnosed == m.Cause
		switch {
		case r.Outcome != Killed && r.Outcome != Survived:
			fmt.Printf("%s, not a kill (%.0f s): see %s/mutant-%d.log\n", strings.ToUpper(string(r.Outcome)), r.Seconds, *out, m.K)
		case r.Killed:
			mark := "diagnosed"
			if !r.Correct {
				mark = fmt.Sprintf("MISDIAGNOSED (want %s)", m.Cause)
			}
			fmt.Printf("killed by %d tests (%.0f s); diagnosis %s: %s\n", len(r.KilledBy), r.Seconds, r.Diagnosed, mark)
		default:
			fmt.Printf("SURVIVED (%.0f s)\n", r.Seconds)
		}
		results = append(results, r)
	}
	printMatrix(results)
	js, _ := json.MarshalIndent(results, "", "  ")
	if err := os.WriteFile(filepath.Join(*out, "mutants.json"), append(js, '\n'), 0o644); err != nil {
		fatal(err)
	}
	survivors, correct := 0, 0
	for _, r := range results {
		if !r.Killed {
			survivors++
		}
		if r.Correct {
			correct++
		}
	}
	fmt.Printf("\n%d of %d mutants killed in %.0f s; matrix in %s/mutants.json\n", len(results)-survivors, len(results), time.Since(start).Seconds(), *out)
	acc := float64(correct) / float64(max(1, len(results)))
	fmt.Printf("diagnosis: %d of %d mutants diagnosed with their cause (%.0f%%; at least %.0f%% required)\n", correct, len(results), 100*acc, 100*MinDiagnosed)
	status := 0
	if survivors > 0 {
		fmt.Printf("FAIL: %d mutants not killed (survived, crashed, or the suite could not run): see the lines above\n", survivors)
		status = 1
	}
	if acc < MinDiagnosed && *only == "" {
		fmt.Printf("FAIL: diagnosis accuracy %.0f%% below %.0f%%\n", 100*acc, 100*MinDiagnosed)
		status = 1
	}
	os.Exit(status)
}

func run(name string, args ...string) error {
	c := exec.Command(name, args...)
	c.Stdout, c.Stderr = os.Stderr, os.Stderr
	return c.Run()
}

// suite runs the suite against lib, with verify's report written into
// reportDir, and returns the top-level tests that failed (`--- FAIL: TestX`
// at the start of a line).
func suite(lib, logPath, reportDir string) ([]string, []byte, error) {
	args := append([]string{"test", "-count=1", "-v", "-timeout=10m"}, strings.Fields(*pkgs)...)
	c := exec.Command(*gotest, args...)
	abs, _ := filepath.Abs(reportDir)
	c.Env = append(os.Environ(), "SSMK_LIB="+lib, "SSMK_REPORT_DIR="+abs)
	var buf bytes.Buffer
	c.Stdout, c.Stderr = &buf, &buf
	err := c.Run()
	_ = os.WriteFile(logPath, buf.Bytes(), 0o644)
	seen := map[string]bool{}
	var failed []string
	sc := bufio.NewScanner(&buf)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if f, ok := strings.CutPrefix(sc.Text(), "--- FAIL: "); ok {
			name := strings.Fields(f)[0]
			if !seen[name] {
				seen[name] = true
				failed = append(failed, name)
			}
		}
	}
	sort.Strings(failed)
	return failed, buf.Bytes(), err
}

// Outcome is what one run of the suite against a mutant shows.
type Outcome string

const (
	Killed    Outcome = "killed"     // a test failed
	Survived  Outcome = "survived"   // every test passed
	Crashed   Outcome = "crashed"    // the process died (a signal, a Go panic) before a test failed
	NotLoaded Outcome = "not loaded" // the suite could not open the library
	RunError  Outcome = "error"      // it exited non-zero for another reason (a build error, a timeout)
)

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
	case strings.Contains(text, "signal SIG") || strings.Contains(text, "panic: ") || strings.Contains(text, "fatal error: "):
		return Crashed
	}
	return RunError
}

// diagnoses counts the diagnosis tags of a report.json and returns the
// most frequent ("" when there is none; ties go to the tag seen first).
func diagnoses(path string) (map[string]int, string) {
	var r struct {
		Diagnoses []struct {
			Tag string `json:"tag"`
		} `json:"diagnoses"`
	}
	b, err := os.ReadFile(path)
	if err != nil || json.Unmarshal(b, &r) != nil {
		return nil, ""
	}
	return mostFrequent(r.Diagnoses, func(d struct {
		Tag string `json:"tag"`
	}) string {
		return d.Tag
	})
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
	fmt.Println("\nkill matrix (x: the test failed against the mutant)")
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

// Package testrun runs a package's tests in a child process and reads back
// what each test decided: the one runner behind the gate (cmd/gate), the
// mutation tester (cmd/mutants) and the suite's own report (verify's
// TestMain reads its output with Parse to give each failure its reason).
//
// A child is `go test -v` on a machine with Go, or the package's prebuilt
// test binary (`pkg.test -test.v`, as scripts/gpu.sh carries them to GPU
// machines without Go); its verbose output is parsed by go-junit-report's
// parser into one Test per test and subtest, with its log lines.
//
// A failure's reason is the first line of the message the test failed
// with: the first log line written from a call site of t.Error, t.Errorf,
// t.Fatal or t.Fatalf in the package's sources (ErrorSites), so that the
// test's informational logs (the library's name, a table) are not taken
// for it; where no such line is found (a helper that calls t.Helper, a
// property test's report, a prebuilt binary far from its sources), the
// first log line.
package testrun

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jstemmer/go-junit-report/v2/gtr"
	"github.com/jstemmer/go-junit-report/v2/parser/gotest"
)

// Results of a test.
const (
	Pass      = "pass"
	Fail      = "fail"
	Skip      = "skip"
	Undecided = "undecided" // skipped with "undecided: why": ran and could not decide here
	// Crashed: started and never ended (the process died inside it). Not
	// a failure of the test's judgement: the mutation tester does not count
	// it as a kill; the gate fails on it.
	Crashed = "crashed"
)

// Test is one test function or subtest as the child reported it.
type Test struct {
	Package string
	Name    string
	Result  string
	Seconds float64
	// Output is the test's own log lines, as printed (indented).
	Output []string
	// Reason is the first line of a failure's message, or of an undecided
	// test's reason; empty for a pass or a skip.
	Reason string
}

// Spec is one child process: a package's tests with -run and -skip.
type Spec struct {
	Root    string // the module's root (go test's working folder)
	Package string // folder under Root: "verify", "golden", "fuzz"
	// Bin is a folder of prebuilt test binaries <pkg>.test; empty: go test.
	Bin       string
	Run, Skip string
	Failfast  bool
	Timeout   time.Duration // 0: 30 minutes
	Args      []string      // the test binary's own flags (after -args)
	Env       []string      // the whole environment
}

// Command is the child process of s.
func (s Spec) Command() (*exec.Cmd, error) {
	if s.Bin == "" {
		args := append(append([]string{"test"}, s.flags("-")...), "./"+s.Package)
		if len(s.Args) > 0 {
			args = append(append(args, "-args"), s.Args...)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Env = s.Root, s.Env
		return cmd, nil
	}
	bin, err := filepath.Abs(filepath.Join(s.Bin, filepath.Base(s.Package)+".test"))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("no test binary %s: build it with scripts/gpu.sh build (or run without -bin on a machine with Go)", bin)
	}
	cmd := exec.Command(bin, append(s.flags("-test."), s.Args...)...)
	cmd.Dir, cmd.Env = filepath.Join(s.Root, s.Package), s.Env
	return cmd, nil
}

// flags are the test flags of s, each with prefix: "-" for go test,
// "-test." for a test binary.
func (s Spec) flags(prefix string) []string {
	timeout := s.Timeout
	if timeout == 0 {
		timeout = 30 * time.Minute
	}
	f := []string{prefix + "v", prefix + "count=1", prefix + "timeout=" + timeout.String()}
	if s.Run != "" {
		f = append(f, prefix+"run="+s.Run)
	}
	if s.Skip != "" {
		f = append(f, prefix+"skip="+s.Skip)
	}
	if s.Failfast {
		f = append(f, prefix+"failfast")
	}
	return f
}

// Result is what one child process showed.
type Result struct {
	Tests  []Test
	Output []byte
	// Err is the process's error: nil for exit 0, an *exec.ExitError for a
	// non-zero exit (failing tests, or a crash: see Crashed).
	Err error
}

// Run runs s, writing its output to log as well when log is not nil, and
// parses it.
func Run(s Spec, log *os.File) (Result, error) {
	cmd, err := s.Command()
	if err != nil {
		return Result{}, err
	}
	var out bytes.Buffer
	if log != nil {
		cmd.Stdout = &teeWriter{&out, log}
	} else {
		cmd.Stdout = &out
	}
	cmd.Stderr = cmd.Stdout
	runErr := cmd.Run()
	if _, ok := runErr.(*exec.ExitError); runErr != nil && !ok {
		return Result{}, fmt.Errorf("%s: cannot run the tests: %v", s.Package, runErr)
	}
	tests, err := Parse(out.Bytes(), s.Package, ErrorSites(filepath.Join(s.Root, s.Package)))
	if err != nil {
		return Result{}, fmt.Errorf("%s: parsing the test output: %v", s.Package, err)
	}
	return Result{Tests: tests, Output: out.Bytes(), Err: runErr}, nil
}

type teeWriter struct {
	a, b interface{ Write([]byte) (int, error) }
}

func (t *teeWriter) Write(p []byte) (int, error) {
	if _, err := t.a.Write(p); err != nil {
		return 0, err
	}
	return t.b.Write(p)
}

// timedOut is the limit of go test's -timeout when out ends with its
// panic ("panic: test timed out after 8m30s"), else "".
func timedOut(out []byte) string {
	const mark = "panic: test timed out after "
	i := bytes.LastIndex(out, []byte(mark))
	if i < 0 || (i > 0 && out[i-1] != '\n') {
		return ""
	}
	rest := out[i+len(mark):]
	if j := bytes.IndexAny(rest, "\r\n"); j >= 0 {
		rest = rest[:j]
	}
	return strings.TrimSpace(string(rest))
}

// Parse reads go test's verbose output (-v, or -test.v) of package pkg:
// one Test per test and subtest, with the reasons of failures and of
// undecided tests (sites: ErrorSites of the package's sources; nil is
// allowed).
func Parse(out []byte, pkg string, sites map[string]bool) ([]Test, error) {
	parsed, err := gotest.NewParser(gotest.PackageName(pkg)).Parse(bytes.NewReader(out))
	if err != nil {
		return nil, err
	}
	var tests []Test
	blocks := failureBlocks(out)
	limit := timedOut(out)
	for _, p := range parsed.Packages {
		for _, t := range p.Tests {
			if len(t.Output) == 0 {
				// Without -v the parser keeps no output: a failure's lines
				// follow its "--- FAIL" line, indented under it.
				t.Output = blocks[t.Name]
			}
			res := map[gtr.Result]string{gtr.Pass: Pass, gtr.Fail: Fail, gtr.Skip: Skip}[t.Result]
			if res == "" {
				res = Crashed
			}
			tt := Test{Package: pkg, Name: t.Name, Result: res, Seconds: t.Duration.Seconds(), Output: t.Output}
			switch res {
			case Skip:
				// A check that could not decide here says "undecided: why"
				// when it skips: that is not a skip of choice.
				for _, l := range t.Output {
					if _, why, ok := strings.Cut(l, "undecided: "); ok {
						tt.Result, tt.Reason = Undecided, strings.TrimSpace(why)
						break
					}
				}
			case Fail:
				tt.Reason = Reason(t.Output, sites)
			case Crashed:
				tt.Reason = "the test process ended inside this test (a crash: see the log)"
				if limit != "" {
					// go test's -timeout panics in whatever test is running:
					// the run's budget ran out, no verdict on the kernel.
					tt.Result, tt.Reason = Undecided, "the run's time limit ("+limit+") ended the process inside this test: not judged"
				}
			}
			tests = append(tests, tt)
		}
	}
	// A parent that failed because a subtest did, with no message of its
	// own, takes its first failing subtest's reason, named.
	for i := range tests {
		if tests[i].Result != Fail || tests[i].Reason != "" {
			continue
		}
		for _, u := range tests {
			if u.Result == Fail && u.Reason != "" && strings.HasPrefix(u.Name, tests[i].Name+"/") {
				tests[i].Reason = strings.TrimPrefix(u.Name, tests[i].Name+"/") + ": " + u.Reason
				break
			}
		}
	}
	return tests, nil
}

// failureBlocks reads go test's output without -v: every "--- FAIL: name"
// line and the lines indented deeper under it, by test name.
func failureBlocks(out []byte) map[string][]string {
	blocks := map[string][]string{}
	var name string
	indent := -1
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		l := sc.Text()
		in := len(l) - len(strings.TrimLeft(l, " "))
		if rest, ok := strings.CutPrefix(strings.TrimLeft(l, " "), "--- FAIL: "); ok {
			name, indent = strings.Fields(rest)[0], in
			continue
		}
		if name == "" || in <= indent || strings.TrimSpace(l) == "" {
			name, indent = "", -1
			continue
		}
		blocks[name] = append(blocks[name], l)
	}
	return blocks
}

// logLine is a test's log line: "    file.go:12: message".
var logLine = regexp.MustCompile(`^\s*([\w.-]+\.go:\d+): (.*)$`)

// Reason is the first line of a failure's message among a test's log
// lines: the first written from an error call site (sites), else the first
// log line; "" when the test logged nothing. A first line too short to say
// what failed ("bilinear fp32 real: threshold 4", a header over a list)
// takes its next line too. A testify assertion's empty first line (its
// message follows in "Error Trace:", "Error:", "Messages:" fields) gives
// its Messages, else the first line of its Error.
func Reason(lines []string, sites map[string]bool) string {
	first, firstAt := "", -1
	for i, l := range lines {
		m := logLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if sites[m[1]] {
			return message(strings.TrimSpace(m[2]), lines, i)
		}
		if firstAt < 0 {
			first, firstAt = strings.TrimSpace(m[2]), i
		}
	}
	if firstAt < 0 {
		return ""
	}
	return message(first, lines, firstAt)
}

// message is the reason of the log line lines[i], whose text is msg.
func message(msg string, lines []string, i int) string {
	if msg == "" {
		if r := testifyMessage(lines[i+1:]); r != "" {
			return r
		}
	}
	return withNext(msg, lines, i)
}

// testifyField is a field of a testify failure: "	Messages:   	text".
var testifyField = regexp.MustCompile(`^\s*(Error Trace|Error|Test|Messages):\s*(.*)$`)

// testifyMessage reads a testify failure's fields from the lines after its
// log line (up to the next log line): its Messages, else its Error with
// the lines that continue it (assert.Equal's expected and actual), joined;
// "" when they are not there.
func testifyMessage(lines []string) string {
	var errText []string
	msgs, field := "", ""
	for _, l := range lines {
		if logLine.MatchString(l) {
			break
		}
		if m := testifyField.FindStringSubmatch(l); m != nil {
			field = m[1]
			switch field {
			case "Error":
				errText = append(errText, strings.TrimSpace(m[2]))
			case "Messages":
				msgs = strings.TrimSpace(m[2])
			}
		} else if field == "Error" && strings.TrimSpace(l) != "" {
			errText = append(errText, strings.TrimSpace(l))
		}
	}
	if msgs != "" {
		return msgs
	}
	return strings.Join(errText, " ")
}

// shortReason is the length under which a message's first line is taken
// with its next.
const shortReason = 60

// withNext is msg, the message of lines[i], with its next line appended
// when msg is short and the next line continues the same message (indented
// deeper, not a log line of its own).
func withNext(msg string, lines []string, i int) string {
	if len(msg) >= shortReason || i+1 >= len(lines) || logLine.MatchString(lines[i+1]) {
		return msg
	}
	next := strings.TrimSpace(lines[i+1])
	if next == "" || strings.HasPrefix(next, "---") || strings.HasPrefix(next, "===") {
		return msg
	}
	return strings.TrimSuffix(msg, ":") + " — " + next
}

// errorCall is a call that fails a test.
var errorCall = regexp.MustCompile(`\.(Error|Errorf|Fatal|Fatalf)\(`)

// ErrorSites lists the "file.go:line" of every call of Error, Errorf, Fatal
// or Fatalf in the Go files of dir (nil when dir holds none: a prebuilt
// binary run away from its sources).
func ErrorSites(dir string) map[string]bool {
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	if len(files) == 0 {
		return nil
	}
	sites := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for n := 1; sc.Scan(); n++ {
			if errorCall.MatchString(sc.Text()) {
				sites[filepath.Base(f)+":"+strconv.Itoa(n)] = true
			}
		}
	}
	return sites
}

// FailedTopLevel lists the top-level tests that failed, sorted.
func FailedTopLevel(tests []Test) []string {
	var out []string
	for _, t := range tests {
		if t.Result == Fail && !strings.Contains(t.Name, "/") {
			out = append(out, t.Name)
		}
	}
	sort.Strings(out)
	return out
}

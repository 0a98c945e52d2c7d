package testrun

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Crash is how a test process died inside a test: a panic the test did
// not recover (in the suite's own code, or a Go binding's), or a fatal
// signal (a kernel library's segmentation fault). The run goes on without
// that test (RunResuming); the test is reported as crashed, with Why.
type Crash struct {
	Test string // the top-level test it died in
	// Why is the line that says why ("panic: runtime error: index out of
	// range …", "SIGSEGV: segmentation violation …") with the first frame
	// of the suite's code below it where one is printed.
	Why    string
	Output []string // the process's last lines, for the log
}

var (
	runLine   = regexp.MustCompile(`^=== (RUN|CONT)\s+(\S+)`)
	crashLine = regexp.MustCompile(`^(panic: |fatal error: |SIG[A-Z]+: |unexpected fault address|signal arrived during)`)
	frameLine = regexp.MustCompile(`^\s+(\S+\.go:\d+)`)
)

// CrashOf reads a process's output for a crash inside a test: the first
// crash line and the top-level test running when it came (the last
// "=== RUN" before it). ok is false when the output shows none, or shows
// one outside any test.
func CrashOf(out []byte) (c Crash, ok bool) {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	running := ""
	for i, l := range lines {
		if m := runLine.FindStringSubmatch(l); m != nil {
			running, _, _ = strings.Cut(m[2], "/")
			continue
		}
		if !crashLine.MatchString(l) || running == "" {
			continue
		}
		c = Crash{Test: running, Why: strings.TrimSpace(l)}
		// the first frame in a .go file that is not the runtime's or the
		// testing package's: where it happened
		for _, f := range lines[i+1:] {
			m := frameLine.FindStringSubmatch(f)
			if m == nil || strings.Contains(m[1], "/src/runtime/") || strings.Contains(m[1], "/src/testing/") {
				continue
			}
			c.Why += " at " + shortPath(m[1])
			break
		}
		c.Output = lines[max(0, i-5):min(len(lines), i+40)]
		return c, true
	}
	return Crash{}, false
}

// shortPath is a source path from its module's top folder on ("judge/grads.go:185").
func shortPath(p string) string {
	parts := strings.Split(p, "/")
	if len(parts) > 2 {
		return strings.Join(parts[len(parts)-2:], "/")
	}
	return p
}

// maxResumes bounds how often RunResuming starts the process again: a
// library that crashes in every test is reported after this many.
const maxResumes = 32

// RunResuming runs s as Run does and, when the process crashes inside a
// test (CrashOf), runs it again without that test and without every test
// that had ended, so that one crash costs one test's verdict and not the
// rest. Before each resumed run, resume is called with the crash (to keep
// what the dead process had recorded: it returns the resumed run's extra
// test-binary Args, such as -append); an error from it ends the run. The
// Result holds every process's tests, each crashed test with Result
// Crashed and the crash's Why as its Reason, and the last process's Err.
func RunResuming(s Spec, log *os.File, resume func(Crash) ([]string, error)) (Result, []Crash, error) {
	var all Result
	var crashes []Crash
	var done []string
	base := s
	for attempt := 0; ; attempt++ {
		res, err := Run(s, log)
		if err != nil {
			return all, crashes, err
		}
		all.Output = append(all.Output, res.Output...)
		all.Err = res.Err
		c, crashed := Crash{}, false
		if res.Err != nil {
			c, crashed = CrashOf(res.Output)
		}
		for _, t := range res.Tests {
			if crashed && (t.Name == c.Test || strings.HasPrefix(t.Name, c.Test+"/")) {
				if t.Name == c.Test {
					t.Result, t.Reason = Crashed, "crashed: "+c.Why
					all.Tests = append(all.Tests, t)
				}
				continue
			}
			all.Tests = append(all.Tests, t)
			if !strings.Contains(t.Name, "/") && t.Result != Crashed {
				done = append(done, regexp.QuoteMeta(t.Name))
			}
		}
		if !crashed {
			return all, crashes, nil
		}
		if !hasTest(res.Tests, c.Test) {
			all.Tests = append(all.Tests, Test{Package: s.Package, Name: c.Test, Result: Crashed, Reason: "crashed: " + c.Why, Output: c.Output})
		}
		crashes = append(crashes, c)
		done = append(done, regexp.QuoteMeta(c.Test))
		if attempt == maxResumes {
			return all, crashes, fmt.Errorf("%s: the test process crashed %d times; the rest of its tests did not run", s.Package, len(crashes))
		}
		extra, err := resume(c)
		if err != nil {
			return all, crashes, err
		}
		if log != nil {
			fmt.Fprintf(log, "\ntestrun: the process crashed in %s (%s); resuming without it and the %d tests that ended\n", c.Test, c.Why, len(done))
		}
		s = base
		s.Args = append(append([]string(nil), base.Args...), extra...)
		skip := "^(" + strings.Join(done, "|") + ")$"
		if base.Skip != "" {
			skip = base.Skip + "|" + skip
		}
		s.Skip = skip
	}
}

func hasTest(tests []Test, name string) bool {
	for _, t := range tests {
		if t.Name == name {
			return true
		}
	}
	return false
}

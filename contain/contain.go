// Package contain turns a panic in the suite's own code into an error that
// names the step, its input and the line that panicked, so that one wrong
// assumption about what a kernel returns ends one diagnosis or comparison,
// not the run.
//
// The suite exists to meet wrong kernels: results of the wrong length, NaN
// where a number was due, a refusal where a result was due. Every step
// that reads a kernel's results (the judge's comparisons, the diagnoses,
// the report's tallies) is written to take anything, and the property
// tests of package diagnose drive them with arbitrary results. A panic that
// still happens is a bug of ssmverify; the exported entry points defer
// Recover so that it is reported as that bug, with what would reproduce it,
// rather than as a crash of the test process that loses every verdict:
//
//	func Scan(s Scanner, p *ssm.Problem, dt ssm.DType) (f Finding) {
//		defer func() {
//			if e := contain.Recovered(recover(), "diagnose.Scan", p.Shape); e != nil {
//				f = internalFinding(e)
//			}
//		}()
//		…
//
// recover must be called by the deferred function itself (the Go
// specification), which is why each entry point writes that closure and
// Recovered takes recover's value.
package contain

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Error is a panic recovered in the suite's own code.
type Error struct {
	Step  string // the entry point that panicked: "diagnose.Scan", "judge.CompareScan"
	Input string // what it was given, as far as it can be told ("" when that too panics)
	Value string // the panic's value, as fmt prints it
	Site  string // the first frame below the panic: "judge/grads.go:185 (judge.gradField.elem)"
	Stack string // the whole stack, for the log
}

// Tag is what a diagnosis that ended in a panic is reported under.
const Tag = "internal"

func (e *Error) Error() string {
	s := fmt.Sprintf("internal error of ssmverify in %s: panic: %s", e.Step, e.Value)
	if e.Site != "" {
		s += " at " + e.Site
	}
	if e.Input != "" {
		s += " (input: " + e.Input + ")"
	}
	return s + " — a bug of the suite, not a verdict on the kernel: please report it with this line"
}

// Recovered is the Error for r, the value recover returned in a deferred
// function of step, or nil when r is nil (no panic). input describes what
// step was given (a problem's shape); nil, or an input that panics itself,
// leaves Input empty.
func Recovered(r any, step string, input func() string) *Error {
	if r == nil {
		return nil
	}
	stack := string(debug.Stack())
	return &Error{Step: step, Input: describe(input), Value: fmt.Sprint(r), Site: site(stack), Stack: stack}
}

// describe calls input, recovering from a panic of its own.
func describe(input func() string) (s string) {
	if input == nil {
		return ""
	}
	defer func() {
		if recover() != nil {
			s = ""
		}
	}()
	return input()
}

// site is the first frame of stack below the runtime's panic: "file:line
// (function)", the file relative to the module's root where it can be.
func site(stack string) string {
	lines := strings.Split(stack, "\n")
	for i := 0; i+1 < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "panic(") {
			continue
		}
		for j := i + 2; j+1 < len(lines); j += 2 {
			fn, loc := strings.TrimSpace(lines[j]), strings.TrimSpace(lines[j+1])
			if strings.HasPrefix(fn, "runtime.") {
				continue // a runtime helper (goPanicIndex, panicmem) between panic and the faulting line
			}
			if k := strings.LastIndex(loc, " +0x"); k >= 0 {
				loc = loc[:k]
			}
			if k := strings.Index(loc, "/ssmverify/"); k >= 0 {
				loc = loc[k+len("/ssmverify/"):]
			} else if k := moduleRel(loc); k >= 0 {
				loc = loc[k:]
			}
			if k := strings.Index(fn, "("); k > 0 {
				fn = fn[:k]
			}
			return fmt.Sprintf("%s (%s)", loc, strings.TrimPrefix(fn, "ssmverify/"))
		}
	}
	return ""
}

// moduleRel is where the module-relative part of an absolute source path
// starts (after the checkout's folder): the folder of the first package of
// the module named in it, or −1.
func moduleRel(path string) int {
	for _, pkg := range packages {
		if k := strings.Index(path, "/"+pkg+"/"); k >= 0 {
			return k + 1
		}
	}
	return -1
}

// packages are the module's top-level folders whose code may panic.
var packages = []string{"judge", "diagnose", "report", "mamba1", "mamba2", "mamba3", "ssm", "gate", "bridge", "verify", "fuzz", "perf", "cudalib", "kernels", "golden", "testrun"}

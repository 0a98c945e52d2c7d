package main

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestClassify: only a failed test is a kill; a crash, a library that does
// not load and any other non-zero exit are reported as what they are.
func TestClassify(t *testing.T) {
	exit := errors.New("exit status 1")
	for _, c := range []struct {
		failed []string
		err    error
		log    string
		want   Outcome
	}{
		{[]string{"TestGolden"}, exit, "--- FAIL: TestGolden", Killed},
		{nil, nil, "ok  ssmverify/verify", Survived},
		{nil, exit, "verify: cannot open the library under test: dlopen failed", NotLoaded},
		{nil, errors.New("signal: segmentation fault"), "SIGSEGV: segmentation violation\nsignal SIGSEGV", Crashed},
		{nil, exit, "panic: runtime error: index out of range", Crashed},
		{nil, exit, "SIGABRT: abort\nPC=0x7f… m=3 sigcode=18446744073709551610\nsignal arrived during cgo execution", Crashed},
		{nil, exit, "cudalib/scan.go:12: syntax error", RunError},
	} {
		if got := classify(c.failed, c.err, []byte(c.log)); got != c.want {
			t.Errorf("classify(%v, %v, %q) = %s, want %s", c.failed, c.err, c.log, got, c.want)
		}
	}
}

// TestOnlyCheck: a check fault is killed by its own check alone.
func TestOnlyCheck(t *testing.T) {
	for _, c := range []struct {
		failed []string
		n      int
		want   bool
	}{
		{[]string{"TestCheck1IdenticalInputs"}, 1, true},
		{[]string{"TestCheck2Synchronisation"}, 1, false},
		{[]string{"TestCheck1IdenticalInputs", "TestCheck7MethodComparison"}, 1, false},
		{nil, 5, false},
	} {
		if got := onlyCheck(c.failed, c.n); got != c.want {
			t.Errorf("onlyCheck(%v, %d) = %t, want %t", c.failed, c.n, got, c.want)
		}
	}
	for _, m := range Catalogue {
		kernel, check, resume := m.Cause != "" && m.Check == 0 && m.Run == "", m.Check > 0 && checkTest(m.Check) != "" && m.Cause == "" && m.Run == "",
			m.Run != "" && m.Cause != "" && m.Check == 0
		if !kernel && !check && !resume {
			t.Errorf("mutant %d: a kernel bug names a cause, a check fault a check (1–7), a resumption bug a cause and a -run pattern: cause %q, check %d, run %q", m.K, m.Cause, m.Check, m.Run)
		}
	}
}

// readAll is the files' contents, one after the other.
func readAll(t *testing.T, files ...string) string {
	t.Helper()
	var src strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	return src.String()
}

// TestForwardOnly: a forward kernel bug's run leaves out the backward's and
// the 16-bit types' tests and the gradients' error table, and keeps every
// forward test that kills one of the catalogue's kernel bugs alone (14 and
// 33 are caught by the discretization tables only).
func TestForwardOnly(t *testing.T) {
	re := regexp.MustCompile(forwardOnly)
	for _, name := range []string{"TestBackwardAccuracy", "TestBackwardEveryCombination", "TestNarrowAccuracy",
		"TestNarrowBackwardAccuracy", "TestGradErrorByDType"} {
		if !re.MatchString(name) {
			t.Errorf("%s runs against the forward's kernel bugs", name)
		}
	}
	for _, name := range []string{"TestAccuracy", "TestAccuracyEveryCombination", "TestDiscretizeSweep",
		"TestDiscretizeEdges", "TestGolden", "TestResumption", "TestErrorByDType", "TestChunkBoundaries"} {
		if re.MatchString(name) {
			t.Errorf("%s is left out of the forward's kernel bugs' runs", name)
		}
	}
}

// TestCUDAOwnRunWholeSuite: the CUDA library's own mutants include the
// backward's (108, 109), which the forward's tests alone cannot kill, so
// they are not judged as the catalogue's forward kernel bugs are.
func TestCUDAOwnRunWholeSuite(t *testing.T) {
	for _, m := range CUDACatalogue {
		if !cudaOwn(m) || m.Run != "" {
			t.Errorf("mutant %d: cudaOwn %v, Run %q: want judged by the whole suite", m.K, cudaOwn(m), m.Run)
		}
	}
	for _, m := range Catalogue {
		if cudaOwn(m) {
			t.Errorf("catalogue mutant %d taken for the CUDA library's own", m.K)
		}
	}
}

// TestDesignFirstOrder: the mutants that only kernels' design tests kill
// are of the CUDA library's own catalogue, and their runs take kernels
// first while keeping every package; the others keep the given order.
func TestDesignFirstOrder(t *testing.T) {
	for _, k := range designFirst {
		if !slices.ContainsFunc(CUDACatalogue, func(m Mutant) bool { return m.K == k }) {
			t.Errorf("designFirst lists %d, not a mutant of CUDACatalogue", k)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"./verify ./kernels", "./kernels ./verify"},
		{"./kernels ./verify", "./kernels ./verify"},
		{"./verify", "./verify"},
		{"./golden ./verify ./kernels", "./kernels ./golden ./verify"},
	} {
		if got := bindingFirst(c.in); got != c.want {
			t.Errorf("bindingFirst(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

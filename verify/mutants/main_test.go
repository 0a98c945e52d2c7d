package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Every catalogued mutant is planted in the C sources, and every planted
// one is catalogued.
func TestCatalogueMatchesSources(t *testing.T) {
	src := readAll(t, "../../cudalib/src/ssmk_methods.h", "../../cudalib/src/ssmk_narrow.h", "../../cudalib/src/cpu.cpp", "../../cudalib/src/cpu_backward.cpp")
	if len(Catalogue) < 12 {
		t.Errorf("the catalogue has %d mutants, want at least 12", len(Catalogue))
	}
	for i, m := range Catalogue {
		if m.K != i+1 {
			t.Errorf("catalogue entry %d has k = %d, want %d", i, m.K, i+1)
		}
		if !strings.Contains(src, fmt.Sprintf("SSMK_MUTANT == %d", m.K)) {
			t.Errorf("mutant %d (%s) is not planted: no `SSMK_MUTANT == %d` in the sources", m.K, m.Name, m.K)
		}
	}
	if strings.Contains(src, fmt.Sprintf("SSMK_MUTANT == %d", len(Catalogue)+1)) {
		t.Errorf("the sources plant mutant %d, which the catalogue lacks", len(Catalogue)+1)
	}
}

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

// Every CUDA mutant is planted in the CUDA sources, and every one planted
// there is catalogued.
func TestCUDACatalogueMatchesSources(t *testing.T) {
	files, err := filepath.Glob("../../cudalib/src/cuda/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CUDA sources: %v", err)
	}
	planted := plantedIn(readAll(t, files...))
	for _, m := range CUDACatalogue {
		if !planted[m.K] {
			t.Errorf("CUDA mutant %d (%s) is not planted in cudalib/src/cuda/", m.K, m.Name)
		}
		if m.K <= 100 || m.Cause != "" || m.Check != 0 {
			t.Errorf("CUDA mutant %d: numbers above 100 (the CPU catalogue's are below), no cause, no check", m.K)
		}
		delete(planted, m.K)
	}
	for k := range planted {
		t.Errorf("cudalib/src/cuda/ plants mutant %d, which CUDACatalogue lacks", k)
	}
}

// DeviceShared is exactly the catalogue's mutants planted in the headers
// that the CUDA sources include, and each is an accuracy bug (the CUDA
// runs leave the timed checks out).
func TestDeviceSharedMatchesSources(t *testing.T) {
	headers := []string{"ssmk_methods.h", "ssmk_narrow.h"}
	planted := plantedIn(readAll(t, "../../cudalib/src/"+headers[0], "../../cudalib/src/"+headers[1]))
	files, _ := filepath.Glob("../../cudalib/src/cuda/*.cu")
	cu := readAll(t, files...)
	for _, h := range headers {
		if !strings.Contains(cu, `#include "../`+h+`"`) {
			t.Errorf("no CUDA source includes %s: its mutants would not reach the CUDA build", h)
		}
	}
	listed := map[int]bool{}
	for _, k := range DeviceShared {
		listed[k] = true
		if !planted[k] {
			t.Errorf("DeviceShared lists mutant %d, which %v do not plant", k, headers)
		}
		if k < 1 || k > len(Catalogue) || Catalogue[k-1].Check != 0 {
			t.Errorf("DeviceShared lists mutant %d: want an accuracy bug of the catalogue", k)
		}
	}
	for k := range planted {
		if !listed[k] {
			t.Errorf("%v plant mutant %d, which DeviceShared lacks", headers, k)
		}
	}
	ms := cudaMutants()
	if len(ms) != len(DeviceShared)+len(CUDACatalogue) || ms[0].K != DeviceShared[0] || ms[len(ms)-1].K != CUDACatalogue[len(CUDACatalogue)-1].K {
		t.Errorf("cudaMutants() = %d mutants, want DeviceShared's %d then CUDACatalogue's %d", len(ms), len(DeviceShared), len(CUDACatalogue))
	}
}

// TestFailedTests: only top-level "--- FAIL: " lines at the start of a line
// name a failed test, once each.
func TestFailedTests(t *testing.T) {
	log := "=== RUN   TestA\n--- FAIL: TestA (0.1s)\n    --- FAIL: TestA/sub (0.0s)\n--- PASS: TestB (0.0s)\n--- FAIL: TestA (0.1s)\n--- FAIL: TestC (1s)\nFAIL\n"
	if got := failedTests([]byte(log)); strings.Join(got, ",") != "TestA,TestC" {
		t.Errorf("failedTests = %v, want [TestA TestC]", got)
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

// plantedIn is the set of mutants src plants (SSMK_MUTANT == k or != k).
func plantedIn(src string) map[int]bool {
	planted := map[int]bool{}
	for _, m := range regexp.MustCompile(`SSMK_MUTANT [!=]= (\d+)`).FindAllStringSubmatch(src, -1) {
		k, _ := strconv.Atoi(m[1])
		planted[k] = true
	}
	return planted
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

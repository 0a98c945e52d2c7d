package main

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// Every catalogued mutant is planted in the C sources, and every planted
// one is catalogued.
func TestCatalogueMatchesSources(t *testing.T) {
	var src string
	for _, f := range []string{"../../cudalib/src/ssmk_methods.h", "../../cudalib/src/cpu.cpp"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src += string(b)
	}
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

package main

import (
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

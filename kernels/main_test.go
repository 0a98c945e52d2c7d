package kernels

import (
	"fmt"
	"os"
	"testing"

	"ssmverify/cudalib"
)

// TestMain stops the package at once, with one line that says what to do,
// when the library under test cannot be opened: every test needs it, and a
// failure of each would say the same thing many times over.
func TestMain(m *testing.M) {
	if _, err := cudalib.OpenDefault(); err != nil {
		fmt.Fprintln(os.Stderr, "kernels: cannot open the library under test:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// open returns the library under test: cudalib.OpenDefault (the CPU build
// in CI, the CUDA build on a GPU machine, or SSMK_LIB).
func open(t testing.TB) *cudalib.Library {
	t.Helper()
	l, err := cudalib.OpenDefault()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

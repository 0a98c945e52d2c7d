package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExitCodesAndMessages: what a CI log shows when the gate cannot run:
// exit 2 and one line that names the problem and what to do.
func TestExitCodesAndMessages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "gate")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	foreign := filepath.Join(dir, "libforeign.so")
	if err := os.WriteFile(foreign, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"missing library", []string{"SSMK_LIB=" + filepath.Join(dir, "nope.so")}, []string{"-out", dir + "/a", "-pkgs", ""}, 2, "library not found"},
		{"not a library", []string{"SSMK_LIB=" + foreign}, []string{"-out", dir + "/b", "-pkgs", ""}, 2, "does not load"},
		{"CUDA required, no GPU", []string{"SSMK_LIB=", "SSMK_BACKEND=cuda"}, []string{"-out", dir + "/c", "-pkgs", "", "-root", "../.."}, 2, "SSMK_BACKEND=cuda"},
		{"bad package", nil, []string{"-pkgs", "verify,bogus"}, 2, `unknown package "bogus"`},
		{"bad regression", nil, []string{"-max-regression", "5"}, 2, "-max-regression = 5"},
		{"missing baseline", nil, []string{"-baseline", filepath.Join(dir, "none.json")}, 2, "make baseline writes one"},
		{"bad seed", nil, []string{"-rapid-seed", "x"}, 2, "-rapid-seed"},
		{"merge without reports", nil, []string{"merge", "-out", dir + "/m"}, 2, "no task reports"},
		{"bench without a folder", nil, []string{"bench"}, 2, "want one folder of Check7 runs"},
		{"bench of an empty folder", nil, []string{"bench", empty}, 2, "no SIZE-DTYPE-COMPLEX-LIBRARY folders"},
		{"bench of a missing folder", nil, []string{"bench", filepath.Join(dir, "none")}, 2, "no such file"},
	} {
		cmd := exec.Command(bin, tc.args...)
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), tc.env...)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		code := 0
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		if code != tc.code || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: exit %d, output %q; want exit %d and %q", tc.name, code, out, tc.code, tc.want)
		}
	}
}

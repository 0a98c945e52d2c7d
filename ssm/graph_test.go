package ssm_test

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// goList returns `go list` output lines for args, or skips where no Go
// toolchain is at hand (a GPU machine runs the compiled test binaries).
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// TestPackageGraph holds the packages' layering: ssm at the floor imports
// nothing of the module; cudalib, the binding a user links, needs neither the
// references nor gonum; and only tests and commands import the verify suite.
func TestPackageGraph(t *testing.T) {
	for _, dep := range goList(t, "-deps", "./ssm") {
		if strings.HasPrefix(dep, "ssmverify/") && dep != "ssmverify/ssm" {
			t.Errorf("ssm depends on %s: the vocabulary must stay at the floor", dep)
		}
	}
	for _, dep := range goList(t, "-deps", "./cudalib") {
		if dep == "ssmverify/reference" || strings.HasPrefix(dep, "gonum.org/") {
			t.Errorf("cudalib depends on %s", dep)
		}
	}
	for _, line := range goList(t, "-f", "{{.ImportPath}} {{.Name}} {{join .Imports \" \"}}", "./...") {
		f := strings.Fields(line)
		if len(f) < 2 || f[1] == "main" {
			continue
		}
		for _, imp := range f[2:] {
			if imp == "ssmverify/verify" {
				t.Errorf("%s imports the verify suite: share through judge, report or ssm instead", f[0])
			}
		}
	}
}

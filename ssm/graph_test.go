package ssm_test

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
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
// families' references nor gonum; and only tests and commands import the
// verify suite.
func TestPackageGraph(t *testing.T) {
	for _, dep := range goList(t, "-deps", "./ssm") {
		if strings.HasPrefix(dep, "ssmverify/") && dep != "ssmverify/ssm" {
			t.Errorf("ssm depends on %s: the vocabulary must stay at the floor", dep)
		}
	}
	for _, dep := range goList(t, "-deps", "./cudalib") {
		if strings.HasPrefix(dep, "ssmverify/mamba") || strings.HasPrefix(dep, "gonum.org/") {
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

// TestFamiliesAlike holds the kernel families to one shape: each is a
// package (mamba1, mamba2, mamba3) with its problem and validation
// (problem.go; Mamba-1's is the ABI's, this package's Problem, which the
// binding shares), float64 reference (reference.go), error model
// (scale.go), known slips (slips.go, exported as Slips), generators
// (gen.go, Generate) and property tests beside them; a family to come
// (a backward operation, an engine's copy) is held to the same.
func TestFamiliesAlike(t *testing.T) {
	for _, fam := range []string{"mamba1", "mamba2", "mamba3"} {
		files := []string{"doc.go", "reference.go", "scale.go", "slips.go", "gen.go", "reference_test.go"}
		if fam != "mamba1" {
			files = append(files, "problem.go")
		}
		for _, f := range files {
			if _, err := os.Stat(filepath.Join("..", fam, f)); err != nil {
				t.Errorf("family %s lacks %s: %v", fam, f, err)
			}
		}
		fs := token.NewFileSet()
		funcs := map[string]bool{}
		for _, name := range strings.Fields(strings.Join(goList(t, "-f", "{{join .GoFiles \" \"}}", "./"+fam), " ")) {
			f, err := parser.ParseFile(fs, filepath.Join("..", fam, name), nil, 0)
			if err != nil {
				t.Fatalf("family %s: %v", fam, err)
			}
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
					funcs[fd.Name.Name] = true
				}
			}
		}
		for _, fn := range []string{"Slips", "Generate"} {
			if !funcs[fn] {
				t.Errorf("family %s exports no %s", fam, fn)
			}
		}
	}
}

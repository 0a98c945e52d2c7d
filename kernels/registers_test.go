package kernels

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// resUsage is cuobjdump -res-usage output in the shape nvcc 11.8 and 13
// print it: a Function line with the mangled name, then its resources; a
// key is the kernel's mangled template arguments (ScanTraits<float, false,
// 0, true>: "fLb0ELi0ELb1EE").
func resUsage(regs map[string]int) string {
	var b strings.Builder
	b.WriteString("\nFatbin elf code:\n================\narch = sm_90\n\nResource usage:\n")
	b.WriteString(" Function _ZN4ssmk62_GLOBAL__N__0b1e2c3d_10_kernels_cu_8b38e404_9876517discretize_kernelIdLb1EEEvixPKT_PKvPvS6_:\n")
	b.WriteString("  REG:200 STACK:80 SHARED:0 LOCAL:0 CONSTANT[0]:400 TEXTURE:0 SURFACE:0 SAMPLER:0\n")
	for name, r := range regs {
		b.WriteString(" Function _ZN4ssmk11scan_kernelINS_10ScanTraitsI" + name + "EEEvNS_10ScanParamsE:\n")
		b.WriteString("  REG:" + strconv.Itoa(r) + " STACK:0 SHARED:1024 LOCAL:0 CONSTANT[0]:656 TEXTURE:0 SURFACE:0 SAMPLER:0\n")
	}
	return b.String()
}

// TestScanRegistersScript runs scripts/scan-registers.sh (make cuda-check's
// register limit and gpu.sh's report) against a stand-in cuobjdump: it must
// name every scan kernel over the limit with its dtype, A, method, case and
// ignore the other kernels, and fail only when given a limit.
func TestScanRegistersScript(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	script, err := filepath.Abs("../scripts/scan-registers.sh")
	require.NoError(t, err)
	lib := filepath.Join(t.TempDir(), "lib.so")
	require.NoError(t, os.WriteFile(lib, []byte("not read: the stand-in cuobjdump prints the listing"), 0o644))

	within := map[string]int{"fLb0ELi0ELb1EE": 123, "dLb0ELi1ELb1EE": 128, "fLb1ELin1ELb0EE": 104}
	over := map[string]int{"fLb0ELi0ELb1EE": 123, "dLb0ELi1ELb1EE": 136, "dLb1ELin1ELb0EE": 130, "fLb0ELi5ELb0EE": 129}
	cases := []struct {
		name     string
		listing  string
		args     []string
		wantCode int
		want     []string
		notWant  []string
	}{
		{"within, limit given", resUsage(within), []string{"128"}, 0,
			[]string{"every scan kernel within 128; the most 128"}, []string{"discretize"}},
		{"over, limit given", resUsage(over), []string{"128"}, 1,
			[]string{"3 scan kernels over 128 (fewer than 4 blocks of 128 threads per SM)",
				"fp64 real foh (Mamba case): 136", "fp64 complex all methods (general): 130",
				"fp32 real rk4 (general): 129"}, []string{"zoh", "discretize"}},
		{"over, report only", resUsage(over), nil, 0, []string{"3 scan kernels over 128"}, nil},
		{"a lower limit", resUsage(within), []string{"120"}, 1,
			[]string{"2 scan kernels over 120:", "fp32 real zoh (Mamba case): 123", "fp64 real foh (Mamba case): 128"},
			[]string{"fewer than 4 blocks"}},
		{"no scan kernel", resUsage(nil), []string{"128"}, 2, []string{"no scan kernel found"}, nil},
		{"a limit that is not a number", resUsage(within), []string{"many"}, 2, []string{"MAX must be a number of registers, got 'many'"}, nil},
	}
	// run runs the script with a cuobjdump on PATH that prints listing.
	run := func(t *testing.T, listing string, args ...string) (string, int) {
		bin := t.TempDir()
		file := filepath.Join(bin, "listing.txt")
		require.NoError(t, os.WriteFile(file, []byte(listing), 0o644))
		return runWithTools(t, bin, map[string]string{"cuobjdump": "cat '" + file + "'"}, nil, script, args...)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, code := run(t, c.listing, append([]string{lib}, c.args...)...)
			assert.Equal(t, c.wantCode, code, "exit code; output:\n%s", out)
			for _, w := range c.want {
				assert.Contains(t, out, w)
			}
			for _, w := range c.notWant {
				assert.NotContains(t, out, w)
			}
		})
	}

	t.Run("no library", func(t *testing.T) {
		out, code := run(t, resUsage(within), filepath.Join(t.TempDir(), "missing.so"), "128")
		assert.Equal(t, 2, code)
		assert.Contains(t, out, "no library at")
	})
}

// runWithTools runs a bash script with stand-in executables first on PATH
// (in bin: name → the body of a sh script) and extra environment, and
// returns its combined output and exit code.
func runWithTools(t *testing.T, bin string, tools map[string]string, env []string, script string, args ...string) (string, int) {
	t.Helper()
	for name, body := range tools {
		require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	}
	cmd := exec.Command("bash", append([]string{script}, args...)...)
	cmd.Env = append(append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH")), env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	require.NoError(t, err)
	return string(out), 0
}

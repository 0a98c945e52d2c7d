package kernels

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sassListing is cuobjdump -sass output in nvcc's shape for the six fp32
// forward kernels: some straight-line code, then one loop of loops[m]
// instructions (its last a branch back to its first), then EXIT.
func sassListing(loops [6]int) string {
	var b strings.Builder
	for m, n := range loops {
		fmt.Fprintf(&b, "\n\tcode for sm_90\n\t\tFunction : _ZN4ssmk11scan_kernelINS_10ScanTraitsI%sEEEvNS_10ScanParamsE\n", fp32Forward(m))
		addr := 0
		ins := func(text string) {
			fmt.Fprintf(&b, "        /*%04x*/                   %s ;  /* 0x000fe20000000f00 */\n", addr, text)
			addr += 0x10
		}
		for i := 0; i < 10; i++ {
			ins("MOV R1, c[0x0][0x28]")
		}
		start := addr
		for i := 0; i < n-1; i++ {
			ins("FFMA R2, R3, R4, R2")
		}
		ins(fmt.Sprintf("@!P0 BRA 0x%x", start))
		ins("EXIT")
	}
	return b.String()
}

// fp32Forward is the mangled template arguments of method m's fp32 forward
// kernel (ScanTraits<float, false, m, true, float>, CS = false), as resUsage
// takes them.
func fp32Forward(m int) string { return fmt.Sprintf("fLb0ELi%dELb1EfEELb0", m) }

func sassResUsage(regs [6]int) string {
	byName := map[string]int{}
	for m, r := range regs {
		byName[fp32Forward(m)] = r
	}
	return resUsage(byName)
}

// TestScanSassScript runs scripts/scan-sass.sh (make cuda-check's check of
// the fp32 forward kernels' shape) against a stand-in cuobjdump and nvcc: it
// must pass a build of the baseline's shape, fail one whose loop or registers
// changed when the baseline is the same nvcc's and name it, only report
// against another nvcc's baseline, write the baseline with --update, and
// print the shape alone with --print (scripts/explore/explore.sh).
func TestScanSassScript(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	script, err := filepath.Abs("../scripts/scan-sass.sh")
	require.NoError(t, err)
	dir := t.TempDir()
	lib := filepath.Join(dir, "lib.so")
	require.NoError(t, os.WriteFile(lib, []byte("not read: the stand-in cuobjdump prints the listing"), 0o644))
	regs := [6]int{123, 127, 126, 123, 123, 123}
	loops := [6]int{219, 632, 252, 253, 248, 273}

	// run runs the script with cuobjdump and nvcc on PATH that print the
	// given listing and resource usage, and nvcc's release.
	run := func(t *testing.T, regs, loops [6]int, release string, args ...string) (string, int) {
		bin := t.TempDir()
		sass, res := filepath.Join(bin, "sass.txt"), filepath.Join(bin, "res.txt")
		require.NoError(t, os.WriteFile(sass, []byte(sassListing(loops)), 0o644))
		require.NoError(t, os.WriteFile(res, []byte(sassResUsage(regs)), 0o644))
		return runWithTools(t, bin, map[string]string{
			"cuobjdump": "case \"$1\" in -sass) cat '" + sass + "';; -res-usage) cat '" + res + "';; esac",
			"nvcc":      "echo 'Cuda compilation tools, release " + release + ", V" + release + ".89'",
		}, []string{"NVCC="}, script, args...)
	}

	base := filepath.Join(dir, "baseline.txt")
	out, code := run(t, regs, loops, "11.8", lib, base, "--update")
	require.Equal(t, 0, code, out)
	written, err := os.ReadFile(base)
	require.NoError(t, err)
	assert.Contains(t, string(written), "nvcc 11.8")
	assert.Contains(t, string(written), "zoh regs 123 stack 0 loops 219\n")
	assert.Contains(t, string(written), "rk4 regs 123 stack 0 loops 273\n")

	grown := loops
	grown[0] = 223
	moreRegs := regs
	moreRegs[3] = 128
	cases := []struct {
		name          string
		regs, loops   [6]int
		release       string
		wantCode      int
		want, notWant []string
	}{
		{"the baseline's shape", regs, loops, "11.8", 0, []string{"are the baseline's"}, []string{"changed"}},
		{"zoh's loop grown", regs, grown, "11.8", 1,
			[]string{"changed shape", "baseline: zoh regs 123 stack 0 loops 219", "now:      zoh regs 123 stack 0 loops 223", "scripts/explore/compare.sh"},
			[]string{"foh regs"}},
		{"poly's registers grown", moreRegs, loops, "11.8", 1, []string{"now:      poly regs 128 stack 0 loops 253"}, nil},
		{"another nvcc", regs, grown, "13.0", 0, []string{"changed shape", "reported, not judged"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, code := run(t, c.regs, c.loops, c.release, lib, base)
			assert.Equal(t, c.wantCode, code, "exit code; output:\n%s", out)
			for _, w := range c.want {
				assert.Contains(t, out, w)
			}
			for _, w := range c.notWant {
				assert.NotContains(t, out, w)
			}
		})
	}

	t.Run("--print", func(t *testing.T) {
		out, code := run(t, regs, grown, "13.0", lib, "--print")
		assert.Equal(t, 0, code, out)
		assert.Equal(t, "zoh regs 123 stack 0 loops 223\nfoh regs 127 stack 0 loops 632\nbilinear regs 126 stack 0 loops 252\n"+
			"poly regs 123 stack 0 loops 253\nhighorder regs 123 stack 0 loops 248\nrk4 regs 123 stack 0 loops 273\n", out)
		out, code = run(t, regs, loops, "11.8", lib, "--print", base)
		assert.Equal(t, 2, code)
		assert.Contains(t, out, "--print takes no third argument")
	})

	t.Run("bad arguments", func(t *testing.T) {
		out, code := run(t, regs, loops, "11.8", lib, filepath.Join(dir, "missing.txt"))
		assert.Equal(t, 2, code)
		assert.Contains(t, out, "no baseline at")
		out, code = run(t, regs, loops, "11.8", lib, base, "--updat")
		assert.Equal(t, 2, code)
		assert.Contains(t, out, "must be --update, got '--updat'")
		out, code = run(t, regs, loops, "11.8", filepath.Join(dir, "missing.so"), base)
		assert.Equal(t, 2, code)
		assert.Contains(t, out, "no library at")
	})
}

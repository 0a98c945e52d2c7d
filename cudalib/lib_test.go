package cudalib

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unsafe"

	"ssmverify/ssm"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMain stops the package at once, with one line that says what to do,
// when the library under test cannot be opened: every test but a few needs
// it, and a failure of each would say the same thing many times over.
func TestMain(m *testing.M) {
	if _, err := OpenDefault(); err != nil {
		fmt.Fprintln(os.Stderr, "cudalib: cannot open the library under test:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// open returns the library under test: OpenDefault (the CPU build in CI,
// the CUDA build on a GPU machine, or SSMK_LIB).
func open(t testing.TB) *Library {
	t.Helper()
	l, err := OpenDefault()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestOpenDefaultReportsItsChoice(t *testing.T) {
	l := open(t)
	assert.Equal(t, ABIVersion, l.ABIVersionOf())
	assert.NotEmpty(t, l.Selection)
	assert.Contains(t, []string{"cpu", "cuda"}, l.Backend, "the project's own libraries")
	name, err := l.DeviceName()
	require.NoError(t, err)
	t.Logf("library: %s\nselection: %s\ndevice: %s\nmax dstate: %d", l.Path, l.Selection, name, l.MaxDstate())
	assert.GreaterOrEqual(t, l.MaxDstate(), 256, "the reference point set by Mamba's kernel")
}

// The Go mirror of ssmk_scan_args must have the C layout asserted in ssmk.h.
func TestScanArgsLayout(t *testing.T) {
	var a scanArgs
	assert.Equal(t, uintptr(128), unsafe.Sizeof(a))
	assert.Equal(t, uintptr(48), unsafe.Offsetof(a.U))
	assert.Equal(t, uintptr(120), unsafe.Offsetof(a.LastState))
}

func TestOpenErrors(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "libssmk_cpu.so"))
	var missing *MissingError
	require.ErrorAs(t, err, &missing)
	assert.Contains(t, err.Error(), "make lib", "says how to build it")

	_, err = Open(filepath.Join(t.TempDir(), "libssmk_cuda.so"))
	assert.ErrorContains(t, err, "make lib-cuda")

	junk := filepath.Join(t.TempDir(), "junk.so")
	require.NoError(t, os.WriteFile(junk, []byte("not an ELF file"), 0o644))
	_, err = Open(junk)
	assert.ErrorContains(t, err, "does not load")

	// A real shared library that is not an ssmk library.
	for _, libc := range []string{"/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6"} {
		if _, err := os.Stat(libc); err == nil {
			_, err = Open(libc)
			assert.ErrorContains(t, err, "not an ssmk ABI v1 library")
			break
		}
	}
}

func TestOpenDefaultEnvironment(t *testing.T) {
	dir, err := BuildDir()
	require.NoError(t, err)
	cpu := filepath.Join(dir, CPULibrary)
	if _, err := os.Stat(cpu); err != nil {
		t.Skipf("no CPU build at %s (make lib)", cpu)
	}

	t.Setenv("SSMK_LIB", cpu)
	l, err := OpenDefault()
	require.NoError(t, err)
	assert.Equal(t, "SSMK_LIB="+cpu, l.Selection)

	// A path relative to the module's root, as make passes it from there,
	// is found from this package's folder too (go test runs here).
	t.Setenv("SSMK_LIB", filepath.Join("build", CPULibrary))
	l, err = OpenDefault()
	require.NoError(t, err)
	assert.Equal(t, cpu, l.Path)

	t.Setenv("SSMK_LIB", filepath.Join(t.TempDir(), "mine.so"))
	_, err = OpenDefault()
	assert.ErrorContains(t, err, "SSMK_LIB")

	t.Setenv("SSMK_LIB", "")
	t.Setenv("SSMK_BACKEND", "cpu")
	l, err = OpenDefault()
	require.NoError(t, err)
	assert.Equal(t, "cpu", l.Backend)

	t.Setenv("SSMK_BACKEND", "tpu")
	_, err = OpenDefault()
	assert.ErrorContains(t, err, `want cuda, cpu or auto`)

	// A forced CUDA backend is never silently replaced by the CPU build.
	t.Setenv("SSMK_BACKEND", "cuda")
	t.Setenv("SSMK_BUILD_DIR", t.TempDir())
	_, err = OpenDefault()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "SSMK_BACKEND=cuda")
	assert.Contains(t, err.Error(), "make lib-cuda")

	// auto without a CUDA build says so and uses the CPU build.
	only := t.TempDir()
	require.NoError(t, os.Symlink(cpu, filepath.Join(only, CPULibrary)))
	t.Setenv("SSMK_BUILD_DIR", only)
	t.Setenv("SSMK_BACKEND", "auto")
	l, err = OpenDefault()
	require.NoError(t, err)
	assert.Contains(t, l.Selection, "no CUDA build")
	assert.Equal(t, "cpu", l.Backend)
}

// On a machine without a GPU the CUDA build loads (the runtime is linked
// statically) and answers SSMK_ENODEVICE; auto then falls back and says why.
func TestCUDABuildWithoutGPU(t *testing.T) {
	dir, err := BuildDir()
	require.NoError(t, err)
	path := filepath.Join(dir, CUDALibrary)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no CUDA build at %s", path)
	}
	l, err := Open(path)
	require.NoError(t, err)
	if _, err := l.DeviceName(); err == nil {
		t.Skip("a GPU is present: nothing to test here")
	} else {
		assert.True(t, errors.Is(err, ENoDevice), "got %v", err)
	}
	t.Setenv("SSMK_BACKEND", "cuda")
	_, err = OpenDefault()
	assert.ErrorContains(t, err, "SSMK_ENODEVICE")
	t.Setenv("SSMK_BACKEND", "auto")
	l, err = OpenDefault()
	require.NoError(t, err)
	assert.Equal(t, "cpu", l.Backend)
	assert.Contains(t, l.Selection, "CUDA build present but unusable")
}

// nm -D lists every ABI symbol and no other defined symbol.
func TestExportedSymbols(t *testing.T) {
	nm, err := exec.LookPath("nm")
	if err != nil {
		t.Skip("nm not installed")
	}
	dir, err := BuildDir()
	require.NoError(t, err)
	var want []string
	for name := range (&abi{}).symbols() {
		want = append(want, name)
	}
	for name := range (&abi{}).extensions() { // this project's libraries implement every extension
		want = append(want, name)
	}
	sort.Strings(want)
	for _, lib := range []string{CPULibrary, CUDALibrary} {
		path := filepath.Join(dir, lib)
		if _, err := os.Stat(path); err != nil {
			continue
		}
		out, err := exec.Command(nm, "-D", "--defined-only", path).Output()
		require.NoError(t, err)
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			got = append(got, f[len(f)-1])
		}
		sort.Strings(got)
		assert.Equal(t, want, got, "defined dynamic symbols of %s", lib)
	}
}

func TestSetNumThreads(t *testing.T) {
	l := open(t)
	prev := l.SetNumThreads(0)
	assert.GreaterOrEqual(t, prev, 1)
	assert.Equal(t, prev, l.SetNumThreads(3))
	assert.Equal(t, 3, l.SetNumThreads(-1), "n ≤ 0 leaves it")
	assert.Equal(t, 3, l.SetNumThreads(prev))
}

func TestCapabilities(t *testing.T) {
	l := open(t)
	for m := int32(0); m < 6; m++ {
		for _, dt := range ssm.DTypes() {
			for _, c := range []bool{false, true} {
				caps := ssm.Caps(l.fn.capabilities(m, int32(dt), b2i(c)))
				assert.True(t, caps.Supported(), "method %d %v complex=%t", m, dt, c)
				assert.False(t, caps.ComplexZOHFallback(), "the project's kernels are native for all six")
			}
		}
	}
	// both builds take the 16-bit input types with real A, for their scan
	// only; the CPU build with complex A too, the CUDA build not (declared)
	for _, dt := range ssm.NarrowDTypes() {
		for _, c := range []bool{false, true} {
			raw := ssm.Caps(l.fn.capabilities(0, int32(dt), b2i(c)))
			if c && l.Backend == "cuda" {
				assert.Zero(t, raw, "%v complex: the CUDA build declares it unsupported", dt)
				continue
			}
			assert.Equal(t, ssm.CapNarrowInputs|ssm.CapScanOnly|ssm.CapSupported, raw&(ssm.CapNarrowInputs|ssm.CapScanOnly|ssm.CapSupported), "%v complex=%t", dt, c)
			assert.True(t, l.Capabilities(0, dt, c).Supported())
		}
	}
	for _, bad := range [][3]int32{{6, 0, 0}, {-1, 0, 0}, {0, 4, 0}, {0, -1, 0}, {0, 0, 2}} {
		assert.Zero(t, l.fn.capabilities(bad[0], bad[1], bad[2]), "unknown arguments %v", bad)
	}
}

// TestCapsForNarrow: a 16-bit dtype counts as supported only with
// SSMK_CAP_NARROW_INPUTS, so that a library of ABI v1 that answers
// "supported" for any dtype is not judged on one; and always scan only.
func TestCapsForNarrow(t *testing.T) {
	for _, tc := range []struct {
		raw  ssm.Caps
		dt   ssm.DType
		want ssm.Caps
	}{
		{ssm.CapSupported, ssm.F32, ssm.CapSupported},
		{ssm.CapSupported, ssm.BF16, 0},
		{ssm.CapSupported | ssm.CapInitialState, ssm.F16, 0},
		{ssm.CapNarrowInputs, ssm.F16, 0},
		{ssm.CapSupported | ssm.CapNarrowInputs, ssm.F16, ssm.CapSupported | ssm.CapNarrowInputs | ssm.CapScanOnly},
	} {
		assert.Equal(t, tc.want, tc.raw.For(tc.dt), "%#x for %v", uint32(tc.raw), tc.dt)
	}
}

func TestCopyBandwidth(t *testing.T) {
	l := open(t)
	gbps, err := l.CopyBandwidth(64<<20, 5)
	require.NoError(t, err)
	assert.Greater(t, gbps, 0.5, "GB/s")
	t.Logf("copy bandwidth (read+write): %.1f GB/s", gbps)
	_, err = l.CopyBandwidth(0, 1)
	assert.ErrorContains(t, err, "bytes = 0")
}

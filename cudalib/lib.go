package cudalib

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// ABIVersion is the ABI version this binding speaks; Open refuses others.
const ABIVersion = 1

// Library is a loaded ssmk library. Its methods are safe for concurrent use
// (the ABI requires thread safety of its libraries; the binding keeps each
// call and its ssmk_last_error on one OS thread). A Library stays loaded
// for the life of the process.
type Library struct {
	// Path is the file that was loaded.
	Path string
	// Backend is ssmk_backend(): "cuda", "cpu", or a user library's word.
	Backend string
	// Selection says how OpenDefault chose this library, for the code-path
	// check: "SSMK_LIB=…", "SSMK_BACKEND=cpu", "auto: …". Empty after Open.
	Selection string

	maxDstate int
	fn        abi
}

// abi holds the library's functions, bound with purego.
//
// Every pointer parameter is an unsafe.Pointer, never a uintptr: purego
// passes the arguments through reflection, and a pointer typed as such
// makes its object escape to the heap, where it cannot move. A uintptr to a
// stack variable would go stale if the stack grew during the call.
type abi struct {
	abiVersion           func() int32
	backend              func() string
	deviceName           func(buf unsafe.Pointer, n int32) int32
	maxDstate            func() int32
	capabilities         func(method, dtype, isComplex int32) uint32
	setNumThreads        func(n int32) int32
	lastError            func() string
	discretize           func(method, dtype, isComplex int32, n int64, delta, a, abar, bcoef unsafe.Pointer) int32
	scanFwd              func(args unsafe.Pointer) int32
	planCreate           func(args, plan unsafe.Pointer) int32
	planCreateDiscretize func(method, dtype, isComplex int32, n int64, delta, a, plan unsafe.Pointer) int32
	planLaunch           func(plan uintptr) int32
	planSync             func(plan uintptr) int32
	planTime             func(plan uintptr, iters int32, ms unsafe.Pointer) int32
	planFetch            func(plan uintptr, out, lastState unsafe.Pointer) int32
	planDestroy          func(plan uintptr)
	copyBandwidth        func(bytes int64, iters int32, gbps unsafe.Pointer) int32

	// Extensions: nil where the library does not export them.
	scanFwdState    func(args, h0 unsafe.Pointer) int32
	planCreateState func(args, h0, plan unsafe.Pointer) int32
	scanFeatures    func(method, dtype, isComplex int32, f unsafe.Pointer) int32
	scanBwd         func(args, h0, grads unsafe.Pointer) int32
	planCreateBwd   func(args, h0, grads, plan unsafe.Pointer) int32
	planFetchBwd    func(plan uintptr, grads unsafe.Pointer) int32
	planCreateSaved func(args, h0, grads, plan unsafe.Pointer) int32
}

// extensions are the ABI's optional functions: a library of ABI v1 lacks
// them and is judged without them (its capabilities say so too).
func (a *abi) extensions() map[string]any {
	return map[string]any{
		"ssmk_scan_fwd_state":        &a.scanFwdState,
		"ssmk_plan_create_state":     &a.planCreateState,
		"ssmk_scan_features":         &a.scanFeatures,
		"ssmk_scan_bwd":              &a.scanBwd,
		"ssmk_plan_create_bwd":       &a.planCreateBwd,
		"ssmk_plan_fetch_bwd":        &a.planFetchBwd,
		"ssmk_plan_create_bwd_saved": &a.planCreateSaved,
	}
}

func (a *abi) symbols() map[string]any {
	return map[string]any{
		"ssmk_abi_version":            &a.abiVersion,
		"ssmk_backend":                &a.backend,
		"ssmk_device_name":            &a.deviceName,
		"ssmk_max_dstate":             &a.maxDstate,
		"ssmk_capabilities":           &a.capabilities,
		"ssmk_set_num_threads":        &a.setNumThreads,
		"ssmk_last_error":             &a.lastError,
		"ssmk_discretize":             &a.discretize,
		"ssmk_scan_fwd":               &a.scanFwd,
		"ssmk_plan_create":            &a.planCreate,
		"ssmk_plan_create_discretize": &a.planCreateDiscretize,
		"ssmk_plan_launch":            &a.planLaunch,
		"ssmk_plan_sync":              &a.planSync,
		"ssmk_plan_time":              &a.planTime,
		"ssmk_plan_fetch":             &a.planFetch,
		"ssmk_plan_destroy":           &a.planDestroy,
		"ssmk_copy_bandwidth":         &a.copyBandwidth,
	}
}

// Open loads the ssmk library at path and checks its ABI version. A
// missing file, a file that does not load, a missing symbol or another ABI
// version is an error that says which and what to do.
func Open(path string) (*Library, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("cudalib: %s: %w", path, err)
	}
	if _, err := os.Stat(abs); err != nil {
		return nil, &MissingError{Path: abs, Hint: buildHint(abs)}
	}
	h, err := purego.Dlopen(abs, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("cudalib: %s does not load: %w", abs, err)
	}
	l := &Library{Path: abs}
	for name, ptr := range l.fn.symbols() {
		if _, err := purego.Dlsym(h, name); err != nil {
			return nil, fmt.Errorf("cudalib: %s lacks %s: not an ssmk ABI v%d library", abs, name, ABIVersion)
		}
		purego.RegisterLibFunc(ptr, h, name)
	}
	for name, ptr := range l.fn.extensions() {
		if _, err := purego.Dlsym(h, name); err == nil {
			purego.RegisterLibFunc(ptr, h, name)
		}
	}
	if v := l.fn.abiVersion(); v != ABIVersion {
		return nil, &ABIError{Path: abs, Got: int(v)}
	}
	l.Backend = l.fn.backend()
	l.maxDstate = int(l.fn.maxDstate())
	return l, nil
}

// MissingError is returned for a library file that does not exist.
type MissingError struct {
	Path, Hint string
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("cudalib: %s not found%s", e.Path, e.Hint)
}

// ABIError is returned for a library of another ABI version.
type ABIError struct {
	Path string
	Got  int
}

func (e *ABIError) Error() string {
	return fmt.Sprintf("cudalib: %s implements ssmk ABI version %d, this suite speaks version %d: rebuild it against cudalib/include/ssmk.h",
		e.Path, e.Got, ABIVersion)
}

func buildHint(path string) string {
	switch filepath.Base(path) {
	case "libssmk_cpu.so":
		return ": run `make lib` to build it"
	case "libssmk_cuda.so":
		return ": run `make lib-cuda` on a machine with nvcc to build it"
	}
	return ""
}

// BuildDir returns the folder holding the project's libraries: $SSMK_BUILD_DIR
// if set, else build/ in the module root found above the working directory
// (so tests run from any package folder find it).
func BuildDir() (string, error) {
	if d := os.Getenv("SSMK_BUILD_DIR"); d != "" {
		return filepath.Abs(d)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module ssmverify") {
			return filepath.Join(dir, "build"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cudalib: no build folder: not inside the ssmverify module and SSMK_BUILD_DIR is unset")
		}
		dir = parent
	}
}

// resolveLib is SSMK_LIB's path as the user meant it. An absolute path, or
// a relative one that names a file from here, is taken as it is; a relative
// one that does not is read from the module's root, where make runs: go
// test runs each package in its own folder, so "build/x.so" from the root
// would otherwise be looked for as verify/build/x.so.
func resolveLib(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if dir, err := BuildDir(); err == nil && os.Getenv("SSMK_BUILD_DIR") == "" {
		if p := filepath.Join(filepath.Dir(dir), path); fileExists(p) {
			return p
		}
	}
	return path
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Library file names inside BuildDir.
const (
	CPULibrary  = "libssmk_cpu.so"
	CUDALibrary = "libssmk_cuda.so"
)

// OpenDefault opens the library the environment asks for:
//
//   - SSMK_LIB=path: always that library (a user's own kernels);
//   - else SSMK_BACKEND=cuda: the CUDA build, which must load and find a GPU;
//   - SSMK_BACKEND=cpu: the CPU build;
//   - SSMK_BACKEND=auto or unset: the CUDA build when it exists and a device
//     answers, else the CPU build.
//
// A forced backend that cannot load is an error, never a silent fallback.
// Library.Selection records the reason for the choice.
func OpenDefault() (*Library, error) {
	if path := os.Getenv("SSMK_LIB"); path != "" {
		l, err := Open(resolveLib(path))
		if err != nil {
			return nil, fmt.Errorf("SSMK_LIB: %w", err)
		}
		l.Selection = "SSMK_LIB=" + path
		return l, nil
	}
	dir, err := BuildDir()
	if err != nil {
		return nil, err
	}
	cpu, cuda := filepath.Join(dir, CPULibrary), filepath.Join(dir, CUDALibrary)
	switch b := strings.ToLower(os.Getenv("SSMK_BACKEND")); b {
	case "cuda":
		l, err := openCUDA(cuda)
		if err != nil {
			return nil, fmt.Errorf("SSMK_BACKEND=cuda: %w", err)
		}
		l.Selection = "SSMK_BACKEND=cuda"
		return l, nil
	case "cpu":
		l, err := Open(cpu)
		if err != nil {
			return nil, fmt.Errorf("SSMK_BACKEND=cpu: %w", err)
		}
		l.Selection = "SSMK_BACKEND=cpu"
		return l, nil
	case "", "auto":
		why := "auto: no CUDA build at " + cuda
		if _, err := os.Stat(cuda); err == nil {
			l, err := openCUDA(cuda)
			if err == nil {
				name, _ := l.DeviceName()
				l.Selection = "auto: CUDA build loaded and found " + name
				return l, nil
			}
			why = "auto: CUDA build present but unusable (" + err.Error() + ")"
		}
		l, err := Open(cpu)
		if err != nil {
			return nil, fmt.Errorf("%s; CPU build: %w", why, err)
		}
		l.Selection = why + "; using the CPU build"
		return l, nil
	default:
		return nil, fmt.Errorf("SSMK_BACKEND=%q: want cuda, cpu or auto", b)
	}
}

// openCUDA opens the CUDA build and asks it for its device, so that a
// library without a GPU behind it is reported, not used.
func openCUDA(path string) (*Library, error) {
	l, err := Open(path)
	if err != nil {
		return nil, err
	}
	if _, err := l.DeviceName(); err != nil {
		return nil, err
	}
	return l, nil
}

// call runs one ABI call and turns a non-zero status into an *Error with
// ssmk_last_error(). The OS thread is locked so that the message read is
// the one this call left (it is thread-local in the library).
func (l *Library) call(fn string, f func() int32) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	st := f()
	if st == 0 {
		return nil
	}
	return &Error{Func: fn, Status: Status(st), Msg: l.fn.lastError()}
}

// ABIVersionOf returns ssmk_abi_version().
func (l *Library) ABIVersionOf() int { return int(l.fn.abiVersion()) }

// MaxDstate returns ssmk_max_dstate().
func (l *Library) MaxDstate() int { return l.maxDstate }

// DeviceName returns ssmk_device_name(): "NVIDIA H200 (sm_90)", a CPU model.
func (l *Library) DeviceName() (string, error) {
	buf := make([]byte, 256)
	err := l.call("ssmk_device_name", func() int32 { return l.fn.deviceName(unsafe.Pointer(&buf[0]), int32(len(buf))) })
	if err != nil {
		return "", err
	}
	if i := strings.IndexByte(string(buf), 0); i >= 0 {
		buf = buf[:i]
	}
	return string(buf), nil
}

// SetNumThreads calls ssmk_set_num_threads(n) and returns the previous
// value; n ≤ 0 only reads it.
func (l *Library) SetNumThreads(n int) int { return int(l.fn.setNumThreads(int32(n))) }

// String describes the library in one line.
func (l *Library) String() string {
	dev, err := l.DeviceName()
	if err != nil {
		dev = "no device: " + err.Error()
	}
	return fmt.Sprintf("%s (backend %s, ABI v%d, %s)", l.Path, l.Backend, ABIVersion, dev)
}

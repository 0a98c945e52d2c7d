// Package cudalib loads a discretization-kernel library through the ssmk C
// ABI (version 1) with purego — no cgo — and gives it a typed Go API: the
// project's own CUDA library (build/libssmk_cuda.so), its CPU build of the
// same arithmetic (build/libssmk_cpu.so), or any library a user builds
// against cudalib/include/ssmk.h.
//
// # Choosing a library
//
// Open(path) loads one file and checks its ABI version. OpenDefault follows
// the environment: SSMK_LIB=path always wins; otherwise SSMK_BACKEND=cuda or
// cpu forces a build from build/ (an error, never a silent fallback, when it
// cannot load or the CUDA build finds no GPU), and auto (the default) takes
// the CUDA build when a device answers, else the CPU build.
// Library.Selection records why, for the code-path check.
//
// # The ABI (cudalib/include/ssmk.h holds the full contract)
//
// C linkage, every symbol prefixed ssmk_, int32 integers, int64 flat sizes,
// dense row-major arrays, complex values as interleaved (re, im) pairs; dtype
// selects float (SSMK_F32 = 0) or double (SSMK_F64 = 1) for every
// floating-point array of a call. Methods SSMK_ZOH … SSMK_RK4 = 0 … 5 map
// x = Δ·a to (Ā, g) with B̄ = Δ·g·B:
//
//	zoh        Ā = e^x                   g = 1
//	foh        Ā = e^x                   g = (e^x − 1)/x, 1 at x = 0
//	bilinear   Ā = (1 + x/2)/(1 − x/2)   g = 1/(1 − x/2)
//	poly       Ā = e^x                   g = 1 + x/2 + x²/6
//	highorder  Ā = e^x                   g = 1 + x/2
//	rk4        Ā = e^x                   g = 1 + x/2 + x²/6 + x³/24
//
// Functions: ssmk_abi_version (1), ssmk_backend, ssmk_device_name,
// ssmk_max_dstate, ssmk_capabilities (bit 0 supported, bit 1 "complex A
// falls back to zoh"), ssmk_set_num_threads, ssmk_last_error (per thread),
// ssmk_discretize (elementwise (Ā, Δ·g)), ssmk_scan_fwd (the selective scan
// on host pointers, documented in the reference package and ssmk.h), and the
// device-resident plans ssmk_plan_create, ssmk_plan_create_discretize,
// ssmk_plan_launch (asynchronous on a GPU), ssmk_plan_sync, ssmk_plan_time
// (CUDA events around iters launches), ssmk_plan_fetch, ssmk_plan_destroy,
// plus ssmk_copy_bandwidth (device-to-device copy, bytes read + written per
// second: the roofline ceiling). Statuses: SSMK_OK 0, EINVAL 1, EUNSUPPORTED
// 2, ENODEVICE 3, EDEVICE 4, ENOMEM 5; no argument value may crash the
// library or make it write outside the buffers it was given, and inputs are
// never modified.
//
// # The Go side
//
// Every call is validated before it reaches C: a wrong length, a size that
// does not divide, a dstate above ssmk_max_dstate, an unknown method or
// dtype is a Go error naming the argument, the expected and the actual
// value. A non-zero status becomes an *Error carrying ssmk_last_error();
// errors.Is(err, cudalib.ENoDevice) tests the status. Go memory passed to C
// is pinned for the call (runtime.Pinner) and passed as unsafe.Pointer, so
// nothing moves under the library; plans copy their inputs and hold no Go
// memory. ScanBuffers keeps the exact arrays a kernel read, so callers can
// hash them and check that the kernel left them alone.
//
// This package is the binding alone: it knows the ABI, not any library's
// arithmetic. The project's own CPU and CUDA implementations of the ABI,
// their sources and the tests of their designs, registers and SASS, are
// package kernels; this package's tests hold the binding to the header
// (struct layouts, validation before C, raw calls, the extensions'
// negotiation).
package cudalib

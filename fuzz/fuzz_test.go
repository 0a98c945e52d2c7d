package fuzz

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"ssmverify/cudalib"
	"ssmverify/ssm"
)

var (
	lib     *cudalib.Library
	threads = flag.Int("threads", 1, "host threads the library may use (ssmk_set_num_threads); fuzz inputs are tiny, and one thread per fuzz worker keeps OpenMP from oversubscribing the cores")
)

// TestMain opens the library under test the way the verification suite
// does (cudalib.OpenDefault: SSMK_LIB, else SSMK_BACKEND, else the CUDA
// build when a GPU answers, else the CPU build).
func TestMain(m *testing.M) {
	flag.Parse()
	l, err := cudalib.OpenDefault()
	if err != nil {
		fmt.Fprintln(os.Stderr, "fuzz: cannot open the library under test:", err)
		os.Exit(2)
	}
	lib = l
	lib.SetNumThreads(*threads)
	os.Exit(m.Run())
}

// FuzzDiscretize: ssmk_discretize on up to 64 (Δ, a) pairs per call, decoded
// from the bytes (special values by index, ordinary values, raw bits), for
// the method, dtype and real/complex the first arguments select.
func FuzzDiscretize(f *testing.F) {
	if !discretizesAny() {
		f.Skip("the library declares ssmk_discretize for no combination (scan only): nothing to fuzz")
	}
	f.Fuzz(func(t *testing.T, method, dtype uint8, isComplex bool, data []byte) {
		in := DecodeDiscretize(method, dtype, isComplex, data)
		if err := CheckDiscretize(lib, in); err != nil {
			t.Fatal(err)
		}
	})
}

// discretizesAny reports whether the library declares ssmk_discretize for
// some method, dtype and real/complex A.
func discretizesAny() bool {
	for _, m := range ssm.Methods() {
		for _, dt := range ssm.DTypes() {
			for _, c := range []bool{false, true} {
				if lib.Capabilities(m, dt, c).Discretizes() {
					return true
				}
			}
		}
	}
	return false
}

// FuzzScan: ssmk_scan_fwd on a small problem whose shape and flags come from
// the header bytes and whose inputs mix special and ordinary values.
func FuzzScan(f *testing.F) {
	f.Fuzz(func(t *testing.T, method, dtype, flags, batch, dim, seqlen, dstate, groups uint8, data []byte) {
		s := ScanShape{Method: method, DType: dtype, Flags: flags, Batch: batch, Dim: dim, Seqlen: seqlen, Dstate: dstate, Groups: groups}
		p, dt, withState := DecodeScan(s, data, lib.MaxDstate())
		if err := CheckScan(lib, p, dt, withState); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzBackward: ssmk_scan_bwd on the small problems FuzzScan decodes (its
// header and bytes; 16-bit dtypes where the library declares their
// backward, SSMK_CAP_BWD_NARROW), with a cotangent seeded by the bytes,
// under the backward's policy (CheckBackward).
func FuzzBackward(f *testing.F) {
	f.Fuzz(func(t *testing.T, method, dtype, flags, batch, dim, seqlen, dstate, groups uint8, data []byte) {
		s := ScanShape{Method: method, DType: dtype, Flags: flags, Batch: batch, Dim: dim, Seqlen: seqlen, Dstate: dstate, Groups: groups}
		p, dt, withState := DecodeScan(s, data, lib.MaxDstate())
		if err := CheckBackward(lib, p, BackwardCotangent(p, data, withState), dt); err != nil {
			t.Fatal(err)
		}
	})
}

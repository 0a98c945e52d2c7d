package cudalib

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"unsafe"

	"ssmverify/ssm"
)

// Every array the binding allocates for a call (NewArray, and the outputs it
// makes) sits inside a larger allocation whose two ends are guard regions
// filled with a canary byte. A library that writes past the end of a buffer,
// or before its start, writes into the guard, not into another Go object:
// the suite survives the bug it exists to find (a write of one element past
// out used to corrupt the Go heap and crash the test binary, "tried to unpin
// non-Go pointer") and names it. After every call that hands the library
// buffers, the guards of all of them are checked and the inputs' checksums
// compared with those taken before it: a write outside a buffer, or into an
// input, is a *MemoryError, whatever status the call returned.

// guardCanary fills the guard regions: 0xA5A5A5A5 is no float32 or float64
// a kernel computes by accident (−2.9e−16 and −4.4e−29 with this mantissa).
const guardCanary = 0xA5

// guardBytes is the size of each guard region for a buffer of n bytes: an
// eighth of the buffer, at least 4 KiB (an off-by-one, or a row of a few
// thousand steps, lands inside), at most 1 MiB.
func guardBytes(n int) int { return min(max(n/8, 4<<10), 1<<20) }

// guard is an array's allocation: raw is all of it, the array is raw[lo:hi].
type guard struct {
	raw    []byte
	lo, hi int
}

// guarded allocates n elements of size bytes each, zeroed, inside guard
// regions, and returns the whole allocation as typed memory of words of the
// element's size (so that it is aligned for the type) and the guard.
func guarded[T any](n int) ([]T, *guard) {
	var zero T
	size := int(unsafe.Sizeof(zero))
	g := (guardBytes(n*size) + size - 1) / size // guard elements per side
	all := make([]T, n+2*g)
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&all[0])), len(all)*size)
	for i := range raw[:g*size] {
		raw[i] = guardCanary
	}
	for i := (g + n) * size; i < len(raw); i++ {
		raw[i] = guardCanary
	}
	return all[g : g+n : g+n], &guard{raw: raw, lo: g * size, hi: (g + n) * size}
}

// MemoryError is a library's write outside a buffer it was given, or into
// one of its inputs: a finding about the library, never a crash of the
// suite.
type MemoryError struct {
	Func  string // the ABI function called
	Array string // the buffer's ABI name
	// Kind is "overrun" (past the end), "underrun" (before the start) or
	// "input" (an input's contents changed).
	Kind string
	// Offset is, for an overrun or underrun, the first byte written outside
	// the buffer, counted from its end (overrun) or back from its start
	// (underrun), and the element it falls in.
	Offset, Element int
}

func (e *MemoryError) Error() string {
	switch e.Kind {
	case "overrun":
		return fmt.Sprintf("%s wrote past the end of %s: byte %d after it (element %d past the last) changed", e.Func, e.Array, e.Offset, e.Element)
	case "underrun":
		return fmt.Sprintf("%s wrote before the start of %s: byte %d before it (element %d before the first) changed", e.Func, e.Array, e.Offset, e.Element)
	}
	return fmt.Sprintf("%s modified its input %s (a library must not write into its inputs)", e.Func, e.Array)
}

// MemoryTag names the finding for machines: memory:overrun:out,
// memory:input:delta, … (package diagnose reports it as the cause).
func (e *MemoryError) MemoryTag() string { return "memory:" + e.Kind + ":" + e.Array }

// IsMemoryError reports whether err is (or wraps) a *MemoryError, and
// returns it.
func IsMemoryError(err error) (*MemoryError, bool) {
	var m *MemoryError
	ok := errors.As(err, &m)
	return m, ok
}

// elemSize is the array's element size in bytes.
func (a Array) elemSize() int {
	switch {
	case a.F64 != nil:
		return 8
	case a.N16 != nil:
		return 2
	}
	return 4
}

// breach returns the first write outside the array's buffer ("" when
// none, or when the array has no guard: one the caller made).
func (a Array) breach() (kind string, offset, element int) {
	g := a.guard
	if g == nil {
		return "", 0, 0
	}
	for i := g.lo - 1; i >= 0; i-- { // nearest the buffer first
		if g.raw[i] != guardCanary {
			off := g.lo - i
			return "underrun", off, (off + a.elemSize() - 1) / a.elemSize()
		}
	}
	for i := g.hi; i < len(g.raw); i++ {
		if g.raw[i] != guardCanary {
			off := i - g.hi + 1
			return "overrun", off, (off + a.elemSize() - 1) / a.elemSize()
		}
	}
	return "", 0, 0
}

// checksums are the CRC-32C of each input's bytes (0 for an absent one).
func checksums(inputs []NamedArray) []uint32 {
	sums := make([]uint32, len(inputs))
	for i, in := range inputs {
		sums[i] = crc32.Checksum(in.Bytes(), castagnoli)
	}
	return sums
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checkMemory is the first breach of a guard among arrays, or the first
// input whose checksum is not sums' (taken before the call fn).
func checkMemory(fn string, inputs []NamedArray, sums []uint32, outputs []NamedArray) error {
	for _, a := range append(append([]NamedArray{}, outputs...), inputs...) {
		if kind, off, el := a.breach(); kind != "" {
			return &MemoryError{Func: fn, Array: a.Name, Kind: kind, Offset: off, Element: el}
		}
	}
	for i, in := range inputs {
		if sums != nil && crc32.Checksum(in.Bytes(), castagnoli) != sums[i] {
			return &MemoryError{Func: fn, Array: in.Name, Kind: "input"}
		}
	}
	return nil
}

// guardedCall is call with the memory checks around it: the inputs'
// checksums before, every array's guards and the inputs after. A breach is
// reported whatever status the call returned: it is the graver finding.
func (l *Library) guardedCall(fn string, inputs, outputs []NamedArray, f func() int32) error {
	sums := checksums(inputs)
	err := l.call(fn, f)
	if merr := checkMemory(fn, inputs, sums, outputs); merr != nil {
		return merr
	}
	return err
}

// The unwritten mark: NaNs with a payload no arithmetic produces (the 16-bit
// one is a NaN in fp16 and in bfloat16 alike).
const (
	unwritten16 = 0x7fa5
	unwritten32 = 0x7fa5a5a5
	unwritten64 = 0x7ff5a5a5a5a5a5a5
)

// Unwritten is n elements of dt's type in a guarded allocation (as every
// array the binding makes), each holding the unwritten mark, a NaN: an
// output a library leaves partly unwritten reads NaN where it did not
// write, which no judgement of a finite reference lets pass, and Untouched
// tells whether it wrote at all (the fuzzers' buffers, and those kept back
// while the library is passed NULL). A write outside it is a *MemoryError
// of the call, as for any array of the binding.
func Unwritten(n int, dt ssm.DType) Array {
	a := zeros(n, dt)
	switch {
	case a.F64 != nil:
		for i := range a.F64 {
			a.F64[i] = math.Float64frombits(unwritten64)
		}
	case a.N16 != nil:
		for i := range a.N16 {
			a.N16[i] = unwritten16
		}
	default:
		for i := range a.F32 {
			a.F32[i] = math.Float32frombits(unwritten32)
		}
	}
	return a
}

// Untouched reports whether a, made by Unwritten, was left alone: every
// element holds the unwritten mark and its guards are whole.
func (a Array) Untouched() bool {
	if kind, _, _ := a.breach(); kind != "" {
		return false
	}
	switch {
	case a.F64 != nil:
		for _, v := range a.F64 {
			if math.Float64bits(v) != unwritten64 {
				return false
			}
		}
	case a.N16 != nil:
		for _, v := range a.N16 {
			if v != unwritten16 {
				return false
			}
		}
	default:
		for _, v := range a.F32 {
			if math.Float32bits(v) != unwritten32 {
				return false
			}
		}
	}
	return true
}

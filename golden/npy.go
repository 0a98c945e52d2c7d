// Package golden holds the project's golden cases: small selective-scan
// problems covering every method × real/complex A × feature set, with their
// float64 reference outputs, stored as NumPy .npy files (format 1.0,
// little-endian float64, C order) under golden/cases/ and described by
// golden/manifest.json (case name, shapes, flags, method, and the sha256 of
// every file), so that NumPy and PyTorch users can load them:
//
//	import json, numpy as np
//	m = json.load(open("golden/manifest.json"))
//	case = m["cases"][0]
//	u = np.load("golden/" + case["files"]["u"]["file"])
//
// Complex arrays carry a trailing axis of 2 (re, im), as the ABI stores them.
// `go test ./golden -update` regenerates everything from mamba1.Generate and the
// reference; any change to the reference therefore shows up in review as
// changed golden files. The tests check every checksum, that the reference
// still reproduces every output to ≤ 1 ulp, and that the library under test
// (cudalib.OpenDefault) matches every case within the verification
// thresholds.
package golden

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"

	"ssmverify/ssm"
)

// npyMagic is the NumPy format's magic string followed by version 1.0.
var npyMagic = []byte("\x93NUMPY\x01\x00")

// Encodings of a golden file's values (File.Encoding): float64 ("", NumPy
// '<f8'), IEEE binary16 ("float16", '<f2') and bfloat16 ("bfloat16", '<u2'
// holding the bit patterns, which NumPy has no type for: read them as
// (np.load(f).astype(np.uint32) << 16).view(np.float32)).
const (
	EncFloat64  = ""
	EncFloat16  = "float16"
	EncBFloat16 = "bfloat16"
)

// descr is the NumPy dtype of an encoding.
func descr(enc string) (string, int, error) {
	switch enc {
	case EncFloat64:
		return "<f8", 8, nil
	case EncFloat16:
		return "<f2", 2, nil
	case EncBFloat16:
		return "<u2", 2, nil
	}
	return "", 0, fmt.Errorf("npy: unknown encoding %q (want %q, %q or %q)", enc, EncFloat64, EncFloat16, EncBFloat16)
}

// EncodingOf is the golden encoding of a dtype's 16-bit inputs (""
// for F32 and F64, whose golden files are float64).
func EncodingOf(dt ssm.DType) string {
	switch dt {
	case ssm.F16:
		return EncFloat16
	case ssm.BF16:
		return EncBFloat16
	}
	return EncFloat64
}

// EncodeNPY encodes data with the given shape as a version 1.0 .npy file of
// little-endian float64 in C order.
func EncodeNPY(shape []int, data []float64) ([]byte, error) {
	return EncodeNPYAs(shape, data, EncFloat64)
}

// EncodeNPYAs encodes data in encoding enc; for a 16-bit encoding every
// value must be one of the type's (an input already rounded to it), else an
// error names the first that is not.
func EncodeNPYAs(shape []int, data []float64, enc string) ([]byte, error) {
	typ, size, err := descr(enc)
	if err != nil {
		return nil, err
	}
	n := 1
	for _, s := range shape {
		n *= s
	}
	if n != len(data) {
		return nil, fmt.Errorf("npy: shape %v holds %d values, data has %d", shape, n, len(data))
	}
	dims := make([]string, len(shape))
	for i, s := range shape {
		dims[i] = strconv.Itoa(s)
	}
	tuple := strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	header := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", typ, tuple)
	// Pad with spaces so that magic + 2-byte length + header + '\n' is a
	// multiple of 64, as NumPy writes it.
	total := len(npyMagic) + 2 + len(header) + 1
	header += strings.Repeat(" ", (64-total%64)%64) + "\n"
	var b bytes.Buffer
	b.Write(npyMagic)
	binary.Write(&b, binary.LittleEndian, uint16(len(header)))
	b.WriteString(header)
	for i, v := range data {
		switch size {
		case 8:
			binary.Write(&b, binary.LittleEndian, math.Float64bits(v))
		default:
			bits := ssm.Float16Bits(v)
			back := ssm.Float16FromBits(bits)
			if enc == EncBFloat16 {
				bits = ssm.BFloat16Bits(v)
				back = ssm.BFloat16FromBits(bits)
			}
			if back != v && !(math.IsNaN(v) && math.IsNaN(back)) {
				return nil, fmt.Errorf("npy: value %d, %.17g, is not a %s value", i, v, enc)
			}
			binary.Write(&b, binary.LittleEndian, bits)
		}
	}
	return b.Bytes(), nil
}

var shapeRE = regexp.MustCompile(`'shape':\s*\(([^)]*)\)`)

// DecodeNPY decodes a version 1.0 .npy file of little-endian float64 in C
// order; anything else is an error that says what was found.
func DecodeNPY(b []byte) (shape []int, data []float64, err error) { return DecodeNPYAs(b, EncFloat64) }

// DecodeNPYAs decodes a .npy file of encoding enc, widening its values to
// float64 exactly.
func DecodeNPYAs(b []byte, enc string) (shape []int, data []float64, err error) {
	typ, size, err := descr(enc)
	if err != nil {
		return nil, nil, err
	}
	if len(b) < 10 || !bytes.Equal(b[:8], npyMagic) {
		return nil, nil, fmt.Errorf("npy: not a version 1.0 .npy file")
	}
	hl := int(binary.LittleEndian.Uint16(b[8:10]))
	if 10+hl > len(b) {
		return nil, nil, fmt.Errorf("npy: header length %d exceeds the file", hl)
	}
	header := string(b[10 : 10+hl])
	if !strings.Contains(header, "'descr': '"+typ+"'") {
		return nil, nil, fmt.Errorf("npy: dtype is not '%s' (header %q)", typ, strings.TrimSpace(header))
	}
	if !strings.Contains(header, "'fortran_order': False") {
		return nil, nil, fmt.Errorf("npy: Fortran order is not supported")
	}
	m := shapeRE.FindStringSubmatch(header)
	if m == nil {
		return nil, nil, fmt.Errorf("npy: no shape in header %q", strings.TrimSpace(header))
	}
	n := 1
	for _, f := range strings.Split(m[1], ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		d, err := strconv.Atoi(f)
		if err != nil || d < 0 {
			return nil, nil, fmt.Errorf("npy: bad dimension %q", f)
		}
		shape = append(shape, d)
		n *= d
	}
	body := b[10+hl:]
	if len(body) != size*n {
		return nil, nil, fmt.Errorf("npy: shape %v needs %d bytes of data, file has %d", shape, size*n, len(body))
	}
	data = make([]float64, n)
	for i := range data {
		switch enc {
		case EncFloat16:
			data[i] = ssm.Float16FromBits(binary.LittleEndian.Uint16(body[2*i:]))
		case EncBFloat16:
			data[i] = ssm.BFloat16FromBits(binary.LittleEndian.Uint16(body[2*i:]))
		default:
			data[i] = math.Float64frombits(binary.LittleEndian.Uint64(body[8*i:]))
		}
	}
	return shape, data, nil
}

// ReadNPY reads and decodes a .npy file of float64.
func ReadNPY(path string) ([]int, []float64, error) { return ReadNPYAs(path, EncFloat64) }

// ReadNPYAs reads and decodes a .npy file of encoding enc.
func ReadNPYAs(path, enc string) ([]int, []float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	s, d, err := DecodeNPYAs(b, enc)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, d, nil
}

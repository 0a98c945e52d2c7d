package bridge

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"

	"ssmverify/ssm"
)

// Array is one array of a message: its name, element tag (f64, f32, f16,
// bf16, i32, i64, u8), shape and raw little-endian bytes.
type Array struct {
	Name  string `json:"name"`
	Tag   string `json:"dtype"`
	Shape []int  `json:"shape"`
	Data  []byte `json:"-"`
}

var tagSize = map[string]int{"f64": 8, "f32": 4, "f16": 2, "bf16": 2, "i32": 4, "i64": 8, "u8": 1}

// Tag returns the protocol's tag of a dtype.
func Tag(dt ssm.DType) string {
	return map[ssm.DType]string{ssm.F64: "f64", ssm.F32: "f32", ssm.F16: "f16", ssm.BF16: "bf16"}[dt]
}

// DTypeOf returns the dtype of a floating-point tag.
func DTypeOf(tag string) (ssm.DType, bool) {
	dt, ok := map[string]ssm.DType{"f64": ssm.F64, "f32": ssm.F32, "f16": ssm.F16, "bf16": ssm.BF16}[tag]
	return dt, ok
}

func count(shape []int) int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return n
}

// Floats returns the array of v in dtype dt (each value rounded to it).
func Floats(name string, v []float64, dt ssm.DType, shape ...int) Array {
	tag := Tag(dt)
	a := Array{Name: name, Tag: tag, Shape: shape, Data: make([]byte, len(v)*tagSize[tag])}
	ssm.ParallelBlocks(len(v), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			switch x := v[i]; dt {
			case ssm.F64:
				binary.LittleEndian.PutUint64(a.Data[8*i:], math.Float64bits(x))
			case ssm.F32:
				binary.LittleEndian.PutUint32(a.Data[4*i:], math.Float32bits(float32(x)))
			case ssm.F16:
				binary.LittleEndian.PutUint16(a.Data[2*i:], ssm.Float16Bits(x))
			case ssm.BF16:
				binary.LittleEndian.PutUint16(a.Data[2*i:], ssm.BFloat16Bits(x))
			}
		}
	})
	return a
}

// Ints returns an int32 array.
func Ints(name string, v []int, shape ...int) Array {
	a := Array{Name: name, Tag: "i32", Shape: shape, Data: make([]byte, 4*len(v))}
	for i, x := range v {
		binary.LittleEndian.PutUint32(a.Data[4*i:], uint32(int32(x)))
	}
	return a
}

// Int32s reads an int32 array.
func (a Array) Int32s() ([]int, error) {
	if a.Tag != "i32" {
		return nil, fmt.Errorf("bridge: array %s has tag %s, want i32", a.Name, a.Tag)
	}
	n := count(a.Shape)
	if len(a.Data) < 4*n {
		return nil, fmt.Errorf("bridge: array %s has %d bytes for %d int32s", a.Name, len(a.Data), n)
	}
	out := make([]int, n)
	for i := range out {
		out[i] = int(int32(binary.LittleEndian.Uint32(a.Data[4*i:])))
	}
	return out, nil
}

// Float64s widens a floating-point array exactly.
func (a Array) Float64s() ([]float64, error) {
	n := count(a.Shape)
	if _, ok := DTypeOf(a.Tag); !ok {
		return nil, fmt.Errorf("bridge: array %s has tag %s, want a floating-point one", a.Name, a.Tag)
	}
	if len(a.Data) < n*tagSize[a.Tag] {
		return nil, fmt.Errorf("bridge: array %s has %d bytes for %d elements of %s", a.Name, len(a.Data), n, a.Tag)
	}
	out := make([]float64, n)
	ssm.ParallelBlocks(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			switch a.Tag {
			case "f64":
				out[i] = math.Float64frombits(binary.LittleEndian.Uint64(a.Data[8*i:]))
			case "f32":
				out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(a.Data[4*i:])))
			case "f16":
				out[i] = ssm.Float16FromBits(binary.LittleEndian.Uint16(a.Data[2*i:]))
			case "bf16":
				out[i] = ssm.BFloat16FromBits(binary.LittleEndian.Uint16(a.Data[2*i:]))
			}
		}
	})
	return out, nil
}

type header struct {
	Kind   string         `json:"kind,omitempty"`
	Op     string         `json:"op,omitempty"`
	Params map[string]any `json:"params,omitempty"`
	Arrays []Array        `json:"arrays"`
}

// maxHeader bounds a header's length: a worker that writes garbage to the
// protocol's pipe is caught, not believed.
const maxHeader = 16 << 20

func writeMessage(w io.Writer, h header, arrays []Array) error {
	h.Arrays = append([]Array{}, arrays...)
	for _, a := range arrays {
		if want := count(a.Shape) * tagSize[a.Tag]; len(a.Data) != want || tagSize[a.Tag] == 0 {
			return fmt.Errorf("bridge: array %s: %d bytes for shape %v of %s, want %d", a.Name, len(a.Data), a.Shape, a.Tag, want)
		}
	}
	js, err := json.Marshal(h)
	if err != nil {
		return err
	}
	buf := binary.LittleEndian.AppendUint32(nil, uint32(len(js)))
	buf = append(buf, js...)
	// small arrays ride in the header's write; a large one is written
	// where it lies (a copy of gigabytes would cost seconds and double the
	// memory of the deployment sizes' calls)
	for _, a := range arrays {
		if len(a.Data) < ssm.ParallelGrain {
			buf = append(buf, a.Data...)
			continue
		}
		if _, err := w.Write(buf); err != nil {
			return err
		}
		if _, err := w.Write(a.Data); err != nil {
			return err
		}
		buf = buf[:0]
	}
	if len(buf) > 0 {
		_, err = w.Write(buf)
	}
	return err
}

// reply is a worker's answer.
type reply struct {
	OK        bool           `json:"ok"`
	Error     string         `json:"error"`
	Kind      string         `json:"kind"`
	Traceback string         `json:"traceback"`
	Protocol  int            `json:"protocol"`
	Describe  map[string]any `json:"describe"`
	Caps      map[string]Cap `json:"capabilities"`
	Configs   map[string]any `json:"configs"`
	MS        []float64      `json:"ms"`
	PID       int            `json:"pid"`
	Arrays    []Array        `json:"arrays"`
}

func readMessage(r io.Reader) (*reply, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	size := binary.LittleEndian.Uint32(n[:])
	if size > maxHeader {
		return nil, fmt.Errorf("bridge: a header of %d bytes: the worker wrote something else than the protocol on its stdout", size)
	}
	js := make([]byte, size)
	if _, err := io.ReadFull(r, js); err != nil {
		return nil, err
	}
	var rep reply
	if err := json.Unmarshal(js, &rep); err != nil {
		return nil, fmt.Errorf("bridge: unreadable header from the worker: %v", err)
	}
	for i := range rep.Arrays {
		a := &rep.Arrays[i]
		size, ok := tagSize[a.Tag]
		if !ok {
			return nil, fmt.Errorf("bridge: array %s has unknown tag %q", a.Name, a.Tag)
		}
		a.Data = make([]byte, count(a.Shape)*size)
		if _, err := io.ReadFull(r, a.Data); err != nil {
			return nil, err
		}
	}
	return &rep, nil
}

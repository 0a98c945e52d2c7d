package fuzz

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/rand/v2"

	"ssmverify/ssm"
)

// Special is one entry of the table of special values a fuzz input can name
// with a single byte.
type Special struct {
	Name string
	F32  float32
	F64  float64
}

func sp(name string, v float64) Special { return Special{name, float32(v), v} }

// Specials is the table of special values: the edges the issue names and
// the kernels' own thresholds, each in both dtypes. x = Δ·a reaches any of
// them with Δ = 1.
var Specials = []Special{
	sp("0", 0), sp("-0", math.Copysign(0, -1)), sp("1", 1), sp("-1", -1),
	sp("2", 2), sp("-2", -2), sp("0.5", 0.5), sp("-0.5", -0.5),
	{"2-ulp", math.Nextafter32(2, 0), math.Nextafter(2, 0)}, // bilinear's pole x = 2 from below
	{"2+ulp", math.Nextafter32(2, 3), math.Nextafter(2, 3)},
	sp("20", 20), {"20-ulp", math.Nextafter32(20, 0), math.Nextafter(20, 0)}, // softplus threshold
	{"20+ulp", math.Nextafter32(20, 21), math.Nextafter(20, 21)},
	sp("1e-8", 1e-8), sp("-1e-8", -1e-8), sp("1e-4", 1e-4), sp("-1e-4", -1e-4), // φ1's series range
	sp("0.49", 0.49), sp("-0.51", -0.51),
	sp("subnormal-min", 0), sp("subnormal-max", 0), sp("normal-min", 0), sp("-normal-min", 0),
	sp("max", 0), sp("-max", 0), sp("log-max", 0), sp("log-max+1", 0), // e^x overflows past log-max
	sp("log-normal-min", 0), sp("log-subnormal-min", 0), // e^x goes subnormal, then to 0
	sp("sqrt-max", 0), sp("eps", 0), sp("1+eps", 0),
	sp("+Inf", math.Inf(1)), sp("-Inf", math.Inf(-1)), sp("NaN", math.NaN()),
	sp("pi", math.Pi), sp("-100", -100), sp("1e30", 1e30), sp("-1e30", -1e30),
}

func init() {
	set := func(name string, f32 float32, f64 float64) {
		for i := range Specials {
			if Specials[i].Name == name {
				Specials[i].F32, Specials[i].F64 = f32, f64
				return
			}
		}
		panic("fuzz: no special value " + name)
	}
	set("subnormal-min", math.SmallestNonzeroFloat32, math.SmallestNonzeroFloat64)
	set("subnormal-max", math.Float32frombits(0x007fffff), math.Float64frombits(0x000fffffffffffff))
	set("normal-min", 0x1p-126, 0x1p-1022)
	set("-normal-min", -0x1p-126, -0x1p-1022)
	set("max", math.MaxFloat32, math.MaxFloat64)
	set("-max", -math.MaxFloat32, -math.MaxFloat64)
	set("log-max", float32(math.Log(math.MaxFloat32)), math.Log(math.MaxFloat64))
	set("log-max+1", float32(math.Log(math.MaxFloat32)+1), math.Log(math.MaxFloat64)+1)
	set("log-normal-min", float32(math.Log(0x1p-126)), math.Log(0x1p-1022))
	set("log-subnormal-min", float32(math.Log(math.SmallestNonzeroFloat32)), math.Log(math.SmallestNonzeroFloat64))
	set("sqrt-max", float32(math.Sqrt(math.MaxFloat32)), math.Sqrt(math.MaxFloat64))
	set("eps", 0x1p-23, 0x1p-52)
	set("1+eps", 1+0x1p-23, 1+0x1p-52)
}

// SpecialIndex returns the index of the named special value (for building
// seed inputs); it panics on an unknown name.
func SpecialIndex(name string) byte {
	for i, s := range Specials {
		if s.Name == name {
			return byte(i)
		}
	}
	panic("fuzz: no special value " + name)
}

// Tags of the value encoding: a tag byte below tagOrdinary names a special
// value (index mod len(Specials)); tagOrdinary…tagRaw−1 starts an ordinary
// value of two more bytes; tagRaw and above is followed by the raw bits of
// the dtype (4 or 8 bytes, little-endian).
const (
	tagOrdinary = 0x40
	tagRaw      = 0x80
)

// Values decodes a stream of dtype values from fuzz bytes; when the bytes run
// out it continues with ordinary values from a generator seeded by the
// bytes, so every input decodes to a complete problem.
type Values struct {
	data []byte
	dt   ssm.DType
	rng  *rand.Rand
}

// NewValues starts decoding data as values of dtype dt.
func NewValues(data []byte, dt ssm.DType) *Values {
	h := fnv.New64a()
	h.Write(data)
	return &Values{data: data, dt: dt, rng: rand.New(rand.NewPCG(h.Sum64(), uint64(len(data))))}
}

// Exhausted reports whether every input byte has been used.
func (v *Values) Exhausted() bool { return len(v.data) == 0 }

func (v *Values) byte() (byte, bool) {
	if len(v.data) == 0 {
		return 0, false
	}
	b := v.data[0]
	v.data = v.data[1:]
	return b, true
}

// ordinary maps 16 bits to ±10^e, e uniform in [−3, 2): the magnitudes of
// real Mamba inputs, where the error model is tight.
func ordinary(bits uint16) float64 {
	e := -3 + 5*float64(bits&0x7fff)/0x8000
	v := math.Pow(10, e)
	if bits&0x8000 != 0 {
		v = -v
	}
	return v
}

func (v *Values) round(x float64) float64 {
	if v.dt == ssm.F32 {
		return float64(float32(x))
	}
	return x
}

// Next returns the next value, exactly representable in the dtype.
func (v *Values) Next() float64 { return v.NextOr(nil) }

// NextOr is Next with pad drawing the value once the bytes have run out
// (nil: an ordinary value of either sign).
func (v *Values) NextOr(pad func(*rand.Rand) float64) float64 {
	t, ok := v.byte()
	if !ok {
		if pad != nil {
			return v.round(pad(v.rng))
		}
		return v.round(ordinary(uint16(v.rng.Uint32())))
	}
	switch {
	case t < tagOrdinary:
		s := Specials[int(t)%len(Specials)]
		if v.dt == ssm.F32 {
			return float64(s.F32)
		}
		return s.F64
	case t < tagRaw:
		lo, _ := v.byte()
		hi, _ := v.byte()
		return v.round(ordinary(uint16(lo) | uint16(hi)<<8))
	}
	var buf [8]byte
	n := 4
	if v.dt == ssm.F64 {
		n = 8
	}
	for i := 0; i < n; i++ {
		buf[i], _ = v.byte()
	}
	if v.dt == ssm.F64 {
		return math.Float64frombits(binary.LittleEndian.Uint64(buf[:]))
	}
	return float64(math.Float32frombits(binary.LittleEndian.Uint32(buf[:])))
}

// Encoder builds fuzz inputs from named values, for seed corpora.
type Encoder struct {
	DType ssm.DType
	Bytes []byte
}

// Special appends a special value by name.
func (e *Encoder) Special(name string) *Encoder {
	e.Bytes = append(e.Bytes, SpecialIndex(name))
	return e
}

// Raw appends v's raw bits in the dtype.
func (e *Encoder) Raw(v float64) *Encoder {
	e.Bytes = append(e.Bytes, tagRaw)
	if e.DType == ssm.F64 {
		e.Bytes = binary.LittleEndian.AppendUint64(e.Bytes, math.Float64bits(v))
	} else {
		e.Bytes = binary.LittleEndian.AppendUint32(e.Bytes, math.Float32bits(float32(v)))
	}
	return e
}

// Ordinary appends an ordinary value (16 bits as ordinary decodes them).
func (e *Encoder) Ordinary(bits uint16) *Encoder {
	e.Bytes = append(e.Bytes, tagOrdinary, byte(bits), byte(bits>>8))
	return e
}

// MaxDiscretize is the most elements one FuzzDiscretize input decodes to:
// enough that one library call amortises the call overhead.
const MaxDiscretize = 64

// DiscretizeInput is a decoded FuzzDiscretize input: n pairs (Δ, a), a
// interleaved when complex, all exactly representable in DType.
type DiscretizeInput struct {
	Method    ssm.Method
	DType     ssm.DType
	IsComplex bool
	Delta, A  []float64
}

// DecodeDiscretize decodes a FuzzDiscretize input. Elements are (Δ, a) or
// (Δ, Re a, Im a), read until the bytes run out (at least one, at most
// MaxDiscretize).
func DecodeDiscretize(method, dtype uint8, isComplex bool, data []byte) DiscretizeInput {
	in := DiscretizeInput{Method: ssm.Method(method % 6), DType: ssm.DType(dtype % 2), IsComplex: isComplex}
	v := NewValues(data, in.DType)
	for len(in.Delta) < MaxDiscretize && (len(in.Delta) == 0 || !v.Exhausted()) {
		in.Delta = append(in.Delta, v.Next())
		in.A = append(in.A, v.Next())
		if isComplex {
			in.A = append(in.A, v.Next())
		}
	}
	return in
}

// ScanShape is the header of a FuzzScan input; every field is reduced into
// its valid range, so any bytes decode to a valid problem. Groups bit 0
// picks 2 groups (for an even dim), bit 1 (GroupsInitialState) a scan from
// an initial state, bit 2 (GroupsNarrow) the 16-bit input types.
type ScanShape struct {
	Method, DType, Flags               uint8
	Batch, Dim, Seqlen, Dstate, Groups uint8
}

// Flag bits of ScanShape.Flags.
const (
	FlagComplex = 1 << iota
	FlagVariableB
	FlagVariableC
	FlagSoftplus
	FlagD
	FlagZ
	FlagDeltaBias
	FlagNoLastState // pass last_state = NULL
)

// GroupsInitialState is the bit of ScanShape.Groups that asks for a scan
// from an initial state (ssmk_scan_fwd_state), decoded after delta_bias.
const GroupsInitialState = 2

// GroupsNarrow is the bit of ScanShape.Groups that asks for a 16-bit input
// type: DType's bit 0 then picks fp16 (0) or bf16 (1) instead of fp32 or
// fp64. The problem is decoded as for fp32 and rounded to what the kernel
// reads (ssm.Problem.RoundTo: u, Δ, z and variable B/C to the 16-bit type,
// saturated at its largest finite value; the weights stay float32).
const GroupsNarrow = 4

// DecodeScan decodes a FuzzScan input: batch 1…2, dim 1…4, seqlen 1…40,
// dstate 1…16 or (Dstate ≥ 128) the library's maximum, groups a divisor of
// dim; then the inputs in ABI order (u, delta, A, B, C, D, z, delta_bias,
// the initial state), from the bytes while they last and ordinary values after (with GroupsNarrow,
// then rounded to the 16-bit type). With Batch ≥ 128
// the sequence is that problem's time series repeated to seqlen LongSteps + L
// (L = 1…40 the decoded seqlen): a GPU kernel runs its fast paths only on
// full tiles of time steps (256 in the float scan), which 40 steps never
// fill, and the repetition puts the decoded special values into them. It
// returns the problem, its dtype and whether last_state is passed.
func DecodeScan(s ScanShape, data []byte, maxDstate int) (*ssm.Problem, ssm.DType, bool) {
	dt := ssm.DType(s.DType % 2)
	narrow := ssm.F32 // the 16-bit type the problem is rounded to, or F32 (none)
	if s.Groups&GroupsNarrow != 0 {
		narrow = map[ssm.DType]ssm.DType{ssm.F32: ssm.F16, ssm.F64: ssm.BF16}[dt]
		dt = ssm.F32 // decoded as fp32's values
	}
	p := &ssm.Problem{
		Batch: 1 + int(s.Batch%2), Dim: 1 + int(s.Dim%4), Seqlen: 1 + int(s.Seqlen%40),
		Dstate: 1 + int(s.Dstate%16), Method: ssm.Method(s.Method % 6),
		Complex: s.Flags&FlagComplex != 0, VariableB: s.Flags&FlagVariableB != 0,
		VariableC: s.Flags&FlagVariableC != 0, Softplus: s.Flags&FlagSoftplus != 0,
	}
	if s.Dstate >= 128 {
		p.Dstate = maxDstate
	}
	p.Groups = 1
	if p.Dim%2 == 0 && s.Groups%2 == 1 {
		p.Groups = 2
	}
	v := NewValues(data, dt)
	// Past the bytes, inputs are drawn as in a Mamba block (Δ small and
	// positive, Re A negative), so the outputs stay finite and the accuracy
	// rule, not only the class rules, is exercised.
	fill := func(n int, pad func(*rand.Rand) float64) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = v.NextOr(pad)
		}
		return x
	}
	signed := func(r *rand.Rand) float64 { return 2*r.Float64() - 1 }
	positive := func(r *rand.Rand) float64 { return math.Pow(10, -3+2*r.Float64()) }
	negative := func(r *rand.Rand) float64 { return -math.Pow(10, -1+2*r.Float64()) }
	want := p.Lens()
	p.U = fill(want["U"], signed)
	p.Delta = fill(want["Delta"], positive)
	p.A = make([]float64, want["A"])
	for i := range p.A {
		if p.Complex && i%2 == 1 {
			p.A[i] = v.NextOr(func(r *rand.Rand) float64 { return 10 * signed(r) }) // Im A of either sign
		} else {
			p.A[i] = v.NextOr(negative)
		}
	}
	p.B = fill(want["B"], signed)
	p.C = fill(want["C"], signed)
	if s.Flags&FlagD != 0 {
		p.D = fill(want["D"], signed)
	}
	if s.Flags&FlagZ != 0 {
		p.Z = fill(want["Z"], signed)
	}
	if s.Flags&FlagDeltaBias != 0 {
		p.DeltaBias = fill(want["DeltaBias"], signed)
	}
	if s.Groups&GroupsInitialState != 0 {
		p.InitialState = fill(p.StateLen(), signed)
	}
	if s.Batch >= 128 {
		repeatInTime(p, LongSteps+p.Seqlen)
	}
	if narrow.Narrow() {
		p.RoundTo(narrow)
		dt = narrow
	}
	return p, dt, s.Flags&FlagNoLastState == 0
}

// LongSteps is what a long FuzzScan problem (Batch ≥ 128) adds to its
// decoded seqlen: one full tile of the float scan (32 lanes × 8 steps), two
// of the double and complex float scans (× 4).
const LongSteps = 256

// repeatInTime makes p's time series (u, Δ, z, and B and C where they vary
// in time) periodic with period p.Seqlen over seqlen steps.
func repeatInTime(p *ssm.Problem, seqlen int) {
	w := 1
	if p.Complex {
		w = 2
	}
	tile := func(x []float64, width int) []float64 {
		if x == nil {
			return nil
		}
		rows := len(x) / (p.Seqlen * width)
		y := make([]float64, rows*seqlen*width)
		for r := 0; r < rows; r++ {
			for t := 0; t < seqlen; t++ {
				src := (r*p.Seqlen + t%p.Seqlen) * width
				copy(y[(r*seqlen+t)*width:(r*seqlen+t+1)*width], x[src:src+width])
			}
		}
		return y
	}
	p.U, p.Delta, p.Z = tile(p.U, 1), tile(p.Delta, 1), tile(p.Z, 1)
	if p.VariableB {
		p.B = tile(p.B, w)
	}
	if p.VariableC {
		p.C = tile(p.C, w)
	}
	p.Seqlen = seqlen
}

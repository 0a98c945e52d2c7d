package fuzz

import (
	"math"
	"strings"
	"testing"

	"ssmverify/ssm"
)

// TestJudge: each rule of the non-finite policy on hand-made values, in
// the style of the math package's special-value tables.
func TestJudge(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	r := func(v float64) complex128 { return complex(v, 0) }
	const f32max = math.MaxFloat32
	for _, tc := range []struct {
		name string
		v    Value
		dt   ssm.DType
		want string // "" to accept, else a fragment of the complaint
	}{
		{"rule 1: within", Value{Kernel: r(1 + 1e-7), Exact: r(1), InDtype: r(1), Scale: 2, Tiny: 1}, ssm.F32, ""},
		{"rule 1: beyond", Value{Kernel: r(1 + 1e-5), Exact: r(1), InDtype: r(1), Scale: 2, Tiny: 1}, ssm.F32, "ratio"},
		{"rule 1: NaN kernel", Value{Kernel: r(nan), Exact: r(1), InDtype: r(1), Scale: 2, Tiny: 1}, ssm.F32, "kernel gives NaN"},
		{"rule 1: float64 tighter", Value{Kernel: r(1 + 1e-12), Exact: r(1), InDtype: r(1), Scale: 2, Tiny: 1}, ssm.F64, "ratio"},
		{"rule 1: underflow part", Value{Kernel: r(0), Exact: r(1e-39), InDtype: r(0), Scale: 1, Tiny: 1}, ssm.F32, ""},
		{"rule 2: dtype overflows, kernel too", Value{Kernel: r(inf), Exact: r(5e36), InDtype: r(inf), Scale: 100, Tiny: 1}, ssm.F32, ""},
		{"rule 2: dtype overflows, kernel exact", Value{Kernel: r(5e36), Exact: r(5e36), InDtype: r(inf), Scale: 100, Tiny: 1}, ssm.F32, ""},
		{"rule 2: dtype overflows, kernel wrong", Value{Kernel: r(1), Exact: r(5e36), InDtype: r(inf), Scale: 100, Tiny: 1}, ssm.F32, "ratio"},
		{"rule 2: dtype leaves the model", Value{Kernel: r(0), Exact: r(1e-30), InDtype: r(0), Scale: 1, Tiny: 0}, ssm.F32, ""},
		{"rule 2: neither answer", Value{Kernel: r(0.5), Exact: r(1), InDtype: r(0), Scale: 1, Tiny: 0}, ssm.F32, "ratio"},
		{"rule 3: +Inf wanted", Value{Kernel: r(inf), Exact: r(inf), InDtype: r(inf)}, ssm.F32, ""},
		{"rule 3: wrong sign", Value{Kernel: r(-inf), Exact: r(inf), InDtype: r(inf)}, ssm.F32, "reference is +Inf"},
		{"rule 3: NaN for +Inf", Value{Kernel: r(nan), Exact: r(inf), InDtype: r(inf)}, ssm.F32, "kernel gives NaN"},
		{"rule 3: finite for NaN", Value{Kernel: r(0), Exact: r(nan), InDtype: r(nan)}, ssm.F64, "reference is NaN"},
		{"rule 3: the dtype's class", Value{Kernel: r(nan), Exact: r(inf), InDtype: r(nan)}, ssm.F32, ""},
		{"rule 3: sums need only be non-finite", Value{Kernel: r(nan), Exact: r(inf), InDtype: r(inf), Sum: true}, ssm.F32, ""},
		{"rule 3: complex needs only be non-finite", Value{Kernel: complex(nan, nan), Exact: complex(inf, 0), InDtype: complex(inf, 0), IsComplex: true}, ssm.F32, ""},
		{"rule 3: complex finite for Inf", Value{Kernel: complex(1, 1), Exact: complex(inf, nan), InDtype: complex(inf, 0), IsComplex: true}, ssm.F32, "reference is Inf"},
		{"edge: beyond the range, +Inf", Value{Kernel: r(inf), Exact: r(1e39), InDtype: r(inf), Scale: 10, Tiny: 1}, ssm.F32, ""},
		{"edge: beyond the range, -Inf", Value{Kernel: r(-inf), Exact: r(1e39), InDtype: r(inf), Scale: 10, Tiny: 1}, ssm.F32, "want a value within the threshold or +Inf"},
		{"edge: beyond the range, sum NaN", Value{Kernel: r(nan), Exact: r(1e39), InDtype: r(inf), Scale: 10, Tiny: 1, Sum: true}, ssm.F32, ""},
		{"edge: just below max, finite", Value{Kernel: r(f32max), Exact: r(f32max * (1 - 1e-8)), InDtype: r(f32max), Scale: 4 * f32max, Tiny: 1}, ssm.F32, ""},
		{"edge: just below max, +Inf", Value{Kernel: r(inf), Exact: r(f32max * (1 - 1e-8)), InDtype: r(f32max), Scale: 4 * f32max, Tiny: 1}, ssm.F32, ""},
		{"scale undefined: finite", Value{Kernel: r(3), Exact: r(1), InDtype: r(1), Scale: nan, Tiny: 1}, ssm.F32, ""},
		{"scale undefined: NaN", Value{Kernel: r(nan), Exact: r(1), InDtype: r(1), Scale: nan, Tiny: 1}, ssm.F32, "error scale undefined"},
		{"scale overflows: anything", Value{Kernel: r(inf), Exact: r(0), InDtype: r(0), Scale: inf, Tiny: 1}, ssm.F64, ""},
		{"on infinity: the dtype's answer accepted", Value{Kernel: r(0.0712663457), Exact: r(0.0712667931), InDtype: r(0.0712663531), Scale: 1.85, Tiny: 1, OnInfinity: true}, ssm.F32, ""},
		{"not on infinity: the same is rejected", Value{Kernel: r(0.0712663457), Exact: r(0.0712667931), InDtype: r(0.0712663531), Scale: 1.85, Tiny: 1}, ssm.F32, "ratio"},
		{"on infinity: NaN accepted", Value{Kernel: r(nan), Exact: r(0.5), InDtype: r(0), Scale: 1, Tiny: 1, OnInfinity: true}, ssm.F32, ""},
		// 16-bit outputs: one rounding to nearest beyond the float32 model; ±Inf from fp16's 65520 on
		{"fp16: rounded to nearest", Value{Kernel: r(1 + 0x1p-10), Exact: r(1 + 0.75*0x1p-10), InDtype: r(1 + 0.75*0x1p-10), Scale: 2, Tiny: 1, Rounded: true}, ssm.F16, ""},
		{"fp16: truncated", Value{Kernel: r(1), Exact: r(1 + 0.75*0x1p-10), InDtype: r(1 + 0.75*0x1p-10), Scale: 2, Tiny: 1, Rounded: true}, ssm.F16, "ratio"},
		{"fp16: the same value unrounded fails", Value{Kernel: r(1 + 0x1p-10), Exact: r(1 + 0.75*0x1p-10), InDtype: r(1 + 0.75*0x1p-10), Scale: 2, Tiny: 1}, ssm.F16, "ratio"},
		{"bf16: rounded to nearest", Value{Kernel: r(1 + 0x1p-7), Exact: r(1 + 0.75*0x1p-7), InDtype: r(1 + 0.75*0x1p-7), Scale: 2, Tiny: 1, Rounded: true}, ssm.BF16, ""},
		{"fp16: past 65520, +Inf", Value{Kernel: r(inf), Exact: r(70000), InDtype: r(70000), Scale: 2e5, Tiny: 1, Rounded: true, Sum: true}, ssm.F16, ""},
		{"fp16: past 65520, saturated", Value{Kernel: r(ssm.Float16Max), Exact: r(70000), InDtype: r(70000), Scale: 2e5, Tiny: 1, Rounded: true, Sum: true}, ssm.F16, "want a value within the threshold or +Inf"},
		// the float32 evaluation itself off its model (83×), then rounded: either answer stands
		{"fp16: the dtype's own evaluation off the model", Value{Kernel: r(294.75), Exact: r(294.9567682246783), InDtype: r(294.8412780761719), Scale: 23488, Tiny: 1, Rounded: true}, ssm.F16, ""},
		{"fp16: the same kernel where the evaluation is on the model", Value{Kernel: r(294.75), Exact: r(294.9567682246783), InDtype: r(294.9567682246783), Scale: 23488, Tiny: 1, Rounded: true}, ssm.F16, "ratio"},
		{"fp16: 65504 is not +Inf", Value{Kernel: r(inf), Exact: r(ssm.Float16Max), InDtype: r(ssm.Float16Max), Scale: 2e4, Tiny: 1, Rounded: true, Sum: true}, ssm.F16, "kernel gives +Inf"},
	} {
		got := Judge(tc.v, tc.dt)
		switch {
		case tc.want == "" && got != "":
			t.Errorf("%s: rejected: %s", tc.name, got)
		case tc.want != "" && !strings.Contains(got, tc.want):
			t.Errorf("%s: got %q, want a complaint containing %q", tc.name, got, tc.want)
		}
	}
}

// TestSpecials: the table's values are distinct per dtype where they should
// be, exactly representable, and at the thresholds they name.
func TestSpecials(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range Specials {
		if seen[s.Name] {
			t.Errorf("special %q listed twice", s.Name)
		}
		seen[s.Name] = true
	}
	if e := math.Exp(float64(Specials[SpecialIndex("log-max+1")].F32)); e <= math.MaxFloat32 {
		t.Errorf("e^(log-max+1) = %g does not overflow float32", e)
	}
	if e := math.Exp(float64(Specials[SpecialIndex("log-max")].F32)); e > math.MaxFloat32*1.0001 {
		t.Errorf("e^log-max = %g is far beyond float32's range", e)
	}
	if x := Specials[SpecialIndex("subnormal-min")].F32; x != math.SmallestNonzeroFloat32 {
		t.Errorf("subnormal-min = %g", x)
	}
	if len(Specials) > tagOrdinary {
		t.Errorf("%d specials do not fit below the ordinary tag %#x", len(Specials), tagOrdinary)
	}
}

// TestValuesRoundTrip: what an Encoder writes, Values reads back, in both
// dtypes, and every decoded value is exactly representable in its dtype.
func TestValuesRoundTrip(t *testing.T) {
	for _, dt := range ssm.DTypes() {
		e := &Encoder{DType: dt}
		e.Special("NaN").Special("2-ulp").Raw(0.1).Ordinary(0x8123)
		v := NewValues(e.Bytes, dt)
		want2 := float64(Specials[SpecialIndex("2-ulp")].F32)
		want3 := float64(float32(0.1))
		if dt == ssm.F64 {
			want2, want3 = math.Nextafter(2, 0), 0.1
		}
		if x := v.Next(); !math.IsNaN(x) {
			t.Errorf("%v: first value %v, want NaN", dt, x)
		}
		if x := v.Next(); x != want2 {
			t.Errorf("%v: second value %v, want %v", dt, x, want2)
		}
		if x := v.Next(); x != want3 {
			t.Errorf("%v: third value %v, want %v", dt, x, want3)
		}
		if x := v.Next(); !(x < 0) || math.Abs(x) < 1e-3 || math.Abs(x) >= 100 {
			t.Errorf("%v: ordinary value %v, want −10^e with e in [−3, 2)", dt, x)
		}
		if !v.Exhausted() {
			t.Errorf("%v: bytes left over", dt)
		}
		for i := 0; i < 100; i++ { // past the end: representable ordinary values
			x := v.Next()
			if dt == ssm.F32 && float64(float32(x)) != x {
				t.Fatalf("%v: padding value %v is not a float32", dt, x)
			}
		}
	}
}

// TestDecodeScanValid: every header decodes to a problem that validates
// (the fuzzer may send any bytes), including dstate at the maximum.
func TestDecodeScanValid(t *testing.T) {
	for h := 0; h < 4096; h++ {
		s := ScanShape{Method: uint8(h), DType: uint8(h >> 1), Flags: uint8(h * 37), Batch: uint8(h >> 2), Dim: uint8(h >> 3),
			Seqlen: uint8(h * 7), Dstate: uint8(h * 13), Groups: uint8(h >> 5)}
		p, _, _ := DecodeScan(s, []byte{byte(h), byte(h >> 8), 0x90, 1, 2, 3, 4}, 256)
		if err := p.Validate(); err != nil {
			t.Fatalf("header %+v: %v", s, err)
		}
		if s.Dstate >= 128 && p.Dstate != 256 {
			t.Fatalf("header %+v: dstate %d, want the maximum 256", s, p.Dstate)
		}
		if !p.Method.Valid() {
			t.Fatalf("header %+v: method %v", s, p.Method)
		}
	}
	// GroupsNarrow: fp16 (DType bit 0 clear) or bf16, the inputs values of
	// the type, the weights float32's
	for _, c := range []struct {
		dtype uint8
		want  ssm.DType
	}{{0, ssm.F16}, {1, ssm.BF16}, {6, ssm.F16}} {
		s := ScanShape{DType: c.dtype, Dim: 1, Seqlen: 12, Dstate: 3, Groups: GroupsNarrow, Flags: FlagZ | FlagD | FlagVariableB}
		data := (&Encoder{DType: ssm.F32}).Special("max").Special("subnormal-min").Special("eps").Ordinary(0x1234).Bytes
		p, dt, _ := DecodeScan(s, data, 256)
		if dt != c.want {
			t.Fatalf("DType %d with GroupsNarrow: %v, want %v", c.dtype, dt, c.want)
		}
		for _, arr := range [][]float64{p.U, p.Delta, p.Z, p.B} {
			for _, x := range arr {
				if dt.Round(x) != x || math.IsInf(x, 0) {
					t.Fatalf("%v: input %v is not a finite %v value", dt, x, dt)
				}
			}
		}
		for _, x := range append(append([]float64(nil), p.A...), p.D...) {
			if float64(float32(x)) != x {
				t.Fatalf("%v: weight %v is not a float32", dt, x)
			}
		}
	}
	in := DecodeDiscretize(200, 7, true, nil)
	if in.Method != ssm.Method(200%6) || in.DType != ssm.F64 || len(in.Delta) != 1 || len(in.A) != 2 {
		t.Errorf("DecodeDiscretize(200, 7, true, nil) = %+v", in)
	}
}

package fuzz

import (
	"math"
	"testing"

	"ssmverify/ssm"
)

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

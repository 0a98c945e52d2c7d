package fuzz

import "testing"

// BenchmarkCheckDiscretize: one FuzzDiscretize execution on a full
// 64-element input of ordinary values (decode, library call, reference,
// policy), without the fuzzing engine.
func BenchmarkCheckDiscretize(b *testing.B) {
	e := &Encoder{}
	for i := 0; i < 3*MaxDiscretize; i++ {
		e.Ordinary(uint16(i * 2654435761))
	}
	for _, m := range []uint8{0, 1, 2} {
		in := DecodeDiscretize(m, 0, false, e.Bytes)
		b.Run(in.Method.String(), func(b *testing.B) {
			for b.Loop() {
				if err := CheckDiscretize(lib, in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "execs/s")
		})
	}
}

// BenchmarkCheckScan: one FuzzScan execution on a mid-sized input
// (batch 2, dim 4, seqlen 40, dstate 16, every flag).
func BenchmarkCheckScan(b *testing.B) {
	s := ScanShape{Batch: 1, Dim: 3, Seqlen: 39, Dstate: 15, Flags: FlagVariableB | FlagVariableC | FlagD | FlagZ | FlagDeltaBias | FlagSoftplus}
	p, dt, st := DecodeScan(s, nil, lib.MaxDstate())
	for b.Loop() {
		if err := CheckScan(lib, p, dt, st); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "execs/s")
}

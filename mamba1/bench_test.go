package mamba1_test

import (
	"fmt"
	"testing"

	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// BenchmarkScanReference times the reference scan in the Mamba-block
// configuration (variable B and C, D, z, delta_bias, softplus) and reports
// nanoseconds per state update (one (b, d, t, n) step of the recurrence).
// The README compares it with the CPU kernel's single-thread time for the
// same problem (BenchmarkScanKernelCPU in cudalib).
func BenchmarkScanReference(b *testing.B) {
	for _, c := range []struct {
		m         ssm.Method
		isComplex bool
		prec      ssm.Precision
	}{
		{ssm.ZOH, false, ssm.Float64},
		{ssm.RK4, false, ssm.Float64},
		{ssm.Bilinear, false, ssm.Float64},
		{ssm.ZOH, true, ssm.Float64},
		{ssm.ZOH, false, ssm.Float32},
	} {
		s := mamba1.MambaBlock(c.m, 1, 64, 256, 16)
		s.Complex = c.isComplex
		p := mamba1.Generate(s, 1)
		kind := ssm.AKind(c.isComplex)
		b.Run(fmt.Sprintf("%v/%s/%v", c.m, kind, c.prec), func(b *testing.B) {
			updates := float64(p.Batch * p.Dim * p.Seqlen * p.Dstate)
			for b.Loop() {
				if _, err := mamba1.Scan(p, c.prec); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/updates, "ns/update")
		})
	}
}

package kernels

import (
	"fmt"
	"slices"
	"ssmverify/cudalib"
	"testing"

	"github.com/stretchr/testify/assert"

	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// The reference figure: 8×512×1024×16 fp32 in the Mamba-block
// configuration moves 68.2 MB (u, Δ, z, out, B, C) — ScanBytes adds A, D,
// delta_bias and last_state.
func TestScanBytes(t *testing.T) {
	p := mamba1.Generate(mamba1.MambaBlock(ssm.ZOH, 8, 512, 1024, 16), 1)
	core := int64(4*8*512*1024+2*8*16*1024) * 4
	assert.Equal(t, int64(68157440), core)
	extra := int64(512*16+512+512+8*512*16) * 4
	assert.Equal(t, core+extra, cudalib.ScanBytes(p, ssm.F32))
	assert.Equal(t, 2*(core+extra), cudalib.ScanBytes(p, ssm.F64))
}

// BenchmarkPlanMambaBlock times one scan of the Mamba-block configuration
// (batch 8, dim 512, seqlen 1024, dstate 16: variable B and C in one group,
// D, z, delta_bias, softplus) per method with the plan's own timer (CUDA
// events on a GPU): 10 launches of warm-up, then the median of 7 × 20
// launches. It reports µs per scan, the bytes the scan must move over that
// time, and that as a fraction of the library's copy bandwidth. Run it
// with -bench PlanMambaBlock -benchtime 1x (each iteration is a full
// measurement).
func BenchmarkPlanMambaBlock(b *testing.B) {
	l, copyBW := openForBench(b)
	for _, dt := range ssm.DTypes() {
		for _, m := range ssm.Methods() {
			p := mamba1.Generate(mamba1.MambaBlock(m, 8, 512, 1024, 16), 1)
			bufs, err := l.NewScanBuffers(p, dt)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("%v/%v", m, dt), func(b *testing.B) {
				plan, err := l.NewPlan(bufs)
				if err != nil {
					b.Fatal(err)
				}
				defer plan.Close()
				var med float64
				for b.Loop() {
					if _, err := plan.Time(10); err != nil {
						b.Fatal(err)
					}
					var per []float64
					for r := 0; r < 7; r++ {
						ms, err := plan.Time(20)
						if err != nil {
							b.Fatal(err)
						}
						per = append(per, ms/20)
					}
					slices.Sort(per)
					med = per[3]
				}
				bytes := float64(cudalib.ScanBytes(p, dt))
				gbps := bytes / (med * 1e6)
				b.ReportMetric(med*1e3, "us/scan")
				b.ReportMetric(bytes/1e6, "MB")
				b.ReportMetric(gbps, "GB/s")
				b.ReportMetric(100*gbps/copyBW, "%copyBW")
			})
		}
	}
	b.Logf("%s; copy bandwidth %.0f GB/s", l, copyBW)
}

// openForBench opens the library under test and measures its copy
// bandwidth (GB/s over 1 GiB, 10 copies), the floor a benchmark's times are
// stated against.
func openForBench(b *testing.B) (*cudalib.Library, float64) {
	l, err := cudalib.OpenDefault()
	if err != nil {
		b.Fatal(err)
	}
	copyBW, err := l.CopyBandwidth(1<<30, 10)
	if err != nil {
		b.Fatal(err)
	}
	return l, copyBW
}

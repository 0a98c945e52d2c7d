package perf

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"ssmverify/report"
)

// benchRow is a method's row: forward and backward medians in µs (bwd 0:
// no backward), ratios to zoh filled in by writeBench.
type benchRow struct {
	method   string
	fwd, bwd float64
	saved    float64 // the backward on saved states (0: none)
}

// writeBench writes DIR/NAME/check7.json for the rows, as Check7 would.
func writeBench(t *testing.T, dir, name string, maxBwd float64, rows ...benchRow) {
	t.Helper()
	c := report.Check7{Schema: report.Check7Schema, CopyBandwidthGBps: 4000, BytesPerScan: 68_500_000, MaxSlowdown: 1e9,
		MaxBackwardSlowdown: maxBwd, Samples: map[string][]float64{}}
	var zf, zb float64
	for _, r := range rows {
		if r.method == "zoh" {
			zf, zb = r.fwd, r.bwd
		}
	}
	for _, r := range rows {
		row := report.Check7Row{Method: r.method, MedianUS: r.fwd, RatioToZOH: r.fwd / zf,
			FracCopyBW: float64(c.BytesPerScan) / (r.fwd * 1e-6) / (c.CopyBandwidthGBps * 1e9)}
		if r.bwd > 0 {
			row.BackwardUS, row.BackwardRatioToZOH, row.BackwardSavedUS = r.bwd, r.bwd/zb, r.saved
		}
		c.Methods = append(c.Methods, row)
		c.Samples[r.method] = []float64{r.fwd}
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name, "check7.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBenchTargets: each target is judged met or missed from the runs, and
// one whose runs are absent is left out. Every kind of target appears both
// met and missed, so that none can pass whatever the figures; the copy
// fraction, judged at the largest size alone, in a second set of runs.
func TestBenchTargets(t *testing.T) {
	dir := t.TempDir()
	const small, large = "8x512x1024x16", "8x2048x4096x16"
	// small: every target met; large: every target missed (68.5 MB at 4000 GB/s: 17.1 µs of copy)
	writeBench(t, dir, small+"-fp32-false-ssmk", 1.15, benchRow{"zoh", 80, 400, 300}, benchRow{"foh", 86, 460, 350})
	writeBench(t, dir, small+"-bf16-false-ssmk", 0, benchRow{"zoh", 45, 0, 0}, benchRow{"foh", 49, 0, 0})
	writeBench(t, dir, small+"-fp32-false-mamba", 1.15, benchRow{"zoh", 160, 450, 449})
	writeBench(t, dir, small+"-bf16-false-mamba", 0, benchRow{"zoh", 81, 0, 0})
	writeBench(t, dir, large+"-fp32-false-ssmk", 1.15, benchRow{"zoh", 1100, 9000, 8000}, benchRow{"foh", 1270, 10400, 9300})
	writeBench(t, dir, large+"-bf16-false-ssmk", 0, benchRow{"zoh", 1090, 0, 0}, benchRow{"foh", 1400, 0, 0})
	writeBench(t, dir, large+"-fp32-false-mamba", 1.15, benchRow{"zoh", 1000, 5500, 5510})
	writeBench(t, dir, large+"-bf16-false-mamba", 0, benchRow{"zoh", 1050, 0, 0})
	// complex A: against real at the small size (met), without a Mamba run or a 16-bit run
	writeBench(t, dir, small+"-fp32-true-ssmk", 1.15, benchRow{"zoh", 230, 900, 0}, benchRow{"foh", 250, 1000, 0})
	writeBench(t, dir, small+"-fp64-true-ssmk", 1.15, benchRow{"zoh", 1000, 4600, 0}, benchRow{"foh", 1450, 6000, 0})

	runs, err := report.LoadBench(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 10 || runs[0].Library != "ssmk" || runs[0].Size != small || runs[len(runs)-1].Size != large {
		t.Fatalf("LoadBench: %d runs, first %+v, last %+v; want 10, small sizes and this build first", len(runs), runs[0], runs[len(runs)-1])
	}
	type key struct{ name, config string }
	got := map[key]BenchTarget{}
	for _, tg := range BenchTargets(runs) {
		got[key{tg.Name, tg.Config}] = tg
	}
	for _, tc := range []struct {
		name, config string
		met          bool
		ratio        float64
	}{
		{"zoh's forward at 40% of copy or more", large + " fp32 real", false, 68.5e6 / 1100e-6 / 4000e9},
		{"foh's forward within 1.10× of zoh's", small + " fp32 real", true, 86.0 / 80},
		{"foh's forward within 1.10× of zoh's", large + " fp32 real", false, 1270.0 / 1100},
		{"foh's forward within 1.10× of zoh's", small + " bf16 real", true, 49.0 / 45},
		{"foh's forward within 1.10× of zoh's", large + " bf16 real", false, 1400.0 / 1090},
		{"foh's forward within 1.10× of zoh's", small + " fp32 complex", true, 250.0 / 230},
		{"foh's forward within 1.10× of zoh's", small + " fp64 complex", false, 1450.0 / 1000},
		{"every backward within 1.15× of zoh's", small + " fp32 real", true, 460.0 / 400},
		{"every backward within 1.15× of zoh's", large + " fp32 real", false, 10400.0 / 9000},
		{"every backward within 1.15× of zoh's", small + " fp32 complex", true, 1000.0 / 900},
		{"every backward within 1.15× of zoh's", small + " fp64 complex", false, 6000.0 / 4600},
		{"complex zoh's forward within 3× of real", small + " fp32 complex", true, 230.0 / 80},
		{"zoh's forward faster than Mamba's", small + " fp32 real", true, 80.0 / 160},
		{"zoh's forward faster than Mamba's", large + " fp32 real", false, 1100.0 / 1000},
		{"zoh's backward within 0.9× of Mamba's", small + " fp32 real", true, 400.0 / 450},
		{"zoh's backward within 0.9× of Mamba's", large + " fp32 real", false, 9000.0 / 5500},
		{"zoh's backward on saved states within 0.9× of Mamba's", small + " fp32 real", true, 300.0 / 449},
		{"zoh's backward on saved states within 0.9× of Mamba's", large + " fp32 real", false, 8000.0 / 5510},
		{"zoh's forward within 0.6× of Mamba's", small + " bf16 real", true, 45.0 / 81},
		{"zoh's forward within 0.6× of Mamba's", large + " bf16 real", false, 1090.0 / 1050},
		{"bf16 faster than fp32, every method", small + " bf16 real", true, 49.0 / 86},
		{"bf16 faster than fp32, every method", large + " bf16 real", false, 1400.0 / 1270},
	} {
		tg, ok := got[key{tc.name, tc.config}]
		if !ok {
			t.Errorf("no target %q for %s", tc.name, tc.config)
			continue
		}
		if tg.Met != tc.met || !veryClose(tg.Ratio, tc.ratio) {
			t.Errorf("%q %s: met %v at %.4f, want %v at %.4f (%s)", tc.name, tc.config, tg.Met, tg.Ratio, tc.met, tc.ratio, tg)
		}
		delete(got, key{tc.name, tc.config})
	}
	for k := range got {
		t.Errorf("unexpected target %q for %s (its runs are absent or it is not a target)", k.name, k.config)
	}

	var b bytes.Buffer
	WriteBenchTable(&b, runs)
	table := b.String()
	for _, want := range []string{"library", "mamba   " + large, "ssmk    " + small + "    fp64  complex foh", "> 1.10×", "saved µs", " 350.0", "   -\n"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

// The copy-bandwidth target is judged at the largest fp32 size run, met
// where its zoh moves its bytes at 40% of the copy bandwidth or more, and
// complex A without a real run of its dtype has no complex-to-real target.
func TestBenchCopyTarget(t *testing.T) {
	dir := t.TempDir()
	writeBench(t, dir, "8x512x1024x16-fp32-false-ssmk", 1.15, benchRow{"zoh", 80, 400, 0})
	writeBench(t, dir, "8x2048x1024x16-fp32-false-ssmk", 1.15, benchRow{"zoh", 40, 400, 0}) // 42.8% of copy
	writeBench(t, dir, "8x512x1024x16-fp64-true-ssmk", 1.15, benchRow{"zoh", 200, 900, 0})
	runs, err := report.LoadBench(dir)
	if err != nil {
		t.Fatal(err)
	}
	var copyTargets []BenchTarget
	for _, tg := range BenchTargets(runs) {
		if strings.Contains(tg.Name, "of copy") {
			copyTargets = append(copyTargets, tg)
		}
		if strings.HasPrefix(tg.Name, "complex zoh") {
			t.Errorf("a complex-to-real target without a real run: %s", tg)
		}
	}
	if len(copyTargets) != 1 || copyTargets[0].Config != "8x2048x1024x16 fp32 real" || !copyTargets[0].Met ||
		!veryClose(copyTargets[0].Ratio, 68.5e6/40e-6/4000e9) {
		t.Errorf("copy targets %v: want one, met at the largest size, 0.428", copyTargets)
	}
	if s := copyTargets[0].String(); !strings.Contains(s, "(at least 0.40)") {
		t.Errorf("%q does not say its bound is a least value", s)
	}
}

func veryClose(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }

// TestLoadBenchErrors: a folder make bench did not name, a run without its
// check7.json, or no runs at all are errors that say what was expected.
func TestLoadBenchErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{"empty", func(*testing.T, string) {}, "no SIZE-DTYPE-COMPLEX-LIBRARY folders"},
		{"foreign folder", func(t *testing.T, dir string) {
			writeBench(t, dir, "8x512x1024x16-fp32-false-ssmk", 1.15, benchRow{"zoh", 80, 400, 0})
			if err := os.Mkdir(filepath.Join(dir, "notes"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, `"notes"`},
		{"unknown dtype", func(t *testing.T, dir string) {
			writeBench(t, dir, "8x512x1024x16-int8-false-ssmk", 1.15, benchRow{"zoh", 80, 400, 0})
		}, "is not SIZE-DTYPE-COMPLEX-LIBRARY"},
		{"no check7.json", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "8x512x1024x16-fp32-false-ssmk"), 0o755); err != nil {
				t.Fatal(err)
			}
		}, "check7.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			_, err := report.LoadBench(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadBench: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}

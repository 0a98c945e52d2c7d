package mamba2

import (
	"fmt"
	"testing"

	"ssmverify/bridge"
	"ssmverify/mamba2"
	"ssmverify/perf"
	"ssmverify/report"
	"ssmverify/ssm"
)

// interleaved measures the timed operations round-robin, rounds × iters
// launches each (after warmup launches per round), so that drift and
// bursts of noise fall on all of them alike; per-launch milliseconds from
// the worker's timer (CUDA events on a GPU).
func interleaved(rounds, warmup, iters int, timers ...func(warmup, iters int) ([]float64, error)) ([]perf.Samples, error) {
	out := make([]perf.Samples, len(timers))
	for r := 0; r < rounds; r++ {
		for i, f := range timers {
			ms, err := f(warmup, iters)
			if err != nil {
				return nil, err
			}
			out[i] = append(out[i], ms...)
		}
	}
	return out, nil
}

// TestMamba2Timing times the kernel's prefill and decode step in the
// worker (CUDA events around each launch of inputs kept on the device,
// after warm-up launches), records the figures, and decides, as Check6
// does for the ABI's kernels, that less work never costs more: a prefill
// of half the tokens, and one without D, z and the bias, against the full
// prefill, measured interleaved (perf.DecideLessWork; undecided where the
// timer is too noisy to tell, never a pass).
func TestMamba2Timing(t *testing.T) {
	track(t)
	dt := pair{ssm.BF16, ssm.F32}
	o := base(dt)
	o.Batch, o.Seqlen, o.Heads, o.Headdim, o.Dstate = 2, 2048, 8, 64, 64 // a Mamba-2 layer's heads and state
	if dev, _ := kernel.W.Hello().Describe["device"].(string); dev == "cpu" {
		o.Seqlen, o.Heads, o.Headdim, o.Dstate = 512, 4, 16, 16 // the numpy path: seconds, not minutes
	}
	o.D, o.Z, o.DtBias, o.Softplus = true, true, true, true
	full := mamba2.Generate(o, 81).Rounded()
	if why := kernel.Supports(full); why != "" {
		rep.KernelUnsupported(t.Name(), bridge.OpPrefill, dt.in, dt.state, why)
		t.Skip(why)
	}
	half := full.Slice(0, full.Seqlen/2, nil)
	// The same steps without the options: dt is the full problem's Δ
	// (bias and softplus applied here), so that only the work differs —
	// the raw dt, half of it negative, would make Δ < 0 and e^{Δ·A} grow:
	// another computation, not less of the same one.
	plain := *full
	lo, hi := full.Limits()
	plain.Dt = make([]float64, len(full.Dt))
	for i, v := range full.Dt {
		plain.Dt[i] = float64(float32(mamba2.Delta(v, full.DtBias[i%full.Heads], true, lo, hi)))
	}
	plain.D, plain.Z, plain.DtBias, plain.Softplus = nil, nil, nil, false
	step := mamba2.GenerateStep(mamba2.StepOptions{Batch: 8, Slots: 8, Heads: o.Heads, Headdim: o.Headdim, Groups: o.Groups, Dstate: o.Dstate,
		D: true, Z: true, DtBias: true, Softplus: true, DType: dt.in, StateDType: dt.state}, 82).Rounded()
	timers := []func(int, int) ([]float64, error){
		func(w, n int) ([]float64, error) { return kernel.TimePrefill(full, w, n) },
		func(w, n int) ([]float64, error) { return kernel.TimePrefill(half, w, n) },
		func(w, n int) ([]float64, error) { return kernel.TimePrefill(&plain, w, n) },
	}
	names := []string{"prefill", "prefill, half the tokens", "prefill without D, z, dt_bias, softplus"}
	if kernel.SupportsStep(step) == "" {
		timers = append(timers, func(w, n int) ([]float64, error) { return kernel.TimeStep(step, w, n) })
		names = append(names, "decode step, batch 8")
	}
	s, err := interleaved(5, 2, 6, timers...)
	if bridge.Unsupported(err) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	tab := report.Table{Name: fmt.Sprintf("mamba2 timing (%s, %v; %s): medians of 30 launches, interleaved", full.Shape(), dt, "worker's timer"),
		Columns: []string{"operation", "median µs", "spread"}}
	for i, n := range names {
		tab.Rows = append(tab.Rows, []string{n, fmt.Sprintf("%.1f", 1e3*s[i].Median()), fmt.Sprintf("%.2f", s[i].Spread())})
		rep.Figures = append(rep.Figures, report.Figure{Name: "mamba2 " + n, Value: report.Num(1e3 * s[i].Median()), Unit: "µs", DType: dt.String()})
	}
	rep.AddTable(tab)
	t.Logf("%v", tab.Rows)
	undecided := ""
	for _, less := range []int{1, 2} {
		d, err := perf.DecideLessWork(names[less], s[0], s[less])
		if err != nil {
			t.Error(err)
			continue
		}
		if d.Outcome() == perf.Undecided {
			undecided += fmt.Sprintf("%s: %.3g× the full prefill (95%% CI %.3g–%.3g) decides nothing; ", names[less], d.Ratio, d.Lo, d.Hi)
		}
	}
	if undecided != "" && !t.Failed() {
		rep.Undecide(t.Name(), "", undecided)
		t.Skip("undecided: " + undecided)
	}
}

package verify

import (
	"fmt"
	"time"

	"ssmverify/cudalib"
	"ssmverify/perf"
)

// Timer is how the checks time work: device events around the launches
// (ssmk_plan_time: CUDA events on a GPU, a monotonic clock around
// synchronous launches on the CPU). HostSynced and HostUnsynced exist for
// Check2 only, to show what the other two ways of timing report.
type Timer int

const (
	TimerEvents Timer = iota
	TimerHostSynced
	TimerHostUnsynced
)

func (t Timer) String() string {
	return [...]string{"device events (ssmk_plan_time)", "host clock + ssmk_plan_sync", "host clock, no sync"}[t]
}

// HarnessTimer is the timer every check but Check2 uses: the device events,
// which Check2 holds against a synchronised host clock. It is a constant of
// this code, not something a run can change, so no test compares it.
const HarnessTimer = TimerEvents

// Measure times a plan: warmup launches (not recorded), then trials samples
// of per launches each, reported per launch in µs, with the given timer.
func Measure(p *cudalib.Plan, timer Timer, warmup, trials, per int) (perf.Samples, error) {
	if warmup > 0 {
		if _, err := p.Time(warmup); err != nil {
			return nil, err
		}
	}
	out := make(perf.Samples, 0, trials)
	for i := 0; i < trials; i++ {
		var us float64
		switch timer {
		case TimerEvents:
			ms, err := p.Time(per)
			if err != nil {
				return nil, err
			}
			us = ms * 1e3 / float64(per)
		case TimerHostSynced, TimerHostUnsynced:
			if err := p.Sync(); err != nil {
				return nil, err
			}
			t0 := time.Now()
			for k := 0; k < per; k++ {
				if err := p.Launch(); err != nil {
					return nil, err
				}
			}
			if timer == TimerHostSynced {
				if err := p.Sync(); err != nil {
					return nil, err
				}
			}
			us = float64(time.Since(t0).Nanoseconds()) / 1e3 / float64(per)
			if timer == TimerHostUnsynced {
				if err := p.Sync(); err != nil { // outside the timed region
					return nil, err
				}
			}
		default:
			return nil, fmt.Errorf("verify: unknown timer %d", timer)
		}
		out = append(out, us)
	}
	return out, nil
}

// MeasureInterleaved times several plans side by side: each warms up, then
// the trials go round-robin (one sample of each plan per round, in the
// given timers), so that drift and bursts of machine noise fall on every
// plan alike instead of on whichever was measured at the time.
func MeasureInterleaved(plans []*cudalib.Plan, timers []Timer, warmup, trials, per int) ([]perf.Samples, error) {
	if len(timers) != len(plans) {
		return nil, fmt.Errorf("verify: %d plans, %d timers", len(plans), len(timers))
	}
	for _, p := range plans {
		if warmup > 0 {
			if _, err := p.Time(warmup); err != nil {
				return nil, err
			}
		}
	}
	out := make([]perf.Samples, len(plans))
	for t := 0; t < trials; t++ {
		for i, p := range plans {
			s, err := Measure(p, timers[i], 0, 1, per)
			if err != nil {
				return nil, err
			}
			out[i] = append(out[i], s[0])
		}
	}
	return out, nil
}

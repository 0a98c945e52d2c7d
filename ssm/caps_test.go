package ssm

import (
	"os"
	"regexp"
	"strconv"
	"testing"
)

func TestCapsBits(t *testing.T) {
	for _, c := range []struct {
		caps                           Caps
		supported, scanOnly, discretes bool
	}{
		{0, false, false, false},
		{CapSupported, true, false, true},
		{CapSupported | CapScanOnly, true, true, false},
		{CapSupported | CapComplexZOHFallback, true, false, true},
	} {
		if c.caps.Supported() != c.supported || c.caps.ScanOnly() != c.scanOnly || c.caps.Discretizes() != c.discretes {
			t.Errorf("caps %d: supported %t scan-only %t discretizes %t", c.caps, c.caps.Supported(), c.caps.ScanOnly(), c.caps.Discretizes())
		}
	}
}

// TestCapsBackwardBits: the backward's bits count only with bit 0 and bit
// 6, and SSMK_CAP_BWD_OUTPUTS_ONLY takes the state gradients away.
func TestCapsBackwardBits(t *testing.T) {
	for _, c := range []struct {
		caps                       Caps
		backward, atomic, stateful bool
	}{
		{CapBackward | CapBackwardAtomic, false, false, false},
		{CapSupported | CapBackward, true, false, true},
		{CapSupported | CapBackward | CapBackwardAtomic, true, true, true},
		{CapSupported | CapBackward | CapBackwardOutputsOnly, true, false, false},
		{CapSupported | CapBackwardOutputsOnly, false, false, false},
	} {
		if c.caps.Backward() != c.backward || c.caps.BackwardAtomic() != c.atomic || c.caps.BackwardStateGrads() != c.stateful {
			t.Errorf("caps %d: backward %t atomic %t state gradients %t", c.caps, c.caps.Backward(), c.caps.BackwardAtomic(), c.caps.BackwardStateGrads())
		}
	}
	for caps, want := range map[Caps]bool{
		CapSupported | CapBackward | CapBackwardSaved: true,
		CapSupported | CapBackwardSaved:               false, // no backward, no saved plans
		CapBackward | CapBackwardSaved:                false,
		CapSupported | CapBackward:                    false,
	} {
		if caps.BackwardSaved() != want {
			t.Errorf("caps %d: saved-state plans %t, want %t", caps, caps.BackwardSaved(), want)
		}
	}
	if got := (CapSupported | CapNarrowInputs | CapBackward | CapBackwardSaved).For(BF16); got.BackwardSaved() {
		t.Errorf("For(BF16) kept SSMK_CAP_BWD_SAVED without SSMK_CAP_BWD_NARROW: %d", got)
	}
	if got := (CapSupported | CapNarrowInputs | CapBackward | CapBackwardOutputsOnly).For(F16); got&(CapBackward|CapBackwardOutputsOnly) != 0 {
		t.Errorf("For(F16) kept the backward's bits without SSMK_CAP_BWD_NARROW: %d", got)
	}
	narrowBwd := CapSupported | CapNarrowInputs | CapBackward | CapBackwardAtomic | CapBackwardNarrow
	for _, c := range []struct {
		caps     Caps
		dt       DType
		backward bool
	}{
		{narrowBwd, BF16, true},
		{narrowBwd, F16, true},
		{narrowBwd &^ CapNarrowInputs, BF16, false}, // no 16-bit scan, no 16-bit backward
		{narrowBwd &^ CapBackward, F16, false},
		{CapSupported | CapBackwardNarrow, F32, false},
		{CapSupported | CapBackward | CapBackwardNarrow, F32, true},
	} {
		got := c.caps.For(c.dt)
		if got.Backward() != c.backward {
			t.Errorf("caps %d For(%v): backward %t, want %t", c.caps, c.dt, got.Backward(), c.backward)
		}
		if c.backward && c.dt.Narrow() && !got.BackwardAtomic() {
			t.Errorf("caps %d For(%v): lost SSMK_CAP_BWD_ATOMIC", c.caps, c.dt)
		}
		if !c.dt.Narrow() && got&CapBackwardNarrow != 0 {
			t.Errorf("caps %d For(%v) kept bit 9", c.caps, c.dt)
		}
	}
}

// The capability bits are the header's: every SSMK_CAP_ define of
// cudalib/include/ssmk.h has its Go constant, of the same value.
func TestCapsMatchHeader(t *testing.T) {
	src, err := os.ReadFile("../cudalib/include/ssmk.h")
	if err != nil {
		t.Fatal(err)
	}
	goCaps := map[string]Caps{"SUPPORTED": CapSupported, "COMPLEX_ZOH_FALLBACK": CapComplexZOHFallback,
		"SCAN_ONLY": CapScanOnly, "INITIAL_STATE": CapInitialState, "FEATURES": CapFeatures,
		"NARROW_INPUTS": CapNarrowInputs, "BACKWARD": CapBackward, "BWD_ATOMIC": CapBackwardAtomic,
		"BWD_OUTPUTS_ONLY": CapBackwardOutputsOnly, "BWD_NARROW": CapBackwardNarrow, "NONFINITE": CapNonFinite,
		"BWD_SAVED": CapBackwardSaved}
	defs := regexp.MustCompile(`(?m)^#define SSMK_CAP_(\w+) (\d+)u`).FindAllStringSubmatch(string(src), -1)
	if len(defs) != len(goCaps) {
		t.Errorf("the header defines %d capability bits, Go %d", len(defs), len(goCaps))
	}
	for _, d := range defs {
		v, _ := strconv.ParseUint(d[2], 10, 32)
		if c, ok := goCaps[d[1]]; !ok || uint64(c) != v {
			t.Errorf("SSMK_CAP_%s = %d in the header; Go has %d (present %t)", d[1], v, c, ok)
		}
	}
}

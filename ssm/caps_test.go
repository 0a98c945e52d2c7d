package ssm

import "testing"

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

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
		t.Errorf("For(F16) kept the backward's bits: %d", got)
	}
}

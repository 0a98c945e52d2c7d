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

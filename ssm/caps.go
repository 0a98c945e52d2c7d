package ssm

// Caps is the capability word of ssmk_capabilities(method, dtype,
// is_complex): what a library declares it computes.
type Caps uint32

const (
	CapSupported          Caps = 1  // SSMK_CAP_SUPPORTED
	CapComplexZOHFallback Caps = 2  // SSMK_CAP_COMPLEX_ZOH_FALLBACK
	CapScanOnly           Caps = 4  // SSMK_CAP_SCAN_ONLY
	CapInitialState       Caps = 8  // SSMK_CAP_INITIAL_STATE (extension: ssmk_scan_fwd_state, ssmk_plan_create_state)
	CapFeatures           Caps = 16 // SSMK_CAP_FEATURES (extension: ssmk_scan_features)
	CapNarrowInputs       Caps = 32 // SSMK_CAP_NARROW_INPUTS (extension: the 16-bit input types, F16 and BF16)
	CapBackward           Caps = 64 // SSMK_CAP_BACKWARD (extension: ssmk_scan_bwd, ssmk_plan_create_bwd)
	// CapBackwardAtomic is SSMK_CAP_BWD_ATOMIC (with CapBackward): the
	// backward reduces with atomics, so two calls may differ in the last
	// bits of the summed gradients; without it they must be bitwise equal.
	CapBackwardAtomic Caps = 128
	// CapBackwardOutputsOnly is SSMK_CAP_BWD_OUTPUTS_ONLY (with
	// CapBackward): the backward takes no gradient of the last state,
	// computes none of an initial state and starts from h = 0, as Mamba's
	// selective_scan_bwd.
	CapBackwardOutputsOnly Caps = 256
	// CapBackwardNarrow is SSMK_CAP_BWD_NARROW (for a 16-bit dtype, with
	// CapNarrowInputs and CapBackward): the backward takes this 16-bit
	// input type, its input-typed gradients (du, ddelta, dz, variable dB
	// and dC) rounded once to it. Without it a 16-bit dtype's backward bits
	// mean nothing (ABI before this extension: the backward is F32 and F64).
	CapBackwardNarrow Caps = 512
	// CapNonFinite is SSMK_CAP_NONFINITE (with CapSupported): the
	// library follows the suite's non-finite policy for this combination
	// (what it returns where an intermediate overflows or an input is NaN
	// or ±Inf: go doc ./fuzz), and the fuzz targets and their corpus hold
	// it to the policy; without it they judge what the error model covers.
	CapNonFinite Caps = 1024
	// CapBackwardSaved is SSMK_CAP_BWD_SAVED (with CapBackward): the
	// library exports ssmk_plan_create_bwd_saved, a backward plan whose
	// creation runs the part of the forward the backward reads (the states
	// a training step's forward saves) and whose launches run the backward
	// alone, as autograd's backward is timed.
	CapBackwardSaved Caps = 2048
)

// For returns c as it holds for dtype dt: for a 16-bit input type, 0
// unless bit 5 (CapNarrowInputs) is set with bit 0 (a library of ABI v1
// knows no such dtype and is never judged on one), always scan only (the
// ABI defines ssmk_discretize for F32 and F64 alone), and without the
// backward's bits unless bit 9 (CapBackwardNarrow) declares them for it.
// For F32 and F64, bit 9 means nothing and is cleared.
func (c Caps) For(dt DType) Caps {
	if !dt.Narrow() {
		return c &^ CapBackwardNarrow
	}
	if c&CapBackwardNarrow == 0 {
		c &^= CapBackward | CapBackwardAtomic | CapBackwardOutputsOnly | CapBackwardSaved
	}
	if c&CapNarrowInputs == 0 || !c.Supported() {
		return 0
	}
	return c | CapScanOnly
}

// Supported reports bit 0.
func (c Caps) Supported() bool { return c&CapSupported != 0 }

// NonFinitePolicy reports whether the combination declares the suite's
// non-finite policy (CapNonFinite).
func (c Caps) NonFinitePolicy() bool { return c.Supported() && c&CapNonFinite != 0 }

// ComplexZOHFallback reports bit 1: with complex A the method computes zoh.
func (c Caps) ComplexZOHFallback() bool { return c&CapComplexZOHFallback != 0 }

// ScanOnly reports bit 2: the scan and its plans support the combination,
// ssmk_discretize does not (a kernel that discretizes inside its scan).
func (c Caps) ScanOnly() bool { return c&CapScanOnly != 0 }

// InitialState reports whether the combination is scanned from a given
// state (ssmk_scan_fwd_state, ssmk_plan_create_state).
func (c Caps) InitialState() bool { return c.Supported() && c&CapInitialState != 0 }

// Discretizes reports whether ssmk_discretize is declared for the
// combination: supported and not scan-only.
func (c Caps) Discretizes() bool { return c.Supported() && !c.ScanOnly() }

// Backward reports whether the backward pass is declared for the
// combination (ssmk_scan_bwd, ssmk_plan_create_bwd): bit 6 with bit 0.
func (c Caps) Backward() bool { return c.Supported() && c&CapBackward != 0 }

// BackwardAtomic reports bit 7: the backward's sums may differ between
// calls in their last bits (atomics), which the suite then bounds instead
// of asking for bitwise equality.
func (c Caps) BackwardAtomic() bool { return c.Backward() && c&CapBackwardAtomic != 0 }

// BackwardSaved reports bit 11 with the backward: plans on saved states
// (ssmk_plan_create_bwd_saved).
func (c Caps) BackwardSaved() bool { return c.Backward() && c&CapBackwardSaved != 0 }

// BackwardStateGrads reports whether the backward takes a gradient of the
// last state, computes one of the initial state and starts from a given
// state (where the forward does): bit 6 without bit 8.
func (c Caps) BackwardStateGrads() bool { return c.Backward() && c&CapBackwardOutputsOnly == 0 }

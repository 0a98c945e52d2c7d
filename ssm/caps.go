package ssm

// Caps is the capability word of ssmk_capabilities(method, dtype,
// is_complex): what a library declares it computes.
type Caps uint32

const (
	CapSupported          Caps = 1 // SSMK_CAP_SUPPORTED
	CapComplexZOHFallback Caps = 2 // SSMK_CAP_COMPLEX_ZOH_FALLBACK
)

// Supported reports bit 0.
func (c Caps) Supported() bool { return c&CapSupported != 0 }

// ComplexZOHFallback reports bit 1: with complex A the method computes zoh.
func (c Caps) ComplexZOHFallback() bool { return c&CapComplexZOHFallback != 0 }

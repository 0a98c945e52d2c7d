package report

import (
	"fmt"
)

// Check7Test is the name of the verify suite's test that writes check7.json
// (the test asserts it), by which the gate runs Check7 in a process of its own.
const Check7Test = "TestCheck7MethodComparison"

// Check7Schema names the version of check7.json's layout.
const Check7Schema = "ssmverify.check7/v1"

// Check7 is the result of the seventh performance check (every method timed
// on the same path and inputs, against zoh): what TestCheck7MethodComparison
// writes as check7.json and the gate reads for its baselines and plots.
type Check7 struct {
	Schema            string      `json:"schema"`
	Config            string      `json:"config"` // problem size, dtype, A, trials and warm-up
	CopyBandwidthGBps float64     `json:"copy_bandwidth_gbps"`
	BytesPerScan      int64       `json:"bytes_per_scan"` // bytes the scan must move (cudalib.ScanBytes)
	ElementsPerScan   int64       `json:"elements_per_scan"`
	MaxSlowdown       float64     `json:"max_slowdown"` // the allowed ratio to zoh
	Methods           []Check7Row `json:"methods"`
	// Samples are every method's timed launches, µs each, by method name.
	Samples map[string][]float64 `json:"samples_us"`
	// Scaling is the -sizes table: size, method, median µs, GB/s.
	Scaling [][]string `json:"scaling,omitempty"`
	// MaxBackwardSlowdown is the allowed ratio of a method's backward to
	// zoh's; BackwardSamples the backward's timed launches by method (both
	// absent where the library declares no backward for every method).
	MaxBackwardSlowdown float64              `json:"max_backward_slowdown,omitempty"`
	BackwardSamples     map[string][]float64 `json:"backward_samples_us,omitempty"`
	// BackwardSavedSamples are the launches of the backward plans on saved
	// states (ssmk_plan_create_bwd_saved: the backward alone, after a
	// forward that saved its states), timed beside BackwardSamples; absent
	// where the library declares them not for every method.
	BackwardSavedSamples map[string][]float64 `json:"backward_saved_samples_us,omitempty"`
	Passed               bool                 `json:"passed"`
}

// Check7Row is one method's row of Check7.
type Check7Row struct {
	Method         string  `json:"method"`
	MedianUS       float64 `json:"median_us"`
	CILowUS        float64 `json:"ci95_low_us"`
	CIHighUS       float64 `json:"ci95_high_us"`
	RatioToZOH     float64 `json:"ratio_to_zoh"`
	RatioCILow     float64 `json:"ratio_ci95_low"`
	RatioCIHigh    float64 `json:"ratio_ci95_high"`
	ElementsPerSec float64 `json:"elements_per_s"`
	GBPerSec       float64 `json:"gb_per_s"`
	FracCopyBW     float64 `json:"fraction_of_copy_bandwidth"`
	Verdict        string  `json:"verdict"`
	// The backward pass of the same problem, timed beside the other
	// methods' backward (ssmk_plan_create_bwd): median, ratio to zoh's
	// backward with its 95% CI, verdict against MaxBackwardSlowdown.
	BackwardUS          float64 `json:"backward_median_us,omitempty"`
	BackwardRatioToZOH  float64 `json:"backward_ratio_to_zoh,omitempty"`
	BackwardRatioCILow  float64 `json:"backward_ratio_ci95_low,omitempty"`
	BackwardRatioCIHigh float64 `json:"backward_ratio_ci95_high,omitempty"`
	BackwardVerdict     string  `json:"backward_verdict,omitempty"`
	// BackwardSavedUS is the median of the backward plan on saved states
	// (ssmk_plan_create_bwd_saved), or 0 where there is none.
	BackwardSavedUS float64 `json:"backward_saved_median_us,omitempty"`
}

// LoadCheck7 reads check7.json. A file without samples (written by an older
// suite) is an error: the gate's comparisons need them.
func LoadCheck7(path string) (*Check7, error) {
	c, err := ReadJSON[Check7](path)
	if err != nil {
		return nil, err
	}
	if len(c.Samples) == 0 {
		return nil, fmt.Errorf("%s has no samples_us (written by an older suite): rerun Check7", path)
	}
	return c, nil
}

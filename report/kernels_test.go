package report

import (
	"math"
	"strings"
	"testing"

	"ssmverify/ssm"
)

// TestKernelCells: a bridged kernel's comparisons, crashes and refusals
// land in its cells, the summary and a merge.
func TestKernelCells(t *testing.T) {
	r := NewKernel(LibraryInfo{Path: "k", Backend: "bridge"}, &BridgeInfo{Adapter: "a", Describe: map[string]any{"device": "cpu"}, Crashes: 1, Restarts: 1})
	r.AddKernel("TestA/x", "ssd_prefill", ssm.F32, ssm.F32, 0.5, true, "")
	r.KernelCrash("TestB", "ssd_step", ssm.BF16, ssm.F32, "signal: segmentation fault")
	r.KernelUnsupported("TestC", "ssd_prefill", ssm.F64, ssm.F64, "dtype fp64 not declared")
	r.RecordTest("TestB", Failed)
	r.Finish()
	s := r.Summary()
	for _, want := range []string{"ssd_prefill  fp32  fp32   ok", "ssd_step     bf16  fp32   FAIL", "crash: signal: segmentation fault",
		"not supported (dtype fp64 not declared)", "the worker crashed 1 times"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	if r.Passed {
		t.Error("a crash left the report passed")
	}
	if len(r.Diagnoses) != 1 || r.Diagnoses[0].Finding.Tag != "crash" || r.Diagnoses[0].Test != "TestB" {
		t.Errorf("a crash's diagnoses: %+v, want one [crash] for TestB", r.Diagnoses)
	}
	m := NewKernel(r.Library, nil)
	if err := m.Merge(r); err != nil {
		t.Fatal(err)
	}
	if len(m.Kernels) != 3 || m.Bridge == nil || !math.IsInf(float64(m.kernelCell("ssd_step", ssm.BF16, ssm.F32).MaxRatio), 1) {
		t.Errorf("merge: %d cells, bridge %v", len(m.Kernels), m.Bridge)
	}
}

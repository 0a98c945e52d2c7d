package report

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"ssmverify/ssm"
)

// BridgeInfo is what a worker behind the bridge said of itself (package
// bridge): the adapter, the versions of Python, torch, Triton and the
// driver, the GPU and its architecture, the kernel's source commit, and
// the configurations its autotuner chose.
type BridgeInfo struct {
	Adapter  string         `json:"adapter"`
	Describe map[string]any `json:"describe"`
	Configs  map[string]any `json:"configs,omitempty"`
	Restarts int            `json:"restarts"`
	Crashes  int            `json:"crashes"`
}

// KernelCell aggregates the comparisons of one operation of a kernel
// behind the bridge (ssd_prefill, ssd_step) in one input dtype and state
// dtype, as Cell does for a method of the ABI.
type KernelCell struct {
	Op         string `json:"op"`
	DType      string `json:"dtype"`
	StateDType string `json:"state_dtype"`
	Support    string `json:"support"` // "yes", or why not
	Tally
	Crashes int `json:"crashes,omitempty"`
}

func (r *Report) kernelCell(op string, dt, sdt ssm.DType) *KernelCell {
	for _, c := range r.Kernels {
		if c.Op == op && c.DType == dt.String() && c.StateDType == sdt.String() {
			return c
		}
	}
	c := &KernelCell{Op: op, DType: dt.String(), StateDType: sdt.String()}
	r.Kernels = append(r.Kernels, c)
	return c
}

// AddKernel records one comparison of a bridged kernel's operation.
func (r *Report) AddKernel(test, op string, dt, sdt ssm.DType, ratio float64, passed bool, worst string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addKernel(test, op, dt, sdt, ratio, passed, worst)
}

func (r *Report) addKernel(test, op string, dt, sdt ssm.DType, ratio float64, passed bool, worst string) *KernelCell {
	c := r.kernelCell(op, dt, sdt)
	if c.Support == "" {
		c.Support = "yes"
	}
	c.add(topLevel(test), ratio, passed, worst)
	return c
}

// KernelCrash records a call of a bridged kernel that ended its worker
// (a device fault, a signal): a failure whose cause is the kernel's own
// end, so it is diagnosed as such ("crash", beside "raises" for the
// kernel's own exception) and never left a failure without a cause.
func (r *Report) KernelCrash(test, op string, dt, sdt ssm.DType, cause string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addKernel(test, op, dt, sdt, math.Inf(1), false, "crash: "+cause).Crashes++
	r.addKernelDiagnosis(test, op, dt, sdt, Finding{Tag: "crash", Cause: "the kernel's call ended its worker: " + cause})
}

// KernelUnsupported records that the kernel does not declare a
// combination (never a failure).
func (r *Report) KernelUnsupported(test, op string, dt, sdt ssm.DType, why string) {
	r.mu.Lock()
	c := r.kernelCell(op, dt, sdt)
	if c.Checks == 0 && c.Support == "" {
		c.Support = "no: " + why
	}
	r.mu.Unlock()
	r.Unsupported(test, fmt.Sprintf("%s %v/state-%v: %s", op, dt, sdt, why))
}

// AddKernelDiagnosis records the cause of a failure of a bridged kernel's
// operation; it is grouped with the ABI's diagnoses (the cell reads
// op/dtype/state-dtype).
func (r *Report) AddKernelDiagnosis(test, op string, dt, sdt ssm.DType, f Finding) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addKernelDiagnosis(test, op, dt, sdt, f)
}

func (r *Report) addKernelDiagnosis(test, op string, dt, sdt ssm.DType, f Finding) {
	r.Diagnoses = append(r.Diagnoses, Diagnosis{Test: test, Method: op, DType: dt.String(), Kind: "state-" + sdt.String(), Finding: f, Text: f.String()})
}

// kernelSummary is the table of the bridged kernel's cells.
func (r *Report) kernelSummary() string {
	if len(r.Kernels) == 0 {
		return ""
	}
	var b strings.Builder
	if r.Bridge != nil {
		keys := make([]string, 0, len(r.Bridge.Describe))
		for k := range r.Bridge.Describe {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var kv []string
		for _, k := range keys {
			kv = append(kv, fmt.Sprintf("%s=%v", k, r.Bridge.Describe[k]))
		}
		fmt.Fprintf(&b, "kernel behind the bridge: %s\n  %s\n", r.Bridge.Adapter, strings.Join(kv, " "))
		if r.Bridge.Crashes > 0 {
			fmt.Fprintf(&b, "  the worker crashed %d times and was restarted %d times (each crash is a failure of its test)\n", r.Bridge.Crashes, r.Bridge.Restarts)
		}
	}
	fmt.Fprintf(&b, "\n%-12s %-5s %-6s %-5s %7s %10s\n", "operation", "dtype", "state", "", "checks", "max ratio")
	sort.SliceStable(r.Kernels, func(i, j int) bool { return r.Kernels[i].Op < r.Kernels[j].Op })
	for _, c := range r.Kernels {
		v := "ok"
		switch {
		case c.Failures > 0:
			v = "FAIL"
		case strings.HasPrefix(c.Support, "no"):
			v = "n/s"
		case c.Checks == 0:
			v = "-"
		}
		fmt.Fprintf(&b, "%-12s %-5s %-6s %-5s %7d %10.3g\n", c.Op, c.DType, c.StateDType, v, c.Checks, float64(c.MaxRatio))
	}
	b.WriteString("\nchecks: comparisons made; max ratio: the largest |kernel − reference| / (u·S + η·T) of the problem's error\n" +
		"model (package mamba2 for Mamba-2, mamba3 for Mamba-3), which decides (threshold 4); n/s: not declared by the adapter, not judged\n")
	for _, t := range r.Tables {
		if !strings.HasPrefix(t.Name, "mamba2 ") && !strings.HasPrefix(t.Name, "mamba3 ") {
			continue
		}
		fmt.Fprintf(&b, "\n%s\n%s", t.Name, t.Text())
	}
	for _, c := range r.Kernels {
		if c.Failures > 0 {
			fmt.Fprintf(&b, "  %s %s/state-%s: %d of %d checks failed (%s); worst %s\n", c.Op, c.DType, c.StateDType, c.Failures, c.Checks, strings.Join(c.FailedBy, ", "), c.Worst)
		} else if strings.HasPrefix(c.Support, "no") {
			fmt.Fprintf(&b, "  %s %s/state-%s: not supported (%s)\n", c.Op, c.DType, c.StateDType, strings.TrimPrefix(c.Support, "no: "))
		}
	}
	return b.String()
}

package mamba2

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"ssmverify/bridge"
	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/mamba2"
	"ssmverify/report"
	"ssmverify/ssm"
)

// pair is an input dtype with the type its states are kept in.
type pair struct{ in, state ssm.DType }

func (d pair) String() string { return fmt.Sprintf("%v/state-%v", d.in, d.state) }

// pairs are the combinations Mamba-2 runs in: float32; 16-bit inputs with
// float32 states (state_dtype=float32) and with states of the inputs' type
// (upstream's default before state_dtype); float64.
var pairs = []pair{{ssm.F32, ssm.F32}, {ssm.BF16, ssm.F32}, {ssm.BF16, ssm.BF16}, {ssm.F16, ssm.F32}, {ssm.F16, ssm.F16}, {ssm.F64, ssm.F64}}

// chunk is the chunk size the kernel declares first (64 where it takes
// any: small enough that the suite's problems cross chunks).
func chunk() int { return chunkOf(kernel) }

// repFor is the report a check of k writes to (Suite.ReportFor): the
// run's for the kernel under test, else a scratch report.
func repFor(k *bridge.SSD) *report.Report { return suite.ReportFor(k.W) }

// skipRefused ends t as not supported where err is the kernel's refusal
// (bridge.Unsupported), recorded in rk: a refusal is never a failure.
func skipRefused(t *testing.T, rk *report.Report, op string, dt, sdt ssm.DType, err error) {
	t.Helper()
	if bridge.Unsupported(err) {
		rk.KernelUnsupported(t.Name(), op, dt, sdt, err.Error())
		t.Skip("not supported: " + err.Error())
	}
}

// chunkOf is the chunk size problems for k are drawn with: 0 for a
// sequential kernel, else its first declared size, else 64.
func chunkOf(k *bridge.SSD) int {
	c, ok := k.Cap(bridge.OpPrefill)
	if !ok {
		return 64
	}
	if c.Algorithm == "sequential" {
		return 0
	}
	if len(c.ChunkSizes) > 0 {
		return c.ChunkSizes[0]
	}
	return 64
}

// runPrefill runs the kernel, telling a crash and a refusal apart: ok is
// false when the test has nothing to judge (recorded already).
func runPrefill(t *testing.T, p *mamba2.Problem) (*mamba2.Output, bool) {
	t.Helper()
	if why := kernel.Supports(p); why != "" {
		rep.KernelUnsupported(t.Name(), bridge.OpPrefill, p.DType, p.StateDType, why)
		return nil, false
	}
	out, err := kernel.Prefill(p)
	var crash *bridge.CrashError
	switch {
	case errors.As(err, &crash):
		rep.KernelCrash(t.Name(), bridge.OpPrefill, p.DType, p.StateDType, crash.Cause)
		rep.AddKernelDiagnosis(t.Name(), bridge.OpPrefill, p.DType, p.StateDType, report.Finding{Tag: "crash", Cause: "the kernel ended its worker: " + crash.Cause, Where: p.Shape()})
		t.Errorf("prefill %s: crash: %s", p.Shape(), crash.Cause)
		return nil, false
	case bridge.Unsupported(err):
		rep.KernelUnsupported(t.Name(), bridge.OpPrefill, p.DType, p.StateDType, err.Error())
		return nil, false
	case err != nil:
		rep.AddKernel(t.Name(), bridge.OpPrefill, p.DType, p.StateDType, math.Inf(1), false, err.Error())
		rep.AddKernelDiagnosis(t.Name(), bridge.OpPrefill, p.DType, p.StateDType, raised(err, p.Shape()))
		t.Errorf("prefill %s: %v", p.Shape(), err)
		return nil, false
	}
	return out, true
}

// raised is the finding of a kernel that raised on a problem it declares:
// the exception, and the options that were on.
func raised(err error, where string) report.Finding {
	var k *bridge.KernelError
	msg := err.Error()
	if errors.As(err, &k) {
		msg = k.Message
	}
	return report.Finding{Tag: "raises", Cause: "the kernel raised on a problem it declares: " + msg, Where: where}
}

func stepShape(s *mamba2.Step) string {
	shape := fmt.Sprintf("%v/state-%v b=%d slots=%d h=%d p=%d g=%d n=%d", s.DType, s.StateDType, s.Batch, s.Slots, s.Heads, s.Headdim, s.Groups, s.Dstate)
	for _, f := range []struct {
		on   bool
		name string
	}{{s.D != nil, "D"}, {s.Z != nil, "z"}, {s.DtBias != nil, "dt_bias"}, {s.Softplus, "softplus"}, {s.Indices != nil, fmt.Sprintf("indices=%v", s.Indices)}} {
		if f.on {
			shape += " " + f.name
		}
	}
	return shape
}

// judgePrefill runs the kernel's prefill of p and judges it against the
// reference; a failure is diagnosed. It returns the kernel's output (nil
// when there is none).
func judgePrefill(t *testing.T, p *mamba2.Problem) *mamba2.Output {
	t.Helper()
	out, ok := runPrefill(t, p)
	if !ok {
		return nil
	}
	want, sc := mamba2.Prefill(p)
	c, _, err := judge.CompareArrays(judge.PrefillArrays(p, out, want, sc))
	if err != nil {
		t.Fatal(err)
	}
	passed := c.NonFinite == 0 && c.Worst.Ratio <= judge.Threshold(p.DType)
	rep.AddKernel(t.Name(), bridge.OpPrefill, p.DType, p.StateDType, c.Worst.Ratio, passed, c.Worst.String())
	if !passed {
		f := diagnose.SSDPrefill(p, out, func(q *mamba2.Problem) (*mamba2.Output, error) { return kernel.Prefill(q) })
		rep.AddKernelDiagnosis(t.Name(), bridge.OpPrefill, p.DType, p.StateDType, f)
		t.Errorf("prefill %s: ratio %.3g > %g at %s; diagnosis [%s] %s", p.Shape(), c.Worst.Ratio, judge.Threshold(p.DType), c.Worst, f.Tag, f)
	}
	return out
}

// runStep runs the kernel's decode step like runPrefill.
func runStep(t *testing.T, s *mamba2.Step) (*mamba2.StepOutput, bool) {
	t.Helper()
	if why := kernel.SupportsStep(s); why != "" {
		rep.KernelUnsupported(t.Name(), bridge.OpStep, s.DType, s.StateDType, why)
		return nil, false
	}
	out, err := kernel.Step(s)
	var crash *bridge.CrashError
	switch {
	case errors.As(err, &crash):
		rep.KernelCrash(t.Name(), bridge.OpStep, s.DType, s.StateDType, crash.Cause)
		rep.AddKernelDiagnosis(t.Name(), bridge.OpStep, s.DType, s.StateDType, report.Finding{Tag: "crash", Cause: "the kernel ended its worker: " + crash.Cause})
		t.Errorf("step %v: crash: %s", s.DType, crash.Cause)
		return nil, false
	case bridge.Unsupported(err):
		rep.KernelUnsupported(t.Name(), bridge.OpStep, s.DType, s.StateDType, err.Error())
		return nil, false
	case err != nil:
		rep.AddKernel(t.Name(), bridge.OpStep, s.DType, s.StateDType, math.Inf(1), false, err.Error())
		rep.AddKernelDiagnosis(t.Name(), bridge.OpStep, s.DType, s.StateDType, raised(err, stepShape(s)))
		t.Errorf("step %v/state-%v: %v", s.DType, s.StateDType, err)
		return nil, false
	}
	return out, true
}

// judgeStep runs and judges one decode step.
func judgeStep(t *testing.T, s *mamba2.Step) *mamba2.StepOutput {
	t.Helper()
	out, ok := runStep(t, s)
	if !ok {
		return nil
	}
	want, sc := mamba2.Decode(s)
	c, _, err := judge.CompareArrays(judge.StepArrays(s, out, want, sc))
	if err != nil {
		t.Fatal(err)
	}
	passed := c.NonFinite == 0 && c.Worst.Ratio <= judge.Threshold(s.DType)
	rep.AddKernel(t.Name(), bridge.OpStep, s.DType, s.StateDType, c.Worst.Ratio, passed, c.Worst.String())
	if !passed {
		f := diagnose.SSDStep(s, out)
		rep.AddKernelDiagnosis(t.Name(), bridge.OpStep, s.DType, s.StateDType, f)
		t.Errorf("step %v/state-%v indices %v: ratio %.3g > %g at %s; diagnosis [%s] %s", s.DType, s.StateDType, s.Indices, c.Worst.Ratio, judge.Threshold(s.DType), c.Worst, f.Tag, f)
	}
	return out
}

package cudalib

import (
	"fmt"
	"runtime"
	"unsafe"

	"ssmverify/ssm"
)

// gradArgs mirrors struct ssmk_scan_grads: eleven pointers.
type gradArgs struct {
	DOut, DLastState               unsafe.Pointer
	DU, DDelta, DA, DB, DC, DD, DZ unsafe.Pointer
	DDeltaBias, DInitialState      unsafe.Pointer
}

// GradBuffers are the host arrays of one backward call: the forward's
// inputs (Scan), the cotangent (DOut, DLastState) and the gradients the
// library fills, each in the shape of its input; DD, DZ and DDeltaBias are
// present where the problem has D, z and delta_bias, DInitialState where
// it was asked for. Each array has its input's type: for a 16-bit dtype
// DOut, DU, DDelta, DZ and variable DB, DC are 16-bit, the others float32
// (the ABI's BACKWARD PASS, 16-bit inputs).
type GradBuffers struct {
	Scan             *ScanBuffers
	DOut, DLastState Array

	DU, DDelta, DA, DB, DC, DD, DZ, DDeltaBias, DInitialState Array
}

// NewGradBuffers validates p and ct against the library and converts them
// to dt (the cotangent's dout to the input type, rounded to nearest, its
// dlast_state to the weights'); withInitial asks for the initial state's
// gradient.
func (l *Library) NewGradBuffers(p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType, withInitial bool) (*GradBuffers, error) {
	if !dt.Valid() {
		return nil, fmt.Errorf("cudalib: dtype = %d: the backward pass takes F32 (0), F64 (1), F16 (2) or BF16 (3)", int32(dt))
	}
	s, err := l.NewScanBuffers(p, dt)
	if err != nil {
		return nil, err
	}
	if err := ct.Validate(p); err != nil {
		return nil, fmt.Errorf("cudalib: %w", err)
	}
	in, w := dt, dt.Weight()
	z := func(v []float64, t ssm.DType) Array {
		if v == nil {
			return Array{}
		}
		return zeros(len(v), t)
	}
	g := ssm.NewGrads(p, withInitial)
	return &GradBuffers{Scan: s, DOut: NewArray(ct.Out, in), DLastState: NewArray(ct.LastState, w),
		DU: z(g.U, in), DDelta: z(g.Delta, in), DA: z(g.A, w), DB: z(g.B, bcType(dt, p.VariableB)), DC: z(g.C, bcType(dt, p.VariableC)),
		DD: z(g.D, w), DZ: z(g.Z, in), DDeltaBias: z(g.DeltaBias, w), DInitialState: z(g.InitialState, w)}, nil
}

// Grads returns the gradients widened to float64.
func (g *GradBuffers) Grads() *ssm.Grads {
	return &ssm.Grads{U: g.DU.Float64s(), Delta: g.DDelta.Float64s(), A: g.DA.Float64s(), B: g.DB.Float64s(),
		C: g.DC.Float64s(), D: g.DD.Float64s(), Z: g.DZ.Float64s(), DeltaBias: g.DDeltaBias.Float64s(),
		InitialState: g.DInitialState.Float64s()}
}

// inputs are the backward's inputs by ABI name: the forward's, dout and
// dlast_state.
func (g *GradBuffers) inputs() []NamedArray {
	return append(g.Scan.Inputs(), NamedArray{"dout", g.DOut}, NamedArray{"dlast_state", g.DLastState})
}

// outputs are the gradients by ABI name.
func (g *GradBuffers) outputs() []NamedArray {
	return []NamedArray{{"du", g.DU}, {"ddelta", g.DDelta}, {"dA", g.DA}, {"dB", g.DB}, {"dC", g.DC}, {"dD", g.DD},
		{"dz", g.DZ}, {"ddelta_bias", g.DDeltaBias}, {"dinitial_state", g.DInitialState}}
}

func (g *GradBuffers) args(pin *runtime.Pinner) *gradArgs {
	a := &gradArgs{DOut: g.DOut.pin(pin), DLastState: g.DLastState.pin(pin), DU: g.DU.pin(pin),
		DDelta: g.DDelta.pin(pin), DA: g.DA.pin(pin), DB: g.DB.pin(pin), DC: g.DC.pin(pin), DD: g.DD.pin(pin),
		DZ: g.DZ.pin(pin), DDeltaBias: g.DDeltaBias.pin(pin), DInitialState: g.DInitialState.pin(pin)}
	pin.Pin(a)
	return a
}

// HasBackward reports whether the library exports the backward extension
// (ssmk_scan_bwd, ssmk_plan_create_bwd, ssmk_plan_fetch_bwd); which
// combinations it computes, its capabilities say (ssm.Caps.Backward).
func (l *Library) HasBackward() bool {
	return l.fn.scanBwd != nil && l.fn.planCreateBwd != nil && l.fn.planFetchBwd != nil
}

// RunBackward calls ssmk_scan_bwd on the buffers; the gradient arrays
// receive the results.
func (l *Library) RunBackward(g *GradBuffers) error {
	if !l.HasBackward() {
		return l.lacks("ssmk_scan_bwd", "the backward pass")
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	a, ga := g.Scan.args(&pin), g.args(&pin)
	h0 := g.Scan.InitialState.pin(&pin)
	return l.guardedCall("ssmk_scan_bwd", g.inputs(), g.outputs(), func() int32 { return l.fn.scanBwd(unsafe.Pointer(a), h0, unsafe.Pointer(ga)) })
}

// Backward runs the backward pass of p for the cotangent ct in dtype dt and
// returns the gradients widened to float64.
func (l *Library) Backward(p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType, withInitial bool) (*ssm.Grads, error) {
	g, err := l.NewGradBuffers(p, ct, dt, withInitial)
	if err != nil {
		return nil, err
	}
	if err := l.RunBackward(g); err != nil {
		return nil, err
	}
	return g.Grads(), nil
}

// BackwardPlan is a device-resident plan of the backward pass
// (ssmk_plan_create_bwd): launched and timed like a Plan, its gradients
// fetched with FetchGrads.
type BackwardPlan struct {
	*Plan
	shape *GradBuffers // the presence and lengths of the gradients
}

// NewBackwardPlan calls ssmk_plan_create_bwd with the buffers: each launch
// computes the gradients from the inputs alone.
func (l *Library) NewBackwardPlan(g *GradBuffers) (*BackwardPlan, error) {
	if !l.HasBackward() {
		return nil, l.lacks("ssmk_plan_create_bwd", "the backward pass")
	}
	return l.newBackwardPlan("ssmk_plan_create_bwd", l.fn.planCreateBwd, g)
}

// HasSavedBackward reports whether the library exports plans on saved
// states (ssmk_plan_create_bwd_saved, SSMK_CAP_BWD_SAVED) beside the
// backward; which combinations, its capabilities say (ssm.Caps.BackwardSaved).
func (l *Library) HasSavedBackward() bool { return l.HasBackward() && l.fn.planCreateSaved != nil }

// NewSavedBackwardPlan calls ssmk_plan_create_bwd_saved with the buffers: the
// plan's creation runs the part of the forward the backward reads, as a
// training step's forward saves it, and each launch the backward alone.
// Its gradients are NewBackwardPlan's.
func (l *Library) NewSavedBackwardPlan(g *GradBuffers) (*BackwardPlan, error) {
	if !l.HasSavedBackward() {
		return nil, l.lacks("ssmk_plan_create_bwd_saved", "backward plans on saved states")
	}
	return l.newBackwardPlan("ssmk_plan_create_bwd_saved", l.fn.planCreateSaved, g)
}

func (l *Library) newBackwardPlan(name string, create func(args, h0, grads, plan unsafe.Pointer) int32, g *GradBuffers) (*BackwardPlan, error) {
	var pin runtime.Pinner
	defer pin.Unpin()
	a, ga := g.Scan.args(&pin), g.args(&pin)
	h0 := g.Scan.InitialState.pin(&pin)
	var h uintptr
	if err := l.guardedCall(name, g.inputs(), g.outputs(), func() int32 {
		return create(unsafe.Pointer(a), h0, unsafe.Pointer(ga), unsafe.Pointer(&h))
	}); err != nil {
		return nil, err
	}
	return &BackwardPlan{Plan: l.newPlan(h, g.Scan.DType, g.Scan.DType, 0, 0), shape: g}, nil
}

// FetchGrads syncs and returns the last launch's gradients widened to
// float64 (ssmk_plan_fetch_bwd).
func (p *BackwardPlan) FetchGrads() (*ssm.Grads, error) {
	if err := p.live("FetchGrads"); err != nil {
		return nil, err
	}
	s := p.shape
	z := func(a Array) Array {
		if !a.Present() {
			return Array{}
		}
		return zeros(a.Len(), a.DType())
	}
	g := &GradBuffers{Scan: s.Scan, DU: z(s.DU), DDelta: z(s.DDelta), DA: z(s.DA), DB: z(s.DB), DC: z(s.DC),
		DD: z(s.DD), DZ: z(s.DZ), DDeltaBias: z(s.DDeltaBias), DInitialState: z(s.DInitialState)}
	var pin runtime.Pinner
	defer pin.Unpin()
	ga := g.args(&pin)
	if err := p.l.guardedCall("ssmk_plan_fetch_bwd", nil, g.outputs(), func() int32 { return p.l.fn.planFetchBwd(p.h, unsafe.Pointer(ga)) }); err != nil {
		return nil, err
	}
	return g.Grads(), nil
}

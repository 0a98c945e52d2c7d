package cudalib

import (
	"fmt"
	"runtime"
	"unsafe"

	"ssmverify/ssm"
)

// Array is a host array of one element type, as the library reads or
// writes it. At most one of its slices is non-nil: F32 or F64 for those
// types, N16 for the 16-bit input types (bit patterns of Narrow, F16 or
// BF16); all are nil for an absent optional array (passed as NULL).
type Array struct {
	F32    []float32
	F64    []float64
	N16    []uint16
	Narrow ssm.DType // F16 or BF16 where N16 is set
	// guard is the allocation around the buffer (guard.go): set for the
	// arrays the binding makes, nil for those a caller makes itself.
	guard *guard
}

// NewArray converts v to the element type of dt's inputs (rounding to
// nearest for F32, F16 and BF16), in a guarded allocation. A nil v gives
// the absent array.
func NewArray(v []float64, dt ssm.DType) Array {
	if v == nil {
		return Array{}
	}
	a := zeros(len(v), dt)
	switch {
	case a.F64 != nil:
		copy(a.F64, v)
	case a.N16 != nil:
		enc := ssm.Float16Bits
		if dt == ssm.BF16 {
			enc = ssm.BFloat16Bits
		}
		for i, x := range v {
			a.N16[i] = enc(x)
		}
	default:
		for i, x := range v {
			a.F32[i] = float32(x)
		}
	}
	return a
}

// zeros is n zeros of dt's element type in a guarded allocation.
func zeros(n int, dt ssm.DType) Array {
	switch dt {
	case ssm.F64:
		v, g := guarded[float64](n)
		return Array{F64: v, guard: g}
	case ssm.F16, ssm.BF16:
		v, g := guarded[uint16](n)
		return Array{N16: v, Narrow: dt, guard: g}
	}
	v, g := guarded[float32](n)
	return Array{F32: v, guard: g}
}

// Len is the number of elements (complex values count twice).
func (a Array) Len() int { return max(len(a.F32), len(a.F64), len(a.N16)) }

// DType is the element type the array holds (F32 for an absent one).
func (a Array) DType() ssm.DType {
	switch {
	case a.F64 != nil:
		return ssm.F64
	case a.N16 != nil:
		return a.Narrow
	}
	return ssm.F32
}

// Present reports whether the array is passed (non-NULL).
func (a Array) Present() bool { return a.F32 != nil || a.F64 != nil || a.N16 != nil }

// Float64s returns the values widened to float64, exactly (nil for an
// absent array).
func (a Array) Float64s() []float64 {
	switch {
	case a.F64 != nil:
		return append([]float64(nil), a.F64...)
	case a.F32 != nil:
		v := make([]float64, len(a.F32))
		for i, x := range a.F32 {
			v[i] = float64(x)
		}
		return v
	case a.N16 != nil:
		dec := ssm.Float16FromBits
		if a.Narrow == ssm.BF16 {
			dec = ssm.BFloat16FromBits
		}
		v := make([]float64, len(a.N16))
		for i, x := range a.N16 {
			v[i] = dec(x)
		}
		return v
	}
	return nil
}

// Bytes views the array's memory as bytes (for hashing inputs).
func (a Array) Bytes() []byte {
	switch {
	case len(a.F64) > 0:
		return unsafe.Slice((*byte)(unsafe.Pointer(&a.F64[0])), 8*len(a.F64))
	case len(a.F32) > 0:
		return unsafe.Slice((*byte)(unsafe.Pointer(&a.F32[0])), 4*len(a.F32))
	case len(a.N16) > 0:
		return unsafe.Slice((*byte)(unsafe.Pointer(&a.N16[0])), 2*len(a.N16))
	}
	return nil
}

// pin pins the array's memory for a call and returns its address (nil when
// absent or empty).
func (a Array) pin(p *runtime.Pinner) unsafe.Pointer {
	var ptr unsafe.Pointer
	switch {
	case len(a.F64) > 0:
		ptr = unsafe.Pointer(&a.F64[0])
	case len(a.F32) > 0:
		ptr = unsafe.Pointer(&a.F32[0])
	case len(a.N16) > 0:
		ptr = unsafe.Pointer(&a.N16[0])
	default:
		return nil
	}
	p.Pin(ptr)
	return ptr
}

// scanArgs mirrors struct ssmk_scan_args: 11 int32 fields, 4 bytes of
// padding (Go aligns the pointer that follows), 10 pointers: 128 bytes.
// The pointers point into pinned heap slices.
type scanArgs struct {
	Batch, Dim, Seqlen, Dstate, NGroups int32
	Method, DType, IsComplex            int32
	IsVariableB, IsVariableC, Softplus  int32
	U, Delta, A, B, C, D, Z, DeltaBias  unsafe.Pointer
	Out, LastState                      unsafe.Pointer
}

// ScanBuffers are the host arrays of one scan call in the library's dtype:
// the inputs converted from a Problem, and the outputs the library fills.
// For a 16-bit dtype the inputs (u, Δ, variable B and C, z, out) are of
// that type and the weights and states of its weight type, float32.
// Keeping them lets a caller hash exactly what the kernel read and check
// that it left the inputs alone.
type ScanBuffers struct {
	Problem *ssm.Problem // shape, method and flags (its data is not read again)
	DType   ssm.DType

	U, Delta, A, B, C, D, Z, DeltaBias Array
	InitialState                       Array // absent (Len 0) for a scan from h = 0
	Out, LastState                     Array
}

// NewScanBuffers validates p against the library (shape, lengths, method,
// dtype, dstate ≤ MaxDstate) and converts its arrays to dt.
func (l *Library) NewScanBuffers(p *ssm.Problem, dt ssm.DType) (*ScanBuffers, error) {
	if err := l.checkProblem(p, dt); err != nil {
		return nil, err
	}
	w := dt.Weight()
	return &ScanBuffers{
		Problem: p, DType: dt,
		U: NewArray(p.U, dt), Delta: NewArray(p.Delta, dt), A: NewArray(p.A, w),
		B: NewArray(p.B, bcType(dt, p.VariableB)), C: NewArray(p.C, bcType(dt, p.VariableC)), D: NewArray(p.D, w), Z: NewArray(p.Z, dt),
		DeltaBias: NewArray(p.DeltaBias, w), InitialState: NewArray(p.InitialState, w),
		Out: zeros(p.OutLen(), dt), LastState: zeros(p.StateLen(), w),
	}, nil
}

// bcType is the element type of B or C (and of its gradient) in a call of
// dtype dt: the input type when variable, the weights' when constant.
func bcType(dt ssm.DType, variable bool) ssm.DType {
	if variable {
		return dt
	}
	return dt.Weight()
}

func (l *Library) checkProblem(p *ssm.Problem, dt ssm.DType) error {
	if p == nil {
		return fmt.Errorf("cudalib: problem is nil")
	}
	if !dt.Valid() {
		return fmt.Errorf("cudalib: dtype = %d, want F32 (0), F64 (1), F16 (2) or BF16 (3)", int32(dt))
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("cudalib: %w", err)
	}
	if p.Dstate > l.maxDstate {
		return fmt.Errorf("cudalib: dstate = %d, want ≤ %d (ssmk_max_dstate of %s)", p.Dstate, l.maxDstate, l.Path)
	}
	return nil
}

// Inputs lists the input arrays by name, in ABI order (absent ones too).
func (b *ScanBuffers) Inputs() []NamedArray {
	return []NamedArray{{"u", b.U}, {"delta", b.Delta}, {"A", b.A}, {"B", b.B}, {"C", b.C},
		{"D", b.D}, {"z", b.Z}, {"delta_bias", b.DeltaBias}, {"initial_state", b.InitialState}}
}

// NamedArray is an array with its ABI name.
type NamedArray struct {
	Name string
	Array
}

// args pins every buffer and fills the C argument struct.
func (b *ScanBuffers) args(pin *runtime.Pinner) *scanArgs {
	p := b.Problem
	a := &scanArgs{
		Batch: int32(p.Batch), Dim: int32(p.Dim), Seqlen: int32(p.Seqlen), Dstate: int32(p.Dstate),
		NGroups: int32(p.Groups), Method: int32(p.Method), DType: int32(b.DType),
		IsComplex: b2i(p.Complex), IsVariableB: b2i(p.VariableB), IsVariableC: b2i(p.VariableC),
		Softplus: b2i(p.Softplus),
		U:        b.U.pin(pin), Delta: b.Delta.pin(pin), A: b.A.pin(pin), B: b.B.pin(pin), C: b.C.pin(pin),
		D: b.D.pin(pin), Z: b.Z.pin(pin), DeltaBias: b.DeltaBias.pin(pin),
		Out: b.Out.pin(pin), LastState: b.LastState.pin(pin),
	}
	pin.Pin(a)
	return a
}

func b2i(v bool) int32 {
	if v {
		return 1
	}
	return 0
}

// RunScan calls ssmk_scan_fwd on the buffers (ssmk_scan_fwd_state where
// there is an initial state); Out and LastState receive the results.
func (l *Library) RunScan(b *ScanBuffers) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	a := b.args(&pin)
	if b.InitialState.Present() {
		if l.fn.scanFwdState == nil {
			return l.lacks("ssmk_scan_fwd_state", "a scan from an initial state")
		}
		h0 := b.InitialState.pin(&pin)
		return l.guardedCall("ssmk_scan_fwd_state", b.Inputs(), b.outputs(), func() int32 { return l.fn.scanFwdState(unsafe.Pointer(a), h0) })
	}
	return l.guardedCall("ssmk_scan_fwd", b.Inputs(), b.outputs(), func() int32 { return l.fn.scanFwd(unsafe.Pointer(a)) })
}

// outputs lists the output arrays by name.
func (b *ScanBuffers) outputs() []NamedArray {
	return []NamedArray{{"out", b.Out}, {"last_state", b.LastState}}
}

// HasInitialState reports whether the library exports the initial-state
// extension (ssmk_scan_fwd_state and ssmk_plan_create_state).
func (l *Library) HasInitialState() bool {
	return l.fn.scanFwdState != nil && l.fn.planCreateState != nil
}

// lacks is the error for a call of an extension the library does not
// export.
func (l *Library) lacks(name, what string) error {
	return &Error{Func: name, Status: EUnsupported,
		Msg: fmt.Sprintf("%s does not export %s (an ABI extension: %s)", l.Path, name, what)}
}

// Scan runs the forward scan of p in dtype dt and returns the results
// widened to float64.
func (l *Library) Scan(p *ssm.Problem, dt ssm.DType) (*ssm.Output, error) {
	b, err := l.NewScanBuffers(p, dt)
	if err != nil {
		return nil, err
	}
	if err := l.RunScan(b); err != nil {
		return nil, err
	}
	return &ssm.Output{Out: b.Out.Float64s(), LastState: b.LastState.Float64s()}, nil
}

// featureSet is ssmk_feature_set (layout guarded in ssmk.h: 32 bytes).
type featureSet struct {
	Options     uint32
	HeadDim     int32
	DimMultiple int32
	MaxGroups   int32
	Dstates     uint32
	Reserved    [3]int32
}

// Features returns what the library's scan takes for the combination:
// ssmk_scan_features where the capabilities carry SSMK_CAP_FEATURES,
// ssm.AllFeatures (ABI v1) otherwise. An error for a library that declares
// the bit without exporting the function, refuses the call, or declares
// something unusable (ssm.Features.Validate).
func (l *Library) Features(m ssm.Method, dt ssm.DType, isComplex bool) (ssm.Features, error) {
	c := l.Capabilities(m, dt, isComplex)
	if !c.Supported() || c&ssm.CapFeatures == 0 {
		return ssm.AllFeatures, nil
	}
	if l.fn.scanFeatures == nil {
		return ssm.Features{}, l.lacks("ssmk_scan_features", "SSMK_CAP_FEATURES is set")
	}
	var fs featureSet
	var pin runtime.Pinner
	defer pin.Unpin()
	pin.Pin(&fs)
	if err := l.call("ssmk_scan_features", func() int32 {
		return l.fn.scanFeatures(int32(m), int32(dt), b2i(isComplex), unsafe.Pointer(&fs))
	}); err != nil {
		return ssm.Features{}, err
	}
	f := ssm.Features{Options: ssm.Option(fs.Options), HeadDim: int(fs.HeadDim), DimMultiple: int(fs.DimMultiple),
		MaxGroups: int(fs.MaxGroups), Dstates: fs.Dstates}
	if err := f.Validate(); err != nil {
		return ssm.Features{}, fmt.Errorf("cudalib: %s: ssmk_scan_features(%v, %v, %s): %w", l.Path, m, dt, ssm.AKind(isComplex), err)
	}
	return f, nil
}

// Capabilities returns ssmk_capabilities(m, dt, isComplex); for a 16-bit
// dtype, the word as ssm.Caps.For reads it: supported only
// with SSMK_CAP_NARROW_INPUTS, and scan only.
func (l *Library) Capabilities(m ssm.Method, dt ssm.DType, isComplex bool) ssm.Caps {
	return ssm.Caps(l.fn.capabilities(int32(m), int32(dt), b2i(isComplex))).For(dt)
}

func checkDiscretize(m ssm.Method, dt ssm.DType, isComplex bool, delta, a []float64) error {
	if !m.Valid() {
		return fmt.Errorf("cudalib: method = %d, want 0…5 (zoh foh bilinear poly highorder rk4)", int32(m))
	}
	if dt != ssm.F32 && dt != ssm.F64 {
		return fmt.Errorf("cudalib: dtype = %d, want F32 (0) or F64 (1): ssmk_discretize has no 16-bit dtypes", int32(dt))
	}
	if len(delta) == 0 {
		return fmt.Errorf("cudalib: len(delta) = 0, want ≥ 1")
	}
	want, layout := len(delta), "len(delta)"
	if isComplex {
		want, layout = 2*len(delta), "2·len(delta), complex interleaved"
	}
	if len(a) != want {
		return fmt.Errorf("cudalib: len(A) = %d, want %d (%s)", len(a), want, layout)
	}
	return nil
}

// Discretize calls ssmk_discretize: for each i, (Ā, Δ·g) of method m at
// x = delta[i]·A[i]. For complex A, a and the results are interleaved
// (re, im) pairs. Inputs are converted to dt and the results widened.
func (l *Library) Discretize(m ssm.Method, dt ssm.DType, isComplex bool, delta, a []float64) (abar, bcoef []float64, err error) {
	if err := checkDiscretize(m, dt, isComplex, delta, a); err != nil {
		return nil, nil, err
	}
	ab, bc := zeros(len(a), dt), zeros(len(a), dt)
	if err := l.DiscretizeInto(m, isComplex, NewArray(delta, dt), NewArray(a, dt), ab, bc); err != nil {
		return nil, nil, err
	}
	return ab.Float64s(), bc.Float64s(), nil
}

// DiscretizeInto calls ssmk_discretize on arrays the caller owns, all of
// one dtype: delta has n elements, a, abar and bcoef n (2n interleaved when
// complex). It lets a caller pass exactly the bits it wants (subnormals,
// NaN payloads) and place guard elements around the outputs, as the fuzzers
// do to catch writes outside the buffers.
func (l *Library) DiscretizeInto(m ssm.Method, isComplex bool, delta, a, abar, bcoef Array) error {
	dt := ssm.F32
	switch {
	case delta.F64 != nil:
		dt = ssm.F64
	case delta.N16 != nil:
		return fmt.Errorf("cudalib: delta is %v: ssmk_discretize has no 16-bit dtypes", delta.Narrow)
	}
	n := delta.Len()
	if err := checkDiscretize(m, dt, isComplex, make([]float64, n), make([]float64, a.Len())); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    Array
	}{{"A", a}, {"Abar", abar}, {"Bcoef", bcoef}} {
		if (f.v.F64 != nil) != (dt == ssm.F64) || (f.v.F32 != nil) != (dt == ssm.F32) {
			return fmt.Errorf("cudalib: %s is not in delta's dtype %v", f.name, dt)
		}
		if f.v.Len() != a.Len() {
			return fmt.Errorf("cudalib: len(%s) = %d, want %d (as A)", f.name, f.v.Len(), a.Len())
		}
	}
	var pin runtime.Pinner
	defer pin.Unpin()
	pd, pa, pab, pbc := delta.pin(&pin), a.pin(&pin), abar.pin(&pin), bcoef.pin(&pin)
	return l.guardedCall("ssmk_discretize", []NamedArray{{"delta", delta}, {"A", a}}, []NamedArray{{"Abar", abar}, {"Bcoef", bcoef}}, func() int32 {
		return l.fn.discretize(int32(m), int32(dt), b2i(isComplex), int64(n), pd, pa, pab, pbc)
	})
}

// CopyBandwidth returns ssmk_copy_bandwidth(bytes, iters) in GB/s (bytes
// read plus written): the memory ceiling for roofline figures.
func (l *Library) CopyBandwidth(bytes int64, iters int) (float64, error) {
	if bytes < 1 || iters < 1 {
		return 0, fmt.Errorf("cudalib: CopyBandwidth(bytes = %d, iters = %d): want both ≥ 1", bytes, iters)
	}
	var gbps float64
	err := l.call("ssmk_copy_bandwidth", func() int32 {
		return l.fn.copyBandwidth(bytes, int32(iters), unsafe.Pointer(&gbps))
	})
	return gbps, err
}

// Plan is a device-resident plan: inputs uploaded once, then launched and
// timed without host transfers. Close it when done.
type Plan struct {
	l        *Library
	h        uintptr
	dt, sdt  ssm.DType // of out (Ā) and of last_state (Δ·g)
	outLen   int
	stateLen int
	cleanup  runtime.Cleanup
}

// NewPlan calls ssmk_plan_create with the buffers' inputs.
func (l *Library) NewPlan(b *ScanBuffers) (*Plan, error) {
	var pin runtime.Pinner
	defer pin.Unpin()
	a := b.args(&pin)
	var h uintptr
	var err error
	if b.InitialState.Present() {
		if l.fn.planCreateState == nil {
			return nil, l.lacks("ssmk_plan_create_state", "a scan from an initial state")
		}
		h0 := b.InitialState.pin(&pin)
		err = l.guardedCall("ssmk_plan_create_state", b.Inputs(), b.outputs(), func() int32 {
			return l.fn.planCreateState(unsafe.Pointer(a), h0, unsafe.Pointer(&h))
		})
	} else {
		err = l.guardedCall("ssmk_plan_create", b.Inputs(), b.outputs(), func() int32 {
			return l.fn.planCreate(unsafe.Pointer(a), unsafe.Pointer(&h))
		})
	}
	if err != nil {
		return nil, err
	}
	return l.newPlan(h, b.DType, b.DType.Weight(), b.Out.Len(), b.LastState.Len()), nil
}

// NewDiscretizePlan calls ssmk_plan_create_discretize.
func (l *Library) NewDiscretizePlan(m ssm.Method, dt ssm.DType, isComplex bool, delta, a []float64) (*Plan, error) {
	if err := checkDiscretize(m, dt, isComplex, delta, a); err != nil {
		return nil, err
	}
	d, aa := NewArray(delta, dt), NewArray(a, dt)
	var pin runtime.Pinner
	defer pin.Unpin()
	pd, pa := d.pin(&pin), aa.pin(&pin)
	var h uintptr
	err := l.guardedCall("ssmk_plan_create_discretize", []NamedArray{{"delta", d}, {"A", aa}}, nil, func() int32 {
		return l.fn.planCreateDiscretize(int32(m), int32(dt), b2i(isComplex), int64(len(delta)), pd, pa, unsafe.Pointer(&h))
	})
	if err != nil {
		return nil, err
	}
	return l.newPlan(h, dt, dt, len(a), len(a)), nil
}

func (l *Library) newPlan(h uintptr, dt, sdt ssm.DType, outLen, stateLen int) *Plan {
	p := &Plan{l: l, h: h, dt: dt, sdt: sdt, outLen: outLen, stateLen: stateLen}
	// A plan dropped without Close still frees its device memory.
	destroy := l.fn.planDestroy
	p.cleanup = runtime.AddCleanup(p, func(h uintptr) { destroy(h) }, h)
	return p
}

func (p *Plan) live(fn string) error {
	if p == nil || p.h == 0 {
		return fmt.Errorf("cudalib: %s on a closed plan", fn)
	}
	return nil
}

// Launch enqueues one run (ssmk_plan_launch); on a GPU it returns before
// the work is done.
func (p *Plan) Launch() error {
	if err := p.live("Launch"); err != nil {
		return err
	}
	return p.l.call("ssmk_plan_launch", func() int32 { return p.l.fn.planLaunch(p.h) })
}

// Sync waits for the plan's enqueued work (ssmk_plan_sync).
func (p *Plan) Sync() error {
	if err := p.live("Sync"); err != nil {
		return err
	}
	return p.l.call("ssmk_plan_sync", func() int32 { return p.l.fn.planSync(p.h) })
}

// Time runs iters launches between device events (ssmk_plan_time) and
// returns the total milliseconds.
func (p *Plan) Time(iters int) (float64, error) {
	if err := p.live("Time"); err != nil {
		return 0, err
	}
	if iters < 1 {
		return 0, fmt.Errorf("cudalib: Plan.Time(iters = %d): want ≥ 1", iters)
	}
	var ms float64
	err := p.l.call("ssmk_plan_time", func() int32 {
		return p.l.fn.planTime(p.h, int32(iters), unsafe.Pointer(&ms))
	})
	return ms, err
}

// Fetch syncs and returns the last run's results widened to float64: for
// a scan plan (out, last_state), for a discretize plan (Ā, Δ·g).
func (p *Plan) Fetch() (out, second []float64, err error) {
	if err := p.live("Fetch"); err != nil {
		return nil, nil, err
	}
	o, s := zeros(p.outLen, p.dt), zeros(p.stateLen, p.sdt)
	var pin runtime.Pinner
	defer pin.Unpin()
	po, ps := o.pin(&pin), s.pin(&pin)
	if err := p.l.guardedCall("ssmk_plan_fetch", nil, []NamedArray{{"out", o}, {"second", s}}, func() int32 { return p.l.fn.planFetch(p.h, po, ps) }); err != nil {
		return nil, nil, err
	}
	return o.Float64s(), s.Float64s(), nil
}

// Close frees the plan (ssmk_plan_destroy). Closing twice is harmless.
func (p *Plan) Close() {
	if p == nil || p.h == 0 {
		return
	}
	p.cleanup.Stop()
	p.l.fn.planDestroy(p.h)
	p.h = 0
}

// ScanArgNames are the fields of ssmk_scan_args that RunScanEdited can
// change: the sizes and flags (set to a value) and the required arrays
// (passed as NULL).
var ScanArgNames = []string{"batch", "dim", "seqlen", "dstate", "n_groups", "method", "dtype", "is_complex",
	"is_variable_B", "is_variable_C", "delta_softplus", "u", "delta", "A", "B", "C", "out"}

// RunScanEdited calls ssmk_scan_fwd on the buffers with one field of the
// argument struct changed: a size or flag set to value, or a required
// array passed as NULL (value ignored). It is how the suite judges a
// library's argument validation: the buffers stay valid for the unedited
// problem, so any access the library makes with the bad value is still
// within them or is the library's bug.
func (l *Library) RunScanEdited(b *ScanBuffers, field string, value int32) error {
	var pin runtime.Pinner
	defer pin.Unpin()
	a := b.args(&pin)
	ints := map[string]*int32{"batch": &a.Batch, "dim": &a.Dim, "seqlen": &a.Seqlen, "dstate": &a.Dstate, "n_groups": &a.NGroups,
		"method": &a.Method, "dtype": &a.DType, "is_complex": &a.IsComplex, "is_variable_B": &a.IsVariableB,
		"is_variable_C": &a.IsVariableC, "delta_softplus": &a.Softplus}
	ptrs := map[string]*unsafe.Pointer{"u": &a.U, "delta": &a.Delta, "A": &a.A, "B": &a.B, "C": &a.C, "out": &a.Out}
	switch {
	case ints[field] != nil:
		*ints[field] = value
	case ptrs[field] != nil:
		*ptrs[field] = nil
	default:
		return fmt.Errorf("cudalib: RunScanEdited: field %q, want one of %v", field, ScanArgNames)
	}
	return l.call("ssmk_scan_fwd", func() int32 { return l.fn.scanFwd(unsafe.Pointer(a)) })
}

package cudalib

// The binding's own tests: Go-side validation, the C layout of the
// argument structs, the raw ABI calls and the extensions' negotiation.
// Our kernels' behaviour is tested in package kernels.

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"ssmverify/mamba1"
	"ssmverify/ssm"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bad input through the Go API: a clear error naming the argument, before
// any C call.
func TestGoValidation(t *testing.T) {
	l := open(t)
	base := func() *ssm.Problem { return mamba1.Generate(mamba1.MambaBlock(ssm.ZOH, 1, 4, 8, 4), 1) }
	for _, tc := range []struct {
		edit func(*ssm.Problem)
		dt   ssm.DType
		want string
	}{
		{func(p *ssm.Problem) { p.Dstate = l.MaxDstate() + 1 }, ssm.F32, "dstate"},
		{func(p *ssm.Problem) { p.U = p.U[:3] }, ssm.F32, "len(U) = 3, want 32"},
		{func(p *ssm.Problem) { p.Groups = 3 }, ssm.F64, "Groups = 3 does not divide Dim = 4"},
		{func(p *ssm.Problem) { p.Method = 9 }, ssm.F64, "Method = 9"},
		{func(p *ssm.Problem) {}, ssm.DType(5), "dtype = 5"},
	} {
		p := base()
		tc.edit(p)
		_, err := l.Scan(p, tc.dt)
		assert.ErrorContains(t, err, tc.want)
	}
	_, _, err := l.Discretize(ssm.ZOH, ssm.F32, true, []float64{1, 2}, []float64{1, 2})
	assert.ErrorContains(t, err, "len(A) = 2, want 4")
	_, _, err = l.Discretize(ssm.ZOH, ssm.F32, false, nil, nil)
	assert.ErrorContains(t, err, "len(delta) = 0")
	_, _, err = l.Discretize(ssm.Method(7), ssm.F32, false, []float64{1}, []float64{1})
	assert.ErrorContains(t, err, "method = 7")
	one32, one64 := NewArray([]float64{1}, ssm.F32), NewArray([]float64{1}, ssm.F64)
	assert.ErrorContains(t, l.DiscretizeInto(ssm.ZOH, false, one32, one32, one64, one32), "Abar is not in delta's dtype fp32")
	assert.ErrorContains(t, l.DiscretizeInto(ssm.ZOH, false, one64, one64, one64, NewArray([]float64{1, 2}, ssm.F64)), "len(Bcoef) = 2, want 1")
	assert.ErrorContains(t, l.DiscretizeInto(ssm.ZOH, true, one64, one64, one64, one64), "len(A) = 1, want 2")
	assert.NoError(t, l.DiscretizeInto(ssm.ZOH, false, one64, NewArray([]float64{1}, ssm.F64), NewArray([]float64{0}, ssm.F64), NewArray([]float64{0}, ssm.F64)))
}

// Bad input straight to C: NULL arrays, zero and negative sizes, n_groups not
// dividing dim, dstate over the maximum, unknown method, dtype or flag. Each
// returns SSMK_EINVAL with a message naming the argument, and writes nothing.
func TestCValidation(t *testing.T) {
	l := open(t)
	p := mamba1.Generate(mamba1.MambaBlock(ssm.FOH, 1, 4, 8, 4), 1)
	good, err := l.NewScanBuffers(p, ssm.F32)
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		edit func(a *scanArgs)
		want string
	}{
		{"batch 0", func(a *scanArgs) { a.Batch = 0 }, "batch = 0"},
		{"seqlen < 0", func(a *scanArgs) { a.Seqlen = -5 }, "seqlen = -5"},
		{"dim < 0", func(a *scanArgs) { a.Dim = -1 }, "dim = -1"},
		{"groups 0", func(a *scanArgs) { a.NGroups = 0 }, "n_groups = 0"},
		{"groups 3", func(a *scanArgs) { a.NGroups = 3 }, "n_groups = 3 does not divide dim = 4"},
		{"dstate max", func(a *scanArgs) { a.Dstate = int32(l.MaxDstate() + 1) }, "dstate"},
		{"method", func(a *scanArgs) { a.Method = 6 }, "method = 6"},
		{"dtype", func(a *scanArgs) { a.DType = 4 }, "dtype = 4"},
		{"complex flag", func(a *scanArgs) { a.IsComplex = 7 }, "is_complex = 7"},
		{"varB flag", func(a *scanArgs) { a.IsVariableB = -1 }, "is_variable_B = -1"},
		{"softplus flag", func(a *scanArgs) { a.Softplus = 2 }, "delta_softplus = 2"},
		{"u NULL", func(a *scanArgs) { a.U = nil }, "u is NULL"},
		{"delta NULL", func(a *scanArgs) { a.Delta = nil }, "delta is NULL"},
		{"A NULL", func(a *scanArgs) { a.A = nil }, "A is NULL"},
		{"B NULL", func(a *scanArgs) { a.B = nil }, "B is NULL"},
		{"C NULL", func(a *scanArgs) { a.C = nil }, "C is NULL"},
		{"out NULL", func(a *scanArgs) { a.Out = nil }, "out is NULL"},
		{"huge", func(a *scanArgs) { a.Batch, a.Dim, a.Seqlen = 1<<30, 1<<30, 1<<30 }, "too large"},
	} {
		var pin runtime.Pinner
		a := good.args(&pin)
		tc.edit(a)
		before := append([]float32(nil), good.Out.F32...)
		err := l.call("ssmk_scan_fwd", func() int32 { return l.fn.scanFwd(unsafe.Pointer(a)) })
		pin.Unpin()
		require.Error(t, err, tc.name)
		assert.ErrorIs(t, err, EInval, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
		assert.Equal(t, before, good.Out.F32, "%s: out untouched", tc.name)

		// The same arguments to plan creation.
		pin = runtime.Pinner{}
		a = good.args(&pin)
		tc.edit(a)
		var h uintptr
		err = l.call("ssmk_plan_create", func() int32 { return l.fn.planCreate(unsafe.Pointer(a), unsafe.Pointer(&h)) })
		pin.Unpin()
		assert.ErrorIs(t, err, EInval, tc.name)
		assert.Zero(t, h, "%s: no plan on failure", tc.name)
	}
	err = l.call("ssmk_scan_fwd", func() int32 { return l.fn.scanFwd(nil) })
	assert.ErrorContains(t, err, "args is NULL")
	err = l.call("ssmk_plan_create", func() int32 { return l.fn.planCreate(nil, nil) })
	assert.ErrorContains(t, err, "plan is NULL")

	x := []float32{1, 2}
	px := unsafe.Pointer(&x[0])
	for _, tc := range []struct {
		m, dt, c int32
		n        int64
		d, a     unsafe.Pointer
		want     string
	}{
		{0, 0, 0, 0, px, px, "n = 0"},
		{0, 0, 0, -3, px, px, "n = -3"},
		{9, 0, 0, 1, px, px, "method = 9"},
		{0, 5, 0, 1, px, px, "dtype = 5"},
		{0, 0, 5, 1, px, px, "is_complex = 5"},
		{0, 0, 0, 1, nil, px, "delta is NULL"},
		{0, 0, 0, 1, px, nil, "A is NULL"},
	} {
		err := l.call("ssmk_discretize", func() int32 { return l.fn.discretize(tc.m, tc.dt, tc.c, tc.n, tc.d, tc.a, px, px) })
		assert.ErrorIs(t, err, EInval)
		assert.ErrorContains(t, err, tc.want)
	}
	err = l.call("ssmk_discretize", func() int32 { return l.fn.discretize(0, 0, 0, 1, px, px, nil, px) })
	assert.ErrorContains(t, err, "Abar is NULL")
	err = l.call("ssmk_device_name", func() int32 { return l.fn.deviceName(nil, 10) })
	assert.ErrorContains(t, err, "buf is NULL")
	buf := []byte("xxxx")
	err = l.call("ssmk_device_name", func() int32 { return l.fn.deviceName(unsafe.Pointer(&buf[0]), 0) })
	assert.ErrorContains(t, err, "len = 0")
	// Truncated to len, NUL-terminated, nothing past it written.
	buf = []byte("xxxxxxxx")
	require.NoError(t, l.call("ssmk_device_name", func() int32 { return l.fn.deviceName(unsafe.Pointer(&buf[0]), 4) }))
	assert.Equal(t, byte(0), buf[3])
	assert.Equal(t, "xxxx", string(buf[4:]))
	for _, fn := range []func() int32{
		func() int32 { return l.fn.planLaunch(0) }, func() int32 { return l.fn.planSync(0) },
		func() int32 { return l.fn.planTime(0, 1, nil) }, func() int32 { return l.fn.planFetch(0, nil, nil) },
		func() int32 { return l.fn.copyBandwidth(-1, 1, nil) },
	} {
		assert.ErrorIs(t, l.call("plan", fn), EInval)
	}
	l.fn.planDestroy(0) // NULL is allowed
}

// grow recurses with a large frame so that the goroutine's stack must be
// copied, then runs f at the bottom.
func grow(depth int, f func()) {
	var pad [1024]byte
	pad[depth%len(pad)] = byte(depth)
	if depth == 0 {
		f()
		return
	}
	grow(depth-1, f)
	_ = pad[0]
}

// Out-parameters written by C (the plan handle, timings) must survive a
// stack copy during the call: the binding passes them as pointers, which
// puts them on the heap. Passed as uintptr, a stack variable's address goes
// stale when purego's reflection grows the stack (seen on the H200 as
// "Time on a closed plan").
func TestOutParamsSurviveStackGrowth(t *testing.T) {
	l := open(t)
	p := mamba1.Generate(mamba1.MambaBlock(ssm.ZOH, 1, 2, 8, 4), 1)
	b, err := l.NewScanBuffers(p, ssm.F32)
	require.NoError(t, err)
	for i := 0; i < 20; i++ {
		var plan *Plan
		grow(i*7, func() { plan, err = l.NewPlan(b) })
		require.NoError(t, err)
		var ms float64
		grow(i*5, func() { ms, err = plan.Time(1) })
		require.NoError(t, err)
		assert.Greater(t, ms, 0.0)
		plan.Close()
	}
}

// TestInitialStateExtension: a library with the extension takes an initial
// state (package kernels checks our builds' answers against the reference),
// and a library without the extension's symbols (ABI v1) refuses a problem with an initial state with
// SSMK_EUNSUPPORTED naming the function, in the scan and in plans alike.
func TestInitialStateExtension(t *testing.T) {
	l := open(t)
	require.True(t, l.HasInitialState(), "this project's libraries export the extension")
	v1 := *l
	v1.fn.scanFwdState, v1.fn.planCreateState = nil, nil
	p := mamba1.Generate(mamba1.Spec{Batch: 1, Dim: 1, Seqlen: 4, Dstate: 2, Groups: 1, Method: ssm.ZOH, Dist: mamba1.Realistic}, 1)
	mamba1.SetInitialState(p, 2)
	b, err := v1.NewScanBuffers(p, ssm.F64)
	require.NoError(t, err)
	for _, err := range []error{v1.RunScan(b), func() error { _, err := v1.NewPlan(b); return err }()} {
		var e *Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, EUnsupported, e.Status)
		assert.Contains(t, e.Error(), "does not export ssmk_")
	}
	p.InitialState = nil
	_, err = v1.Scan(p, ssm.F64)
	assert.NoError(t, err, "a scan from h = 0 needs no extension")
}

// TestFeaturesExtension: this project's libraries declare every option on
// every shape for each supported combination; a library that sets
// SSMK_CAP_FEATURES without exporting ssmk_scan_features is an error, not
// a silent "takes everything"; a library without the bit (ABI v1) takes
// everything.
func TestFeaturesExtension(t *testing.T) {
	l := open(t)
	for _, isComplex := range []bool{false, true} {
		for _, dt := range ssm.DTypes() {
			for _, m := range ssm.Methods() {
				require.NotZero(t, l.Capabilities(m, dt, isComplex)&ssm.CapFeatures)
				f, err := l.Features(m, dt, isComplex)
				require.NoError(t, err)
				assert.True(t, f.All(), "%v %v %s: %v", m, dt, ssm.AKind(isComplex), f)
			}
		}
	}
	var fs featureSet
	require.Equal(t, 32, int(unsafe.Sizeof(fs)), "featureSet must match ssmk_feature_set")
	lacking := *l
	lacking.fn.scanFeatures = nil
	_, err := lacking.Features(ssm.ZOH, ssm.F32, false)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Contains(t, e.Error(), "does not export ssmk_scan_features")
	v1 := *l
	v1.fn.capabilities = func(method, dtype, isComplex int32) uint32 { return uint32(ssm.CapSupported) }
	f, err := v1.Features(ssm.ZOH, ssm.F32, false)
	require.NoError(t, err)
	assert.True(t, f.All())
}

// The Go mirror of ssmk_scan_grads: eleven pointers.
func TestGradArgsLayout(t *testing.T) {
	var a gradArgs
	assert.Equal(t, 11*unsafe.Sizeof(uintptr(0)), unsafe.Sizeof(a))
	assert.Equal(t, 10*unsafe.Sizeof(uintptr(0)), unsafe.Offsetof(a.DInitialState))
}

// TestNarrowBuffers: a 16-bit dtype's buffers hold u, Δ, z, out and the
// variable one of B and C as its bit patterns, the weights and the states
// as float32, and ScanBytes counts each in its own size.
func TestNarrowBuffers(t *testing.T) {
	l := open(t)
	s := mamba1.MambaBlock(ssm.ZOH, 2, 4, 16, 8)
	s.VariableC = false
	p := mamba1.Generate(s, 1)
	mamba1.SetInitialState(p, 2)
	for _, dt := range ssm.NarrowDTypes() {
		b, err := l.NewScanBuffers(p, dt)
		require.NoError(t, err)
		for _, a := range []NamedArray{{"u", b.U}, {"delta", b.Delta}, {"z", b.Z}, {"B", b.B}, {"out", b.Out}} {
			assert.True(t, a.N16 != nil && a.Narrow == dt, "%v: %s in 16 bits", dt, a.Name)
		}
		for _, a := range []NamedArray{{"A", b.A}, {"C", b.C}, {"D", b.D}, {"delta_bias", b.DeltaBias}, {"initial_state", b.InitialState}, {"last_state", b.LastState}} {
			assert.NotNil(t, a.F32, "%v: %s in float32", dt, a.Name)
		}
		seq, vb := int64(2*4*16), int64(2*1*8*16)
		weights := int64(4*8 /* A */ + 4*8 /* C */ + 4 + 4 /* D, bias */ + 2*4*8 /* last state */)
		assert.Equal(t, (4*seq+vb)*2+weights*4, ScanBytes(p, dt), "%v", dt)
	}
}

// TestNarrowDiscretizeRefused: ssmk_discretize has no 16-bit dtypes (the
// ABI gives them to the scan alone): the binding refuses them before C, and
// the library itself answers SSMK_EUNSUPPORTED, whatever its caller.
func TestNarrowDiscretizeRefused(t *testing.T) {
	l := open(t)
	for _, dt := range ssm.NarrowDTypes() {
		_, _, err := l.Discretize(ssm.ZOH, dt, false, []float64{1}, []float64{-1})
		assert.ErrorContains(t, err, "ssmk_discretize has no 16-bit dtypes")
		err = l.DiscretizeInto(ssm.ZOH, false, NewArray([]float64{1}, dt), NewArray([]float64{-1}, dt), zeros(1, dt), zeros(1, dt))
		assert.ErrorContains(t, err, "ssmk_discretize has no 16-bit dtypes")
		// and the library itself refuses them (SSMK_EUNSUPPORTED), whatever its caller
		one := []uint16{0x3c00}
		st := l.fn.discretize(0, int32(dt), 0, 1, unsafePtr(one), unsafePtr(one), unsafePtr(one), unsafePtr(one))
		assert.Equal(t, int32(EUnsupported), st, "%v: ssmk_discretize's status", dt)
	}
}

// Many goroutines at once: results identical to a serial run, and each
// failing call reads its own error message.
func TestConcurrentCalls(t *testing.T) {
	l := open(t)
	p := mamba1.Generate(mamba1.MambaBlock(ssm.HighOrder, 1, 4, 33, 8), 9)
	want, err := l.Scan(p, ssm.F64)
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				if g%2 == 0 {
					got, err := l.Scan(p, ssm.F64)
					if err != nil || !assert.ObjectsAreEqual(want.Out, got.Out) {
						errs <- fmt.Errorf("goroutine %d: concurrent scan differs (err %v)", g, err)
						return
					}
					continue
				}
				// A distinct bad n per goroutine: the message must be ours.
				n := int64(-g*100 - i)
				x := []float64{1}
				px := unsafe.Pointer(&x[0])
				err := l.call("ssmk_discretize", func() int32 { return l.fn.discretize(0, 1, 0, n, px, px, px, px) })
				if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("n = %d:", n)) {
					errs <- fmt.Errorf("goroutine %d: error %v, want one naming n = %d", g, err, n)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func unsafePtr(s []uint16) unsafe.Pointer { return unsafe.Pointer(&s[0]) }

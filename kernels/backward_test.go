package kernels

import (
	"math"
	"ssmverify/cudalib"
	"testing"

	"ssmverify/mamba1"
	"ssmverify/ssm"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openBackward returns the library under test, skipping where it does not
// export the backward extension.
func openBackward(t *testing.T) *cudalib.Library {
	l := open(t)
	if !l.HasBackward() {
		t.Skipf("%s does not export the backward pass", l.Path)
	}
	return l
}

// backwardProblem is a Mamba block with an initial state and a gradient of
// the last state: every gradient of the ABI is present.
func backwardProblem(m ssm.Method, isComplex bool) (*ssm.Problem, *ssm.Cotangent) {
	s := mamba1.MambaBlock(m, 2, 4, 70, 3)
	s.Complex, s.Groups = isComplex, 2
	p := mamba1.Generate(s, 5)
	mamba1.SetInitialState(p, 5)
	return p, mamba1.NewCotangent(p, 5, true)
}

// In float64 the library's gradients agree with the reference's to many
// digits (the suite's verify package judges them against the error model).
func TestBackwardMatchesReferenceF64(t *testing.T) {
	l := openBackward(t)
	for _, m := range ssm.Methods() {
		for _, isComplex := range []bool{false, true} {
			if !l.Capabilities(m, ssm.F64, isComplex).Backward() {
				continue
			}
			p, ct := backwardProblem(m, isComplex)
			got, err := l.Backward(p, ct, ssm.F64, true)
			require.NoError(t, err)
			want, err := mamba1.ScanGrad(p, ct, true)
			require.NoError(t, err)
			wf := want.Fields()
			for k, f := range got.Fields() {
				require.Equal(t, wf[k].Name, f.Name)
				var diff, mag float64
				for i, v := range f.Values {
					diff = math.Max(diff, math.Abs(v-wf[k].Values[i]))
					mag = math.Max(mag, math.Abs(wf[k].Values[i]))
				}
				assert.LessOrEqual(t, diff, 1e-9*mag, "%v %s: %s differs by %g (largest %g)", m, ssm.AKind(isComplex), f.Name, diff, mag)
			}
		}
	}
}

// A plan's gradients are the direct call's, bitwise; the team size does not
// change them either (the library does not declare atomics).
func TestBackwardPlanAndDeterminism(t *testing.T) {
	l := openBackward(t)
	p, ct := backwardProblem(ssm.FOH, true)
	caps := l.Capabilities(ssm.FOH, ssm.F32, true)
	require.True(t, caps.Backward())
	direct, err := l.Backward(p, ct, ssm.F32, true)
	require.NoError(t, err)
	b, err := l.NewGradBuffers(p, ct, ssm.F32, true)
	require.NoError(t, err)
	plan, err := l.NewBackwardPlan(b)
	require.NoError(t, err)
	defer plan.Close()
	_, err = plan.FetchGrads()
	assert.ErrorContains(t, err, "has not been launched")
	require.NoError(t, plan.Launch())
	fromPlan, err := plan.FetchGrads()
	require.NoError(t, err)
	_, _, err = plan.Fetch()
	assert.ErrorContains(t, err, "ssmk_plan_fetch_bwd", "a backward plan is fetched with its own function")
	if caps.BackwardAtomic() {
		// sums by atomics: the same gradients up to their order of addition
		sameGrads(t, true, ssm.F32, direct, fromPlan, "the plan against the direct call")
		return
	}
	assert.Equal(t, direct, fromPlan)
	prev := l.SetNumThreads(1)
	defer l.SetNumThreads(prev)
	one, err := l.Backward(p, ct, ssm.F32, true)
	require.NoError(t, err)
	assert.Equal(t, direct, one, "one thread and %d give other gradients", prev)
}

// A 16-bit backward where the library declares one (SSMK_CAP_BWD_NARROW)
// takes its types as the ABI says: its input-typed gradients are 16-bit,
// the weights' float; a plan gives the direct call's gradients. The CPU
// build computes them as its float32 backward of the widened inputs, each
// input-typed gradient rounded once: exactly that, bit for bit.
func TestBackwardNarrow(t *testing.T) {
	l := openBackward(t)
	for _, dt := range ssm.NarrowDTypes() {
		if !l.Capabilities(ssm.ZOH, dt, false).Backward() {
			t.Logf("%v: the backward is not declared", dt)
			continue
		}
		p, ct := backwardProblem(ssm.ZOH, false)
		p.InitialState, ct.LastState = nil, nil
		p.RoundTo(dt)
		ct.RoundTo(dt)
		b, err := l.NewGradBuffers(p, ct, dt, false)
		require.NoError(t, err)
		for name, a := range map[string]cudalib.Array{"dout": b.DOut, "du": b.DU, "ddelta": b.DDelta, "dz": b.DZ, "dB": b.DB, "dC": b.DC} {
			assert.Equal(t, dt, a.DType(), "%s is of the input type", name)
		}
		for name, a := range map[string]cudalib.Array{"dA": b.DA, "dD": b.DD, "ddelta_bias": b.DDeltaBias} {
			assert.Equal(t, ssm.F32, a.DType(), "%s is float", name)
		}
		require.NoError(t, l.RunBackward(b))
		direct := b.Grads()
		fromPlan := launchOnce(t, l.NewBackwardPlan, b)
		if l.Backend != "cpu" {
			continue // a GPU's atomics may order the sums otherwise: verify judges them
		}
		assert.Equal(t, direct, fromPlan, "%v: plan and direct call", dt)
		wide, err := l.Backward(p, ct, ssm.F32, false)
		require.NoError(t, err)
		wf, df := wide.Fields(), direct.Fields()
		for k, f := range df {
			for i, v := range f.Values {
				w := wf[k].Values[i]
				if ssm.InputTyped(p, f.Name) {
					w = dt.Round(w)
				}
				if v != w {
					t.Errorf("%v %s[%d] = %g, the float32 backward's %g", dt, f.Name, i, v, w)
					break
				}
			}
		}
	}
}

// Bad arguments get an error that names them.
func TestBackwardRefusesBadArguments(t *testing.T) {
	l := openBackward(t)
	p, ct := backwardProblem(ssm.ZOH, false)
	_, err := l.Backward(p, ct, ssm.DType(7), false)
	assert.ErrorContains(t, err, "dtype = 7")
	_, err = l.Backward(p, &ssm.Cotangent{Out: ct.Out[:3]}, ssm.F32, false)
	assert.ErrorContains(t, err, "len(Out) = 3")
	b, err := l.NewGradBuffers(p, ct, ssm.F32, false)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		drop func(*cudalib.GradBuffers)
		want string
	}{
		{"dout", func(g *cudalib.GradBuffers) { g.DOut = cudalib.Array{} }, "grads->dout is NULL"},
		{"dA", func(g *cudalib.GradBuffers) { g.DA = cudalib.Array{} }, "grads->dA is NULL"},
		{"dz", func(g *cudalib.GradBuffers) { g.DZ = cudalib.Array{} }, "grads->dz (args->z is given) is NULL"},
		{"ddelta_bias", func(g *cudalib.GradBuffers) { g.DDeltaBias = cudalib.Array{} }, "grads->ddelta_bias (args->delta_bias is given) is NULL"},
	} {
		g := *b
		c.drop(&g)
		err := l.RunBackward(&g)
		var e *cudalib.Error
		require.ErrorAs(t, err, &e, c.name)
		assert.Equal(t, cudalib.EInval, e.Status, c.name)
		assert.Contains(t, e.Msg, c.want, c.name)
	}
	// An unknown dtype reaches the library as SSMK_EINVAL, naming it.
	g := *b
	s := *b.Scan
	s.DType = ssm.DType(9)
	g.Scan = &s
	var e *cudalib.Error
	require.ErrorAs(t, l.RunBackward(&g), &e)
	assert.Equal(t, cudalib.EInval, e.Status)
	assert.Contains(t, e.Msg, "dtype = 9")
}

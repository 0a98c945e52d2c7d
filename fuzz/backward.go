package fuzz

import (
	"fmt"
	"hash/fnv"
	"math"

	"ssmverify/cudalib"
	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// BackwardCotangent is the cotangent FuzzBackward sends back for a decoded
// problem: seeded by the input's bytes (so that a corpus entry replays
// exactly), with a gradient of the last state unless the flags say no
// last state (FlagNoLastState).
func BackwardCotangent(p *ssm.Problem, data []byte, withLast bool) *ssm.Cotangent {
	h := fnv.New64a()
	h.Write(data)
	return mamba1.NewCotangent(p, h.Sum64(), withLast)
}

// CheckBackward runs ssmk_scan_bwd on p in dtype dt (F32 or F64; other
// dtypes and combinations without a declared backward are not judged)
// with every gradient guarded and unwritten (cudalib.Unwritten), and
// judges the gradients by the backward's policy: the library must return
// within the hang limit, write nothing outside its buffers, leave its
// inputs alone, and, where every value of the problem is judgeable
// (Judgeable), give every gradient within the threshold of the float64
// adjoint under the backward's error model.
func CheckBackward(lib *cudalib.Library, p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType) error {
	c := lib.Capabilities(p.Method, dt, p.Complex)
	if !c.Backward() || !lib.HasBackward() || (p.Complex && c.ComplexZOHFallback()) {
		return nil
	}
	if p.InitialState != nil && !(c.InitialState() && lib.HasInitialState()) {
		return nil
	}
	states := c.BackwardStateGrads() && c.InitialState() && lib.HasInitialState()
	if !states && (p.InitialState != nil || ct.LastState != nil) {
		return nil // a backward of the outputs alone (SSMK_CAP_BWD_OUTPUTS_ONLY)
	}
	decl, err := lib.Features(p.Method, dt, p.Complex)
	if err != nil {
		return err
	}
	if p, _, err = decl.Fit(p); err != nil {
		return nil
	}
	if dt != ssm.F64 { // what the kernel reads: float32, or the 16-bit type and float32 weights
		p, ct = p.Clone(), ct.Clone()
		p.RoundTo(dt)
		ct.RoundTo(dt)
	}
	f := &Failure{Input: fmt.Sprintf("backward %s %v dlast_state=%t", p.Shape(), dt, ct.LastState != nil)}
	b, err := lib.NewGradBuffers(p, ct, dt, states)
	if err != nil {
		f.add("library error: %v", err)
		return f.err()
	}
	for _, a := range []*cudalib.Array{&b.DU, &b.DDelta, &b.DA, &b.DB, &b.DC, &b.DD, &b.DZ, &b.DDeltaBias, &b.DInitialState} {
		if a.Present() { // 16-bit dtypes: input-typed gradients 16-bit, the weights' float
			*a = cudalib.Unwritten(a.Len(), a.DType())
		}
	}
	if !guardedCall(f, lib, "ssmk_scan_bwd", p.Method, dt, p.Complex, func() error { return lib.RunBackward(b) }) {
		return f.err()
	}
	if f.err() != nil || !Judgeable(p, ct, dt) {
		return f.err()
	}
	want, err := mamba1.ScanGrad(p, ct, true)
	if err != nil {
		return err
	}
	sc, err := mamba1.GradErrorScale(p, ct, true, dt.Precision())
	if err != nil {
		return err
	}
	cmp := judge.CompareGrads(p, b.Grads(), dt, want, sc)
	if !cmp.Passed(dt) {
		for _, g := range cmp.Failing(dt) {
			f.add("%s", g)
		}
		if cmp.NonFinite > 0 {
			f.add("%d non-finite gradients where the reference is finite", cmp.NonFinite)
		}
	}
	return f.err()
}

// Judgeable reports whether the backward's values are judged for p: every
// input and cotangent finite, and every bound of the forward's and the
// backward's error models, and every partial product of a gradient term's
// factors (GradScale.Peak), finite and below 1/16 of the dtype's largest
// number, so that no evaluation order of a correct kernel overflows and the
// first-order model holds (bilinear within its rounding's reach of the
// pole gives an infinite forward scale). Elsewhere the fuzzer asks only
// for memory safety, termination and untouched inputs: the backward's
// non-finite policy.
func Judgeable(p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType) bool {
	limit := dt.Precision().Largest() / 16
	ok := func(ss ...[]float64) bool {
		for _, s := range ss {
			for _, v := range s {
				if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > limit {
					return false
				}
			}
		}
		return true
	}
	if !ok(p.U, p.Delta, p.A, p.B, p.C, p.D, p.Z, p.DeltaBias, p.InitialState, ct.Out, ct.LastState) {
		return false
	}
	fs, err := mamba1.ErrorScaleIn(p, dt.Precision())
	if err != nil || !ok(fs.Out, fs.LastState, fs.MagOut, fs.MagState, fs.PathMagOut, fs.PathMagState, fs.DecayOut, fs.DecayState) {
		return false
	}
	g, err := mamba1.ScanGrad(p, ct, true)
	if err != nil {
		return false
	}
	gs, err := mamba1.GradErrorScale(p, ct, true, dt.Precision())
	if err != nil || !(gs.Peak <= limit) {
		return false
	}
	for _, f := range append(g.Fields(), gs.Scale.Fields()...) {
		if !ok(f.Values) {
			return false
		}
	}
	return true
}

package verify

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"ssmverify/cudalib"
	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/report"
	"ssmverify/ssm"
)

// TestBackwardSavedStates: a backward plan on saved states
// (ssmk_plan_create_bwd_saved, SSMK_CAP_BWD_SAVED) is what Check7 times
// when a library declares one, so its gradients are judged as every
// backward's are (the reference under the backward's error model) and
// held to the ABI's promise: the plain plan's gradients, bit for bit unless
// the library declares atomics (then each launch within the error model, as
// TestBackwardDeterministic holds two calls), at its first launch and at the
// next (the saved states are read, never consumed). Rows of 1100 steps span chunks
// of every design (TestBackwardChunkBoundaries' first length), so that the
// saved states enter the sweep.
func TestBackwardSavedStates(t *testing.T) {
	track(t)
	if !lib.HasSavedBackward() {
		t.Skipf("%s exports no backward plans on saved states", lib.Path)
	}
	for _, cb := range backwardCombos(t.Name(), ssm.DTypes()) {
		caps := lib.Capabilities(cb.m, cb.dt, cb.isComplex)
		name := fmt.Sprintf("%v %v %s", cb.m, cb.dt, ssm.AKind(cb.isComplex))
		if !caps.BackwardSaved() {
			rep.Unsupported(t.Name(), "plans on saved states of "+name+" (declared unsupported)")
			continue
		}
		s := mamba1.MambaBlock(cb.m, 2, 4, 1100, 4)
		s.Complex, s.Groups = cb.isComplex, 2
		p, err := fitProblem(t.Name(), mamba1.Generate(within(s, cb.dt), 23), cb.dt)
		if errors.Is(err, errNotTaken) {
			continue
		}
		states := stateGrads(cb)
		if states {
			mamba1.SetInitialState(p, 23)
		}
		p, ct := roundedFor(p, mamba1.NewCotangent(p, 23, states), cb.dt)
		if msg := savedCase(t.Name(), p, ct, cb.dt, states, caps.BackwardAtomic()); msg != "" {
			t.Errorf("%s: %s", name, msg)
		}
	}
}

// savedCase runs p's backward through a plain plan and a plan on saved
// states (launched twice), judges each launch of the saved plan against
// the reference (its first recorded under test) and, for a library without
// atomics, against the plain plan's gradients bit for bit, and returns
// what failed ("" if nothing). A saved plan that fails where the plain plan
// passes is diagnosed here: the states it saved or reads are the cause, the
// arithmetic of the backward being the plain plan's; where the plain plan
// fails too, the backward's own diagnosis names the cause.
func savedCase(test string, p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType, states, atomic bool) string {
	bufs, err := lib.NewGradBuffers(p, ct, dt, states)
	if err != nil {
		return err.Error()
	}
	run := func(newPlan func(*cudalib.GradBuffers) (*cudalib.BackwardPlan, error), launches int) ([]*ssm.Grads, error) {
		plan, err := newPlan(bufs)
		if err != nil {
			return nil, err
		}
		defer plan.Close()
		var out []*ssm.Grads
		for range launches {
			if err := plan.Launch(); err != nil {
				return nil, err
			}
			g, err := plan.FetchGrads()
			if err != nil {
				return nil, err
			}
			out = append(out, g)
		}
		return out, nil
	}
	plain, err := run(lib.NewBackwardPlan, 1)
	if err != nil {
		return "the plain plan: " + err.Error()
	}
	saved, err := run(lib.NewSavedBackwardPlan, 2)
	if err != nil {
		rep.Add(test, p.Method, dt, p.Complex, math.Inf(1), math.Inf(1), false, "plan on saved states refused: "+err.Error())
		return "the plan on saved states: " + err.Error()
	}
	want, err := mamba1.ScanGrad(p, ct, states)
	if err != nil {
		return err.Error()
	}
	sc, err := mamba1.GradErrorScale(p, ct, states, dt.Precision())
	if err != nil {
		return err.Error()
	}
	plainOK := judge.CompareGrads(p, plain[0], dt, want, sc).Passed(dt)
	// why is the cause of a failure of the saved plan: its states where the
	// plain plan passes, else the backward's own fault, diagnosed
	why := func() string {
		if !plainOK {
			return "\n(the plain plan fails too: a fault of the backward itself)" + backwardDiagnosis(test, p, ct, dt)
		}
		f := report.Finding{Tag: "bwd-saved-states",
			Cause: "the plan on saved states computes other gradients than the plain plan, which passes: the states its creation saved, or its launches read, are not the forward's"}
		if rep.WantDiagnosis(test, p.Method, dt, p.Complex) {
			rep.AddBackwardDiagnosis(test, p.Method, dt, p.Complex, f)
		}
		return "\ndiagnosis [" + f.Tag + "]: " + f.String()
	}
	var msgs []string
	for i, g := range saved {
		judged := judge.CompareGrads(p, g, dt, want, sc)
		if i == 0 {
			rep.AddBackward(test, p.Method, dt, p.Complex, judged)
		}
		switch {
		case !judged.Passed(dt):
			msgs = append(msgs, fmt.Sprintf("launch %d of the plan on saved states: %s%s", i+1, gradFailure(judged, dt), why()))
		case !atomic:
			if ds := bitDiffs(plain[0], g); len(ds) > 0 {
				msgs = append(msgs, fmt.Sprintf("launch %d of the plan on saved states against the plain plan: %s[%d] is %.17g, the plain plan's %.17g (SSMK_CAP_BWD_ATOMIC is not declared)%s",
					i+1, ds[0].name, ds[0].i, ds[0].b, ds[0].a, why()))
			}
		}
	}
	return strings.Join(msgs, "\n")
}

package mamba2

import (
	"cmp"
	"fmt"
	"testing"

	"ssmverify/bridge"
	"ssmverify/mamba2"
	"ssmverify/ssm"
)

// untouchedSlotCases are state pools a decode step updates in part: padding
// rows (−1, the engines' null slot) among updates, a step of padding rows
// only, one request in a large pool.
var untouchedSlotCases = []struct {
	name    string
	slots   int
	indices []int
}{
	{"padding_among_updates", 6, []int{5, -1, 0, 2}},
	{"padding_only", 4, []int{-1, -1}},
	{"one_row_in_a_pool_of_64", 64, []int{37}},
}

// TestMamba2DecodeUntouchedSlots: a decode step leaves every slot of the
// pool that no row names — a padding row's null slot included — bit for
// bit as it was (the engines keep thousands of requests' states in one
// pool; a step that writes another's slot corrupts that request).
func TestMamba2DecodeUntouchedSlots(t *testing.T) {
	track(t)
	for _, dt := range pairs[:3] {
		for i, c := range untouchedSlotCases {
			t.Run(dt.String()+"/"+c.name, func(t *testing.T) {
				track(t)
				msg, judged := untouchedSlots(t, kernel, dt, c.slots, c.indices, uint64(90+i))
				if !judged {
					return
				}
				rep.AddKernel(t.Name(), bridge.OpStep, dt.in, dt.state, 0, msg == "", "the slots no row names: "+cmp.Or(msg, "every bit kept"))
				if msg != "" {
					t.Error(msg)
				}
			})
		}
	}
}

// untouchedSlots runs k's step on a pool of slots with the rows' indices
// and says how it broke the untouched slots ("" where it did not); judged
// is false where k declares the step unsupported.
func untouchedSlots(t *testing.T, k *bridge.SSD, dt pair, slots int, indices []int, seed uint64) (msg string, judged bool) {
	rk := repFor(k)
	t.Helper()
	o := mamba2.StepOptions{Batch: len(indices), Slots: slots, Heads: 4, Headdim: 8, Groups: 2, Dstate: 16, D: true, DtBias: true, Softplus: true,
		Indices: indices, DType: dt.in, StateDType: dt.state}
	s := mamba2.GenerateStep(o, seed).Rounded()
	if why := k.SupportsStep(s); why != "" {
		rk.KernelUnsupported(t.Name(), bridge.OpStep, s.DType, s.StateDType, why)
		return "", false
	}
	got, err := k.Step(s)
	if bridge.Unsupported(err) {
		rk.KernelUnsupported(t.Name(), bridge.OpStep, s.DType, s.StateDType, err.Error())
		return "", false
	}
	if err != nil {
		return fmt.Sprintf("step with slots %v of %d: %v", indices, slots, err), true
	}
	if len(got.State) != len(s.State) {
		return fmt.Sprintf("step with slots %v of %d: %d state elements returned, want %d", indices, slots, len(got.State), len(s.State)), true
	}
	if changed := s.ChangedUntouched(got.State); len(changed) > 0 {
		return fmt.Sprintf("step with slots %v of %d: slots %v, which no row names, changed", indices, slots, changed), true
	}
	return "", true
}

// TestMamba2DecodeUntouchedSlotsCanFail: the numpy step that writes a
// padding row's state into the pool (slip padding-written: slot −1 is the
// last slot in numpy's indexing, one no row names here) breaks the
// property.
func TestMamba2DecodeUntouchedSlotsCanFail(t *testing.T) {
	track(t)
	msg, judged := untouchedSlots(t, slipKernel(t, "padding-written"), pair{ssm.F32, ssm.F32}, 6, []int{3, -1, 0, 2}, 90)
	if !judged || msg == "" {
		t.Fatal("a step that writes a padding row's slot left the untouched slots as they were")
	}
	t.Log(msg)
}

package mamba2

import (
	"fmt"
	"testing"

	"ssmverify/mamba2"
	"ssmverify/verify/bridgetest"
)

// base is the suite's Mamba-2 problem: dimensions that Triton's matrix
// units take (head dimension and state 16), several chunks with a partial
// last one, two groups of two heads.
func base(dt pair) mamba2.Options {
	return mamba2.Options{Batch: 2, Seqlen: 300, Heads: 4, Headdim: 16, Groups: 2, Dstate: 16, Chunk: chunk(), DType: dt.in, StateDType: dt.state}
}

// prefillCases are the combinations of TestMamba2Prefill: each option alone,
// then all of them; the packed rows have a boundary inside a chunk and a
// sequence of one step.
var prefillCases = []struct {
	name string
	mod  func(o *mamba2.Options)
	all  bool // run in every dtype pair, not only fp32 and bf16/state-fp32
}{
	{"plain", func(o *mamba2.Options) {}, true},
	{"D", func(o *mamba2.Options) { o.D = true }, false},
	{"z", func(o *mamba2.Options) { o.Z = true }, false},
	{"dt_bias+softplus", func(o *mamba2.Options) { o.DtBias, o.Softplus = true, true }, false},
	{"dt_limit", func(o *mamba2.Options) { o.DtBias, o.Softplus, o.DtMin, o.DtMax = true, true, 0.004, 0.05 }, false},
	{"initial_states", func(o *mamba2.Options) { o.InitialStates = true }, false},
	{"one_group", func(o *mamba2.Options) { o.Groups = 1 }, false},
	{"group_per_head", func(o *mamba2.Options) { o.Groups = o.Heads }, false},
	{"seqlen_1", func(o *mamba2.Options) { o.Seqlen, o.InitialStates = 1, true }, false},
	{"packed", func(o *mamba2.Options) { o.Batch, o.CuSeqlens = 1, []int{0, 70, 71, 200, 300} }, true},
	{"packed+initial_states", func(o *mamba2.Options) { o.Batch, o.CuSeqlens, o.InitialStates = 1, []int{0, 40, 300}, true }, false},
	{"all", func(o *mamba2.Options) {
		o.D, o.Z, o.DtBias, o.Softplus, o.InitialStates, o.DtMin, o.DtMax = true, true, true, true, true, 0.001, 0.1
	}, true},
	// last, so that the cases before keep their seeds
	{"D_per_channel", func(o *mamba2.Options) { o.D, o.DPerChannel = true, true }, false},
}

func TestMamba2Prefill(t *testing.T) {
	track(t)
	for _, dt := range pairs {
		for _, c := range prefillCases {
			if !c.all && !(dt == pairs[0] || dt == pairs[1]) {
				continue
			}
			t.Run(dt.String()+"/"+c.name, func(t *testing.T) {
				track(t)
				judgePrefill(t, prefillCase(c.name, dt))
			})
		}
	}
}

// TestMamba2Boundaries draws sequence boundaries systematically against
// the kernel's chunk (bridgetest.BoundaryRows): a sequence starting at a
// chunk's first, second, middle, second-to-last and last token, a
// sequence of one token at each, several boundaries in one chunk; each
// with and without initial states, in float32 and bf16.
func TestMamba2Boundaries(t *testing.T) {
	track(t)
	for _, dt := range pairs[:2] {
		o := base(dt)
		o.Batch, o.D, o.DtBias, o.Softplus = 1, true, true, true
		o.Seqlen = max(o.Seqlen, 3*max(chunk(), 16))
		rows, err := bridgetest.BoundaryRows(chunk(), o.Seqlen)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range rows {
			for _, init := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/%s/initial_states=%t", dt, r.Name, init), func(t *testing.T) {
					track(t)
					q := o
					q.CuSeqlens, q.InitialStates = r.CuSeqlens, init
					judgePrefill(t, mamba2.Generate(q, uint64(500+i)).Rounded())
				})
			}
		}
	}
}

// TestMamba2PrefillNegativeDt: without softplus a Δ below zero is clamped
// to dt_limit's lower end, 0 by default (upstream's _chunk_cumsum_fwd): the
// state holds still on those steps instead of growing.
func TestMamba2PrefillNegativeDt(t *testing.T) {
	track(t)
	for _, dt := range pairs[:2] {
		o := base(dt)
		o.DtBias = true
		p := mamba2.Generate(o, 7)
		for h := range p.DtBias {
			p.DtBias[h] = -0.02 // with dt ~ 0.02·N(0,1): about a sixth of the steps below 0
		}
		judgePrefill(t, p.Rounded())
	}
}

// decodeCases are the combinations of TestMamba2Decode.
var decodeCases = []struct {
	name string
	o    mamba2.StepOptions
}{
	{"plain", mamba2.StepOptions{Batch: 3, Slots: 3, Heads: 4, Headdim: 16, Groups: 2, Dstate: 16}},
	{"all", mamba2.StepOptions{Batch: 3, Slots: 3, Heads: 4, Headdim: 16, Groups: 2, Dstate: 16, D: true, Z: true, DtBias: true, Softplus: true}},
	{"one_group", mamba2.StepOptions{Batch: 2, Slots: 2, Heads: 4, Headdim: 16, Groups: 1, Dstate: 16, D: true, DtBias: true, Softplus: true}},
	{"indices+padding", mamba2.StepOptions{Batch: 4, Slots: 6, Heads: 4, Headdim: 16, Groups: 2, Dstate: 16, D: true, DtBias: true, Softplus: true, Indices: []int{5, -1, 0, 2}}},
}

// prefillCase returns the problem of prefill case name in dtype pair dt.
func prefillCase(name string, dt pair) *mamba2.Problem {
	for i, c := range prefillCases {
		if c.name == name {
			o := base(dt)
			c.mod(&o)
			return mamba2.Generate(o, uint64(10+i)).Rounded()
		}
	}
	return nil
}

// decodeCase returns the step of decode case name in dtype pair dt.
func decodeCase(name string, dt pair) *mamba2.Step {
	for i, c := range decodeCases {
		if c.name == name {
			o := c.o
			o.DType, o.StateDType = dt.in, dt.state
			return mamba2.GenerateStep(o, uint64(20+i)).Rounded()
		}
	}
	return nil
}

func TestMamba2Decode(t *testing.T) {
	track(t)
	for _, dt := range pairs {
		for _, c := range decodeCases {
			t.Run(dt.String()+"/"+c.name, func(t *testing.T) {
				track(t)
				judgeStep(t, decodeCase(c.name, dt))
			})
		}
	}
}

package mamba2

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"ssmverify/ssm"
)

// quadratic is the output as SSD's quadratic form, computed independently
// of Prefill's recurrence: y_t = Σ_{s ≤ t} C_t·B_s·Δ_s·x_s·exp(cum_t − cum_s)
// + C_t·exp(cum_t)·h0 + D·x, gated.
func quadratic(p *Problem) []float64 {
	H, P, N, G, L := p.Heads, p.Headdim, p.Dstate, p.Groups, p.Seqlen
	lo, hi := p.Limits()
	y := make([]float64, p.XLen())
	for b := 0; b < p.Batch; b++ {
		for si, sq := range p.Sequences() {
			for h := 0; h < H; h++ {
				g := h / (H / G)
				bias := 0.0
				if p.DtBias != nil {
					bias = p.DtBias[h]
				}
				cum := map[int]float64{sq[0] - 1: 0}
				for t := sq[0]; t < sq[1]; t++ {
					cum[t] = cum[t-1] + p.A[h]*Delta(p.Dt[(b*L+t)*H+h], bias, p.Softplus, lo, hi)
				}
				for t := sq[0]; t < sq[1]; t++ {
					for pp := 0; pp < P; pp++ {
						var v float64
						for s := sq[0]; s <= t; s++ {
							var cb float64
							for n := 0; n < N; n++ {
								cb += p.C[((b*L+t)*G+g)*N+n] * p.B[((b*L+s)*G+g)*N+n]
							}
							v += cb * Delta(p.Dt[(b*L+s)*H+h], bias, p.Softplus, lo, hi) * p.X[((b*L+s)*H+h)*P+pp] * math.Exp(cum[t]-cum[s])
						}
						if p.InitialStates != nil && si == 0 {
							for n := 0; n < N; n++ {
								v += p.C[((b*L+t)*G+g)*N+n] * math.Exp(cum[t]) * p.InitialStates[((b*H+h)*P+pp)*N+n]
							}
						}
						i := ((b*L+t)*H+h)*P + pp
						if p.D != nil {
							v += p.D[p.DIndex(h, pp)] * p.X[i]
						}
						if p.Z != nil {
							v *= silu(p.Z[i])
						}
						y[i] = v
					}
				}
			}
		}
	}
	return y
}

var optionTable = []struct {
	name string
	o    Options
}{
	{"plain", Options{Batch: 2, Seqlen: 37, Heads: 4, Headdim: 3, Groups: 1, Dstate: 5, Chunk: 8}},
	{"all", Options{Batch: 2, Seqlen: 40, Heads: 4, Headdim: 3, Groups: 2, Dstate: 4, Chunk: 16, D: true, Z: true, DtBias: true, Softplus: true, InitialStates: true}},
	{"limits", Options{Batch: 1, Seqlen: 20, Heads: 2, Headdim: 2, Groups: 2, Dstate: 3, Chunk: 8, DtBias: true, DtMin: 0.01, DtMax: 0.05}},
	{"packed", Options{Batch: 1, Seqlen: 30, Heads: 4, Headdim: 2, Groups: 2, Dstate: 3, Chunk: 8, D: true, InitialStates: true, CuSeqlens: []int{0, 5, 21, 30}}},
	{"D per channel", Options{Batch: 1, Seqlen: 20, Heads: 2, Headdim: 3, Groups: 1, Dstate: 3, Chunk: 8, D: true, DPerChannel: true, Z: true}},
}

func TestPrefillMatchesQuadraticForm(t *testing.T) {
	for _, c := range optionTable {
		p := Generate(c.o, 1)
		if err := p.Validate(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		out, _ := Prefill(p)
		q := quadratic(p)
		for i := range q {
			if d := math.Abs(out.Y[i] - q[i]); d > 1e-12*(1+math.Abs(q[i])) {
				t.Fatalf("%s: y[%d] = %.17g, quadratic form %.17g", c.name, i, out.Y[i], q[i])
			}
		}
	}
}

// TestPackedEqualsUnpacked: each sequence of a packed row is its own
// problem (the state restarts at each boundary, the first sequence takes
// the row's initial state).
func TestPackedEqualsUnpacked(t *testing.T) {
	p := Generate(optionTable[3].o, 2)
	out, _ := Prefill(p)
	H, P, N := p.Heads, p.Headdim, p.Dstate
	for i, q := range p.Unpack() {
		sq := p.Sequences()[i]
		o, _ := Prefill(q)
		for j, v := range o.Y {
			if w := out.Y[sq[0]*H*P+j]; v != w {
				t.Fatalf("sequence %d: y[%d] = %g alone, %g packed", i, j, v, w)
			}
		}
		for j, v := range o.FinalStates {
			if w := out.SeqStates[i*H*P*N+j]; v != w {
				t.Fatalf("sequence %d: state[%d] = %g alone, %g packed", i, j, v, w)
			}
		}
	}
}

// TestPrefillParallelChannels: a problem long enough that Prefill runs a
// head's channels in parallel (forChannels) gives the result of running
// them one after another, bit for bit, packed sequences and initial
// states included.
func TestPrefillParallelChannels(t *testing.T) {
	o := Options{Batch: 1, Seqlen: 1400, Heads: 2, Headdim: 8, Groups: 1, Dstate: 64, Chunk: 64, D: true, Z: true, DtBias: true,
		Softplus: true, InitialStates: true, CuSeqlens: []int{0, 300, 1400}, DType: ssm.BF16, StateDType: ssm.F32}
	p := Generate(o, 5)
	if (p.Seqlen-300)*p.Dstate < ParallelWork {
		t.Fatalf("the problem is too small to run in parallel: %d < %d", (p.Seqlen-300)*p.Dstate, ParallelWork)
	}
	par, psc := Prefill(p)
	prev := runtime.GOMAXPROCS(1)
	seq, ssc := Prefill(p)
	runtime.GOMAXPROCS(prev)
	for _, c := range []struct {
		name string
		a, b []float64
	}{{"y", par.Y, seq.Y}, {"final_states", par.FinalStates, seq.FinalStates}, {"seq_states", par.SeqStates, seq.SeqStates},
		{"scale of y", psc.Y, ssc.Y}, {"scale of the states", psc.SeqStates, ssc.SeqStates}, {"tiny of y", psc.TinyY, ssc.TinyY}} {
		for i := range c.a {
			if math.Float64bits(c.a[i]) != math.Float64bits(c.b[i]) {
				t.Fatalf("%s[%d]: %g in parallel, %g in sequence", c.name, i, c.a[i], c.b[i])
			}
		}
	}
}

// TestRowAndHeadsOf: the problems Row and HeadsOf cut out have, as
// references, the parts of the whole problem's: a row's first tokens (its
// initial state with them), and one group's heads over every row, bit for
// bit; HeadsOf refuses heads of two groups.
func TestRowAndHeadsOf(t *testing.T) {
	o := Options{Batch: 2, Seqlen: 70, Heads: 4, Headdim: 3, Groups: 2, Dstate: 5, Chunk: 16, D: true, Z: true, DtBias: true,
		Softplus: true, InitialStates: true, DType: ssm.F32, StateDType: ssm.F32}
	p := Generate(o, 9)
	whole, _ := Prefill(p)
	H, P, N, L := p.Heads, p.Headdim, p.Dstate, p.Seqlen
	row, _ := Prefill(p.Row(1, 0, 40))
	for i, v := range row.Y {
		if w := whole.Y[(1*L)*H*P+i]; math.Float64bits(v) != math.Float64bits(w) {
			t.Fatalf("Row(1, 0, 40): y[%d] = %g, the whole problem's %g", i, v, w)
		}
	}
	heads := []int{2, 3}
	sub, _ := Prefill(p.HeadsOf(heads))
	part := whole.HeadsOf(p, heads)
	for i := range sub.Y {
		if math.Float64bits(sub.Y[i]) != math.Float64bits(part.Y[i]) {
			t.Fatalf("HeadsOf(%v): y[%d] = %g, the whole problem's %g", heads, i, sub.Y[i], part.Y[i])
		}
	}
	o.DPerChannel = true
	pc := Generate(o, 10)
	pcWhole, _ := Prefill(pc)
	pcSub, _ := Prefill(pc.HeadsOf(heads))
	for i, w := range pcWhole.HeadsOf(pc, heads).Y {
		if math.Float64bits(pcSub.Y[i]) != math.Float64bits(w) {
			t.Fatalf("HeadsOf(%v) with D per channel: y[%d] = %g, the whole problem's %g", heads, i, pcSub.Y[i], w)
		}
	}
	for i := range sub.FinalStates {
		if math.Float64bits(sub.FinalStates[i]) != math.Float64bits(part.FinalStates[i]) {
			t.Fatalf("HeadsOf(%v): final state[%d] = %g, the whole problem's %g", heads, i, sub.FinalStates[i], part.FinalStates[i])
		}
	}
	if len(sub.FinalStates) != p.Batch*len(heads)*P*N {
		t.Fatalf("HeadsOf(%v): %d final-state elements, want %d", heads, len(sub.FinalStates), p.Batch*len(heads)*P*N)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "head 2") {
			t.Errorf("HeadsOf([1 2]) across groups: recovered %v, want a panic naming head 2", r)
		}
	}()
	p.HeadsOf([]int{1, 2})
}

// TestDecodeStepsEqualPrefill: decode steps from a prefill's final state
// reproduce the longer prefill (the reference's own consistency, which
// the kernels' is measured against).
func TestDecodeStepsEqualPrefill(t *testing.T) {
	o := optionTable[1].o
	p := Generate(o, 3)
	full, _ := Prefill(p)
	head, _ := Prefill(p.Slice(0, 30, nil))
	state := head.FinalStates
	H, P := p.Heads, p.Headdim
	for step := 30; step < p.Seqlen; step++ {
		s := StepAt(p, step, state)
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		o, _ := Decode(s)
		for b := 0; b < p.Batch; b++ {
			for j := 0; j < H*P; j++ {
				got, want := o.Y[b*H*P+j], full.Y[(b*p.Seqlen+step)*H*P+j]
				if math.Abs(got-want) > 1e-12*(1+math.Abs(want)) {
					t.Fatalf("step %d row %d: decode %g, prefill %g", step, b, got, want)
				}
			}
		}
		state = o.State
	}
	for i, v := range state {
		if math.Abs(v-full.FinalStates[i]) > 1e-12*(1+math.Abs(v)) {
			t.Fatalf("final state %d: decode chain %g, prefill %g", i, v, full.FinalStates[i])
		}
	}
}

func TestDecodePaddingSlots(t *testing.T) {
	s := GenerateStep(StepOptions{Batch: 3, Slots: 5, Heads: 2, Headdim: 2, Groups: 1, Dstate: 3, D: true, Indices: []int{4, -1, 0}}, 1)
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	o, sc := Decode(s)
	for i := 4; i < 8; i++ {
		if o.Y[i] != 0 || sc.Y[i] != 0 {
			t.Fatalf("padding row: y[%d] = %g, scale %g; want 0, 0", i, o.Y[i], sc.Y[i])
		}
	}
	per := 2 * 2 * 3
	for _, slot := range []int{1, 2, 3} {
		for i := slot * per; i < (slot+1)*per; i++ {
			if o.State[i] != s.State[i] || sc.State[i] != 0 {
				t.Fatalf("slot %d touched: state[%d] %g → %g", slot, i, s.State[i], o.State[i])
			}
		}
	}
}

func TestValidateNamesTheField(t *testing.T) {
	base := func() *Problem { return Generate(optionTable[1].o, 4) }
	for _, c := range []struct {
		mod  func(p *Problem)
		want string
	}{
		{func(p *Problem) { p.Groups = 3 }, "Groups"},
		{func(p *Problem) { p.X = p.X[1:] }, "len(X)"},
		{func(p *Problem) { p.A[0] = 0.5 }, "A[0]"},
		{func(p *Problem) { p.Dt[3] = math.NaN() }, "Dt[3]"},
		{func(p *Problem) { p.Chunk = -1 }, "Chunk"},
		{func(p *Problem) { p.CuSeqlens = []int{0, 40} }, "CuSeqlens with Batch"},
		{func(p *Problem) { p.Batch, p.X, p.Dt, p.B, p.C, p.Z, p.InitialStates = 1, nil, nil, nil, nil, nil, nil }, "len(X)"},
		{func(p *Problem) { p.DtMin, p.DtMax = 0.5, 0.1 }, "dt_limit"},
		{func(p *Problem) { p.DType = ssm.DType(9) }, "DType"},
		{func(p *Problem) { p.D = p.D[:3] }, "len(D)"}, // neither one per head nor one per channel
	} {
		p := base()
		c.mod(p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Validate() = %v, want an error naming %q", err, c.want)
		}
	}
	s := GenerateStep(StepOptions{Batch: 2, Slots: 2, Heads: 2, Headdim: 2, Groups: 1, Dstate: 2}, 1)
	s.Indices = []int{1, 1}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "repeats") {
		t.Errorf("repeated slot: Validate() = %v", err)
	}
}

// TestChannelsOf: the problem ChannelsOf cuts out (some channels of some
// heads, in the order named) has as reference and as error scale the
// whole problem's at those channels, bit for bit, with D per channel, the
// gate and initial states; a channel outside the head is refused.
func TestChannelsOf(t *testing.T) {
	o := Options{Batch: 2, Seqlen: 70, Heads: 4, Headdim: 3, Groups: 2, Dstate: 5, Chunk: 16, D: true, DPerChannel: true, Z: true,
		DtBias: true, Softplus: true, InitialStates: true, DType: ssm.BF16, StateDType: ssm.F32}
	p := Generate(o, 11).Rounded()
	whole, wsc := Prefill(p)
	heads, ch := []int{2, 3}, []int{2, 0}
	q := p.ChannelsOf(heads, ch)
	sub, ssc := Prefill(q)
	part := whole.ChannelsOf(p, heads, ch)
	partScale := (&Output{Y: wsc.Y, FinalStates: wsc.FinalStates}).ChannelsOf(p, heads, ch)
	if q.Headdim != len(ch) || len(sub.Y) != len(part.Y) || len(sub.FinalStates) != len(part.FinalStates) {
		t.Fatalf("ChannelsOf: headdim %d, %d and %d outputs, %d and %d final-state elements", q.Headdim, len(sub.Y), len(part.Y),
			len(sub.FinalStates), len(part.FinalStates))
	}
	for _, c := range []struct {
		name      string
		got, want []float64
	}{{"y", sub.Y, part.Y}, {"final state", sub.FinalStates, part.FinalStates}, {"y's error scale", ssc.Y, partScale.Y},
		{"final state's error scale", ssc.FinalStates, partScale.FinalStates}} {
		for i := range c.got {
			if math.Float64bits(c.got[i]) != math.Float64bits(c.want[i]) {
				t.Fatalf("ChannelsOf(%v, %v): %s[%d] = %g, the whole problem's %g", heads, ch, c.name, i, c.got[i], c.want[i])
			}
		}
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "channel 3") {
			t.Errorf("ChannelsOf(…, [3]) of a head of 3: recovered %v, want a panic naming channel 3", r)
		}
	}()
	p.ChannelsOf(heads, []int{3})
}

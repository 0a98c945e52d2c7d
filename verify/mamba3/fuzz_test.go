package mamba3

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"ssmverify/bridge"
	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/mamba3"
	"ssmverify/ssm"
	"ssmverify/verify/bridgetest"
)

// FuzzMamba3Forward decodes a Mamba-3 SISO forward from the fuzzer's
// bytes — the input type, D, z, a starting state, packed rows, 1 to 96
// steps, heads sharing q and k, the state's and the head's sizes, the
// rotated pairs — in value regimes of its own edges: |A|·Δ of 10²–10³, Δ
// near 0 and large, λ = σ(Trap) at 0 and 1, accumulated angles of many
// turns; and judges the bridged kernel's y and final states with the
// suite's judge, a failure named by its diagnosis.
//
//	go test ./verify/mamba3 -run FuzzMamba3Forward        replay the seeds (make test)
//	scripts/fuzz.sh FuzzMamba3Forward                     fuzz it for FUZZTIME (make fuzz)
func FuzzMamba3Forward(f *testing.F) {
	for _, s := range mamba3Seeds {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		bridgetest.FuzzCheck(t, data, func(data []byte) string { return forwardCheck(kernel, bridge.OpMamba3Forward, data) })
	})
}

// FuzzMamba3Step judges the bridged kernel's decode step (one token per
// row, from each row's four-part state) of the decoded problem, in the
// forward's regimes.
func FuzzMamba3Step(f *testing.F) {
	for _, s := range mamba3Seeds {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		bridgetest.FuzzCheck(t, data, func(data []byte) string { return forwardCheck(kernel, bridge.OpMamba3Step, data) })
	})
}

// FuzzMamba3Isolation: a non-finite value in one sequence's input (V, Q,
// DT with its ADT, or Trap) leaves every other sequence's y and final
// state finite and within the error model of the clean run's.
func FuzzMamba3Isolation(f *testing.F) {
	for i, s := range mamba3Seeds {
		f.Add(s.data, uint8(i), uint16(i*257))
	}
	f.Fuzz(func(t *testing.T, data []byte, what uint8, where uint16) {
		bridgetest.FuzzPoisonCheck(t, data, what, where, func(data []byte, what uint8, where uint16) string { return m3IsolationCheck(kernel, data, what, where) })
	})
}

// m3IsolationCheck poisons one sequence of the decoded forward and
// compares every other sequence's results with the clean run's.
func m3IsolationCheck(k *bridge.Mamba3, data []byte, what uint8, where uint16) string {
	op := bridge.OpMamba3Forward
	dts := dtypes(op)
	if len(dts) == 0 {
		return ""
	}
	p := decodeForward(data, dts, false)
	a, err := k.Arithmetic(op, p.DType)
	if err != nil {
		return ""
	}
	p.Arithmetic = a
	p = p.Rounded()
	seqs := p.Sequences()
	if len(seqs) < 2 || k.Supports(op, p) != "" {
		return ""
	}
	si := int(where) % len(seqs)
	sq := seqs[si]
	t := sq[1] + int(where>>8)%(sq[2]-sq[1])
	q := *p
	q.NonFinite = true
	q.V, q.Q, q.DT, q.ADT, q.Trap = append([]float64(nil), p.V...), append([]float64(nil), p.Q...), append([]float64(nil), p.DT...), append([]float64(nil), p.ADT...), append([]float64(nil), p.Trap...)
	v := bridgetest.Poison(int(what / 4))
	b, L, H := sq[0], p.Seqlen, p.Heads
	h := int(what) % H
	switch what % 4 {
	case 0:
		q.V[((b*L+t)*H+h)*p.P] = v
	case 1:
		q.Q[((b*L+t)*p.HeadsQK+h%p.HeadsQK)*p.N] = v
	case 2:
		q.DT[(b*H+h)*L+t], q.ADT[(b*H+h)*L+t] = math.Abs(v), -math.Abs(v)
	case 3:
		q.Trap[(b*H+h)*L+t] = v
	}
	y0, s0, err := k.Forward(op, p)
	if err != nil {
		return ""
	}
	y1, s1, err := k.Forward(op, &q)
	var crash *bridge.CrashError
	switch {
	case errors.As(err, &crash):
		return fmt.Sprintf("%s %s with a non-finite input: crash: %s", op, mamba3Shape(p), crash.Cause)
	case err != nil:
		return ""
	}
	// other sequences' results: the clean run's, within the error model
	// (a kernel's arithmetic may round differently from run to run: the
	// numpy path's sums depend on the arrays' alignment), and finite
	_, ratios, err := judge.CompareArrays(judge.Mamba3Arrays(p, y1, y0, s1, s0, mamba3.ErrorScale(p)))
	if err != nil {
		return fmt.Sprintf("%s %s with a non-finite input: %v", op, mamba3Shape(p), err)
	}
	th := judge.Threshold(p.DType)
	HP := H * p.P
	for i, r := range ratios["y"] {
		rb, rt := i/(L*HP), i/HP%L
		if (rb != b || rt < sq[1] || rt >= sq[2]) && !(r <= th) {
			return fmt.Sprintf("%s %s: diagnosis [isolation:to-sequence] a non-finite input of sequence %d (what %d) reached y[%d %d …] (%g, clean %g)", op, mamba3Shape(p), si, what, rb, rt, y1[i], y0[i])
		}
	}
	for _, name := range []string{"angle_state", "ssm_state", "k_state", "v_state"} {
		rs := ratios[name]
		per := len(rs) / len(seqs)
		for i, r := range rs {
			if i/per != si && !(r <= th) {
				return fmt.Sprintf("%s %s: diagnosis [isolation:to-sequence] a non-finite input of sequence %d (what %d) reached the %s of sequence %d", op, mamba3Shape(p), si, what, name, i/per)
			}
		}
	}
	return ""
}

// mamba3Seeds are one input per edge the decoder draws, named for it.
var mamba3Seeds = []struct {
	name string
	data []byte
}{
	{"plain", []byte{0, 0, 39, 1, 0, 2, 2, 1}},
	{"large-decay-exponent", []byte{0, 1, 60, 1, 1, 2, 2, 1, 0, 1}},
	{"dt-near-zero", []byte{0, 0, 50, 2, 1, 1, 2, 1, 1}},
	{"trap-at-0-and-1", []byte{0, 3, 40, 1, 0, 2, 1, 2, 0, 0, 1}},
	{"angles-many-turns", []byte{0, 2, 90, 1, 0, 3, 2, 4, 2, 0, 2}},
	{"packed-one-token", []byte{0, 0x0c, 30, 1, 0, 2, 2, 1, 0, 0, 0, 3, 1, 2, 15}},
	{"no-rotation", []byte{0, 1, 30, 1, 1, 2, 2, 0}},
	{"bf16", []byte{1, 3, 64, 2, 1, 2, 3, 3, 0, 0, 0, 7}},
}

var (
	m3Heads = []int{1, 2, 4}
	m3Ns    = []int{2, 4, 8, 16, 32}
	m3Ps    = []int{1, 2, 4, 8, 16}
)

// decodeForward decodes data into a Mamba-3 problem for op: flags bit 0
// D, 1 z, 2 a state, 3 packed; then the steps, heads, heads sharing q and
// k, N, P, the rotated pairs, the Δ regime, the A regime, the λ regime
// with the angles', the values' seed and the packed row's boundaries.
func decodeForward(data []byte, dtypes []ssm.DType, step bool) *mamba3.Problem {
	r := bridgetest.NewFuzzBytes(data)
	dt := dtypes[r.Next()%len(dtypes)]
	flags := r.Next()
	o := mamba3.Options{Batch: 2, Seqlen: 1 + r.Next()%96, D: flags&1 != 0, Z: flags&2 != 0, State: flags&4 != 0}
	o.Heads = r.Pick(m3Heads)
	o.HeadsQK = r.Divisor(o.Heads)
	o.N = r.Pick(m3Ns)
	o.P = r.Pick(m3Ps)
	o.AngleDim = r.Next() % (o.N/2 + 1)
	dtRegime, aRegime, lamRegime, seed := r.Next()%3, r.Next()%2, r.Next()%3, r.Next()
	if nb := r.Next() % 5; step {
		// a decode step: one token per row, from each row's state
		o.Seqlen, o.State, o.Batch = 1, true, 1+nb%4
	} else if flags&8 != 0 || nb > 0 {
		o.Batch, o.CuSeqlens = 1, r.CuSeqlens(nb, o.Seqlen)
	}
	p := mamba3.Generate(o, uint64(seed))
	for i := range p.DT {
		a := p.ADT[i] / p.DT[i]
		switch dtRegime {
		case 1:
			p.DT[i] = 1e-6 * float64(1+i%7)
		case 2:
			p.DT[i] = 1 + float64(i%4)
		}
		if aRegime == 1 {
			a = -math.Exp(4 + float64((seed+i)%4)) // Δ·A of 10² to 10³ with Δ near 0.1 to 1
		}
		p.ADT[i] = a * p.DT[i]
	}
	if lamRegime == 1 {
		for i := range p.Trap {
			p.Trap[i] = 30 * float64(1-2*(i%2)) // λ at 0 and at 1
		}
	}
	if lamRegime == 2 && dtRegime != 2 {
		for i := range p.DT {
			p.DT[i] = 2 + float64(i%3) // tanh(Angles)·π·Δ of several radians a step
			p.ADT[i] = -0.01 * p.DT[i]
		}
	}
	p.DType = dt
	return p
}

// forwardCheck runs and judges the kernel's forward of the decoded
// problem: "" where it passes, is refused or is not declared.
func forwardCheck(k *bridge.Mamba3, op string, data []byte) string {
	dts := dtypes(op)
	if len(dts) == 0 {
		return ""
	}
	p := decodeForward(data, dts, op == bridge.OpMamba3Step)
	a, err := k.Arithmetic(op, p.DType)
	if err != nil {
		return ""
	}
	p.Arithmetic = a
	p = p.Rounded()
	if k.Supports(op, p) != "" {
		return ""
	}
	y, st, err := k.Forward(op, p)
	var crash *bridge.CrashError
	switch {
	case errors.As(err, &crash):
		return fmt.Sprintf("%s %s: crash: %s", op, mamba3Shape(p), crash.Cause)
	case bridge.Unsupported(err):
		return ""
	case err != nil:
		return fmt.Sprintf("%s %s: diagnosis [raises] %v", op, mamba3Shape(p), err)
	}
	want, wst := mamba3.Forward(p)
	c, _, err := judge.CompareArrays(judge.Mamba3Arrays(p, y, want, st, wst, mamba3.ErrorScale(p)))
	if err != nil {
		return fmt.Sprintf("%s %s: %v", op, mamba3Shape(p), err)
	}
	if c.NonFinite == 0 && c.Worst.Ratio <= judge.Threshold(p.DType) {
		return ""
	}
	f := diagnose.Mamba3(p, y, st, func(q *mamba3.Problem) ([]float64, *mamba3.State, error) { return k.Forward(op, q) })
	return fmt.Sprintf("%s %s: ratio %.3g at %s; diagnosis [%s] %s", op, mamba3Shape(p), c.Worst.Ratio, c.Worst, f.Tag, f)
}

func mamba3Shape(p *mamba3.Problem) string {
	return fmt.Sprintf("%v b=%d l=%d h=%d hqk=%d n=%d p=%d angles=%d D=%t z=%t state=%t cu=%v", p.DType, p.Batch, p.Seqlen, p.Heads, p.HeadsQK,
		p.N, p.P, p.AngleDim, p.D != nil, p.Z != nil, p.State != nil, p.CuSeqlens)
}

// TestMamba3FuzzSeedsFindSlips: replayed against the numpy path with each
// of its forward slips planted, some seed of FuzzMamba3Forward fails and
// its diagnosis names the slip.
func TestMamba3FuzzSeedsFindSlips(t *testing.T) {
	track(t)
	for _, c := range []struct{ slip, tag string }{
		{"no-previous", "m3:no-previous"}, {"lambda-fixed", "m3:lambda-fixed"}, {"prev-key-current-angle", "m3:prev-key-current-angle"},
		{"rotate-halves", "m3:rotate-halves"}, {"gamma-no-dt", "m3:gamma-no-dt"}, {"angle-no-dt", "m3:angle-no-dt"},
	} {
		t.Run(c.slip, func(t *testing.T) {
			w, err := bridge.Start(bridge.Spec{Python: spec.Python, Adapter: "numpy_mamba3", Args: []string{"slip=" + c.slip}})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			k := &bridge.Mamba3{W: w}
			var failing []string
			for _, s := range mamba3Seeds {
				if msg := forwardCheck(k, bridge.OpMamba3Forward, s.data); msg != "" {
					failing = append(failing, s.name)
					if strings.Contains(msg, "["+c.tag) || strings.Contains(msg, "+"+c.tag) {
						t.Logf("slip %s: found by %s", c.slip, s.name)
						return
					}
				}
			}
			t.Errorf("slip %s: no seed finds it named %s (failing: %v)", c.slip, c.tag, failing)
		})
	}
}

// FuzzMamba3Backward judges the bridged kernel's backward (mamba3_bwd) of
// the decoded forward, with a cotangent of y and of the final state, as
// TestMamba3Backward does.
func FuzzMamba3Backward(f *testing.F) {
	for _, s := range mamba3Seeds {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		bridgetest.FuzzCheck(t, data, func(data []byte) string { return m3BackwardCheck(kernel, data) })
	})
}

// m3BackwardCheck runs and judges k's backward of the decoded problem.
func m3BackwardCheck(k *bridge.Mamba3, data []byte) string {
	op := bridge.OpMamba3Backward
	dts := dtypes(op)
	if len(dts) == 0 {
		return ""
	}
	p := decodeForward(data, dts, false)
	a, err := k.Arithmetic(op, p.DType)
	if err != nil {
		return ""
	}
	p.Arithmetic = a
	p = p.Rounded()
	if k.Supports(op, p) != "" {
		return ""
	}
	ct := mamba3.GenerateCotangent(p, true, uint64(len(data)))
	y, st, g, err := k.Backward(p, ct)
	var crash *bridge.CrashError
	switch {
	case errors.As(err, &crash):
		return fmt.Sprintf("%s %s: crash: %s", op, mamba3Shape(p), crash.Cause)
	case bridge.Unsupported(err):
		return ""
	case err != nil:
		return fmt.Sprintf("%s %s: diagnosis [raises] %v", op, mamba3Shape(p), err)
	}
	v := judgedBackward(k, p, ct, y, st, g)
	switch {
	case v.err != nil:
		return fmt.Sprintf("%s %s: %v", op, mamba3Shape(p), v.err)
	case v.passed():
		return ""
	}
	return fmt.Sprintf("%s %s: ratio %.3g at %s; diagnosis [%s] %s", op, mamba3Shape(p), v.worst.Ratio, v.worst, v.finding.Tag, v.finding)
}

package mamba2

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"ssmverify/bridge"
	"ssmverify/diagnose"
	"ssmverify/judge"
	"ssmverify/mamba2"
	"ssmverify/report"
	"ssmverify/verify/bridgetest"
)

// The decode step's fuzz targets: a pool of states, rows mapped to slots
// (with padding rows, index −1), and the value regimes of the prefill's
// targets (fuzz_test.go).

// stepSpec is a decoded step's bytes, for the seeds.
type stepSpec struct {
	pair, flags, batch, slots, heads, groups, headdim, dstate, dt, a, seed int
	indices                                                                []int // slot+1 per row, 0 for padding; nil: rows are slots
}

func (s stepSpec) bytes() []byte {
	b := []byte{byte(s.pair), byte(s.flags), byte(s.batch - 1), byte(s.slots), byte(s.heads), byte(s.groups), byte(s.headdim),
		byte(s.dstate), byte(s.dt), byte(s.a), byte(s.seed), byte(len(s.indices))}
	for _, x := range s.indices {
		b = append(b, byte(x))
	}
	return b
}

// decodeStep decodes data into a decode step, rounded to its types.
func decodeStep(data []byte) *mamba2.Step {
	r := bridgetest.NewFuzzBytes(data)
	dt := pairs[r.Next()%len(pairs)]
	flags := r.Next()
	o := mamba2.StepOptions{Batch: 1 + r.Next()%4, DType: dt.in, StateDType: dt.state}
	o.Slots = o.Batch + r.Next()%4
	o.Heads = r.Pick(fuzzHeads)
	o.Groups = r.Divisor(o.Heads)
	o.Headdim = r.Pick(fuzzHeaddims)
	o.Dstate = r.Pick(fuzzDstates)
	dtRegime, aRegime, seed := r.Next()%3, r.Next()%3, r.Next()
	o.D, o.Z, o.DtBias, o.Softplus = flags&fuzzFlagD != 0, flags&fuzzFlagZ != 0, flags&fuzzFlagBias != 0, flags&fuzzFlagSoftplus != 0
	if n := r.Next() % 5; n > 0 || o.Slots > o.Batch {
		// rows to distinct slots, some rows padding (−1), in an order the bytes choose
		used := map[int]bool{}
		o.Indices = make([]int, o.Batch)
		for b := range o.Indices {
			v := r.Next() % (o.Slots + 1)
			for v > 0 && used[v-1] {
				v = (v + 1) % (o.Slots + 1)
			}
			if v > 0 {
				used[v-1] = true
			}
			o.Indices[b] = v - 1
		}
	}
	s := mamba2.GenerateStep(o, uint64(seed))
	for h := range s.A {
		switch aRegime {
		case 1:
			s.A[h] = -math.Exp(4 + float64((seed+h)%5))
		case 2:
			s.A[h] = -1e-6
		}
	}
	for i := range s.Dt {
		switch dtRegime {
		case 1:
			s.Dt[i] = -6 - float64(i%13)
			if !s.Softplus {
				s.Dt[i] = 1e-7
			}
		case 2:
			s.Dt[i] = 3 + float64(i%5)
		}
		if s.DtBias != nil && dtRegime != 0 {
			s.Dt[i] -= s.DtBias[i%s.Heads]
		}
	}
	return s.Rounded()
}

// stepSeeds are the decode step's seed corpus, one per class.
var stepSeeds = []struct {
	name string
	spec stepSpec
}{
	{"plain", stepSpec{batch: 2, heads: 1, headdim: 2, dstate: 2}},
	{"padding-rows", stepSpec{pair: 0, flags: fuzzFlagD, batch: 3, slots: 2, heads: 1, headdim: 3, dstate: 3, indices: []int{2, 0, 1}}},
	{"large-decay-exponent", stepSpec{pair: 0, flags: fuzzFlagBias | fuzzFlagSoftplus, batch: 2, heads: 3, headdim: 2, dstate: 3, dt: 2, a: 1}},
	{"dt-near-zero", stepSpec{pair: 1, flags: fuzzFlagBias | fuzzFlagSoftplus, batch: 2, slots: 1, heads: 1, headdim: 2, dstate: 3, dt: 1, indices: []int{3, 1}}},
	{"all-options-16-bit-state", stepSpec{pair: 2, flags: 0x0f, batch: 4, slots: 3, heads: 3, groups: 1, headdim: 3, dstate: 3, seed: 5, indices: []int{4, 0, 2, 7}}},
	{"dstate-above-128", stepSpec{pair: 0, flags: fuzzFlagZ, batch: 1, heads: 0, headdim: 1, dstate: 6}},
}

// stepJudge runs k's decode step of s and judges it (ok false with the
// finding where it fails; skip where it is not declared).
func stepJudge(k *bridge.SSD, s *mamba2.Step) (ok, skip bool, f report.Finding, ratio float64) {
	if why := k.SupportsStep(s); why != "" {
		return true, true, report.Finding{}, 0
	}
	out, err := k.Step(s)
	var crash *bridge.CrashError
	switch {
	case errors.As(err, &crash):
		return false, false, report.Finding{Tag: "crash", Cause: crash.Cause, Where: stepShape(s)}, math.Inf(1)
	case bridge.Unsupported(err):
		return true, true, report.Finding{}, 0
	case err != nil:
		return false, false, raised(err, stepShape(s)), math.Inf(1)
	}
	want, sc := mamba2.Decode(s)
	c, _, err := judge.CompareArrays(judge.StepArrays(s, out, want, sc))
	if err != nil {
		return false, false, report.Finding{Tag: "missing", Cause: err.Error()}, math.Inf(1)
	}
	if c.NonFinite == 0 && c.Worst.Ratio <= judge.Threshold(s.DType) {
		return true, false, report.Finding{}, c.Worst.Ratio
	}
	return false, false, diagnose.SSDStep(s, out), c.Worst.Ratio
}

// FuzzMamba2Step judges the bridged kernel's decode step of the decoded
// pool against the reference: y, every slot written and every other kept.
func FuzzMamba2Step(f *testing.F) {
	for _, s := range stepSeeds {
		f.Add(s.spec.bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		bridgetest.FuzzCheck(t, data, func(data []byte) string {
			s := decodeStep(data)
			if ok, _, fd, ratio := stepJudge(kernel, s); !ok {
				return fmt.Sprintf("step %s: ratio %.3g; diagnosis [%s] %s", stepShape(s), ratio, fd.Tag, fd)
			}
			return ""
		})
	})
}

// FuzzMamba2StepIsolation: a non-finite input of one row (x, dt, B or C)
// leaves every other row's y and every slot but that row's finite and
// within the error model of the clean step's.
func FuzzMamba2StepIsolation(f *testing.F) {
	for i, s := range stepSeeds {
		f.Add(s.spec.bytes(), uint8(i), uint16(i*257))
	}
	f.Fuzz(func(t *testing.T, data []byte, what uint8, where uint16) {
		bridgetest.FuzzPoisonCheck(t, data, what, where, func(data []byte, what uint8, where uint16) string {
			return stepIsolationCheck(kernel, data, what, where)
		})
	})
}

// stepIsolationCheck poisons one row of the decoded step and compares the
// other rows' results and slots with the clean step's.
func stepIsolationCheck(k *bridge.SSD, data []byte, what uint8, where uint16) string {
	s := decodeStep(data)
	if s.Batch < 2 || k.SupportsStep(s) != "" {
		return ""
	}
	row := int(where) % s.Batch
	q := *s
	q.X, q.Dt, q.B, q.C = append([]float64(nil), s.X...), append([]float64(nil), s.Dt...), append([]float64(nil), s.B...), append([]float64(nil), s.C...)
	q.State = append([]float64(nil), s.State...)
	v := bridgetest.Poison(int(what / 4))
	H, P, G, N := s.Heads, s.Headdim, s.Groups, s.Dstate
	h := int(what) % H
	switch what % 4 {
	case 0:
		q.X[(row*H+h)*P+int(where>>8)%P] = v
	case 1:
		q.Dt[row*H+h] = v
	case 2:
		q.B[(row*G+h%G)*N+int(where>>8)%N] = v
	case 3:
		q.C[(row*G+h%G)*N+int(where>>8)%N] = v
	}
	clean, err := k.Step(s)
	if err != nil {
		return ""
	}
	got, err := k.Step(&q)
	var crash *bridge.CrashError
	switch {
	case errors.As(err, &crash):
		return fmt.Sprintf("step %s with a non-finite input: crash: %s", stepShape(s), crash.Cause)
	case err != nil:
		return ""
	}
	// within the error model of the clean step's, and finite where it is (see leaked)
	_, sc := mamba2.Decode(s)
	_, ratios, err := judge.CompareArrays(judge.StepArrays(s, got, clean, sc))
	if err != nil {
		return err.Error()
	}
	th := judge.Threshold(s.DType)
	HP, HPN := H*P, H*P*N
	for i, r := range ratios["y"] {
		if i/HP != row && leaked(got.Y[i], clean.Y[i], r, th) {
			return fmt.Sprintf("step %s: diagnosis [isolation:to-row] a non-finite input of row %d (what %d) reached y of row %d (%g, clean %g)", stepShape(s), row, what, i/HP, got.Y[i], clean.Y[i])
		}
	}
	mine := s.Slot(row)
	for i, r := range ratios["state"] {
		if i/HPN != mine && leaked(got.State[i], clean.State[i], r, th) {
			return fmt.Sprintf("step %s: diagnosis [isolation:to-slot] a non-finite input of row %d (what %d) reached slot %d (%g, clean %g)", stepShape(s), row, what, i/HPN, got.State[i], clean.State[i])
		}
	}
	return ""
}

// TestMamba2StepFuzzFindingNamed replays what the H200 campaigns found in
// upstream's selective_state_update against the numpy path with the slip
// that explains it planted; the diagnosis must name it:
//   - dstate-130-one-slot-of-four: ratio 25.8, 251 of 66560 state elements,
//     diagnosed "none" until the slip's reference allowed the ulp of e^v + 1
//     that log(e^v + 1) may round by (the numpy slip fails 252);
//   - negative-dt-state-overflows: Δ + dt_bias below 0 at A down to −2981,
//     undamped without the clamp: e^{−A·Δ} passes float32's range, and the
//     kernel's ±Inf and NaN fit no slip (ratio +Inf, "none") until the
//     slip's comparison left out what its own reference puts beyond the
//     range (diagnose.SSDStep).
func TestMamba2StepFuzzFindingNamed(t *testing.T) {
	track(t)
	for _, c := range []struct{ file, slip, want string }{
		{"dstate-130-one-slot-of-four", "softplus-log-exp", "dt:softplus-log-exp"},
		{"negative-dt-state-overflows", "no-dt-limit", "dt:no-limit"},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", "fuzz", "FuzzMamba2Step", c.file))
		if err != nil {
			t.Fatal(err)
		}
		data, ok := strings.CutPrefix(string(b), "go test fuzz v1\n[]byte(")
		raw, err := strconv.Unquote(strings.TrimSuffix(strings.TrimSpace(data), ")"))
		if !ok || err != nil {
			t.Fatalf("the corpus file %s: %q (%v)", c.file, b, err)
		}
		s := decodeStep([]byte(raw))
		if ok, _, f, ratio := stepJudge(slipKernel(t, c.slip), s); ok || f.Tag != c.want {
			t.Errorf("%s: step %s with slip %s: passed %v, ratio %.3g, diagnosis [%s] %s, want %s", c.file, stepShape(s), c.slip, ok, ratio, f.Tag, f.Cause, c.want)
		}
	}
}

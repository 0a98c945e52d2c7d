package diagnose

import (
	"math"
	"testing"

	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// narrowStore is a 16-bit library's backward: the reference's gradients
// stored as the ABI says (input-typed ones rounded to nearest in dt, the
// weights' to float32), but for one slip of its storage; its F32 backward
// is right.
type narrowStore struct {
	rightForward
	slip string
}

func (k narrowStore) Backward(p *ssm.Problem, ct *ssm.Cotangent, dt ssm.DType, withInitial bool) (*ssm.Grads, error) {
	g, err := mamba1.ScanGrad(p, ct, withInitial)
	if err != nil {
		return nil, err
	}
	if k.slip == "y16" {
		g.Z = yRoundedDz(p, ct, g, dt)
	}
	for _, f := range g.Fields() {
		for i, v := range f.Values {
			switch {
			case ssm.InputTyped(p, f.Name) && k.slip == "truncate":
				f.Values[i] = towardZero(v, dt)
			case f.Name == "dB" && p.VariableB && k.slip == "groupsum" && dt.Narrow():
				// a sum over channels kept in 16 bits: several ulps off, either way
				f.Values[i] = dt.Round(v * (1 + float64(i%5-2)*0x1p-6))
			case ssm.InputTyped(p, f.Name) || k.slip == "weights16":
				f.Values[i] = dt.Round(v)
			default:
				f.Values[i] = float64(float32(v))
			}
		}
	}
	return g, nil
}

// towardZero is v truncated to the 16-bit type dt (11 or 8 significant
// bits; the subnormals' spacing below the normal range).
func towardZero(v float64, dt ssm.DType) float64 {
	if v == 0 {
		return 0
	}
	bits, sub := 11, ssm.Float16MinSub
	if dt == ssm.BF16 {
		bits, sub = 8, ssm.BFloat16MinSub
	}
	_, e := math.Frexp(math.Abs(v)) // |v| ∈ [2^(e−1), 2^e)
	q := math.Max(math.Ldexp(1, e-bits), sub)
	return math.Copysign(math.Floor(math.Abs(v)/q)*q, v)
}

// TestBackwardNarrowSlips: the diagnosis of each slip of a 16-bit
// backward's storage, and none for a correct one.
func TestBackwardNarrowSlips(t *testing.T) {
	for _, dt := range ssm.NarrowDTypes() {
		p := mamba1.Generate(mamba1.MambaBlock(ssm.ZOH, 1, 4, 64, 4), 3)
		p.RoundTo(dt)
		ct := mamba1.NewCotangent(p, 3, false)
		ct.RoundTo(dt)
		for _, c := range []struct{ slip, tag string }{{"", ""}, {"truncate", "bwd-truncated"}, {"weights16", "bwd-weights-16bit"}, {"y16", "bwd-y-16bit"}, {"groupsum", "bwd-16bit-sum"}} {
			if got := Backward(narrowStore{slip: c.slip}, p, ct, dt).Tag; got != c.tag {
				t.Errorf("%v, slip %q: diagnosis %q, want %q", dt, c.slip, got, c.tag)
			}
		}
	}
}

package diagnose

import (
	"math"
	"strings"
	"testing"

	"ssmverify/judge"
	"ssmverify/mamba2"
	"ssmverify/ssm"
)

// operatorKernel is a fake Mamba-2 prefill written in the operator's form:
// y_t = g(z_t)·(Σ_s mod·C_t·B_s·Δ_s·e^{cum_t − cum_s}·x_s + D·x_t +
// e^{cum_t}·modInit·C_t·h0), the final states the reference's. mod
// plants a slip on the entries of some regions, as a chunked kernel's
// path would; its exponent may be rescaled (exp2 for exp).
type operatorKernel struct {
	mod     func(op *operator, r opRegion, t, s int, bh int) float64
	expC    map[opRegion]float64 // the exponent's scale per region (1 where absent)
	modInit float64
	// negateAll negates every output, D's skip term included
	negateAll bool
	// offset adds a constant to every output
	offset float64
}

func (k operatorKernel) run(p *mamba2.Problem) (*mamba2.Output, error) {
	want, _ := mamba2.Prefill(p)
	out := &mamba2.Output{Y: make([]float64, p.XLen()), FinalStates: want.FinalStates, SeqStates: want.SeqStates}
	op := newSSDOperator(p, 1)
	fam := op.fam.(*ssdFamily)
	L, H, P, N := p.Seqlen, p.Heads, p.Headdim, p.Dstate
	modInit := k.modInit
	if modInit == 0 {
		modInit = 1
	}
	for b := 0; b < p.Batch; b++ {
		for h := 0; h < H; h++ {
			bh := b*H + h
			for pp := 0; pp < P; pp++ {
				for t := 0; t < L; t++ {
					var y float64
					for s := 0; s <= t; s++ {
						r := op.regionOf(t, s)
						if r == regionCrossSeq {
							continue
						}
						c := 1.0
						if v, ok := k.expC[r]; ok {
							c = v
						}
						m := 1.0
						if k.mod != nil {
							m = k.mod(op, r, t, s, bh)
						}
						y += m * fam.cb(b, h, t, s) * op.delta[bh][s] * math.Exp(c*(op.cum[bh][t]-op.cum[bh][s])) * p.X[((b*L+s)*H+h)*P+pp]
					}
					if p.D != nil {
						y += p.D[h] * p.X[((b*L+t)*H+h)*P+pp]
					}
					if p.InitialStates != nil && op.seqOf[t] == 0 {
						g := mamba2.Group(h, H, p.Groups)
						for n := 0; n < N; n++ {
							y += modInit * math.Exp(op.cum[bh][t]) * p.C[((b*L+t)*p.Groups+g)*N+n] * p.InitialStates[((b*H+h)*P+pp)*N+n]
						}
					}
					i := ((b*L+t)*H+h)*P + pp
					if k.negateAll {
						y = -y
					}
					y += k.offset
					if p.Z != nil {
						z := p.Z[i]
						y *= z / (1 + math.Exp(-z))
					}
					out.Y[i] = y
				}
			}
		}
	}
	return out, nil
}

func onRegions(f float64, rs ...opRegion) func(*operator, opRegion, int, int, int) float64 {
	return func(_ *operator, r opRegion, _, _, _ int) float64 {
		if containsRegion(rs, r) {
			return f
		}
		return 1
	}
}

// TestOperatorRelations: slips planted in the operator's regions, none of
// them in the catalogue, are named by their relation and region; a right
// operator has none; noise in a region is reported there as unrelated.
func TestOperatorRelations(t *testing.T) {
	p := mamba2.Generate(mamba2.Options{Batch: 1, Seqlen: 48, Heads: 2, Headdim: 4, Groups: 1, Dstate: 4, Chunk: 16, D: true, InitialStates: true,
		DType: ssm.F64, StateDType: ssm.F64}, 3)
	for _, c := range []struct {
		name string
		k    operatorKernel
		tag  string // "" for a right operator
	}{
		{"right", operatorKernel{}, ""},
		{"own term twice", operatorKernel{mod: onRegions(2, regionDiagonal)}, "op:diagonal:times(2)"},
		{"in-chunk without Δ_s", operatorKernel{mod: func(op *operator, r opRegion, _, s, bh int) float64 {
			if r == regionInChunk || r == regionDiagonal {
				return 1 / op.delta[bh][s]
			}
			return 1
		}}, "op:diagonal+in-chunk:lacks(dt_s)"},
		{"exp2 for exp within a chunk", operatorKernel{expC: map[opRegion]float64{regionInChunk: math.Ln2}}, "op:in-chunk:exp-scaled(0.693147)"},
		{"entering state undecayed", operatorKernel{mod: func(op *operator, r opRegion, t, _, bh int) float64 {
			if r == regionNextChunk || r == regionFar {
				return math.Exp(-op.chunkCum[bh][t])
			}
			return 1
		}}, "op:next-chunk+far:undecayed-entering-state"},
		{"initial state dropped", operatorKernel{modInit: 1e-300}, "op:initial-state:zero"},
		{"the output negated after D", operatorKernel{negateAll: true}, "op:diagonal+in-chunk+next-chunk+far+initial-state:times-with-D(-1)"},
		{"a constant added", operatorKernel{offset: 0.5}, "op:offset"},
		{"NaN across chunks", operatorKernel{mod: onRegions(math.NaN(), regionNextChunk, regionFar)}, "op:next-chunk:non-finite"},
		{"noise across chunks", operatorKernel{mod: func(_ *operator, r opRegion, t, s, _ int) float64 {
			if r == regionNextChunk {
				return 1 + 0.3*math.Sin(float64(7*t+3*s))
			}
			return 1
		}}, "op:next-chunk:unrelated"},
	} {
		t.Run(c.name, func(t *testing.T) {
			op, err := measureSSDOperator(p, c.k.run)
			wantOperatorTag(t, op, err, p.DType, c.tag)
		})
	}
}

// wantOperatorTag diagnoses a measured operator and wants tag ("": none,
// a right operator) with the measurement's evidence.
func wantOperatorTag(t *testing.T, op *operator, err error, dt ssm.DType, tag string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	f, ok := op.diagnose(judge.Threshold(dt))
	if tag == "" {
		if ok {
			t.Fatalf("a right operator diagnosed [%s] %s", f.Tag, f.Cause)
		}
		return
	}
	if !ok || f.Tag != tag {
		t.Fatalf("diagnosed [%s] %s (where %s), want %s", f.Tag, f.Cause, f.Where, tag)
	}
	if !strings.Contains(f.Where, "calls, impulses") {
		t.Errorf("no evidence of the measurement: %s", f.Where)
	}
}

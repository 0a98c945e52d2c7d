package mamba1

import (
	"strconv"

	"ssmverify/ssm"

	"pgregory.net/rapid"
)

// Limits bounds the Specs that Specs draws.
type Limits struct {
	MaxBatch, MaxDim, MaxSeqlen, MaxDstate int
	// ExtraDstate are further dstate values drawn now and then besides
	// 1…MaxDstate (a library's maximum, say).
	ExtraDstate []int
	// Methods to draw from; nil means all six.
	Methods []ssm.Method
	// Complex: 0 draws real and complex, 1 only real, 2 only complex.
	Complex int
	// Dists to draw from; nil means both.
	Dists []Dist
}

// Small are the limits of the reference's own property tests.
var Small = Limits{MaxBatch: 2, MaxDim: 6, MaxSeqlen: 40, MaxDstate: 8}

// Specs draws a Spec within l. Every draw shrinks towards the smallest and
// simplest case: batch 1, dim 1, seqlen 1, dstate 1, zoh, real, constant B
// and C, no features, realistic inputs.
func Specs(l Limits) *rapid.Generator[Spec] {
	methods := l.Methods
	if methods == nil {
		methods = ssm.Methods()
	}
	dists := l.Dists
	if dists == nil {
		dists = []Dist{Realistic, Stress}
	}
	return rapid.Custom(func(t *rapid.T) Spec {
		var s Spec
		s.Method = rapid.SampledFrom(methods).Draw(t, "method")
		switch l.Complex {
		case 1:
			s.Complex = false
		case 2:
			s.Complex = true
		default:
			s.Complex = rapid.Bool().Draw(t, "complex")
		}
		s.Dist = rapid.SampledFrom(dists).Draw(t, "dist")
		s.Batch = rapid.IntRange(1, l.MaxBatch).Draw(t, "batch")
		s.Dim = rapid.IntRange(1, l.MaxDim).Draw(t, "dim")
		s.Seqlen = rapid.IntRange(1, l.MaxSeqlen).Draw(t, "seqlen")
		s.Dstate = rapid.IntRange(1, l.MaxDstate).Draw(t, "dstate")
		if len(l.ExtraDstate) > 0 && rapid.IntRange(0, 7).Draw(t, "extra-dstate?") == 7 {
			s.Dstate = rapid.SampledFrom(l.ExtraDstate).Draw(t, "extra-dstate")
		}
		var divisors []int
		for g := 1; g <= s.Dim; g++ {
			if s.Dim%g == 0 {
				divisors = append(divisors, g)
			}
		}
		s.Groups = rapid.SampledFrom(divisors).Draw(t, "groups")
		s.VariableB = rapid.Bool().Draw(t, "variableB")
		s.VariableC = rapid.Bool().Draw(t, "variableC")
		s.Softplus = rapid.Bool().Draw(t, "softplus")
		s.HasD = rapid.Bool().Draw(t, "D")
		s.HasZ = rapid.Bool().Draw(t, "z")
		s.HasBias = rapid.Bool().Draw(t, "bias")
		return s
	})
}

// Problems draws a Spec within l and a seed, and returns the problem with
// both; the seed shrinks towards 0.
func Problems(l Limits) *rapid.Generator[Case] {
	specs := Specs(l)
	return rapid.Custom(func(t *rapid.T) Case {
		s := specs.Draw(t, "spec")
		seed := rapid.Uint64().Draw(t, "seed")
		return Case{Spec: s, Seed: seed, Problem: Generate(s, seed)}
	})
}

// Case is a drawn problem with what reproduces it: Generate(c.Spec, c.Seed).
type Case struct {
	Spec    Spec
	Seed    uint64
	Problem *ssm.Problem
}

func (c Case) String() string { return c.Spec.String() + " seed=" + strconv.FormatUint(c.Seed, 10) }

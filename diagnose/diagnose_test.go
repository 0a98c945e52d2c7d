package diagnose

import (
	"errors"
	"math"
	"math/cmplx"
	"strings"
	"testing"

	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// fake is a kernel with a planted bug: the scan of transform(p) by the
// reference, or mamba1.EditedScan's edit of p (of transform(p), with both: two
// bugs), rounded to float32 for F32.
type fake struct {
	transform func(p *ssm.Problem) *ssm.Problem
	edit      *mamba1.Edit
}

func (f fake) Scan(p *ssm.Problem, dt ssm.DType) (*ssm.Output, error) {
	var o *ssm.Output
	var err error
	switch {
	case f.edit != nil && f.transform != nil:
		o = mamba1.EditedScan(f.transform(p), *f.edit)
	case f.edit != nil:
		o = mamba1.EditedScan(p, *f.edit)
	case f.transform != nil:
		o, err = mamba1.Scan(f.transform(p), ssm.Float64)
	default:
		o, err = mamba1.Scan(p, ssm.Float64)
	}
	if err == nil && dt == ssm.F32 {
		for _, s := range [][]float64{o.Out, o.LastState} {
			for i, v := range s {
				s[i] = float64(float32(v))
			}
		}
	}
	return o, err
}

func problem(m ssm.Method, isComplex bool, tweak func(*mamba1.Spec)) *ssm.Problem {
	s := mamba1.Spec{Batch: 2, Dim: 6, Seqlen: 40, Dstate: 5, Groups: 3, Method: m, Complex: isComplex, VariableB: true, VariableC: true,
		Softplus: true, HasD: true, HasZ: true, HasBias: true, Dist: mamba1.Realistic}
	if tweak != nil {
		tweak(&s)
	}
	p := mamba1.Generate(s, 3)
	p.RoundToFloat32()
	return p
}

func coefBug(m ssm.Method, f func(x, ab, g complex128) (complex128, complex128)) *mamba1.Edit {
	return &mamba1.Edit{Coef: func(x complex128) (complex128, complex128) {
		ab, g := mamba1.Coef(m, true, x)
		return f(x, ab, g)
	}}
}

// TestScanNamesPlantedCauses: each planted bug is diagnosed with its
// cause, in fp32 and fp64, real and complex A where the bug applies.
func TestScanNamesPlantedCauses(t *testing.T) {
	constB := func(s *mamba1.Spec) { s.VariableB = false }
	for _, c := range []struct {
		tag     string
		m       ssm.Method
		complex bool
		tweak   func(*mamba1.Spec)
		kernel  fake
	}{
		{"no-D", ssm.ZOH, false, nil, fake{transform: func(p *ssm.Problem) *ssm.Problem { return edited(p, func(q *ssm.Problem) { q.D = nil }) }}},
		{"softplus-before-bias", ssm.FOH, false, nil, fake{transform: catalogued(ssm.FOH, "softplus-before-bias").Transform}},
		{"group-index", ssm.ZOH, true, nil, fake{transform: catalogued(ssm.ZOH, "group-index").Transform}},
		{"output-before-update", ssm.RK4, false, nil, fake{edit: &mamba1.Edit{OutBeforeUpdate: true}}},
		{"gate-no-z", ssm.Poly, false, nil, fake{edit: &mamba1.Edit{GateNoZ: true}}},
		{"complex-factor-2", ssm.ZOH, true, nil, fake{edit: &mamba1.Edit{NoFactor2: true}}},
		{"state-without-B", ssm.ZOH, false, constB, fake{edit: &mamba1.Edit{StateWithoutB: true}}},
		{"method:zoh", ssm.RK4, true, nil, fake{transform: func(p *ssm.Problem) *ssm.Problem {
			return edited(p, func(q *ssm.Problem) { q.Method = ssm.ZOH })
		}}},
		{"bilinear-sign", ssm.Bilinear, false, nil, fake{edit: coefBug(ssm.Bilinear, func(x, _, _ complex128) (complex128, complex128) {
			return (1 - x/2) / (1 + x/2), 1 / (1 + x/2)
		})}},
		{"exp-scaled", ssm.ZOH, false, nil, fake{edit: coefBug(ssm.ZOH, func(x, _, g complex128) (complex128, complex128) {
			return cmplx.Exp(x * 1.0001), g
		})}},
		{"phase-scaled", ssm.FOH, true, nil, fake{edit: coefBug(ssm.FOH, func(x, _, g complex128) (complex128, complex128) {
			return cmplx.Exp(complex(real(x), math.Log2E*imag(x))), g
		})}},
		{"g-term:x^2", ssm.RK4, false, nil, fake{edit: coefBug(ssm.RK4, func(x, ab, g complex128) (complex128, complex128) {
			return ab, g + x*x/3
		})}},
		{"phi1-no-guard", ssm.FOH, false, func(s *mamba1.Spec) { s.Dstate = 1 }, fake{edit: coefBug(ssm.FOH, func(x, ab, g complex128) (complex128, complex128) {
			return ab, (cmplx.Exp(x) - 1) / x
		})}},
		{"delta-power", ssm.ZOH, false, nil, fake{edit: &mamba1.Edit{BCoef: func(x complex128, dt float64) complex128 { return 1 }}}},
		{"taylor:phi2/4·Δ^1", ssm.FOH, false, nil, fake{edit: &mamba1.Edit{BCoef: func(x complex128, dt float64) complex128 {
			return complex(dt*dt, 0) * (0.5 + x/6 + x*x/24 + x*x*x/120) // a first-order hold's A⁻²(e^{ΔA} − I − ΔA), truncated
		}}}},
		{"g-not-of-x", ssm.Poly, false, nil, fake{edit: &mamba1.Edit{BCoef: func(x complex128, dt float64) complex128 {
			return complex(dt, 0) * (1 + x/2 + complex(dt/4, 0)) // a term in Δ alone
		}}}},
		{"input-without-u", ssm.RK4, false, nil, fake{edit: &mamba1.Edit{Extra: func(x complex128, dt float64) complex128 {
			return complex(dt, 0) * x / 2 // Δ²·a·B/2 added whatever u is
		}}}},
	} {
		for _, dt := range ssm.DTypes() {
			p := problem(c.m, c.complex, c.tweak)
			if c.tag == "phi1-no-guard" {
				p.A[0] = 0 // x = 0 in channel 0
			}
			f := Scan(c.kernel, p, dt)
			if f.Tag != c.tag {
				t.Errorf("%s %v: diagnosed %q: %s", c.tag, dt, f.Tag, f)
			}
		}
	}
}

// TestScanCorrectKernel: a correct kernel does not reproduce a failure.
func TestScanCorrectKernel(t *testing.T) {
	f := Scan(fake{}, problem(ssm.FOH, true, nil), ssm.F64)
	if f.Tag != "" || !strings.Contains(f.Cause, "does not reproduce") {
		t.Fatalf("a correct kernel diagnosed %q: %s", f.Tag, f)
	}
}

// TestScanSaysWhenNothingFits: noise that no slip explains is reported as
// such, with where it shows.
func TestScanSaysWhenNothingFits(t *testing.T) {
	noisy := fake{edit: &mamba1.Edit{Coef: func(x complex128) (complex128, complex128) {
		ab, g := mamba1.Coef(ssm.ZOH, true, x)
		return ab * complex(1+1e-3*math.Sin(37*real(x)), 0), g
	}}}
	f := Scan(noisy, problem(ssm.ZOH, false, nil), ssm.F64)
	if f.Tag != "abar-unknown" || !strings.Contains(f.Where, "out wrong") {
		t.Fatalf("diagnosed %q: %s", f.Tag, f)
	}
}

// TestNeedsFindsFeature: ablation names the feature the bug needs.
func TestNeedsFindsFeature(t *testing.T) {
	k := fake{transform: func(p *ssm.Problem) *ssm.Problem { return edited(p, func(q *ssm.Problem) { q.D = nil }) }}
	f := Scan(k, problem(ssm.ZOH, false, nil), ssm.F32)
	if len(f.Needs) != 1 || f.Needs[0] != "D" {
		t.Fatalf("needs %v, want [D]", f.Needs)
	}
}

// TestRatioPattern: a state scaled by 1/B is recognised as following B.
func TestRatioPattern(t *testing.T) {
	p := problem(ssm.ZOH, false, func(s *mamba1.Spec) { s.VariableB = false })
	ref, _ := mamba1.Scan(p, ssm.Float64)
	got := mamba1.EditedScan(p, mamba1.Edit{StateWithoutB: true})
	if tag, r := ratioPattern(p, got, ref); tag != "state-ratio:B[d][n]" || !strings.Contains(r, "B[d][n]") {
		t.Fatalf("ratio pattern [%s] %q, want state-ratio:B[d][n]", tag, r)
	}
}

// TestPrefixIsValid: a prefix of a problem is a valid problem of the
// prefix's shape.
func TestPrefixIsValid(t *testing.T) {
	p := problem(ssm.FOH, true, nil)
	q := Prefix(p, 1, 7, 2)
	if err := q.Validate(); err != nil {
		t.Fatal(err)
	}
	part, _ := mamba1.Scan(q, ssm.Float64)
	if len(part.Out) != q.Dim*7 {
		t.Fatalf("len(out) = %d", len(part.Out))
	}
}

// limited refuses problems with more than maxDim channels, as a kernel
// with a grid limit does.
type limited struct {
	fake
	maxDim int
}

func (l limited) Scan(p *ssm.Problem, dt ssm.DType) (*ssm.Output, error) {
	if p.Dim > l.maxDim {
		return nil, errors.New("invalid configuration argument")
	}
	return l.fake.Scan(p, dt)
}

// TestRefusalNamesTheSize: a refusal is explained by the one reduction
// that makes the kernel accept the problem.
func TestRefusalNamesTheSize(t *testing.T) {
	p := problem(ssm.ZOH, false, nil)
	f := Scan(limited{maxDim: 4}, p, ssm.F64)
	if f.Tag != "refusal:dim" || !strings.Contains(f.String(), "dim 6 → 4") {
		t.Fatalf("diagnosed %q: %s", f.Tag, f)
	}
	one := problem(ssm.ZOH, true, func(s *mamba1.Spec) { s.Groups = 1 })
	if f := Scan(limited{maxDim: 3}, one, ssm.F64); f.Tag != "refusal:dim" || !strings.Contains(f.String(), "dim 6 → 3") {
		t.Fatalf("one group: diagnosed %q: %s", f.Tag, f)
	}
	if f := Scan(limited{maxDim: 1}, p, ssm.F64); f.Tag != "refusal" {
		t.Fatalf("nothing makes it accept, diagnosed %q: %s", f.Tag, f)
	}
}

// TestFirstChannels: channels are independent, so the first n channels'
// reference is the full reference's.
func TestFirstChannels(t *testing.T) {
	p := problem(ssm.FOH, true, nil) // 6 channels in 3 groups
	q := firstChannels(p, 4)
	full, err := mamba1.Scan(p, ssm.Float64)
	if err != nil {
		t.Fatal(err)
	}
	part, err := mamba1.Scan(q, ssm.Float64)
	if err != nil {
		t.Fatal(err)
	}
	for b := 0; b < p.Batch; b++ {
		for i := 0; i < 4*p.Seqlen; i++ {
			if part.Out[b*4*p.Seqlen+i] != full.Out[b*p.Dim*p.Seqlen+i] {
				t.Fatalf("batch %d element %d: %g, want %g", b, i, part.Out[b*4*p.Seqlen+i], full.Out[b*p.Dim*p.Seqlen+i])
			}
		}
	}
}

// TestNarrowArithmetic: a float32 error of fp16's size is named, one of a
// wrong formula's size is not; non-finite results where the reference
// exceeds 65504 are an fp16 overflow, where it exceeds float32's range not.
func TestNarrowArithmetic(t *testing.T) {
	if tag, _, ok := narrowArithmetic(ssm.F32, 345); !ok || tag != "narrow:11-bit" {
		t.Fatalf("ratio 345 in fp32: %q %t, want narrow:11-bit", tag, ok)
	}
	if tag, _, ok := narrowArithmetic(ssm.F32, 1e5); !ok || tag != "narrow:8-bit" {
		t.Fatalf("ratio 1e5 in fp32: %q %t, want narrow:8-bit", tag, ok)
	}
	if _, _, ok := narrowArithmetic(ssm.F32, 1e7); ok {
		t.Fatal("ratio 1e7 explained as rounding")
	}
	if tag, _, ok := narrowArithmetic(ssm.F64, 1e8); !ok || tag != "narrow:24-bit" {
		t.Fatalf("ratio 1e8 in fp64: %q %t", tag, ok)
	}
	ref := &ssm.Output{Out: []float64{1, -9.2e7}}
	if tag, _, ok := halfOverflow(ssm.F32, 2, ref); !ok || tag != "narrow:fp16-overflow" {
		t.Fatalf("fp16 overflow not named: %q", tag)
	}
	if _, _, ok := halfOverflow(ssm.F32, 2, &ssm.Output{Out: []float64{1, 6e4}}); ok {
		t.Fatal("an overflow named where every result fits fp16")
	}
	if _, _, ok := halfOverflow(ssm.F32, 0, ref); ok {
		t.Fatal("an overflow named without non-finite results")
	}
}

// TestResumption: pieces replayed with each mistake in taking the initial
// state are named by that mistake (real and complex A, two methods); the
// correct pieces by none.
func TestResumptionSlips(t *testing.T) {
	for _, isComplex := range []bool{false, true} {
		for _, m := range []ssm.Method{ssm.ZOH, ssm.Bilinear} {
			p := mamba1.Generate(mamba1.Spec{Batch: 3, Dim: 2, Seqlen: 30, Dstate: 3, Groups: 1, Method: m, Complex: isComplex,
				VariableB: true, VariableC: true, Softplus: true, HasD: true, HasZ: true, HasBias: true, Dist: mamba1.Realistic}, 5)
			mamba1.SetInitialState(p, 6)
			cuts := []int{0, 7, 8, 20, 30}
			for _, sl := range stateSlips {
				got, err := replay(p, cuts, sl)
				if err != nil {
					t.Fatal(err)
				}
				if f := Resumption(p, got, ssm.F64, cuts); f.Tag != sl.tag {
					t.Errorf("%v %s: planted %s, diagnosed %s (%s)", m, ssm.AKind(isComplex), sl.tag, f.Tag, f.Cause)
				}
			}
			right, err := replay(p, cuts, stateSlip{edit: func(_ *ssm.Problem, h []float64) []float64 { return h }})
			if err != nil {
				t.Fatal(err)
			}
			if f := Resumption(p, right, ssm.F64, cuts); f.Tag != "none" {
				t.Errorf("%v %s: correct pieces diagnosed %s", m, ssm.AKind(isComplex), f.Tag)
			}
		}
	}
}

// TestScanNamesRowStructure: a failure no slip fits is read by which rows
// fail — variable B of later batch entries read from the wrong offset,
// later groups' B shifted, D wrong past the first channel, the last row's
// input spoiled — and named by the relation (offset:batch, offset:group,
// offset:channel, offset:last-row), not left as none.
func TestScanNamesRowStructure(t *testing.T) {
	shiftB := func(from func(p *ssm.Problem, b, g int) bool) func(p *ssm.Problem) *ssm.Problem {
		return func(p *ssm.Problem) *ssm.Problem {
			return edited(p, func(q *ssm.Problem) {
				if !q.VariableB {
					return // the probes' problems with constant B: no offset to get wrong
				}
				blk := q.Dstate * q.Seqlen // one (batch, group)'s block of B
				for b := 0; b < q.Batch; b++ {
					for g := 0; g < q.Groups; g++ {
						if from(q, b, g) {
							off := (b*q.Groups + g) * blk
							for i := 0; i < blk; i++ { // read one step late: a wrong offset
								q.B[off+i] = p.B[off+(i+1)%blk]
							}
						}
					}
				}
			})
		}
	}
	for _, c := range []struct {
		tag    string
		kernel fake
	}{
		{"offset:batch", fake{transform: shiftB(func(_ *ssm.Problem, b, _ int) bool { return b > 0 })}},
		{"offset:group", fake{transform: shiftB(func(_ *ssm.Problem, _, g int) bool { return g > 0 })}},
		{"offset:channel", fake{transform: func(p *ssm.Problem) *ssm.Problem {
			return edited(p, func(q *ssm.Problem) {
				for d := 1; d < len(q.D); d++ {
					q.D[d] = q.D[0] // D read from channel 0 for every channel
				}
			})
		}}},
		{"offset:last-row", fake{transform: func(p *ssm.Problem) *ssm.Problem {
			return edited(p, func(q *ssm.Problem) {
				if q.Batch*q.Dim == 12 { // the problem's own rows, not the probes' single ones
					q.U[len(q.U)-1] += 1 // the last row's last input spoiled: the end of a buffer
				}
			})
		}}},
	} {
		p := problem(ssm.ZOH, false, nil)
		f := Scan(c.kernel, p, ssm.F64)
		if f.Tag != c.tag {
			t.Errorf("%s: diagnosed [%s] %s", c.tag, f.Tag, f)
		}
	}
}

// catalogued is the slip of method m's catalogue tagged tag.
func catalogued(m ssm.Method, tag string) mamba1.Slip {
	for _, s := range mamba1.Slips(m) {
		if s.Tag == tag {
			return s
		}
	}
	panic("no slip " + tag)
}

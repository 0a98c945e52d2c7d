package golden

import (
	"fmt"
	"math"
	"math/big"
	"sync"

	"ssmverify/ssm"
)

// The golden outputs come from a derivation that shares no code with
// package mamba1: the ABI's scan (cudalib/include/ssmk.h) evaluated in
// 256-bit binary floating point with math/big, from the float64 inputs
// taken as exact, with its own exp, log, sin and cos by series, rounded to
// float64 once at the end. Its error is far below float64's last place, so
// every golden output is the correctly rounded value of the exact scan up
// to the series' truncation (below 2⁻²⁵⁰ relative) and the boundary cases
// of one rounding; TestGoldenReferenceReproduces then holds the float64
// reference to the files within its own error model, and a slip in the
// reference (a sign, a term, a flag) shows there.

// exactPrec is the working precision in bits.
const exactPrec = 256

// bf returns a new float of the working precision holding v.
func bf(v float64) *big.Float { return new(big.Float).SetPrec(exactPrec).SetFloat64(v) }

func bnew() *big.Float                { return new(big.Float).SetPrec(exactPrec) }
func badd(a, b *big.Float) *big.Float { return bnew().Add(a, b) }
func bsub(a, b *big.Float) *big.Float { return bnew().Sub(a, b) }
func bmul(a, b *big.Float) *big.Float { return bnew().Mul(a, b) }
func bquo(a, b *big.Float) *big.Float { return bnew().Quo(a, b) }

// negligible reports whether term is below 2⁻⁽ᵖʳᵉᶜ⁺²⁰⁾ of sum: a series
// may stop.
func negligible(term, sum *big.Float) bool {
	if term.Sign() == 0 {
		return true
	}
	if sum.Sign() == 0 {
		return false
	}
	return term.MantExp(nil)-sum.MantExp(nil) < -(exactPrec + 20)
}

var (
	constOnce sync.Once
	ln2, pi   *big.Float
)

// constants computes ln 2 = Σ 1/(k·2ᵏ) and π = 16·atan(1/5) − 4·atan(1/239)
// (Machin), with 64 guard bits.
func constants() {
	constOnce.Do(func() {
		p := uint(exactPrec + 64)
		nf := func(v float64) *big.Float { return new(big.Float).SetPrec(p).SetFloat64(v) }
		ln2 = nf(0)
		for k := 1; ; k++ {
			t := new(big.Float).SetPrec(p).Quo(nf(1), new(big.Float).SetPrec(p).SetMantExp(nf(float64(k)), k))
			ln2.Add(ln2, t)
			if negligible(t, ln2) {
				break
			}
		}
		atanInv := func(n float64) *big.Float { // atan(1/n) = Σ (−1)ᵏ/((2k+1)·n^(2k+1))
			s, pw := nf(0), new(big.Float).SetPrec(p).Quo(nf(1), nf(n))
			n2 := nf(n * n)
			for k := 0; ; k++ {
				t := new(big.Float).SetPrec(p).Quo(pw, nf(float64(2*k+1)))
				if k%2 == 1 {
					t.Neg(t)
				}
				s.Add(s, t)
				if negligible(t, s) {
					return s
				}
				pw.Quo(pw, n2)
			}
		}
		pi = new(big.Float).SetPrec(p).Sub(new(big.Float).SetPrec(p).Mul(nf(16), atanInv(5)), new(big.Float).SetPrec(p).Mul(nf(4), atanInv(239)))
	})
}

// bexp is eˣ: x = k·ln 2 + r with |r| ≤ ln 2/2, e^r by its series at
// r/2¹⁶ then squared 16 times, times 2ᵏ. ok is false where eˣ leaves
// float64's range by far (the caller decides what that means).
func bexp(x *big.Float) (e *big.Float, ok bool) {
	constants()
	xf, _ := x.Float64()
	switch {
	case x.Sign() == 0:
		return bf(1), true
	case xf < -1e6:
		return bf(0), true // below 2⁻¹⁴⁰⁰⁰⁰⁰: exactly 0 to any float64 product of the scan
	case xf > 1e6:
		return nil, false
	}
	k := math.Round(xf / math.Ln2)
	r := bsub(x, bmul(bf(k), ln2))
	r.SetMantExp(r, -16)
	sum, term := bf(1), bf(1)
	for n := 1; ; n++ {
		term = bquo(bmul(term, r), bf(float64(n)))
		sum = badd(sum, term)
		if negligible(term, sum) {
			break
		}
	}
	for i := 0; i < 16; i++ {
		sum = bmul(sum, sum)
	}
	return sum.SetMantExp(sum, int(k)), true
}

// blog is ln y for y > 0, by Halley's iteration z ← z + 2(y − eᶻ)/(y + eᶻ)
// from float64's log (53 → 159 → 477 bits).
func blog(y *big.Float) *big.Float {
	yf, _ := y.Float64()
	z := bf(math.Log(yf))
	for i := 0; i < 3; i++ {
		e, _ := bexp(z)
		z = badd(z, bquo(bmul(bf(2), bsub(y, e)), badd(y, e)))
	}
	return z
}

// bsincos is (sin θ, cos θ): θ = q·π/2 + r, |r| ≤ π/4, by the series, then
// the quadrant.
func bsincos(theta *big.Float) (s, c *big.Float) {
	constants()
	tf, _ := theta.Float64()
	q := math.Round(tf / (math.Pi / 2))
	half := new(big.Float).SetPrec(pi.Prec()).SetMantExp(pi, -1)
	r := new(big.Float).SetPrec(exactPrec+64+uint(max(0, math.Ilogb(q)+1))).Sub(theta, new(big.Float).Mul(bf(q), half))
	r.SetPrec(exactPrec)
	sinR, cosR := bf(0), bf(0)
	term := bf(1) // r^k/k!
	for k := 0; ; k++ {
		if k > 0 {
			term = bquo(bmul(term, r), bf(float64(k)))
		}
		if k%2 == 0 {
			if k%4 == 2 {
				cosR = bsub(cosR, term)
			} else {
				cosR = badd(cosR, term)
			}
		} else if k%4 == 3 {
			sinR = bsub(sinR, term)
		} else {
			sinR = badd(sinR, term)
		}
		if k > 2 && negligible(term, bf(1)) {
			break
		}
	}
	switch ((int64(q) % 4) + 4) % 4 {
	case 1:
		return cosR, bnew().Neg(sinR)
	case 2:
		return bnew().Neg(sinR), bnew().Neg(cosR)
	case 3:
		return bnew().Neg(cosR), sinR
	}
	return sinR, cosR
}

// bc is a complex number of big floats.
type bc struct{ re, im *big.Float }

func bcOf(re, im float64) bc { return bc{bf(re), bf(im)} }
func (a bc) add(b bc) bc     { return bc{badd(a.re, b.re), badd(a.im, b.im)} }
func (a bc) sub(b bc) bc     { return bc{bsub(a.re, b.re), bsub(a.im, b.im)} }
func (a bc) mul(b bc) bc {
	return bc{bsub(bmul(a.re, b.re), bmul(a.im, b.im)), badd(bmul(a.re, b.im), bmul(a.im, b.re))}
}
func (a bc) scale(s *big.Float) bc { return bc{bmul(a.re, s), bmul(a.im, s)} }
func (a bc) zero() bool            { return a.re.Sign() == 0 && a.im.Sign() == 0 }

// quo is a/b, exactly as (a·b̄)/|b|² (no scaling is needed at 256 bits
// with big's exponent range).
func (a bc) quo(b bc) (bc, error) {
	d := badd(bmul(b.re, b.re), bmul(b.im, b.im))
	if d.Sign() == 0 {
		return bc{}, fmt.Errorf("a division by zero (the bilinear pole x = 2)")
	}
	n := a.mul(bc{b.re, bnew().Neg(b.im)})
	return bc{bquo(n.re, d), bquo(n.im, d)}, nil
}

// cexp is eˣ for complex x.
func cexp(x bc) (bc, error) {
	m, ok := bexp(x.re)
	if !ok {
		return bc{}, fmt.Errorf("e^x overflows: Re x = %.6g", x.re)
	}
	if x.im.Sign() == 0 || m.Sign() == 0 {
		return bc{m, bf(0)}, nil
	}
	s, c := bsincos(x.im)
	return bc{bmul(m, c), bmul(m, s)}, nil
}

// exactMethod is (Ā, g) of method m at x, the header's table.
func exactMethod(m ssm.Method, x bc) (abar, g bc, err error) {
	one, half := bcOf(1, 0), bf(0.5)
	if m == ssm.Bilinear {
		den := one.sub(x.scale(half))
		if g, err = one.quo(den); err != nil {
			return
		}
		abar = one.add(x.scale(half)).mul(g)
		return
	}
	if abar, err = cexp(x); err != nil {
		return
	}
	poly := func(c ...float64) bc { // Σ cₖ·xᵏ by Horner's rule
		p := bcOf(c[len(c)-1], 0)
		for k := len(c) - 2; k >= 0; k-- {
			p = p.mul(x).add(bcOf(c[k], 0))
		}
		return p
	}
	switch m {
	case ssm.ZOH:
		g = one
	case ssm.FOH:
		if x.zero() {
			g = one
		} else {
			g, err = abar.sub(one).quo(x)
		}
	case ssm.Poly:
		g = poly(1, 0.5, 1.0/6)
	case ssm.HighOrder:
		g = poly(1, 0.5)
	case ssm.RK4:
		g = poly(1, 0.5, 1.0/6, 1.0/24)
	default:
		err = fmt.Errorf("unknown method %v", m)
	}
	return
}

// ExactScan is the ABI's forward scan of p in 256-bit arithmetic, rounded
// to float64 once (see the top of this file).
func ExactScan(p *ssm.Problem) (*ssm.Output, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	ys, hs, err := exactScan(p, nil)
	if err != nil {
		return nil, err
	}
	out := &ssm.Output{Out: make([]float64, len(ys)), LastState: make([]float64, p.StateLen())}
	for i, y := range ys {
		out.Out[i], _ = y.Float64()
	}
	for k, h := range hs {
		if p.Complex {
			out.LastState[2*k], _ = h.re.Float64()
			out.LastState[2*k+1], _ = h.im.Float64()
		} else {
			out.LastState[k], _ = h.re.Float64()
		}
	}
	return out, nil
}

// inputs gives the exact value of element i of the named input array
// ("U", "Delta", "A", …, as ssm.Problem's fields): the float64 value,
// plus, for a perturbation, eps·v[i] on the one array it perturbs (the
// finite differences of the exact scan).
type inputs struct {
	field string
	v     []float64
	eps   *big.Float
}

func (in *inputs) at(field string, s []float64, i int) *big.Float {
	x := bf(s[i])
	if in != nil && in.field == field {
		x = badd(x, bmul(in.eps, bf(in.v[i])))
	}
	return x
}

// exactScan is ExactScan before its rounding: every output and last state
// in 256 bits, from the inputs as pert gives them (nil: as they are).
func exactScan(p *ssm.Problem, pert *inputs) ([]*big.Float, []bc, error) {
	B, D, L, N := p.Batch, p.Dim, p.Seqlen, p.Dstate
	elem := func(field string, v []float64, i int) bc {
		if p.Complex {
			return bc{pert.at(field, v, 2*i), pert.at(field, v, 2*i+1)}
		}
		return bc{pert.at(field, v, i), bf(0)}
	}
	ys := make([]*big.Float, B*D*L)
	last := make([]bc, B*D*N)
	perGroup := D / p.Groups
	h := make([]bc, N)
	for b := 0; b < B; b++ {
		for d := 0; d < D; d++ {
			grp := d / perGroup
			for n := range h {
				h[n] = bcOf(0, 0)
				if p.InitialState != nil {
					h[n] = elem("InitialState", p.InitialState, (b*D+d)*N+n)
				}
			}
			for t := 0; t < L; t++ {
				i := (b*D+d)*L + t
				dt := pert.at("Delta", p.Delta, i)
				if p.DeltaBias != nil {
					dt = badd(dt, pert.at("DeltaBias", p.DeltaBias, d))
				}
				if p.Softplus && dt.Cmp(bf(20)) <= 0 {
					e, _ := bexp(dt) // dt ≤ 20: finite
					dt = blog(badd(bf(1), e))
				}
				u := pert.at("U", p.U, i)
				y := bcOf(0, 0)
				for n := 0; n < N; n++ {
					abar, g, err := exactMethod(p.Method, elem("A", p.A, d*N+n).scale(dt))
					if err != nil {
						return nil, nil, fmt.Errorf("golden: exact scan at b=%d d=%d t=%d n=%d: %w", b, d, t, n, err)
					}
					bi, ci := d*N+n, d*N+n
					if p.VariableB {
						bi = ((b*p.Groups+grp)*N+n)*L + t
					}
					if p.VariableC {
						ci = ((b*p.Groups+grp)*N+n)*L + t
					}
					h[n] = abar.mul(h[n]).add(g.scale(bmul(dt, u)).mul(elem("B", p.B, bi)))
					y = y.add(elem("C", p.C, ci).mul(h[n]))
				}
				yr := y.re
				if p.Complex {
					yr = bmul(bf(2), yr)
				}
				if p.D != nil {
					yr = badd(yr, bmul(pert.at("D", p.D, d), u))
				}
				if p.Z != nil {
					z := pert.at("Z", p.Z, i)
					e, ok := bexp(bnew().Neg(z))
					if ok {
						yr = bquo(bmul(yr, z), badd(bf(1), e))
					} else {
						yr = bf(0) // sigmoid(z) = 0 beyond e^1e6: z·sigmoid(z) is 0 to float64
					}
				}
				ys[i] = yr
			}
			copy(last[(b*D+d)*N:], h)
		}
	}
	return ys, last, nil
}

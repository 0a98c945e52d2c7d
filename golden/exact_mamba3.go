package golden

import (
	"math/big"

	"ssmverify/mamba3"
)

// ExactMamba3 is Mamba-3's SISO forward (package mamba3's documentation,
// the kernels' step reference) in 256-bit arithmetic from the float64
// inputs taken as exact, with this package's own exp, sin and cos, tanh
// as 1 − 2/(e^{2x} + 1) and σ as bsigmoid, the angle reduced modulo 2π with
// an exact floor; every output rounded once to float64. It shares no code
// with mamba3.Forward.
func ExactMamba3(p *mamba3.Problem) ([]float64, *mamba3.State) {
	constants()
	L, H, Hqk, N, P, A := p.Seqlen, p.Heads, p.HeadsQK, p.N, p.P, p.AngleDim
	twoPi := bmul(bf(2), pi)
	tanh := func(x float64) *big.Float {
		e, ok := bexp(bmul(bf(2), bf(x)))
		if !ok {
			return bf(1)
		}
		return bsub(bf(1), bquo(bf(2), badd(e, bf(1))))
	}
	floor := func(x *big.Float) *big.Float {
		i, acc := x.Int(nil)
		if x.Sign() < 0 && acc != big.Exact {
			i.Sub(i, big.NewInt(1))
		}
		return bnew().SetInt(i)
	}
	f64 := func(x *big.Float) float64 { v, _ := x.Float64(); return v }
	S := p.NumSeqs()
	y := make([]float64, p.Batch*L*H*P)
	fin := &mamba3.State{Angle: make([]float64, S*H*A), SSM: make([]float64, S*H*P*N), K: make([]float64, S*H*N), V: make([]float64, S*H*P)}
	var seqs [][3]int
	if p.CuSeqlens != nil {
		for i := 0; i+1 < len(p.CuSeqlens); i++ {
			seqs = append(seqs, [3]int{0, p.CuSeqlens[i], p.CuSeqlens[i+1]})
		}
	} else {
		for b := 0; b < p.Batch; b++ {
			seqs = append(seqs, [3]int{b, 0, L})
		}
	}
	for si, sq := range seqs {
		b := sq[0]
		for h := 0; h < H; h++ {
			g := h / (H / Hqk)
			phi, kp, vp := make([]*big.Float, A), make([]*big.Float, N), make([]*big.Float, P)
			st := make([]*big.Float, P*N)
			for i := range phi {
				phi[i] = bf(0)
			}
			for i := range kp {
				kp[i] = bf(0)
			}
			for i := range vp {
				vp[i] = bf(0)
			}
			for i := range st {
				st[i] = bf(0)
			}
			if s := p.State; s != nil {
				for i := range phi {
					phi[i] = bf(s.Angle[(si*H+h)*A+i])
				}
				for i := range kp {
					kp[i] = bf(s.K[(si*H+h)*N+i])
				}
				for i := range vp {
					vp[i] = bf(s.V[(si*H+h)*P+i])
				}
				for i := range st {
					st[i] = bf(s.SSM[(si*H+h)*P*N+i])
				}
			}
			for t := sq[1]; t < sq[2]; t++ {
				hl := (b*H+h)*L + t
				dt := bf(p.DT[hl])
				sn, cs := make([]*big.Float, A), make([]*big.Float, A)
				for i := 0; i < A; i++ {
					phi[i] = badd(phi[i], bmul(bmul(tanh(p.Angles[((b*L+t)*H+h)*A+i]), pi), dt))
					phi[i] = bsub(phi[i], bmul(twoPi, floor(bquo(phi[i], twoPi))))
					sn[i], cs[i] = bsincos(phi[i])
				}
				q, k := make([]*big.Float, N), make([]*big.Float, N)
				for n := 0; n < N; n++ {
					q[n] = badd(bf(p.Q[((b*L+t)*Hqk+g)*N+n]), bf(p.QBias[h*N+n]))
					k[n] = badd(bf(p.K[((b*L+t)*Hqk+g)*N+n]), bf(p.KBias[h*N+n]))
				}
				for i := 0; i < A; i++ {
					for _, x := range [][]*big.Float{q, k} {
						x0, x1 := x[2*i], x[2*i+1]
						x[2*i], x[2*i+1] = bsub(bmul(x0, cs[i]), bmul(x1, sn[i])), badd(bmul(x0, sn[i]), bmul(x1, cs[i]))
					}
				}
				alpha, ok := bexp(bf(p.ADT[hl]))
				if !ok {
					alpha = bf(0)
				}
				lam := bsigmoid(bf(p.Trap[hl]))
				beta := bmul(bmul(bsub(bf(1), lam), dt), alpha)
				gamma := bmul(lam, dt)
				for pp := 0; pp < P; pp++ {
					v := bf(p.V[((b*L+t)*H+h)*P+pp])
					acc := bf(0)
					for n := 0; n < N; n++ {
						s := badd(badd(bmul(alpha, st[pp*N+n]), bmul(beta, bmul(kp[n], vp[pp]))), bmul(gamma, bmul(k[n], v)))
						st[pp*N+n] = s
						acc = badd(acc, bmul(s, q[n]))
					}
					if p.D != nil {
						acc = badd(acc, bmul(bf(p.D[h]), v))
					}
					if p.Z != nil {
						z := bf(p.Z[((b*L+t)*H+h)*P+pp])
						acc = bmul(acc, bmul(z, bsigmoid(z)))
					}
					y[((b*L+t)*H+h)*P+pp] = f64(acc)
				}
				kp = k
				for pp := 0; pp < P; pp++ {
					vp[pp] = bf(p.V[((b*L+t)*H+h)*P+pp])
				}
			}
			for i := 0; i < A; i++ {
				fin.Angle[(si*H+h)*A+i] = f64(phi[i])
			}
			for i := range st {
				fin.SSM[(si*H+h)*P*N+i] = f64(st[i])
			}
			for i := range kp {
				fin.K[(si*H+h)*N+i] = f64(kp[i])
			}
			for i := range vp {
				fin.V[(si*H+h)*P+i] = f64(vp[i])
			}
		}
	}
	return y, fin
}

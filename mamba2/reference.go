package mamba2

import (
	"math"
	"math/bits"

	"ssmverify/ssm"
)

// softplus is the kernels' softplus: the identity above 20.
func softplus(v float64) float64 {
	if v <= 20 {
		return math.Log1p(math.Exp(v))
	}
	return v
}

// Delta returns Δ for a raw dt: bias, softplus, clamp.
func Delta(dt, bias float64, soft bool, lo, hi float64) float64 {
	v := dt + bias
	if soft {
		v = softplus(v)
	}
	return math.Min(math.Max(v, lo), hi)
}

// naiveDelta is Delta with the softplus of Triton 3's kernels,
// log(e^v + 1) evaluated in float32: without log1p, 1 + e^v rounds away
// the relative precision of a small softplus (e^v ≪ 1).
func naiveDelta(dt, bias float64, lo, hi float64) float64 {
	v := float32(dt + bias)
	if v <= 20 {
		v = float32(math.Log(float64(float32(float64(float32(math.Exp(float64(v)))) + 1))))
	}
	return math.Min(math.Max(float64(v), lo), hi)
}

func (p *Problem) delta(dt, bias float64, lo, hi float64) float64 {
	if p.naiveSoftplus && p.Softplus {
		return naiveDelta(dt, bias, lo, hi)
	}
	return Delta(dt, bias, p.Softplus, lo, hi)
}

func silu(z float64) float64 { return z / (1 + math.Exp(-z)) }

// skipAndGate adds the skip term D[k]·x to the output y of element i
// and applies the gate z·σ(z), with their error terms: D·x and the sum
// one rounding each (3·|D·x|), the gate's evaluation five (5·|y·z·σ(z)|)
// beside the scale carried through it.
func skipAndGate(y, mag, x float64, d, z []float64, k, i int) (float64, float64) {
	if d != nil {
		y += d[k] * x
		mag += 3 * math.Abs(d[k]*x)
	}
	if z != nil {
		gz := silu(z[i])
		mag = mag*math.Abs(gz) + 5*math.Abs(y*gz)
		y *= gz
	}
	return y, mag
}

// Prefill returns the float64 reference of a prefill and its error scale.
func Prefill(p *Problem) (*Output, *Scale) {
	H, P, N, G, L := p.Heads, p.Headdim, p.Dstate, p.Groups, p.Seqlen
	Q := p.Chunk
	u := p.DType.Precision().UnitRoundoff()
	out := &Output{Y: make([]float64, p.XLen()), FinalStates: make([]float64, p.StateLen()), SeqStates: make([]float64, p.NumSeqs()*p.HeadStateLen())}
	sc := &Scale{Y: make([]float64, p.XLen()), FinalStates: make([]float64, p.StateLen()), SeqStates: make([]float64, len(out.SeqStates)),
		TinyY: make([]float64, p.XLen()), TinyFinal: make([]float64, p.StateLen()), TinySeq: make([]float64, len(out.SeqStates))}
	// the factors of a narrower state and of operands rounded in the
	// chunk's products (4 roundings of u_in per term), in units of u
	var stateFactor, operandFactor float64
	if p.StateDType.Narrow() || (p.StateDType == ssm.F32 && p.DType == ssm.F64) {
		stateFactor = p.StateDType.OutputRoundoff() / u
	}
	if p.DType.Narrow() {
		operandFactor = 4 * p.DType.OutputRoundoff() / u
	}
	if p.operandU > 0 {
		operandFactor = math.Max(operandFactor, 4*p.operandU/u)
	}
	// a state kept in fp16 between chunks (or steps) rounds in its
	// subnormal range by an absolute half-spacing, not a relative one: in
	// units of the arithmetic's η, per hand-over
	tinyHop := p.StateDType.OutputSpacing() / 2 / p.DType.Precision().Tiny()
	hops := func(t, start int) float64 {
		if Q == 0 {
			return float64(t - start + 1)
		}
		return float64(t/Q - start/Q + 1)
	}
	k0 := float64(N + 2*max(Q, 1) + 8) // an output: the sums over states and over a chunk
	k0Stat := float64(2*max(Q, 1) + 8) // a state: the sum over a chunk
	lo, hi := p.Limits()
	seqs := p.Sequences()
	delta := make([]float64, L)
	cum := make([]float64, L)  // within the sequence, through t
	wcum := make([]float64, L) // |within the chunk (row-aligned), through t|
	for b := 0; b < p.Batch; b++ {
		for h := 0; h < H; h++ {
			g := Group(h, H, G)
			bias := 0.0
			if p.DtBias != nil {
				bias = p.DtBias[h]
			}
			var w float64
			for t := 0; t < L; t++ {
				delta[t] = p.delta(p.Dt[(b*L+t)*H+h], bias, lo, hi)
				if Q > 0 && t%Q == 0 {
					w = 0
				}
				w += math.Abs(delta[t] * p.A[h])
				wcum[t] = w
			}
			m := model{q: Q, l2q: float64(bits.Len(uint(max(Q, 1)))), wcum: wcum, sf: stateFactor, ops: operandFactor}
			for si, sq := range seqs {
				var c float64
				for t := sq[0]; t < sq[1]; t++ {
					c += delta[t] * p.A[h]
					cum[t] = c
				}
				// each channel pp of a head is a recurrence of its own (its
				// state row s[pp, ·]): long sequences run them in parallel
				channel := func(pp int, s []float64, rs []recurrences) {
					for n := 0; n < N; n++ {
						s[n], rs[n] = 0, recurrences{}
						if p.InitialStates != nil && si == 0 {
							v := p.InitialStates[((b*H+h)*P+pp)*N+n]
							s[n] = v
							rs[n].init(math.Abs(v), sq[0])
						}
					}
					for t := sq[0]; t < sq[1]; t++ {
						i := ((b*L+t)*H+h)*P + pp
						x := p.X[i]
						a := math.Exp(delta[t] * p.A[h])
						bt := (b*L + t) * G * N
						var y, mag, cabs float64
						for n := 0; n < N; n++ {
							bx := delta[t] * p.B[bt+g*N+n] * x
							s[n] = a*s[n] + bx
							rs[n].step(&m, t, a, math.Abs(bx), math.Abs(cum[t]), sq[0])
							cn := p.C[bt+g*N+n]
							y += cn * s[n]
							mag += math.Abs(cn) * rs[n].scale(&m, t, math.Abs(cum[t]), k0)
							cabs += math.Abs(cn)
						}
						y, mag = skipAndGate(y, mag, x, p.D, p.Z, p.DIndex(h, pp), i)
						tiny := float64(N+3) * float64(t-sq[0]+2)
						if tinyHop > 0 {
							gate := 1.0
							if p.Z != nil {
								gate = math.Max(1, math.Abs(silu(p.Z[i])))
							}
							tiny += hops(t, sq[0]) * tinyHop * cabs * gate
						}
						out.Y[i], sc.Y[i], sc.TinyY[i] = y, mag, tiny
					}
					// the sequence's final state
					last := sq[1] - 1
					for n := 0; n < N; n++ {
						k := ((si*H+h)*P+pp)*N + n
						if p.CuSeqlens == nil {
							k = ((b*H+h)*P+pp)*N + n
						}
						out.SeqStates[k] = s[n]
						sc.SeqStates[k] = rs[n].scale(&m, last, math.Abs(cum[last]), k0Stat)
						sc.TinySeq[k] = float64(last-sq[0]+2) + hops(last, sq[0])*tinyHop
						if si == len(seqs)-1 {
							f := ((b*H+h)*P+pp)*N + n
							out.FinalStates[f], sc.FinalStates[f], sc.TinyFinal[f] = s[n], sc.SeqStates[k], sc.TinySeq[k]
						}
					}
				}
				forChannels(P, (sq[1]-sq[0])*N, N, channel)
			}
		}
	}
	return out, sc
}

// ParallelWork is the work of one channel (steps × states) from which a
// head's channels are run in parallel: below it the goroutines cost more
// than they save, and the small problems of the tests stay sequential.
const ParallelWork = 1 << 16

// ForEachChannel calls f for each channel 0..P−1 of a head: in parallel
// (up to GOMAXPROCS at once) where parallel, else in order. The float64
// references of Mamba-2 and Mamba-3 and their error models run a head's
// channels so: each is a recurrence of its own (its row of the state)
// writing disjoint elements, so that the result is the same either way,
// bit for bit.
func ForEachChannel(P int, parallel bool, f func(pp int)) {
	if !parallel {
		for pp := 0; pp < P; pp++ {
			f(pp)
		}
		return
	}
	ssm.ParallelFor(P, f)
}

// forChannels is ForEachChannel for Prefill's channels, each with scratch
// of n states, in parallel where a channel's work is at least ParallelWork.
func forChannels(P, work, n int, f func(pp int, s []float64, rs []recurrences)) {
	ForEachChannel(P, work >= ParallelWork, func(pp int) { f(pp, make([]float64, n), make([]recurrences, n)) })
}

// Decode returns the float64 reference of a decode step and its scale:
// one step of the recurrence from each row's slot, the pool updated in
// place (a copy), padding rows' outputs zero and their slots untouched.
func Decode(s *Step) (*StepOutput, *StepScale) {
	H, P, N, G := s.Heads, s.Headdim, s.Dstate, s.Groups
	out := &StepOutput{Y: make([]float64, s.Batch*H*P), State: append([]float64(nil), s.State...)}
	sc := &StepScale{Y: make([]float64, len(out.Y)), State: make([]float64, len(out.State)), TinyY: make([]float64, len(out.Y)), TinyState: make([]float64, len(out.State))}
	lo, hi := s.Limits()
	for b := 0; b < s.Batch; b++ {
		slot := s.Slot(b)
		if slot < 0 {
			continue
		}
		for h := 0; h < H; h++ {
			g := Group(h, H, G)
			bias := 0.0
			if s.DtBias != nil {
				bias = s.DtBias[h]
			}
			d := Delta(s.Dt[b*H+h], bias, s.Softplus, lo, hi)
			// log(e^v + 1) in float32 errs by up to 2u absolute (the sum's
			// rounding and e^v's), not relative to Δ: a kernel with that
			// softplus may differ from naiveDelta's float32 by an ulp of
			// e^v + 1, which the state's and y's scales carry (kd·u of Δ)
			kd := 0.0
			if s.naiveSoftplus && s.Softplus {
				d = naiveDelta(s.Dt[b*H+h], bias, lo, hi)
				kd = 2
			}
			a := math.Exp(d * s.A[h])
			// the decay's exponent Δ·A errs relative to itself (Δ's softplus
			// and the product), and e^x turns that into |Δ·A| times as much
			// relative error of a: the prefill's 4·|cum_t − cum_s| for one step
			ka := 4 + 4*math.Abs(d*s.A[h])
			for pp := 0; pp < P; pp++ {
				i := (b*H+h)*P + pp
				x := s.X[i]
				var y, mag float64
				for n := 0; n < N; n++ {
					k := ((slot*H+h)*P+pp)*N + n
					old := s.State[k]
					bx := d * s.B[(b*G+g)*N+n] * x
					v := a*old + bx
					out.State[k] = v
					sc.State[k] = ka*math.Abs(a*old) + 3*math.Abs(bx)
					if kd > 0 && d > 0 {
						sc.State[k] += kd * (math.Abs(s.A[h]*a*old) + math.Abs(bx)/d)
					}
					sc.TinyState[k] = 2
					cn := s.C[(b*G+g)*N+n]
					y += cn * v
					mag += math.Abs(cn) * ((float64(N+2)+ka)*math.Abs(a*old) + float64(N+4)*math.Abs(bx))
					if kd > 0 && d > 0 {
						mag += math.Abs(cn) * kd * (math.Abs(s.A[h]*a*old) + math.Abs(bx)/d)
					}
				}
				y, mag = skipAndGate(y, mag, x, s.D, s.Z, h, i)
				out.Y[i], sc.Y[i], sc.TinyY[i] = y, mag, float64(N+3)
			}
		}
	}
	return out, sc
}

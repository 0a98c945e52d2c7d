package mamba1

import (
	"fmt"
	"math"

	"ssmverify/ssm"
)

// Scan evaluates the selective-scan forward pass of the ABI (see the package
// documentation) in the given precision. It validates p first.
func Scan(p *ssm.Problem, prec ssm.Precision) (*ssm.Output, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	o := &ssm.Output{Out: make([]float64, p.OutLen()), LastState: make([]float64, p.StateLen())}
	switch {
	case prec == ssm.Float64 && !p.Complex:
		scanReal[float64](p, o)
	case prec == ssm.Float64 && p.Complex:
		scanComplex[float64](p, o)
	case prec == ssm.Float32 && !p.Complex:
		scanReal[float32](p, o)
	case prec == ssm.Float32 && p.Complex:
		scanComplex[float32](p, o)
	case prec == ssm.Float64Natural && !p.Complex:
		scanReal[natural64](p, o)
	case prec == ssm.Float64Natural && p.Complex:
		scanComplex[natural64](p, o)
	default:
		return nil, fmt.Errorf("Scan: precision %d, want Float64, Float32 or Float64Natural", int(prec))
	}
	return o, nil
}

// rowParams holds what one (b, d) row needs besides its arrays: the
// per-channel scalars and the offsets and strides of B and C.
type rowParams struct {
	row            int // offset of (b, d, 0) in U, Delta, Z, Out
	bBase, bStride int // word offset of B element n=0 at t=0, and word stride over n
	cBase, cStride int
	bStep, cStep   int // word stride over t (0 when constant)
}

func rowParamsOf(p *ssm.Problem, b, d int) rowParams {
	cw, L := p.ElemWords(), p.Seqlen
	r := rowParams{row: (b*p.Dim + d) * L}
	r.bBase = p.BCIndex(p.VariableB, b, d, 0, 0)
	r.cBase = p.BCIndex(p.VariableC, b, d, 0, 0)
	r.bStride, r.cStride = cw, cw
	if p.VariableB {
		r.bStride, r.bStep = L*cw, cw
	}
	if p.VariableC {
		r.cStride, r.cStep = L*cw, cw
	}
	return r
}

// StepDelta is the step Δ the scan uses at element i of Delta ([Batch][Dim]
// [Seqlen]): delta_bias added and softplus applied (threshold 20), in
// float64.
func StepDelta(p *ssm.Problem, i int) float64 {
	return stepDelta(p, p.Delta[i], i/p.Seqlen%p.Dim)
}

// stepDelta applies delta_bias and softplus (threshold 20) in T.
func stepDelta[T float](p *ssm.Problem, raw T, d int) T {
	dt := raw
	if p.DeltaBias != nil {
		dt += T(p.DeltaBias[d])
	}
	if p.Softplus && dt <= 20 {
		dt = T(math.Log1p(float64(expT(dt))))
	}
	return dt
}

// finishOutput applies the D skip and the SiLU gate z·sigmoid(z) in T.
func finishOutput[T float](p *ssm.Problem, y, u T, d, i int) T {
	if p.D != nil {
		y += T(p.D[d]) * u
	}
	if p.Z != nil {
		z := T(p.Z[i])
		yz := y * z
		if scaled[T]() && (math.IsInf(float64(yz), 0) && !math.IsInf(float64(y), 0) && !math.IsInf(float64(z), 0)) {
			// The reference proper forms z·σ(z) first where y·z alone
			// overflows but the gated output need not (|z·σ(z)| ≤ |z|); not
			// always, because z·σ(z) underflows for very negative z where
			// y·z/(1 + e^−z) does not (FuzzScan: −2.1e-58 read as −0).
			return y * (z / (1 + expT(-z)))
		}
		y = yz / (1 + expT(-z))
	}
	return y
}

// coefRow fills ab[n], bc[n] = Ā, Δ·g of method m at x = dt·a[n]: the
// method switch sits outside the loop over states, so each method's loop is
// straight-line code around one exp.
func coefRow[T float](m ssm.Method, dt T, a, ab, bc []T) {
	ab = ab[:len(a)]
	bc = bc[:len(a)]
	switch m {
	case ssm.ZOH:
		for n, an := range a {
			ab[n], bc[n] = expT(dt*an), dt
		}
	case ssm.FOH:
		for n, an := range a {
			x := dt * an
			ab[n], bc[n] = expT(x), dt*phi1T(x)
		}
	case ssm.Bilinear:
		for n, an := range a {
			abar, g := bilinearT(dt * an)
			ab[n], bc[n] = abar, dt*g
		}
	case ssm.Poly:
		for n, an := range a {
			x := dt * an
			ab[n], bc[n] = expT(x), dt*gPoly(x)
		}
	case ssm.HighOrder:
		for n, an := range a {
			x := dt * an
			ab[n], bc[n] = expT(x), dt*gHighOrder(x)
		}
	case ssm.RK4:
		for n, an := range a {
			x := dt * an
			ab[n], bc[n] = expT(x), dt*gRK4(x)
		}
	}
}

func scanReal[T float](p *ssm.Problem, o *ssm.Output) {
	N, L := p.Dstate, p.Seqlen
	h := make([]T, N)
	a := make([]T, N)
	ab := make([]T, N)
	bc := make([]T, N)
	for b := 0; b < p.Batch; b++ {
		for d := 0; d < p.Dim; d++ {
			rp := rowParamsOf(p, b, d)
			for n := range h {
				h[n] = 0
				if p.InitialState != nil {
					h[n] = T(p.InitialState[(b*p.Dim+d)*N+n])
				}
				a[n] = T(p.A[d*N+n])
			}
			for t := 0; t < L; t++ {
				i := rp.row + t
				u := T(p.U[i])
				dt := stepDelta(p, T(p.Delta[i]), d)
				coefRow(p.Method, dt, a, ab, bc)
				// B and C of this step, from element n = 0 on: re-slicing once
				// lets the compiler drop most bounds checks in the state loop.
				bs := p.B[rp.bBase+t*rp.bStep : rp.bBase+t*rp.bStep+(N-1)*rp.bStride+1]
				cs := p.C[rp.cBase+t*rp.cStep : rp.cBase+t*rp.cStep+(N-1)*rp.cStride+1]
				ab, bc := ab[:len(h)], bc[:len(h)]
				var y T
				bi, ci := 0, 0
				for n := range h {
					h[n] = ab[n]*h[n] + bc[n]*T(bs[bi])*u
					y += T(cs[ci]) * h[n]
					bi += rp.bStride
					ci += rp.cStride
				}
				o.Out[i] = float64(finishOutput(p, y, u, d, i))
			}
			s := (b*p.Dim + d) * N
			for n, v := range h {
				o.LastState[s+n] = float64(v)
			}
		}
	}
}

func scanComplex[T float](p *ssm.Problem, o *ssm.Output) {
	N, L := p.Dstate, p.Seqlen
	h := make([]cpx[T], N)
	a := make([]cpx[T], N)
	for b := 0; b < p.Batch; b++ {
		for d := 0; d < p.Dim; d++ {
			rp := rowParamsOf(p, b, d)
			for n := range h {
				h[n] = cpx[T]{}
				if p.InitialState != nil {
					k := 2 * ((b*p.Dim+d)*N + n)
					h[n] = cpx[T]{T(p.InitialState[k]), T(p.InitialState[k+1])}
				}
				a[n] = cpx[T]{T(p.A[2*(d*N+n)]), T(p.A[2*(d*N+n)+1])}
			}
			for t := 0; t < L; t++ {
				i := rp.row + t
				u := T(p.U[i])
				dt := stepDelta(p, T(p.Delta[i]), d)
				bi, ci := rp.bBase+t*rp.bStep, rp.cBase+t*rp.cStep
				var acc cpx[T]
				for n := 0; n < N; n++ {
					ab, g := complexCoef(p.Method, a[n].scale(dt))
					bv := cpx[T]{T(p.B[bi]), T(p.B[bi+1])}
					cv := cpx[T]{T(p.C[ci]), T(p.C[ci+1])}
					h[n] = ab.mul(h[n]).add(g.scale(dt).mul(bv).scale(u))
					acc = acc.add(cv.mul(h[n]))
					bi += rp.bStride
					ci += rp.cStride
				}
				o.Out[i] = float64(finishOutput(p, 2*acc.re, u, d, i))
			}
			s := 2 * (b*p.Dim + d) * N
			for n, v := range h {
				o.LastState[s+2*n] = float64(v.re)
				o.LastState[s+2*n+1] = float64(v.im)
			}
		}
	}
}

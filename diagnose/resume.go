package diagnose

import (
	"fmt"

	"ssmverify/judge"
	"ssmverify/mamba1"
	"ssmverify/ssm"
)

// stateSlip is one usual mistake in how a scan takes its initial state:
// edit returns the state the kernel would start a piece q from, given the
// state h0 it was passed.
type stateSlip struct {
	tag, cause string
	edit       func(q *ssm.Problem, h0 []float64) []float64
	// firstFromZero: the piece's first output is read before h₀ arrives,
	// as from h = 0.
	firstFromZero bool
}

var stateSlips = []stateSlip{
	{"h0-ignored", "the initial state is ignored: every piece starts from h = 0",
		func(q *ssm.Problem, h0 []float64) []float64 { return nil }, false},
	{"h0-late", "the initial state is added after the first step's update and output (h₁ = Ā·0 + B̄u + h₀) instead of before them: Ā misses h₀, and the first output h₀, once per piece",
		lateState, true},
	{"h0-batch", "every batch row starts from the initial state of batch row 0",
		func(q *ssm.Problem, h0 []float64) []float64 {
			per := len(h0) / q.Batch
			out := make([]float64, len(h0))
			for b := 0; b < q.Batch; b++ {
				copy(out[b*per:(b+1)*per], h0[:per])
			}
			return out
		}, false},
	{"h0-16bit", "the initial state is kept in 16 bits (bfloat16) when it is read",
		func(q *ssm.Problem, h0 []float64) []float64 {
			out := make([]float64, len(h0))
			for i, v := range h0 {
				out[i] = ssm.RoundBFloat16(v)
			}
			return out
		}, false},
}

// lateState is the h₀' whose correct scan equals adding h₀ after the first
// update: Ā₀·h₀' = h₀, with Ā₀ of each channel and state at the piece's
// first step.
func lateState(q *ssm.Problem, h0 []float64) []float64 {
	out := make([]float64, len(h0))
	w := q.ElemWords()
	for b := 0; b < q.Batch; b++ {
		for d := 0; d < q.Dim; d++ {
			dt := mamba1.StepDelta(q, (b*q.Dim+d)*q.Seqlen)
			for n := 0; n < q.Dstate; n++ {
				i := (b*q.Dim+d)*q.Dstate + n
				a := complex(q.A[(d*q.Dstate+n)*w], 0)
				h := complex(h0[i*w], 0)
				if w == 2 {
					a = complex(q.A[(d*q.Dstate+n)*w], q.A[(d*q.Dstate+n)*w+1])
					h = complex(h0[i*w], h0[i*w+1])
				}
				abar, _ := mamba1.Complex(q.Method, complex(dt, 0)*a)
				v := h / abar
				out[i*w] = real(v)
				if w == 2 {
					out[i*w+1] = imag(v)
				}
			}
		}
	}
	return out
}

// Resumption diagnoses a scan of p in pieces (cut at cuts, each piece from
// the kernel's last state of the one before) whose assembled result got
// fails: the pieces are replayed in the float64 reference with each usual
// mistake in taking the initial state, and the mistake whose replay the
// kernel matches within the threshold is named. It needs no kernel calls.
func Resumption(p *ssm.Problem, got *ssm.Output, dt ssm.DType, cuts []int) (f Finding) {
	defer contained(&f, "diagnose.Resumption", func() string { return fmt.Sprintf("%s %v, cuts %v", p.Shape(), dt, cuts) })
	return diagnoseResumption(p, got, dt, cuts)
}

func diagnoseResumption(p *ssm.Problem, got *ssm.Output, dt ssm.DType, cuts []int) Finding {
	f := Finding{Tag: "none", Cause: "no diagnosis fits: the kernel matches no usual mistake in taking the initial state"}
	for _, sl := range stateSlips {
		alt, err := replay(p, cuts, sl)
		if err != nil {
			return Finding{Tag: "error", Cause: "replaying the pieces: " + err.Error()}
		}
		c, err := judge.CompareScan(p, got, dt, alt, nil)
		if err == nil && c.Passed(dt) {
			if f.Tag == "none" {
				f.Tag, f.Cause = sl.tag, sl.cause
				f.Evidence = append(f.Evidence, fmt.Sprintf("the pieces replayed so match the kernel within %.2g of the threshold", c.Worst.Ratio))
			} else {
				f.Also = append(f.Also, sl.tag)
			}
		}
	}
	return f
}

// replay is the scan of p in pieces in the float64 reference, each piece
// starting from sl's edit of the last state of the one before.
func replay(p *ssm.Problem, cuts []int, sl stateSlip) (*ssm.Output, error) {
	return p.InPieces(cuts, func(q *ssm.Problem) (*ssm.Output, error) {
		if q.InitialState != nil {
			q.InitialState = sl.edit(q, q.InitialState)
		}
		o, err := mamba1.Scan(q, ssm.Float64)
		if err != nil || !sl.firstFromZero || q.InitialState == nil {
			return o, err
		}
		z := q.Clone()
		z.InitialState = nil
		o0, err := mamba1.Scan(z, ssm.Float64)
		if err != nil {
			return nil, err
		}
		for i := 0; i < len(o.Out); i += q.Seqlen {
			o.Out[i] = o0.Out[i]
		}
		return o, nil
	})
}

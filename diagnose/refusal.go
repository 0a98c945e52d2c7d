package diagnose

import (
	"errors"
	"fmt"
	"strings"

	"ssmverify/ssm"
)

// memoryFault is a library's write outside a buffer it was given or into
// one of its inputs, as the binding reports it (cudalib.MemoryError).
type memoryFault interface {
	error
	MemoryTag() string
}

// memoryFinding is the finding of err when it is a memory fault: its cause
// needs no probe (the binding's guards saw the write), and no probe may run
// a library that writes where it must not more often than needed.
func memoryFinding(err error) (Finding, bool) {
	var m memoryFault
	if !errors.As(err, &m) {
		return Finding{}, false
	}
	return Finding{Tag: m.MemoryTag(), Cause: m.Error(), Where: "caught by the guard regions around every buffer (package cudalib)"}, true
}

// refusal explains why the kernel refuses p (err): it shrinks one size at
// a time (batch, dim, seqlen, dstate to half, and every feature off) and
// names the reductions after which the kernel accepts the problem. A size
// whose halving is accepted while the others are not is the limit the
// kernel has, e.g. dim > 65 535 where a kernel launches one block per
// channel in a grid dimension of that size.
func refusal(s Scanner, p *ssm.Problem, dt ssm.DType, err error) Finding {
	if f, ok := memoryFinding(err); ok {
		return f
	}
	f := Finding{Tag: "refusal", Cause: "the kernel refuses a declared combination: " + err.Error()}
	var accepted []string
	try := func(name string, q *ssm.Problem) {
		if q == nil {
			return
		}
		if _, err := s.Scan(q, dt); err == nil {
			accepted = append(accepted, name)
		}
	}
	try(fmt.Sprintf("batch %d → 1", p.Batch), shrunk(p.Batch > 1, func() *ssm.Problem { return firstBatch(p) }))
	try(fmt.Sprintf("dim %d → %d", p.Dim, halfDim(p)), shrunk(halfDim(p) < p.Dim, func() *ssm.Problem { return firstChannels(p, halfDim(p)) }))
	try(fmt.Sprintf("seqlen %d → %d", p.Seqlen, (p.Seqlen+1)/2), shrunk(p.Seqlen > 1, func() *ssm.Problem { return truncate(p, (p.Seqlen+1)/2) }))
	try(fmt.Sprintf("dstate %d → %d", p.Dstate, (p.Dstate+1)/2), shrunk(p.Dstate > 1, func() *ssm.Problem { return fewerStates(p, (p.Dstate+1)/2) }))
	for _, ft := range features {
		if ft.present(p) {
			try(ft.name+" off", ft.drop(p))
		}
	}
	if len(accepted) == 0 {
		f.Evidence = append(f.Evidence, "no single reduction (half a size, a feature off) makes it accept")
		return f
	}
	f.Tag = "refusal:" + strings.Fields(accepted[0])[0]
	f.Evidence = append(f.Evidence, "accepted after: "+strings.Join(accepted, "; "))
	if strings.HasPrefix(accepted[0], "dim") && p.Dim > 65535 {
		f.Cause += fmt.Sprintf("; dim = %d > 65 535 is refused and half of it accepted: a launch with one block per "+
			"channel in a grid dimension limited to 65 535 (gridDim.y or .z)", p.Dim)
	}
	return f
}

func shrunk(ok bool, f func() *ssm.Problem) *ssm.Problem {
	if !ok {
		return nil
	}
	return f()
}

// halfDim is about half of p's channels (with groups, a whole number of
// them).
func halfDim(p *ssm.Problem) int {
	if p.Groups == 1 {
		return (p.Dim + 1) / 2
	}
	per := p.Dim / p.Groups
	return max(per, (p.Groups+1)/2*per)
}

// firstChannels keeps the first n channels (a whole number of groups).
func firstChannels(p *ssm.Problem, n int) *ssm.Problem {
	q := p.Clone()
	per := p.Dim / p.Groups
	q.Dim, q.Groups = n, max(1, n/per) // one group: every channel reads group 0
	w, L, N := p.ElemWords(), p.Seqlen, p.Dstate
	rows := func(s []float64, rowLen, blocks, keep, all int) []float64 {
		if s == nil {
			return nil
		}
		out := make([]float64, 0, blocks*keep*rowLen)
		for b := 0; b < blocks; b++ {
			out = append(out, s[b*all*rowLen:][:keep*rowLen]...)
		}
		return out
	}
	q.U, q.Delta, q.Z = rows(p.U, L, p.Batch, n, p.Dim), rows(p.Delta, L, p.Batch, n, p.Dim), rows(p.Z, L, p.Batch, n, p.Dim)
	q.A = rows(p.A, N*w, 1, n, p.Dim)
	q.D, q.DeltaBias = rows(p.D, 1, 1, n, p.Dim), rows(p.DeltaBias, 1, 1, n, p.Dim)
	bc := func(s []float64, variable bool) []float64 {
		if variable {
			return rows(s, N*L*w, p.Batch, q.Groups, p.Groups)
		}
		return rows(s, N*w, 1, n, p.Dim)
	}
	q.B, q.C = bc(p.B, p.VariableB), bc(p.C, p.VariableC)
	return q
}

// BackwardError is the finding of a backward call that returned err: a
// memory fault where the guards saw one, else the refusal.
func BackwardError(err error) Finding {
	if f, ok := memoryFinding(err); ok {
		return f
	}
	return Finding{Tag: "refused", Cause: "the backward refused: " + err.Error()}
}

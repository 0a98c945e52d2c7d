package cudalib

import "ssmverify/ssm"

// ScanBytes is the least memory traffic of one scan of p in dtype dt: every
// input read once, every output written once (u, delta, z, out,
// last_state; A, B, C, D, delta_bias). Variable B and C are counted once
// per group, not once per channel: channels of a group share them, so a
// kernel that re-reads them per channel is paying for cache hits, not for
// memory. Dividing by a measured time gives the bandwidth a roofline
// compares with CopyBandwidth.
func ScanBytes(p *ssm.Problem, dt ssm.DType) int64 {
	e := int64(dt.Size())
	cw := int64(1)
	if p.Complex {
		cw = 2
	}
	seq := int64(p.Batch) * int64(p.Dim) * int64(p.Seqlen)
	words := 3 * seq // u, delta, out
	if p.Z != nil {
		words += seq
	}
	words += int64(p.Dim) * int64(p.Dstate) * cw // A
	for _, variable := range []bool{p.VariableB, p.VariableC} {
		if variable {
			words += int64(p.Batch) * int64(p.Groups) * int64(p.Dstate) * int64(p.Seqlen) * cw
		} else {
			words += int64(p.Dim) * int64(p.Dstate) * cw
		}
	}
	if p.D != nil {
		words += int64(p.Dim)
	}
	if p.DeltaBias != nil {
		words += int64(p.Dim)
	}
	words += int64(p.Batch) * int64(p.Dim) * int64(p.Dstate) * cw // last_state
	return words * e
}

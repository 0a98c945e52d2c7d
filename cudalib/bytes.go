package cudalib

import "ssmverify/ssm"

// ScanBytes is the least memory traffic of one scan of p in dtype dt: every
// input read once, every output written once (u, delta, z, out,
// last_state; A, B, C, D, delta_bias), each in its own element type (for a
// 16-bit dtype: u, delta, z, out and variable B and C in 2 bytes, the
// weights and the state in float32). Variable B and C are counted once
// per group, not once per channel: channels of a group share them, so a
// kernel that re-reads them per channel is paying for cache hits, not for
// memory. Dividing by a measured time gives the bandwidth a roofline
// compares with CopyBandwidth.
func ScanBytes(p *ssm.Problem, dt ssm.DType) int64 {
	in, w := int64(dt.Size()), int64(dt.Weight().Size())
	cw := int64(1)
	if p.Complex {
		cw = 2
	}
	seq := int64(p.Batch) * int64(p.Dim) * int64(p.Seqlen)
	inWords := 3 * seq // u, delta, out
	if p.Z != nil {
		inWords += seq
	}
	wWords := int64(p.Dim) * int64(p.Dstate) * cw // A
	for _, variable := range []bool{p.VariableB, p.VariableC} {
		if variable {
			inWords += int64(p.Batch) * int64(p.Groups) * int64(p.Dstate) * int64(p.Seqlen) * cw
		} else {
			wWords += int64(p.Dim) * int64(p.Dstate) * cw
		}
	}
	if p.D != nil {
		wWords += int64(p.Dim)
	}
	if p.DeltaBias != nil {
		wWords += int64(p.Dim)
	}
	wWords += int64(p.Batch) * int64(p.Dim) * int64(p.Dstate) * cw // last_state
	return inWords*in + wWords*w
}

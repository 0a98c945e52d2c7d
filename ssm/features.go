package ssm

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
)

// Option is a bit of ssmk_feature_set.options: an option of the forward
// scan that a library's scan takes.
type Option uint32

const (
	OptD            Option = 1  // SSMK_FEAT_D: the D·u skip term
	OptZ            Option = 2  // SSMK_FEAT_Z: the SiLU gate
	OptDeltaBias    Option = 4  // SSMK_FEAT_DELTA_BIAS
	OptSoftplusOff  Option = 8  // SSMK_FEAT_SOFTPLUS_OFF: Δ used as given
	OptSoftplusOn   Option = 16 // SSMK_FEAT_SOFTPLUS_ON
	OptConstantBC   Option = 32 // SSMK_FEAT_CONSTANT_BC
	OptVariableBC   Option = 64 // SSMK_FEAT_VARIABLE_BC
	OptAll          Option = 127
	optionsReserved Option = ^OptAll
)

var optionNames = []string{"D", "z", "delta_bias", "softplus off", "softplus on", "constant B/C", "variable B/C"}

// String lists the options by name ("D, z, softplus on").
func (o Option) String() string {
	var names []string
	for i, name := range optionNames {
		if o&(1<<i) != 0 {
			names = append(names, name)
		}
	}
	if o&optionsReserved != 0 {
		names = append(names, fmt.Sprintf("reserved bits %#x", uint32(o&optionsReserved)))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// Features is what ssmk_scan_features declares for a combination (method,
// dtype, real/complex A): the options the scan takes, the shapes, and the
// structure its inputs must have. A library without the extension takes
// everything: AllFeatures.
//
// HeadDim k ≥ 1 is Mamba-2's structure: channels form heads of k, and for
// each head A[d][n] is one value for all its channels and states, Δ[b][d][t]
// (and delta_bias[d]) one value per (b, t) for all its channels; a head
// lies within one group of B and C.
type Features struct {
	Options     Option
	HeadDim     int    // 0: no structure
	DimMultiple int    // dim % DimMultiple == 0; 1: any
	MaxGroups   int    // n_groups ≤ MaxGroups; 0: any
	Dstates     uint32 // 0: any dstate; else bit k: dstate = 2^k
}

// AllFeatures is a library that takes every option on every shape (ABI v1).
var AllFeatures = Features{Options: OptAll, DimMultiple: 1}

// All reports whether f is AllFeatures: nothing to fit.
func (f Features) All() bool { return f == AllFeatures }

// Validate reports a declaration the suite cannot use: reserved bits,
// neither softplus setting, neither kind of B/C, sizes below their minimum.
func (f Features) Validate() error {
	switch {
	case f.Options&optionsReserved != 0:
		return fmt.Errorf("options %#x: reserved bits set (want a subset of %#x)", uint32(f.Options), uint32(OptAll))
	case f.Options&(OptSoftplusOff|OptSoftplusOn) == 0:
		return fmt.Errorf("options %v: neither softplus off nor on is taken", f.Options)
	case f.Options&(OptConstantBC|OptVariableBC) == 0:
		return fmt.Errorf("options %v: neither constant nor variable B/C is taken", f.Options)
	case f.HeadDim < 0:
		return fmt.Errorf("head_dim = %d, want ≥ 0", f.HeadDim)
	case f.DimMultiple < 1:
		return fmt.Errorf("dim_multiple = %d, want ≥ 1", f.DimMultiple)
	case f.MaxGroups < 0:
		return fmt.Errorf("max_groups = %d, want ≥ 0", f.MaxGroups)
	}
	return nil
}

// String describes the declaration for reports.
func (f Features) String() string {
	if f.All() {
		return "every option on every shape"
	}
	s := "options: " + f.Options.String()
	if f.HeadDim > 0 {
		s += fmt.Sprintf("; Mamba-2 heads of %d channels (A and Δ shared per head)", f.HeadDim)
	}
	if f.DimMultiple > 1 {
		s += fmt.Sprintf("; dim a multiple of %d", f.DimMultiple)
	}
	if f.MaxGroups > 0 {
		s += fmt.Sprintf("; n_groups ≤ %d", f.MaxGroups)
	}
	if f.Dstates != 0 {
		var ns []string
		for _, n := range f.dstateList() {
			ns = append(ns, fmt.Sprint(n))
		}
		s += "; dstate ∈ {" + strings.Join(ns, ", ") + "}"
	}
	return s
}

func (f Features) dstateList() []int {
	var out []int
	for m := f.Dstates; m != 0; m &= m - 1 {
		out = append(out, 1<<bits.TrailingZeros32(m))
	}
	return out
}

// TakesDstate reports whether dstate n is within the declaration.
func (f Features) TakesDstate(n int) bool {
	if f.Dstates == 0 {
		return true
	}
	return n > 0 && n&(n-1) == 0 && n < 1<<32 && f.Dstates&(1<<bits.TrailingZeros(uint(n))) != 0
}

// Sizes returns the sizes nearest to (dim, dstate, groups) that the
// declaration takes: dim raised to a multiple of DimMultiple and HeadDim,
// groups lowered to MaxGroups and then to the largest count that divides
// dim into whole heads, dstate to the smallest declared size ≥ dstate (else
// the largest). For generators: a problem drawn at these sizes can be
// fitted, and is no larger than it must be.
func (f Features) Sizes(dim, dstate, groups int) (int, int, int) {
	hd := max(1, f.HeadDim)
	step := lcm(max(1, f.DimMultiple), hd)
	dim = (dim + step - 1) / step * step
	if f.MaxGroups > 0 && groups > f.MaxGroups {
		groups = f.MaxGroups
	}
	for groups > 1 && (dim%groups != 0 || (dim/groups)%hd != 0) {
		groups--
	}
	if f.Dstates != 0 && !f.TakesDstate(dstate) {
		l := f.dstateList()
		best := l[len(l)-1]
		for _, n := range l {
			if n >= dstate {
				best = n
				break
			}
		}
		dstate = best
	}
	return dim, dstate, groups
}

func lcm(a, b int) int {
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return a / x * b
}

// Fit returns p as a library declaring f takes it — D, z and delta_bias
// dropped where not taken, softplus turned on or off where only the other
// is taken, A and Δ made one value per head under HeadDim — with a note
// for each change, for the report. p is not modified; when nothing changes
// the result is p itself. It returns an error when p cannot be fitted: its
// shape is outside the declaration (Sizes gives one within), or it needs
// constant or variable B/C and f takes only the other.
func (f Features) Fit(p *Problem) (*Problem, []string, error) {
	if f.All() {
		return p, nil, nil
	}
	if err := f.Validate(); err != nil {
		return nil, nil, fmt.Errorf("the library's declaration: %w", err)
	}
	switch {
	case p.Dim%f.DimMultiple != 0:
		return nil, nil, fmt.Errorf("dim = %d: the library takes multiples of %d", p.Dim, f.DimMultiple)
	case f.MaxGroups > 0 && p.Groups > f.MaxGroups:
		return nil, nil, fmt.Errorf("n_groups = %d: the library takes at most %d", p.Groups, f.MaxGroups)
	case !f.TakesDstate(p.Dstate):
		return nil, nil, fmt.Errorf("dstate = %d: the library takes %v", p.Dstate, f.dstateList())
	case f.HeadDim > 0 && (p.Dim%f.HeadDim != 0 || (p.Dim/p.Groups)%f.HeadDim != 0):
		return nil, nil, fmt.Errorf("dim = %d, n_groups = %d: heads of %d channels must tile each group", p.Dim, p.Groups, f.HeadDim)
	case (!p.VariableB || !p.VariableC) && f.Options&OptConstantBC == 0:
		return nil, nil, fmt.Errorf("constant B or C: the library takes variable B/C only")
	case (p.VariableB || p.VariableC) && f.Options&OptVariableBC == 0:
		return nil, nil, fmt.Errorf("variable B or C: the library takes constant B/C only")
	}
	q := p.Clone()
	var notes []string
	drop := func(has bool, o Option, clear func(), name string) {
		if has && f.Options&o == 0 {
			clear()
			notes = append(notes, "without "+name)
		}
	}
	drop(q.D != nil, OptD, func() { q.D = nil }, "D")
	drop(q.Z != nil, OptZ, func() { q.Z = nil }, "z")
	// The steps Δ are kept where they can be: delta_bias folded into Δ,
	// softplus undone or applied ahead, so that the scan runs over the
	// same steps as the problem drawn (only the rounding of Δ differs).
	if q.DeltaBias != nil && f.Options&OptDeltaBias == 0 {
		for i := range q.Delta {
			q.Delta[i] += q.DeltaBias[i/q.Seqlen%q.Dim]
		}
		q.DeltaBias = nil
		notes = append(notes, "delta_bias folded into Δ")
	}
	bias := func(i int) float64 {
		if q.DeltaBias == nil {
			return 0
		}
		return q.DeltaBias[i/q.Seqlen%q.Dim]
	}
	if q.Softplus && f.Options&OptSoftplusOn == 0 {
		q.Softplus = false
		for i := range q.Delta {
			q.Delta[i] = Softplus(q.Delta[i]+bias(i)) - bias(i)
		}
		notes = append(notes, "softplus off, applied to Δ ahead")
	} else if !q.Softplus && f.Options&OptSoftplusOff == 0 {
		q.Softplus = true
		kept := true
		for i := range q.Delta {
			if b, dt := bias(i), q.Delta[i]+bias(i); dt > 0 {
				q.Delta[i] = InverseSoftplus(dt) - b
			} else {
				kept = false
			}
		}
		if kept {
			notes = append(notes, "softplus on, Δ its inverse (the same steps)")
		} else {
			notes = append(notes, "softplus on (Δ ≤ 0 present: other steps)")
		}
	}
	if k := f.HeadDim; k > 0 {
		shareHeads(q, k)
		notes = append(notes, fmt.Sprintf("A and Δ shared by heads of %d channels", k))
	}
	if len(notes) == 0 {
		return p, nil, nil
	}
	return q, notes, nil
}

// Exact is Fit where the fitted problem has the same solution as p: the
// steps kept (delta_bias folded, softplus applied ahead or undone) and
// nothing else changed; an error where fitting would change what p
// computes (D or z dropped, A or Δ not already shared per head, softplus
// turned on over a step Δ ≤ 0). For probes that read a kernel's results
// as p's.
func (f Features) Exact(p *Problem) (*Problem, error) {
	q, notes, err := f.Fit(p)
	if err != nil {
		return nil, err
	}
	switch {
	case p.D != nil && q.D == nil:
		return nil, fmt.Errorf("the skip term D is not taken")
	case p.Z != nil && q.Z == nil:
		return nil, fmt.Errorf("z is not taken")
	case slices.Contains(notes, "softplus on (Δ ≤ 0 present: other steps)"):
		return nil, fmt.Errorf("softplus is always applied and Δ ≤ 0 has no inverse")
	}
	if f.HeadDim > 0 {
		r := p.Clone()
		shareHeads(r, f.HeadDim)
		if !slices.Equal(r.A, p.A) || !slices.Equal(r.Delta, p.Delta) {
			return nil, fmt.Errorf("the problem's A and Δ are not shared by heads of %d channels", f.HeadDim)
		}
	}
	return q, nil
}

// shareHeads gives every channel of a head of k the head's first
// channel's Δ and delta_bias, and every state of it the first state's A.
func shareHeads(q *Problem, k int) {
	w := q.ElemWords()
	for d := 0; d < q.Dim; d++ {
		h := d / k * k
		for n := 0; n < q.Dstate; n++ {
			copy(q.A[(d*q.Dstate+n)*w:(d*q.Dstate+n+1)*w], q.A[h*q.Dstate*w:(h*q.Dstate+1)*w])
		}
		if q.DeltaBias != nil {
			q.DeltaBias[d] = q.DeltaBias[h]
		}
		for b := 0; b < q.Batch; b++ {
			copy(q.Delta[(b*q.Dim+d)*q.Seqlen:(b*q.Dim+d+1)*q.Seqlen], q.Delta[(b*q.Dim+h)*q.Seqlen:(b*q.Dim+h+1)*q.Seqlen])
		}
	}
}

// Softplus is the scan's softplus: log1p(e^x), x itself above 20.
func Softplus(x float64) float64 {
	if x > 20 {
		return x
	}
	return math.Log1p(math.Exp(x))
}

// InverseSoftplus is the x whose Softplus is y > 0: y itself above 20
// (the pass-through), else y + log(−expm1(−y)).
func InverseSoftplus(y float64) float64 {
	if y > 20 {
		return y
	}
	return y + math.Log(-math.Expm1(-y))
}

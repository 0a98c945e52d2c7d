package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// The generated population of upstream's Triton kernels: the mutation
// operators applied mechanically to the forward kernels of a checkout of
// state-spaces/mamba (the @triton.jit functions that compute Mamba-2's
// chunked prefill and Mamba-3's SISO forward), each mutant a copy of the
// checkout's mamba_ssm with one line changed, judged by the whole bridged
// suite (SSMK_BRIDGE="mamba2_upstream checkout=COPY") on the GPU. A
// mutant Triton refuses to compile is stillborn, as one Python cannot
// parse; the grading is by the kernel and the section of it the line is
// in (tritonRegions), written from the kernels' structure.

// tritonSources are the kernels of each family, by file of the checkout:
// the forward's (mamba2, mamba3) and Mamba-2's backward's
// (mamba2-backward).
var tritonSources = map[string][]pySource{
	"mamba2": {
		{"mamba_ssm/ops/triton/ssd_chunk_state.py", []string{"_chunk_cumsum_fwd_kernel", "_chunk_state_fwd_kernel", "_chunk_state_varlen_kernel"}},
		{"mamba_ssm/ops/triton/ssd_state_passing.py", []string{"_state_passing_fwd_kernel"}},
		{"mamba_ssm/ops/triton/ssd_bmm.py", []string{"_bmm_chunk_fwd_kernel"}},
		{"mamba_ssm/ops/triton/ssd_chunk_scan.py", []string{"_chunk_scan_fwd_kernel"}},
	},
	// the backward's kernels, in the order _mamba_chunk_scan_combined_bwd
	// launches them
	"mamba2-backward": {
		{"mamba_ssm/ops/triton/ssd_chunk_scan.py", []string{"_chunk_scan_bwd_dz_kernel", "_chunk_scan_bwd_dstates_kernel", "_chunk_scan_bwd_dc_kernel",
			"_chunk_scan_bwd_dcb_kernel", "_chunk_scan_bwd_ddAcs_stable_kernel"}},
		{"mamba_ssm/ops/triton/ssd_state_passing.py", []string{"_state_passing_bwd_kernel"}},
		{"mamba_ssm/ops/triton/ssd_combined.py", []string{"_chunk_scan_chunk_state_bwd_dx_kernel"}},
		{"mamba_ssm/ops/triton/ssd_chunk_state.py", []string{"_chunk_state_bwd_db_kernel", "_chunk_cumsum_bwd_kernel"}},
		{"mamba_ssm/ops/triton/ssd_bmm.py", []string{"_bmm_chunk_bwd_kernel"}},
	},
	"mamba3": {
		{"mamba_ssm/ops/triton/mamba3/mamba3_siso_fwd.py", []string{"mamba3_siso_fwd_kernel"}},
		{"mamba_ssm/ops/triton/mamba3/angle_dt.py", []string{"angle_dt_fwd_kernel"}},
	},
}

// tritonOperators are Python's operators and Triton's own: e^x as 2^x and
// back, a mask's bound off by one, an index from the wrong program axis,
// a clamp removed, a product's operands swapped.
var tritonOperators = append(slices.Clone(pyOperators[:len(pyOperators)-2]),
	operator{"exp-to-exp2", regexp.MustCompile(`\btl\.exp\(`), "tl.exp2(", 0},
	operator{"exp2-to-exp", regexp.MustCompile(`\btl\.math\.exp2\(|\btl\.exp2\(`), "tl.exp(", 0},
	operator{"less-to-less-equal", regexp.MustCompile(` < `), " <= ", 0},
	operator{"greater-to-greater-equal", regexp.MustCompile(` > `), " >= ", 0},
	operator{"program-axis", regexp.MustCompile(`tl\.program_id\((axis=)?0\)`), "tl.program_id(${1}1)", 0},
	operator{"program-axis", regexp.MustCompile(`tl\.program_id\((axis=)?1\)`), "tl.program_id(${1}0)", 0},
	operator{"drop-clamp", regexp.MustCompile(`tl\.(minimum|maximum)\(([^,()]+(\([^()]*\))?[^,()]*), [^()]+\)`), "${2}", 0},
	operator{"swap-dot-operands", regexp.MustCompile(`tl\.dot\(([^,()]+), ([^,()]+)\)`), "tl.dot(${2}, ${1})", 0},
	operator{"constant-plus-one", regexp.MustCompile(`\b([0-9])\b([^.0-9eE]|$)`), "", 1},
)

var pyDocDelim = regexp.MustCompile(`"""`)

// tritonCandidates lists every mechanical mutation of the kernels in src
// (a file of the checkout root), in order: the bodies of the named
// @triton.jit functions, their signatures, docstrings, comments and
// static assertions left out.
func tritonCandidates(root string, src pySource) ([]Generated, error) {
	b, err := os.ReadFile(filepath.Join(root, src.file))
	if err != nil {
		return nil, err
	}
	var out []Generated
	fn, inSig, inDoc := "", false, false
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trim := strings.TrimSpace(line)
		if m := pyDef.FindStringSubmatch(line); m != nil {
			fn, inSig = m[1], !strings.HasSuffix(trim, ":")
			continue
		}
		if inSig {
			inSig = !strings.HasSuffix(trim, ":")
			continue
		}
		if d := len(pyDocDelim.FindAllString(line, -1)); d > 0 {
			if d == 1 {
				inDoc = !inDoc
			}
			continue
		}
		if inDoc {
			continue
		}
		if len(line) > 0 && line[0] != ' ' {
			fn = ""
		}
		if fn == "" || !slices.Contains(src.funcs, fn) || trim == "" || strings.HasPrefix(trim, "#") || strings.HasPrefix(trim, "tl.static_assert") {
			continue
		}
		code := line
		if i := strings.Index(code, "  #"); i >= 0 {
			code = code[:i]
		}
		for _, m := range mutate(tritonOperators, line, code, nil) {
			out = append(out, Generated{File: src.file, Line: n, Func: fn, Op: m.op, Before: line, After: m.after})
		}
	}
	return out, nil
}

// tritonRegion maps a kernel's lines (all of its function where line is
// nil) to the diagnosis tags that name the path they compute.
type tritonRegion struct {
	fn   string
	line *regexp.Regexp
	tags *regexp.Regexp
	path string
}

// axisPaths are the paths whose tags name a mutant only with the axis of
// the index the mutation changed (mutatedAxis), where it changed one:
// those of the stores the backward reads, known by their slices alone.
var axisPaths = map[string]bool{"what the forward stores for the backward": true}

// sliceTags are the tags of a slice relation (diagnose.measureSlices): a
// failure kept to its batch or head indices, crossing between slices, or
// on memory an earlier call left, in the forward ("op:slices:head-index",
// "op:trap-input:batch-ignored") or in a gradient ("bwd:dK:head-index").
const sliceTags = `-(index|crossed|ignored|stale)(\+|$)`

var (
	sliceTag = regexp.MustCompile(sliceTags)
	// axisTags are the slice relations along each axis a mutation's
	// index term names (a batch row is an unpacked problem's sequence)
	axisTags = map[string]*regexp.Regexp{
		"batch":    regexp.MustCompile(`(batch|sequence)` + sliceTags),
		"sequence": regexp.MustCompile(`(batch|sequence)` + sliceTags),
		"head":     regexp.MustCompile(`head` + sliceTags),
		"token":    regexp.MustCompile(`token` + sliceTags),
	}
)

// bwdCarried are the gradients a state's cotangent reaches.
var bwdCarried = bwdParts(`dinitial_states|dx|dB|ddt|dA|ddt_bias`)

// yRegions are the tags of the operator's regions of y (not the states').
const yRegions = `^op:(?:(?:diagonal|in-chunk|next-chunk|far|initial-state|initial-previous-input|cross-sequence|upper)\+?)+:`

var tritonRegions = map[string][]tritonRegion{
	"mamba2": {
		{"_chunk_cumsum_fwd_kernel", nil, regexp.MustCompile(`^dt:|^op:|^narrow:`), "Δ and the cumulative decay (every path)"},
		{"_bmm_chunk_fwd_kernel", nil, regexp.MustCompile(`^op:[^:]*(diagonal|in-chunk)|^groups:|^op:[^:]*:swapped`), "C·B, the chunk's quadratic form"},
		{"_chunk_scan_fwd_kernel", regexp.MustCompile(`^\s*dA_cs_m = `), regexp.MustCompile(`^op:|^dt:`), "the output step's cumulative decay (both paths)"},
		{"_chunk_scan_fwd_kernel", regexp.MustCompile(`x_residual|D_ptr|D = tl\.load`), regexp.MustCompile(`^op:diagonal:|^op:[^:]*:(no-D|D-twice)|^no-D|^op:offset`), "the skip term D"},
		{"_chunk_scan_fwd_kernel", regexp.MustCompile(`z_ptr|z = tl\.load|acc \*= z|out_x_ptr`), regexp.MustCompile(`^no-z|^op:[^:]*:(row-factor|times-with-D)`), "the gate"},
		{"_chunk_scan_fwd_kernel", regexp.MustCompile(`cb_ptr|cb = |cb \*=|dt_k|dA_cs_k|dA_cumsum_ptrs|x_ptrs|acc \+= tl\.dot\(cb|K_MAX|mask = offs_m|dt_ptrs`), regexp.MustCompile(`^op:[^:]*(diagonal|in-chunk)|^op:[^:]*:swapped`), "the chunk's quadratic form"},
		{"_chunk_scan_fwd_kernel", regexp.MustCompile(`dA_cs_m|prev_states|C_ptrs|scale_m|acc = tl\.dot\(C, prev|states_ptr|seq_idx_prev|c_idx`), regexp.MustCompile(`^op:[^:]*(next-chunk|far|initial-state)|^varlen:|^init-state:|^op:offset|^groups:`), "the entering state's output"},
		{"_chunk_scan_fwd_kernel", nil, regexp.MustCompile(yRegions + `|^op:offset|^no-|^D|^varlen:|^init-state:|^groups:`), "y: the chunk's quadratic form, the entering state's output, D and z"},
		{"_chunk_state_fwd_kernel", nil, regexp.MustCompile(`^op:[^:]*(next-chunk|far|state)|^varlen:|^init-state:|^groups:`), "the chunk's own state"},
		{"_chunk_state_varlen_kernel", nil, regexp.MustCompile(`^op:[^:]*state|^varlen:|^init-state:`), "a sequence's final state"},
		{"_state_passing_fwd_kernel", nil, regexp.MustCompile(`^op:[^:]*(next-chunk|far|state|initial)|^init-state:|^varlen:`), "the states passed between chunks"},
	},
	// each backward kernel's gradients: those it writes, and those its
	// results reach (the state's cotangent reaches every gradient that
	// the carried state's does); a path of the chain rule the kernel forms
	"mamba2-backward": {
		{"_chunk_scan_bwd_dz_kernel", nil, regexp.MustCompile(bwdParts(`dz|dD`) + `|(no|negated)-path:gate`), "dz, dD and the cotangent through the gate"},
		{"_chunk_scan_bwd_dstates_kernel", nil, regexp.MustCompile(bwdCarried), "the chunks' states' cotangents from y"},
		{"_state_passing_bwd_kernel", nil, regexp.MustCompile(bwdCarried + `|(^|\+)bwd:[^:]*:(no|negated)-path:(carry|final)`), "the states' cotangents passed between chunks, the initial states'"},
		{"_chunk_scan_chunk_state_bwd_dx_kernel", nil, regexp.MustCompile(bwdParts(`dx|ddt|ddt_bias|dD`)), "dx, and dt's and dD's parts through x"},
		{"_chunk_state_bwd_db_kernel", nil, regexp.MustCompile(bwdParts(`dB|ddt|dA|ddt_bias`)), "dB's part through the states, and the decay's"},
		{"_chunk_scan_bwd_dc_kernel", nil, regexp.MustCompile(bwdParts(`dC|ddt|dA|ddt_bias`)), "dC's part through the entering states, and the decay's"},
		{"_chunk_scan_bwd_dcb_kernel", nil, regexp.MustCompile(bwdParts(`dB|dC`)), "the chunk's quadratic form's C·B cotangent"},
		{"_bmm_chunk_bwd_kernel", nil, regexp.MustCompile(bwdParts(`dB|dC`)), "dB and dC from the C·B cotangent"},
		{"_chunk_scan_bwd_ddAcs_stable_kernel", nil, regexp.MustCompile(bwdParts(`ddt|dA|ddt_bias`)), "the cumulative decay's cotangent within a chunk"},
		{"_chunk_cumsum_bwd_kernel", nil, regexp.MustCompile(bwdParts(`ddt|dA|ddt_bias`)), "dt, A and dt_bias from the decay's cotangent"},
	},
	"mamba3": {
		// what the forward stores for the backward alone (DA_CS, Scale,
		// Gamma, the q·k dot; Q and K, which the forward also reads back):
		// a relation of the forward, or of a gradient, at the index the
		// mutation changed
		{"mamba3_siso_fwd_kernel", regexp.MustCompile(`(da_cs|da_cs_sum|q|k|qk|scale|gamma)_store_ptr|DA_CS(_SUM)?_Store\b`), regexp.MustCompile(`^op:|^m3:|(^|\+)bwd:[^:]+:`), "what the forward stores for the backward"},
		{"angle_dt_fwd_kernel", nil, regexp.MustCompile(`^op:[^:]*:(angle|unrotated)|^m3:(angle|rotate)|^op:`), "the accumulated angle"},
		{"mamba3_siso_fwd_kernel", regexp.MustCompile(`cos_|sin_|ko0|ko1|qo0|qo1|k0, k1|q0, q1|angle_block|angle_ptr|offs_hdr|tl\.join`), regexp.MustCompile(`^op:[^:]*:(angle|unrotated|swapped)|^m3:(angle|rotate|prev-key)`), "the rotation"},
		{"mamba3_siso_fwd_kernel", regexp.MustCompile(`dt_shifted|trap_shifted|shifted_gamma|gamma = |scale = shifted|trap = |dt = tl\.load|k_pre_block \*= scale|gamma_store|scale_store`), regexp.MustCompile(`^op:[^:]*:(no-current|no-previous|previous|lambda|gamma|beta|times|column-factor|zero)|^m3:(no-previous|lambda|beta|gamma)`), "the trapezoid's weights γ and β"},
		{"mamba3_siso_fwd_kernel", regexp.MustCompile(`store_qk_dot|qk_dot|D_val|D_ptr`), regexp.MustCompile(`^op:diagonal|^op:[^:]*:(no-D|D-twice|no-current|times)`), "the diagonal: D and the token's own term"},
		{"mamba3_siso_fwd_kernel", regexp.MustCompile(`init_|input_k_state|input_v_state|dt_scalar|trap_scalar|acc_ssm_states \+= input`), regexp.MustCompile(`^op:[^:]*(initial)|^op:[^:]*state-initial`), "the initial state"},
		{"mamba3_siso_fwd_kernel", regexp.MustCompile(`acc_o = tl\.dot\(q_block|acc_o \*= tl\.math\.exp2\(da_cs\)`), regexp.MustCompile(`^op:[^:]*(next-chunk|far|initial)`), "the entering state's output"},
		{"mamba3_siso_fwd_kernel", regexp.MustCompile(`s_block`), regexp.MustCompile(`^op:[^:]*(diagonal|in-chunk)`), "the chunk's quadratic form"},
		{"mamba3_siso_fwd_kernel", regexp.MustCompile(`da = |da_cs|exp2\(da`), regexp.MustCompile(`^op:[^:]*:(decay|exp|undecayed|entering|chunk-state|passed|exclusive|times|zero)`), "the cumulative decay"},
		{"mamba3_siso_fwd_kernel", regexp.MustCompile(`v_block \*= scale|acc_ssm_states = acc_ssm_states|scale = tl\.math\.exp2\(da_cs_rev`), regexp.MustCompile(`^op:[^:]*(next-chunk|far|state)`), "the state passed to the next chunk"},
		{"mamba3_siso_fwd_kernel", regexp.MustCompile(`z_block|silu`), regexp.MustCompile(`^op:[^:]*:(row-factor|times-with-D)|^op:`), "the gate"},
		{"mamba3_siso_fwd_kernel", nil, regexp.MustCompile(`^op:|^m3:`), "the kernel's indexing and the rest"},
	},
}

// tritonGradeOf says whether tag names the path of g's line. An
// accumulation made an assignment loses what was accumulated before it,
// a path of another line: any relation of the operator's names it there,
// as on the numpy paths (bridgedGradeOf).
func tritonGradeOf(family string, g Generated, tag string) (path string, correct bool) {
	for _, r := range tritonRegions[family] {
		if r.fn == g.Func && (r.line == nil || r.line.MatchString(g.Before)) {
			ok := r.tags.MatchString(tag)
			if ok && (axisPaths[r.path] || sliceTag.MatchString(tag)) {
				ok = axisNamed(mutatedAxis(g), tag)
			}
			if g.Op == "accumulate-to-assign" {
				return r.path + " (and what was accumulated before it)", ok || strings.HasPrefix(tag, "op:")
			}
			return r.path, ok
		}
	}
	return "", false
}

// mutatedAxis is the axis of the index term a mutation changed: "batch"
// (pid_batch, pid_b), "sequence" (seq_idx: a sequence's state), "head"
// (pid_head, pid_h), "token" (a position: seq_offset, offs_seqlen,
// chunk_offset), "" where it changed none. The term is the one the
// changed characters lie in, between its + or - operators.
func mutatedAxis(g Generated) string {
	a, b := g.Before, g.After
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	j, k := len(a), len(b)
	for j > i && k > i && a[j-1] == b[k-1] {
		j, k = j-1, k-1
	}
	term := func(s string, lo, hi int) string {
		hi = min(max(hi, lo+1), len(s))
		if lo < len(s) && strings.ContainsRune("+-", rune(s[lo])) {
			// the operator itself changed (+ to -): the term it leads
			lo++
			hi = max(hi, lo)
		} else {
			for lo > 0 && !strings.ContainsRune("+-,(=", rune(s[lo-1])) {
				lo--
			}
		}
		for hi < len(s) && !strings.ContainsRune("+-,)", rune(s[hi])) {
			hi++
		}
		return s[lo:hi]
	}
	t := term(a, i, j) + " " + term(b, i, k)
	switch {
	case strings.Contains(t, "pid_batch"), strings.Contains(t, "pid_b "), strings.Contains(t, "_batch"):
		return "batch"
	case strings.Contains(t, "seq_idx"):
		return "sequence"
	case strings.Contains(t, "pid_head"), strings.Contains(t, "pid_h "), strings.Contains(t, "_head"):
		return "head"
	case strings.Contains(t, "seq_offset"), strings.Contains(t, "offs_seqlen"), strings.Contains(t, "chunk_offset"), strings.Contains(t, "_seqlen"):
		return "token"
	}
	return ""
}

// axisNamed reports whether tag states a slice relation along axis,
// where the mutation changed an index ("" none: any tag of the path): a
// relation of values (a factor, a path cut) does not name an offset; a
// token's offset is named only by memory left at some positions
// ("token-stale"). A batch row is the sequence of an unpacked problem.
func axisNamed(axis, tag string) bool {
	if axis == "" {
		return true
	}
	re, ok := axisTags[axis]
	return ok && re.MatchString(tag)
}

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tritonFixture is a Triton file in upstream's manner: a decorated kernel
// with a signature over several lines, a docstring, comments and a static
// assertion, and a host function that is not a kernel.
const tritonFixture = `import triton
import triton.language as tl


@triton.jit
def _scan_kernel(
    x_ptr, y_ptr, seqlen,
    BLOCK: tl.constexpr,
):
    """
    The docstring: x * 2 < 3 is prose.
    """
    pid = tl.program_id(axis=0)
    # a comment: x + 1
    tl.static_assert(BLOCK > 1)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < seqlen, other=0.0)
    acc = tl.dot(x, w)
    y = tl.exp(tl.minimum(x, 0.0)) * acc
    tl.store(y_ptr + offs, y, mask=offs < seqlen)


def host(x):
    return x + 1
`

// TestTritonCandidates: the mutations are of the kernels' bodies alone
// (not their signatures, docstrings, comments, static assertions or the
// host's code), each changes its line, and Triton's operators are drawn.
func TestTritonCandidates(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "k.py"), []byte(tritonFixture), 0o644); err != nil {
		t.Fatal(err)
	}
	cands, err := tritonCandidates(dir, pySource{"k.py", []string{"_scan_kernel"}})
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]int{}
	for _, g := range cands {
		if g.Before == g.After {
			t.Errorf("line %d: %s changes nothing", g.Line, g.Op)
		}
		if g.Line < 13 || g.Line > 20 || g.Line == 14 || g.Line == 15 {
			t.Errorf("line %d (%q) mutated: outside the kernel's body, or a comment or assertion", g.Line, g.Before)
		}
		ops[g.Op]++
	}
	for _, op := range []string{"program-axis", "less-to-less-equal", "exp-to-exp2", "drop-clamp", "swap-dot-operands", "plus-to-minus", "times-to-divide"} {
		if ops[op] == 0 {
			t.Errorf("no %s mutation (drawn: %v)", op, ops)
		}
	}
	for _, g := range cands {
		if g.Op == "drop-clamp" && !strings.Contains(g.After, "tl.exp(x)") {
			t.Errorf("drop-clamp: %q, want the clamp's first operand alone", g.After)
		}
	}
}

// TestTritonGrading: every line of upstream's forward kernels lies in a
// path, and a path's tag grades the mutant correct while another
// kernel's does not.
func TestTritonGrading(t *testing.T) {
	g := Generated{File: "mamba_ssm/ops/triton/mamba3/mamba3_siso_fwd.py", Func: "mamba3_siso_fwd_kernel", Before: "        ko0 = k0 * cos_block - k1 * sin_block"}
	if path, ok := bridgedGradeOf("mamba3", g, "op:in-chunk+next-chunk+far:angle-negated(k)"); path != "the rotation" || !ok {
		t.Errorf("rotation line graded %q %v", path, ok)
	}
	if _, ok := bridgedGradeOf("mamba3", g, "op:in-chunk:previous-undecayed"); ok {
		t.Error("a rotation's mutant graded correct by a weight's relation")
	}
	g = Generated{File: "mamba_ssm/ops/triton/ssd_state_passing.py", Func: "_state_passing_fwd_kernel", Before: "        states = scale * states + new_states"}
	if path, ok := bridgedGradeOf("mamba2", g, "op:next-chunk+far:passed-state-undecayed"); path != "the states passed between chunks" || !ok {
		t.Errorf("state passing graded %q %v", path, ok)
	}
	if _, ok := bridgedGradeOf("mamba2", g, "op:in-chunk:times(2)"); ok {
		t.Error("a state passing mutant graded correct by an in-chunk relation")
	}
	g = Generated{File: "mamba_ssm/ops/triton/ssd_chunk_state.py", Func: "_chunk_cumsum_bwd_kernel", Before: "        dA = tl.sum(ddA * dt)"}
	if path, ok := bridgedGradeOf("mamba2-backward", g, "bwd:dA:lacks(Δ)"); path == "" || !ok {
		t.Errorf("the backward's cumsum graded %q %v", path, ok)
	}
	if _, ok := bridgedGradeOf("mamba2-backward", g, "bwd:dx:no-path:skip"); ok {
		t.Error("a mutant of dA's kernel graded correct by dx's relation")
	}
	if _, ok := bridgedGradeOf("mamba2-backward", g, "bwd:dx:none+bwd:ddt:factor(2)"); !ok {
		t.Error("a joined tag's second relation not read")
	}
	// a store the backward reads, at −head: named by a slice relation of
	// a gradient along the head axis, not the batch's, not a factor
	siso := "mamba_ssm/ops/triton/mamba3/mamba3_siso_fwd.py"
	g = Generated{File: siso, Func: "mamba3_siso_fwd_kernel", Op: "plus-to-minus",
		Before: "    scale_store_ptr = Scale_store + pid_batch * stride_scale_store_batch + pid_head * stride_scale_store_head + seq_offset * stride_scale_store_seqlen",
		After:  "    scale_store_ptr = Scale_store + pid_batch * stride_scale_store_batch - pid_head * stride_scale_store_head + seq_offset * stride_scale_store_seqlen"}
	for tag, want := range map[string]bool{"bwd:dK:head-index": true, "bwd:dQ:none+bwd:dK:v-input-head-crossed": true,
		"bwd:dK:batch-index": false, "bwd:dK:factor(2)": false, "bwd:dK:none": false, "op:in-chunk:times(2)": false} {
		if path, ok := bridgedGradeOf("mamba3", g, tag); path != "what the forward stores for the backward" || ok != want {
			t.Errorf("Scale_store at −head, [%s]: graded %q %v, want %v", tag, path, ok, want)
		}
	}
	// the stores at −token: memory left at some positions names it
	g.Op, g.Before, g.After = "plus-to-minus", "        tl.store(scale_store_ptr + offs_seqlen * stride_scale_store_seqlen, scale, mask=offs_seqlen < seqlen)",
		"        tl.store(scale_store_ptr - offs_seqlen * stride_scale_store_seqlen, scale, mask=offs_seqlen < seqlen)"
	for tag, want := range map[string]bool{"bwd:dK:token-stale": true, "bwd:dK:dt-input-batch-crossed": false, "bwd:dK:head-index": false} {
		if _, ok := bridgedGradeOf("mamba3", g, tag); ok != want {
			t.Errorf("Scale stored at −token, [%s]: graded %v, want %v", tag, ok, want)
		}
	}
	// the sequence stride of the initial state dropped: the sequence (an
	// unpacked problem's batch row) named, in the initial state's input
	g = Generated{File: siso, Func: "mamba3_siso_fwd_kernel", Op: "drop-factor",
		Before: "    init_v_state_ptr = Initial_V_State + seq_idx * stride_init_v_state_seq + pid_head * stride_init_v_state_head",
		After:  "    init_v_state_ptr = Initial_V_State + seq_idx + pid_head * stride_init_v_state_head"}
	for tag, want := range map[string]bool{"op:initial-v-state-input:batch-ignored": true, "op:initial-v-state-input:head-crossed": false, "op:slices:batch-index": false} {
		if _, ok := bridgedGradeOf("mamba3", g, tag); ok != want {
			t.Errorf("the initial V state without its sequence stride, [%s]: graded %v, want %v", tag, ok, want)
		}
	}
	// an accumulation made an assignment: what it accumulated before
	g = Generated{File: siso, Func: "mamba3_siso_fwd_kernel", Op: "accumulate-to-assign",
		Before: "        acc_o += tl.dot(s_block.to(v_block.dtype), v_block)", After: "        acc_o = tl.dot(s_block.to(v_block.dtype), v_block)"}
	if path, ok := bridgedGradeOf("mamba3", g, "op:initial-state:zero"); !ok || !strings.Contains(path, "accumulated before") {
		t.Errorf("acc_o assigned: graded %q %v", path, ok)
	}
	if suiteOf("mamba2-backward") != "mamba2" || len(suiteRun("mamba2-backward")) == 0 || suiteRun("mamba2") != nil {
		t.Error("the backward population is not judged by the Mamba-2 suite's backward tests")
	}
	for fam, srcs := range tritonSources {
		for _, s := range srcs {
			for _, fn := range s.funcs {
				if path, _ := bridgedGradeOf(fam, Generated{File: s.file, Func: fn, Before: "x"}, ""); path == "" {
					t.Errorf("%s %s: no path", fam, fn)
				}
			}
		}
	}
}

// TestBaselineSubtraction: a mutant of a kernel that fails some of the
// suite unmutated is killed by a subtest the unmutated kernel passes, or
// by a failing one diagnosed otherwise, never by the unmutated failures.
func TestBaselineSubtraction(t *testing.T) {
	log := []byte("=== RUN   TestA\n    --- FAIL: TestA/fp32/plain (0.1s)\n    --- PASS: TestA/bf16/plain (0.1s)\n--- FAIL: TestA (0.2s)\n--- FAIL: TestB (0.1s)\nFAIL\n")
	v := verdicts(log, filepath.Join(t.TempDir(), "none.json"))
	if len(v) != 2 || v["TestA/fp32/plain"] != "" || v["TestB"] != "" {
		t.Fatalf("verdicts %v, want the leaves TestA/fp32/plain and TestB", v)
	}
	base := &baseline{failed: map[string]string{"TestA/fp32/plain": "narrow:tf32"}}
	for _, c := range []struct {
		run  map[string]string
		want int
	}{
		{map[string]string{"TestA/fp32/plain": "narrow:tf32"}, 0},
		{map[string]string{"TestA/fp32/plain": "op:in-chunk:zero"}, 1},
		{map[string]string{"TestA/fp32/plain": "narrow:tf32", "TestA/bf16/plain": "op:far:zero"}, 1},
	} {
		if own := base.against(c.run); len(own) != c.want {
			t.Errorf("against(%v) = %v, want %d subtests", c.run, own, c.want)
		}
	}
}

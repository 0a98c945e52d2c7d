package bridge

import (
	"os/exec"
	"strings"
	"testing"
)

// TestUpstreamDecodeChainIsTheSteps: ssmbridge.upstream.decode_chain (the
// Triton adapters' ssd_decode_chain, FeatureStepLoop) gives each token's
// launch the inputs the one-step path gives it (upstream.step, one round
// trip a token with the state sent back), so that its y and last state
// equal that path's bit for bit, on a stand-in of selective_state_update
// in torch on the CPU (groups, D, z, dt_bias, softplus; a float32 state
// for bf16 inputs). Needs torch: the machines CI runs on have none, and
// einops is stood in for by its three patterns the adapters use.
func TestUpstreamDecodeChainIsTheSteps(t *testing.T) {
	needPython(t)
	if exec.Command(FindPython(), "-c", "import torch").Run() != nil {
		t.Skip("no torch for " + FindPython() + " (Debian: apt-get install python3-torch)")
	}
	script := `
import sys, types
sys.path.insert(0, "python")
import numpy as np, torch
try:
    import einops
except ImportError:
    einops = types.ModuleType("einops")
    def repeat(v, pattern, **n):
        if pattern == "h -> h p n":
            return v[:, None, None].expand(v.shape[0], n["p"], n["n"])
        if pattern in ("... h -> ... h p", "h -> h p"):
            return v[..., None].expand(*v.shape, n["p"])
        raise ValueError(pattern)
    einops.repeat = repeat
    sys.modules["einops"] = einops
from ssmbridge import upstream
from ssmbridge.arrays import from_float, from_torch, torch_dtype
def tensor(arrays, name, required=True):
    return upstream.tensor(arrays, name, "cpu", required)
def update(state, x, dt, A, B, C, D=None, z=None, dt_bias=None, dt_softplus=False, state_batch_indices=None):
    # one decode step as selective_state_update computes it, in float32; the state updated in place
    H, G = x.shape[1], B.shape[1]
    g = torch.arange(H) // (H // G)
    d = dt.float() + (0 if dt_bias is None else dt_bias.float())
    if dt_softplus:
        d = torch.nn.functional.softplus(d)
    s = state.float() * torch.exp(d[..., None] * A.float()) + (d * x.float())[..., None] * B.float()[:, g, None, :]
    state.copy_(s.to(state.dtype))
    y = (state.float() * C.float()[:, g, None, :]).sum(-1)
    if D is not None:
        y = y + D.float() * x.float()
    if z is not None:
        y = y * z.float() * torch.sigmoid(z.float())
    return y.to(x.dtype)
rng = np.random.default_rng(3)
Bt, L, H, P, G, N, k = 2, 9, 4, 3, 2, 5, 4
for tag, stag in (("f32", "f32"), ("bf16", "f32"), ("bf16", "bf16")):
    r = lambda *s: from_float(tag, rng.standard_normal(s).astype(np.float32))
    w = lambda *s: from_float("f32", rng.standard_normal(s).astype(np.float32))
    arrays = {"x": (tag, r(Bt, L, H, P)), "dt": (tag, r(Bt, L, H)), "B": (tag, r(Bt, L, G, N)), "C": (tag, r(Bt, L, G, N)),
              "z": (tag, r(Bt, L, H, P)), "A": ("f32", -np.abs(w(H))), "D": ("f32", w(H)), "dt_bias": ("f32", w(H))}
    params = {"prefill_tokens": k, "dt_softplus": True, "dt_limit": [0.0, None]}
    def prefill(head):
        # a stand-in prefill: the same recurrence from a zero state, its y and final state
        st = torch.zeros(Bt, H, P, N, dtype=torch_dtype(stag))
        x, dt, B, C, z = (tensor(head, n) for n in ("x", "dt", "B", "C", "z"))
        A, _, bias, D = upstream.tied_views(P, N, tensor(head, "A"), dt[:, 0], tensor(head, "dt_bias"), tensor(head, "D"))
        ys = [update(st, x[:, t], einops.repeat(dt[:, t], "... h -> ... h p", p=P), A, B[:, t], C[:, t], D=D, z=z[:, t],
                     dt_bias=bias, dt_softplus=True).unsqueeze(1) for t in range(x.shape[1])]
        return torch.cat(ys, 1), st
    got = upstream.decode_chain(tensor, arrays, params, prefill, update)
    y0, st = prefill({n: (tg, v[:, :k] if n in ("x", "dt", "B", "C", "z") else v) for n, (tg, v) in arrays.items()})
    want, state = [from_torch(y0)[1]], from_torch(st)
    for t in range(k, L):
        step = {n: (tg, v[:, t] if n in ("x", "dt", "B", "C", "z") else v) for n, (tg, v) in arrays.items()}
        out = upstream.step(tensor, dict(step, state=state), params, update)
        want.append(out["y"][1][:, None])
        state = out["state"]
    assert got["y"][0] == tag and got["final_states"][0] == stag, (got["y"][0], got["final_states"][0])
    assert np.array_equal(got["y"][1], np.concatenate(want, 1)), f"{tag}/{stag}: y differs from the one-step path's"
    assert np.array_equal(got["final_states"][1], state[1]), f"{tag}/{stag}: the last state differs"
    for bad in ({"prefill_tokens": 0}, {"prefill_tokens": L}, {"dt_limit": [0.0, 1.0]}):
        try:
            upstream.decode_chain(tensor, arrays, dict(params, **bad), prefill, update)
            raise AssertionError(f"{bad}: no refusal")
        except Exception as e:
            assert type(e).__name__ == "Unsupported", f"{bad}: {type(e).__name__}: {e}"
print("chained")
`
	out, err := exec.Command(FindPython(), "-c", script).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "chained") {
		t.Fatalf("decode_chain: %v\n%s", err, out)
	}
}

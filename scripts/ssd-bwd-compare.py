"""Compares upstream Mamba-2 backward (mamba2_upstream ssd_bwd) with the numpy path's hand-written adjoint on
four float32 problems (plain, an initial state, a packed row with an initial state, the dt limit), printing per
output and gradient max|upstream - numpy| / max|numpy|. A first look at upstream's backward before the suite judges it
by an error model (issue 75); on the GPU machine: python3 scripts/ssd-bwd-compare.py CHECKOUT.
"""
import sys, numpy as np
sys.path.insert(0, "bridge/python"); sys.path.insert(0, "bridge/python/adapters")
import mamba2_upstream as up, numpy_ssd as ref
up.open({"checkout": sys.argv[1] if len(sys.argv) > 1 else ".ext/mamba"}); ref.open({})
rng = np.random.default_rng(1)
def case(name, b, L, H, P, G, N, cu=None, init=True, lim=None):
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    a = {"x": ("f32", f(b, L, H, P)), "dt": ("f32", (rng.uniform(-4, -1, (b, L, H))).astype(np.float32)),
         "A": ("f32", -np.exp(rng.uniform(0, np.log(16), H)).astype(np.float32)), "B": ("f32", f(b, L, G, N)), "C": ("f32", f(b, L, G, N)),
         "D": ("f32", f(H)), "z": ("f32", f(b, L, H, P)), "dt_bias": ("f32", f(H)), "dy": ("f32", f(b, L, H, P)),
         "d_final_states": ("f32", f(b, H, P, N))}
    if init: a["initial_states"] = ("f32", f(b, H, P, N))
    if cu is not None: a["cu_seqlens"] = ("i32", np.array(cu, dtype=np.int32))
    prm = {"chunk_size": 64, "dt_softplus": True, "dt_limit": lim or [0.0, None], "state_dtype": "f32"}
    try:
        g = up.ssd_bwd(a, prm)
    except Exception as e:
        print(f"{name:24s} upstream raised {type(e).__name__}: {str(e)[:150]}"); return
    r = ref.ssd_bwd(a, prm)
    row = []
    for k in sorted(r):
        if k not in g: row.append(f"{k}:MISSING"); continue
        gv, rv = np.asarray(g[k][1], np.float64), np.asarray(r[k][1], np.float64)
        if gv.shape != rv.shape: row.append(f"{k}:shape{gv.shape}vs{rv.shape}"); continue
        row.append(f"{k}:{np.max(np.abs(gv-rv))/max(np.max(np.abs(rv)),1e-30):.1e}")
    print(f"{name:24s}", " ".join(row))
case("plain", 2, 200, 4, 16, 2, 16, init=False)
case("init", 2, 200, 4, 16, 1, 32)
case("packed+init", 1, 300, 4, 16, 2, 16, cu=[0, 64, 65, 190, 300])
case("clamped", 2, 150, 4, 16, 2, 16, init=False, lim=[0.02, 0.06])

#!/bin/bash
# scripts/explore/compare.sh NAME... (on the GPU machine, after explore.sh built build/variant-NAME.so for each):
# Check7 at make bench's sizes (BENCH_SIZES), fp32 and fp64, real and complex A, against every variant in turn,
# (DTYPES, COMPLEX to narrow) ROUNDS times (default 2) with the variants alternating, so that a drift of the GPU's clocks reaches them alike.
# Prints, per size, dtype, A and method, each variant's median µs (median over the rounds of Check7's medians)
# and its ratio to the first variant's, for the forward and, where the library has one, the backward (Check7's
# backward columns, with each variant's slowest backward against its zoh's). ROUNDS=0 runs nothing and summarises
# the logs an earlier call left (one cut short by a timeout, say). DEADLINE=S starts no run that the longest run
# so far says would end past S seconds from the start, and summarises what was measured (a device call's limit
# then leaves the table rather than nothing). Exits 1 when a run writes no check7.json.
out=${OUT:-/tmp/out} logs=${LOGS:-/tmp/compare-logs}
[ "${ROUNDS:-2}" = 0 ] || rm -rf "$logs"
mkdir -p "$out" "$logs"
fail=0 start=$SECONDS longest=0
for round in $(seq "${ROUNDS:-2}"); do
  for size in ${BENCH_SIZES:-8x512x1024x16 8x2048x4096x16}; do
    IFS=x read -r b d l n <<<"$size"
    for dt in ${DTYPES:-fp32 fp64}; do
      for cx in ${COMPLEX:-false true}; do
        for name in "$@"; do
          if [ -n "${DEADLINE:-}" ] && [ $((SECONDS - start + longest)) -gt "$DEADLINE" ]; then
            echo "compare.sh: DEADLINE=$DEADLINE s: stopping before round $round $name $size $dt complex=$cx" >&2
            break 5
          fi
          t0=$SECONDS
          dir=$logs/$name/$round/$size-$dt-$cx
          echo "compare.sh: round $round $name $size $dt complex=$cx" >&2
          mkdir -p "$dir"
          (cd verify && SSMK_BACKEND=cuda SSMK_LIB="$PWD/../build/variant-$name.so" ../carry/verify.test \
            -test.run '^TestCheck7MethodComparison$' -batch "$b" -dim "$d" -seqlen "$l" -dstate "$n" -dtype "$dt" \
            -complex="$cx" -trials "${TRIALS:-30}" -max-slowdown 1e9 -report "$dir") >"$dir/check7.log" 2>&1
          [ -f "$dir/check7.json" ] || { echo "compare.sh: $name $size $dt complex=$cx wrote no check7.json"; tail -5 "$dir/check7.log"; fail=1; }
          [ $((SECONDS - t0)) -le "$longest" ] || longest=$((SECONDS - t0))
        done
      done
    done
  done
done
python3 - "$logs" "$@" <<'PY' | tee "$out/compare.txt"
import glob, json, os, statistics, sys
logs, names = sys.argv[1], sys.argv[2:]
t = {}
for n in names:
    for path in glob.glob(f"{logs}/{n}/*/*/check7.json"):
        cfg = os.path.basename(os.path.dirname(path))
        for m in json.load(open(path))["methods"]:
            t.setdefault((cfg, m["method"], "fwd"), {}).setdefault(n, []).append(m["median_us"])
            if m.get("backward_median_us"):
                t.setdefault((cfg, m["method"], "bwd"), {}).setdefault(n, []).append(m["backward_median_us"])
print(f"{'size-dtype-complex':28} {'method':9} {'pass':4}" + "".join(f"{n + ' µs':>12}" for n in names) +
      "".join(f"{n + '/' + names[0]:>14}" for n in names[1:]))
worst = {(n, d): 0.0 for n in names[1:] for d in ("fwd", "bwd")}
order = lambda k: (k[2] != "fwd", k[0].split("-")[0].count("4096"), k[0],
                   ["zoh", "foh", "bilinear", "poly", "highorder", "rk4"].index(k[1]))
for k in sorted(t, key=order):
    med = {n: statistics.median(v) for n, v in t[k].items()}
    if names[0] not in med:
        continue
    line = f"{k[0]:28} {k[1]:9} {k[2]:4}" + "".join(f"{med.get(n, float('nan')):12.1f}" for n in names)
    for n in names[1:]:
        r = med.get(n, float("nan")) / med[names[0]]
        worst[n, k[2]] = max(worst[n, k[2]], r)
        line += f"{r:14.3f}"
    print(line)
for (n, d), w in worst.items():
    if w:
        print(f"worst {n}/{names[0]} ({d}): {w:.3f}")
# The backward's target: every method within 1.15x of zoh's backward, per variant and configuration.
for n in names:
    for cfg in sorted({k[0] for k in t if k[2] == "bwd"}):
        zoh = t.get((cfg, "zoh", "bwd"), {}).get(n)
        rs = {k[1]: statistics.median(v[n]) / statistics.median(zoh) for k, v in t.items()
              if k[0] == cfg and k[2] == "bwd" and n in v and zoh}
        if rs:
            m = max(rs, key=rs.get)
            print(f"{n} {cfg}: slowest backward {m} at {rs[m]:.3f}x zoh's")
PY
exit $fail

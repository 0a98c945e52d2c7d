#!/bin/bash
# scripts/explore/compare.sh NAME... (on the GPU machine, after explore.sh built build/variant-NAME.so for each):
# Check7 at make bench's sizes (BENCH_SIZES), fp32 and fp64, real and complex A, against every variant in turn,
# (DTYPES, COMPLEX to narrow) ROUNDS times (default 2) with the variants alternating, so that a drift of the GPU's clocks reaches them alike.
# Prints, per size, dtype, A and method, each variant's median µs (median over the rounds of Check7's medians)
# and its ratio to the first variant's. Exits 1 when a run writes no check7.json.
out=${OUT:-/tmp/out} logs=${LOGS:-/tmp/compare-logs}
rm -rf "$logs"; mkdir -p "$out" "$logs"
fail=0
for round in $(seq "${ROUNDS:-2}"); do
  for size in ${BENCH_SIZES:-8x512x1024x16 8x2048x4096x16}; do
    IFS=x read -r b d l n <<<"$size"
    for dt in ${DTYPES:-fp32 fp64}; do
      for cx in ${COMPLEX:-false true}; do
        for name in "$@"; do
          dir=$logs/$name/$round/$size-$dt-$cx
          mkdir -p "$dir"
          (cd verify && SSMK_BACKEND=cuda SSMK_LIB="$PWD/../build/variant-$name.so" ../carry/verify.test \
            -test.run '^TestCheck7MethodComparison$' -batch "$b" -dim "$d" -seqlen "$l" -dstate "$n" -dtype "$dt" \
            -complex="$cx" -trials "${TRIALS:-30}" -max-slowdown 1e9 -report "$dir") >"$dir/check7.log" 2>&1
          [ -f "$dir/check7.json" ] || { echo "compare.sh: $name $size $dt complex=$cx wrote no check7.json"; tail -5 "$dir/check7.log"; fail=1; }
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
            t.setdefault((cfg, m["method"]), {}).setdefault(n, []).append(m["median_us"])
print(f"{'size-dtype-complex':28} {'method':9}" + "".join(f"{n + ' µs':>12}" for n in names) +
      "".join(f"{n + '/' + names[0]:>14}" for n in names[1:]))
worst = {n: 0.0 for n in names[1:]}
order = lambda k: (k[0].split("-")[0].count("4096"), k[0], ["zoh", "foh", "bilinear", "poly", "highorder", "rk4"].index(k[1]))
for k in sorted(t, key=order):
    med = {n: statistics.median(v) for n, v in t[k].items()}
    if names[0] not in med:
        continue
    line = f"{k[0]:28} {k[1]:9}" + "".join(f"{med.get(n, float('nan')):12.1f}" for n in names)
    for n in names[1:]:
        r = med.get(n, float("nan")) / med[names[0]]
        worst[n] = max(worst[n], r)
        line += f"{r:14.3f}"
    print(line)
for n in names[1:]:
    print(f"worst {n}/{names[0]}: {worst[n]:.3f}")
PY
exit $fail

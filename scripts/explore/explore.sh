#!/bin/bash
# scripts/explore/explore.sh NAME=FLAGS ... (on the GPU machine, after scripts/gpu.sh build; scripts/gpu.sh variants
# runs it): builds the variants in parallel (extra nvcc flags FLAGS; the sources of carry/kernels_NAME/, a copy of
# a kernels/ tree, where present, else the working tree's kernels/), reports the registers, stack and loop sizes of
# their fp32 kernels (scripts/scan-sass.sh --print), then times BenchmarkPlanMambaBlock for each, ROUNDS times
# (default 1), and prints the medians, one column per variant. Logs go to $LOGS; sass.txt and table.txt to $OUT.
# ROUNDS=0 only builds; REBUILD=0 keeps the variants an earlier call built. Exits 1 when a variant does not
# build or its benchmark fails.
out=${OUT:-/tmp/out} logs=${LOGS:-/tmp/explore-logs}
rm -rf "$logs"; mkdir -p "$out" "$logs" build
fail=0
for v in "$@"; do
  name=${v%%=*}; flags=${v#*=}
  # REBUILD=0 keeps a variant built by an earlier call on the same machine
  [ "${REBUILD:-1}" = 0 ] && [ -f "build/variant-$name.so" ] && continue
  # the variant's kernels/ with the ABI's header beside it, where build-cuda.sh looks
  d=/tmp/lib-$name/kernels; rm -rf "/tmp/lib-$name"; mkdir -p "/tmp/lib-$name/cudalib"; cp -r cudalib/include "/tmp/lib-$name/cudalib/"
  if [ -d "carry/kernels_$name" ]; then cp -r "carry/kernels_$name" "$d"; else cp -r kernels "$d"; fi
  ( lib=$PWD/build/variant-$name.so
    SSMK_NVCC_EXTRA="$flags" "$d/build-cuda.sh" "$lib" 90 > "$logs/build-$name.log" 2>&1 ||
      { echo "BUILD FAIL $name"; grep -m5 error "$logs/build-$name.log"; exit 1; }
    # the fp32 forwards' registers, stack and loops, as make cuda-check counts them
    scripts/scan-sass.sh "$lib" --print | sed "s/^/$name /" > "$logs/sass-$name.txt" ) &
done
for p in $(jobs -p); do wait "$p" || fail=1; done
cat "$logs"/sass-*.txt > "$out/sass.txt" 2>/dev/null
for round in $(seq "${ROUNDS:-1}"); do
  for v in "$@"; do
    name=${v%%=*}
    [ -f "build/variant-$name.so" ] || continue
    (cd kernels && SSMK_BACKEND=cuda SSMK_LIB="$PWD/../build/variant-$name.so" ../carry/kernels.test -test.run '^$' \
      -test.bench "PlanMambaBlock${BENCH_FILTER:+/$BENCH_FILTER}" -test.benchtime "${BT:-1x}") >> "$logs/bench-$name.log" 2>&1 ||
      { echo "BENCH FAIL $name"; tail -5 "$logs/bench-$name.log"; fail=1; }
  done
done
python3 - "$logs" "$@" <<'PY' | tee "$out/table.txt"
# µs per scan of BenchmarkPlanMambaBlock, one column per variant (medians over the rounds)
import re, sys, statistics
logs, names = sys.argv[1], [a.split('=')[0] for a in sys.argv[2:]]
rows = {}
for n in names:
    try:
        for line in open(f"{logs}/bench-{n}.log"):
            m = re.match(r"BenchmarkPlanMambaBlock/(\S+?)-\d+\s.*?([0-9.]+) us/scan", line)
            if m:
                rows.setdefault(m.group(1), {}).setdefault(n, []).append(float(m.group(2)))
    except FileNotFoundError:
        pass
print(f"{'method/dtype':16}" + "".join(f"{n:>12}" for n in names))
for k, v in rows.items():
    print(f"{k:16}" + "".join(f"{statistics.median(v[n]) if n in v else float('nan'):12.1f}" for n in names))
PY
grep -h "method [012]:" "$out/sass.txt"
exit $fail

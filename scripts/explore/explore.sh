#!/bin/bash
# scripts/explore/explore.sh NAME=FLAGS ... (on the GPU machine, after scripts/gpu.sh build): parallel builds of variants (carry/cuda_NAME.cu replaces cuda.cu when present),
# registers and state-loop sizes of the fp32 VEC kernels, then BenchmarkPlanMambaBlock for each (ROUNDS times, medians)
out=${OUT:-/tmp/out}; mkdir -p "$out" build /tmp/logs
for v in "$@"; do
  name=${v%%=*}; flags=${v#*=}
  d=/tmp/lib-$name; rm -rf $d; cp -r cudalib $d
  [ -f carry/cuda_$name.cu ] && cp carry/cuda_$name.cu $d/src/cuda.cu; [ -f carry/ssmk_methods_$name.h ] && cp carry/ssmk_methods_$name.h $d/src/ssmk_methods.h
  ( SSMK_NVCC_EXTRA="$flags" $d/build-cuda.sh "$PWD/build/variant-$name.so" 90 > "/tmp/logs/build-$name.log" 2>&1 || { echo "BUILD FAIL $name"; grep -m5 error /tmp/logs/build-$name.log; }
    nvcc -O3 -std=c++17 --expt-relaxed-constexpr $flags -gencode arch=compute_90,code=sm_90 -I$d/include -cubin -o /tmp/logs/$name.cubin $d/src/cuda.cu 2>/dev/null
    for m in 0 1 2 3 4 5; do
      f=$(cuobjdump -sass /tmp/logs/$name.cubin | grep -o "_ZN[0-9A-Za-z_]*scan_kernelIfLb0ELi${m}ELb1EEEvNS_10ScanParamsE" | head -1)
      r=$(cuobjdump -res-usage /tmp/logs/$name.cubin 2>&1 | grep -A1 "$f" | tail -1 | awk '{print $1,$2}')
      cuobjdump -sass -fun "$f" /tmp/logs/$name.cubin > /tmp/logs/$name-m$m.sass
      l=$(python3 scripts/explore/loops.py /tmp/logs/$name-m$m.sass 2>/dev/null | awk '/^loop/ && $3+0>150 {printf "%s ", $3}')
      echo "$name method $m: $r loops: $l"
    done > /tmp/logs/sass-$name.txt ) &
done
wait
cat /tmp/logs/sass-*.txt > "$out/sass.txt"
for round in $(seq ${ROUNDS:-1}); do
for v in "$@"; do
  name=${v%%=*}
  (cd cudalib && SSMK_BACKEND=cuda SSMK_LIB="$PWD/../build/variant-$name.so" ../carry/cudalib.test -test.run '^$' -test.bench "PlanMambaBlock${BENCH_FILTER:+/$BENCH_FILTER}" -test.benchtime ${BT:-1x}) >> "/tmp/logs/bench-$name.log" 2>&1 || { echo "BENCH FAIL $name"; tail -5 "/tmp/logs/bench-$name.log"; }
done
done
python3 - "/tmp/logs" "$@" <<'PY' | tee "$out/table.txt"
import re, sys, statistics
out, names = sys.argv[1], [a.split('=')[0] for a in sys.argv[2:]]
rows = {}
for n in names:
    try:
        for line in open(f"{out}/bench-{n}.log"):
            m = re.match(r"BenchmarkPlanMambaBlock/(\S+?)-\d+\s.*?([0-9.]+) us/scan", line)
            if m: rows.setdefault(m.group(1), {}).setdefault(n, []).append(float(m.group(2)))
    except FileNotFoundError: pass
print(f"{'method/dtype':16}" + "".join(f"{n:>10}" for n in names))
for k, v in rows.items():
    print(f"{k:16}" + "".join(f"{statistics.median(v[n]) if n in v else float('nan'):10.1f}" for n in names))
PY
grep -h "method 0\|method 1\|method 2" "$out/sass.txt"

#!/bin/bash
# scripts/explore/profile.sh (on the GPU machine, after scripts/gpu.sh build): ncu profiles of the scan kernel (zoh and foh fp32, 8x512x1024x16): details and per-SASS-instruction stall samples into $OUT
out=${OUT:-/tmp/out}; mkdir -p "$out" build /tmp/prof
kernels/build-cuda.sh build/libssmk_cuda.so 90 > /tmp/prof/build.log 2>&1 || { tail -20 /tmp/prof/build.log; exit 1; }
export SSMK_BACKEND=cuda
ncu --version | tail -1
cd kernels
for m in zoh foh; do
  timeout 200 ncu --set full --import-source yes -k regex:scan_kernel --launch-skip 12 --launch-count 1 -f -o /tmp/prof/$m-small \
    ../carry/kernels.test -test.run '^$' -test.bench "PlanMambaBlock/$m/fp32" -test.benchtime 1x > /tmp/prof/ncu-$m.log 2>&1 || tail -5 /tmp/prof/ncu-$m.log
done
for r in zoh-small foh-small; do
  ncu -i /tmp/prof/$r.ncu-rep --page details > "$out/$r.txt" 2>&1
done
ncu -i /tmp/prof/zoh-small.ncu-rep --page source --csv --print-source sass > "$out/zoh-small-sass.csv" 2>&1 || head -5 "$out/zoh-small-sass.csv"
ncu -i /tmp/prof/foh-small.ncu-rep --page source --csv --print-source sass > "$out/foh-small-sass.csv" 2>&1
ls -la "$out"
grep -h -E "Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|Warp Cycles Per Issued|L1/TEX Hit|L2 Hit|Executed Instructions  " "$out"/*-*.txt

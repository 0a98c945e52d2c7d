#!/bin/bash
# scripts/explore/bwd-profile.sh [NAME=LIB ...] (on the GPU machine, after scripts/gpu.sh build): Nsight Compute
# profiles of one backward launch each (zoh fp32, 8x512x1024x16, through Check7's harness) of the project's CUDA
# build ("ours", built here) and of every NAME=LIB given (e.g. mamba=/tmp/mamba/libssmk_mamba.so, adapters/mamba):
# details and per-SASS-instruction samples into $OUT (NAME.txt, NAME-sass.csv.gz), then the headline figures.
# Read the CSVs with stalls.py (stall reasons by opcode) and blocks.py (where the executed instructions go).
out=${OUT:-/tmp/out}; mkdir -p "$out" build /tmp/prof
kernels/build-cuda.sh build/libssmk_cuda.so 90 > /tmp/prof/build.log 2>&1 || { tail -20 /tmp/prof/build.log; exit 1; }
export SSMK_BACKEND=cuda
ncu --version | tail -1
libs=("ours=$PWD/build/libssmk_cuda.so" "$@")
cd verify
for v in "${libs[@]}"; do
  name=${v%%=*} lib=${v#*=}
  [ -f "$lib" ] || { echo "bwd-profile.sh: $name: no library at $lib"; exit 2; }
  # the first backward launch is Check7's warm-up; profile the second
  SSMK_LIB=$lib timeout 300 ncu --set full --import-source yes -k 'regex:scan_bwd|selective_scan_bwd' --launch-skip 1 \
    --launch-count 1 -f -o "/tmp/prof/$name" ../carry/verify.test -test.run '^TestCheck7MethodComparison$' \
    -methods zoh -trials 3 -warmup 1 -max-slowdown 1e9 > "/tmp/prof/ncu-$name.log" 2>&1
  [ -f "/tmp/prof/$name.ncu-rep" ] || { tail -5 "/tmp/prof/ncu-$name.log"; echo "bwd-profile.sh: $name: no profile"; exit 1; }
  ncu -i "/tmp/prof/$name.ncu-rep" --page details > "$out/$name.txt" 2>&1
  ncu -i "/tmp/prof/$name.ncu-rep" --page source --csv --print-source sass 2>&1 | gzip > "$out/$name-sass.csv.gz"
done
for v in "${libs[@]}"; do
  echo "== ${v%%=*}"
  grep -h -E "Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|Executed Instructions  |Block Size" "$out/${v%%=*}.txt"
done

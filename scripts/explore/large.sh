#!/bin/bash
# scripts/explore/large.sh NAME... (after explore.sh built build/variant-NAME.so): Check7 at 8x2048x4096x16 for each built variant (interleaved trials)
for name in "$@"; do
  echo "== $name"
  (cd verify && SSMK_BACKEND=cuda SSMK_LIB=$PWD/../build/variant-$name.so ../carry/verify.test -test.run 'Check7MethodComparison' -test.v -batch 8 -dim 2048 -seqlen 4096 -dstate 16 -trials ${TRIALS:-15} -max-slowdown 10 2>&1 | grep -E "(zoh|foh|bilinear|poly|highorder|rk4) " | head -8)
done

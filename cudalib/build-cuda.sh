#!/usr/bin/env bash
# Builds the CUDA library: cudalib/build-cuda.sh OUT.so ARCH
# ARCH is a compute capability like 90, 87, 80 (or sm_90). The one place that
# knows nvcc's flags: `make lib-cuda`, `make cuda-check` and scripts/gpu.sh
# all call it. Warnings are errors (host and device), the CUDA runtime is
# linked statically (the .so needs only the driver), and only ssmk_* is
# exported.
set -euo pipefail
out=${1:?usage: build-cuda.sh OUT.so ARCH}
arch=${2:-90}
arch=${arch#sm_}
here=$(cd "$(dirname "$0")" && pwd)
nvcc=${NVCC:-nvcc}
command -v "$nvcc" >/dev/null || { echo "build-cuda.sh: $nvcc not found (Debian: apt-get install nvidia-cuda-toolkit g++-11)" >&2; exit 1; }
ccbin=()
# Debian's CUDA 11.8 supports host compilers up to GCC 11.
if [ -n "${NVCC_CCBIN:-}" ]; then ccbin=(-ccbin "$NVCC_CCBIN")
elif "$nvcc" --version | grep -q 'release 11\.' && command -v g++-11 >/dev/null; then ccbin=(-ccbin g++-11)
fi
mkdir -p "$(dirname "$out")"
flags=("${ccbin[@]}" -O3 -std=c++17 -lineinfo --expt-relaxed-constexpr ${SSMK_NVCC_EXTRA:-}
  -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Werror -Werror all-warnings
  -gencode "arch=compute_${arch},code=sm_${arch}" -I"$here/include")
# Each translation unit in parallel (kernels.cu and kernels_narrow.cu take
# most of the time, about equally), then one link.
objs=$(mktemp -d)
trap 'rm -rf "$objs"' EXIT
pids=()
for src in "$here"/src/cuda/*.cu; do
  (set -x; "$nvcc" "${flags[@]}" -c -o "$objs/$(basename "$src" .cu).o" "$src") &
  pids+=($!)
done
st=0
for p in "${pids[@]}"; do wait "$p" || st=1; done
[ "$st" -eq 0 ] || { echo "build-cuda.sh: a translation unit failed to compile" >&2; exit 1; }
set -x
"$nvcc" "${flags[@]}" -shared -o "$out" "$objs"/*.o -Xlinker --version-script="$here/src/ssmk.map"

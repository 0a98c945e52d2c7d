#!/usr/bin/env bash
# Builds the CUDA library: kernels/build-cuda.sh OUT.so ARCH
# ARCH is a compute capability like 90, 87, 80 (or sm_90). The one place that
# knows nvcc's flags: `make lib-cuda`, `make cuda-check` and scripts/gpu.sh
# all call it. Warnings are errors (host and device), the CUDA runtime is
# linked statically (the .so needs only the driver), and only ssmk_* is
# exported.
#
# SSMK_OBJ_CACHE=DIR keeps each translation unit's object in DIR under a key
# of everything that decides it: nvcc's version, the flags, and the bytes of
# the unit and of every file it includes from this tree (quoted or angled
# includes, resolved against the including file's folder and then the ABI's
# ../cudalib/include/, followed transitively; an include inside an #if
# counts too, which can only cost a rebuild). A build whose unit and includes match a cached one copies the
# object instead of compiling it: the CUDA mutants (cmd/mutants -cuda),
# each one patched file away from the unmutated tree, recompile only the
# units that include the patched file.
#
# build-cuda.sh --deps FILE prints the files the key hashes for FILE (no nvcc
# needed; kernels' TestBuildDepsCoverPreprocessor holds them to g++ -MM's).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# The ABI header lives with the binding (cudalib/include); a mutant's tree
# copies it beside its kernels/.
abi_inc=$(cd "$here/../cudalib/include" && pwd)
# deps FILE: FILE and the files of this tree it includes, transitively, one
# path a line (each once).
deps() {
  local -A seen=()
  local queue=("$1") f inc dir cand
  while [ ${#queue[@]} -gt 0 ]; do
    f=${queue[0]}
    queue=("${queue[@]:1}")
    [ -z "${seen[$f]:-}" ] || continue
    seen[$f]=1
    echo "$f"
    dir=$(dirname "$f")
    while IFS= read -r inc; do
      for cand in "$dir/$inc" "$abi_inc/$inc"; do
        if [ -f "$cand" ]; then
          queue+=("$(realpath "$cand")")
          break
        fi
      done
    done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^">]+)[">].*/\1/p' "$f")
  done
}
if [ "${1:-}" = --deps ]; then
  deps "$(realpath "${2:?usage: build-cuda.sh --deps FILE}")"
  exit 0
fi
out=${1:?usage: build-cuda.sh OUT.so ARCH}
arch=${2:-90}
arch=${arch#sm_}
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
  -gencode "arch=compute_${arch},code=sm_${arch}" -I"$abi_inc")
cache=${SSMK_OBJ_CACHE:-}
if [ -n "$cache" ]; then
  mkdir -p "$cache"
  # The flags name this tree's folders; a mutant's copy of the tree
  # differs there alone, so the key takes the folder's bytes (below), not its path.
  # nvcc adds NVCC_PREPEND_FLAGS and NVCC_APPEND_FLAGS to every command, and
  # the host compiler's version decides the host side of each object.
  toolkey=$({ "$nvcc" --version; "${ccbin[1]:-${CXX:-g++}}" --version 2>&1 | head -1
    printf '%s\n' "${flags[@]}" "${NVCC_PREPEND_FLAGS:-}" "${NVCC_APPEND_FLAGS:-}" | sed -e "s|$here|KERNELS|g" -e "s|$abi_inc|ABI|g"; } | sha256sum | cut -c1-64)
fi
# Each translation unit in parallel (kernels.cu and kernels_narrow.cu take
# most of the time, about equally), then one link.
objs=$(mktemp -d)
trap 'rm -rf "$objs"' EXIT
pids=()
reused=0
for src in "$here"/src/cuda/*.cu; do
  obj="$objs/$(basename "$src" .cu).o"
  if [ -n "$cache" ]; then
    # The key hashes each dependency's bytes, not its path: the unmutated
    # tree and a mutant's copy share a unit's object when their bytes agree.
    key=$( { echo "$toolkey"; deps "$(realpath "$src")" | sort | xargs -d '\n' sha256sum | cut -c1-64; } | sha256sum | cut -c1-64)
    if cp "$cache/$key.o" "$obj" 2>/dev/null; then
      reused=$((reused + 1))
      continue
    fi
    # Written under a temporary name and renamed: builds sharing the cache
    # never copy half an object.
    (set -x; "$nvcc" "${flags[@]}" -c -o "$obj" "$src" && cp "$obj" "$cache/$key.o.$$" && mv "$cache/$key.o.$$" "$cache/$key.o") &
  else
    (set -x; "$nvcc" "${flags[@]}" -c -o "$obj" "$src") &
  fi
  pids+=($!)
done
[ -z "$cache" ] || echo "build-cuda.sh: $reused of $(ls "$here"/src/cuda/*.cu | wc -l) objects from $cache"
st=0
for p in "${pids[@]}"; do wait "$p" || st=1; done
[ "$st" -eq 0 ] || { echo "build-cuda.sh: a translation unit failed to compile" >&2; exit 1; }
set -x
"$nvcc" "${flags[@]}" -shared -o "$out" "$objs"/*.o -Xlinker --version-script="$here/src/ssmk.map"

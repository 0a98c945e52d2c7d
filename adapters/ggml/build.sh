#!/usr/bin/env bash
# Builds an ssmk library over ggml's ggml_ssm_scan from a user's checkout:
#
#   adapters/ggml/build.sh GGML_SRC OUT.so [cpu|cuda]
#
# GGML_SRC is a ggml checkout (include/ggml.h at its top) or a llama.cpp
# checkout (ggml/ inside it). The backend is cpu (default) or cuda (nvcc on
# PATH; CUDA_ARCH, default 90). ggml is configured and built with cmake, as
# shared libraries, in OUT.so.ggml/ (kept: a second build only relinks), and
# adapters/ggml/ssmk_ggml.c is compiled against the checkout's headers and
# linked to it with an rpath. Nothing of ggml is copied into this repository.
#
# The commit is GGML_COMMIT, else the checkout's git HEAD; it appears in
# ssmk_device_name, hence in every report. The mode (Mamba-1 or Mamba-2 path)
# is chosen when the library runs: SSMK_GGML_HEAD_DIM (docs/adapters.md).
set -euo pipefail
usage="usage: adapters/ggml/build.sh GGML_SRC OUT.so [cpu|cuda]"
src=${1:?$usage}
out=${2:?$usage}
backend=${3:-cpu}
arch=${CUDA_ARCH:-90}
arch=${arch#sm_}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cc=${CC:-cc}
die() { echo "adapters/ggml: $*" >&2; exit 1; }

[ -d "$src" ] || die "GGML_SRC=$src is not a folder (want a ggml or llama.cpp checkout)"
src=$(cd "$src" && pwd)
if [ -f "$src/include/ggml.h" ]; then
	ggml=$src
elif [ -f "$src/ggml/include/ggml.h" ]; then
	ggml=$src/ggml
else
	die "$src has neither include/ggml.h (ggml) nor ggml/include/ggml.h (llama.cpp)"
fi
grep -q 'ggml_ssm_scan' "$ggml/include/ggml.h" || die "$ggml/include/ggml.h declares no ggml_ssm_scan"
# The ids form (Mamba-2 support, 2025) is required; K (state rollback) is optional.
proto=$(sed -n '/ggml_ssm_scan(/,/);/p' "$ggml/include/ggml.h")
echo "$proto" | grep -q 'ids' || die "this ggml's ggml_ssm_scan has no ids argument: a ggml from before Mamba-2 support, not handled"
k=0
echo "$proto" | grep -q 'int64_t *K *)' && k=1
case $backend in
cpu) cuda=OFF ;;
cuda)
	cuda=ON
	command -v nvcc >/dev/null || die "nvcc not found (put CUDA's bin/ on PATH) for the cuda backend"
	;;
*) die "backend $backend: want cpu or cuda" ;;
esac
command -v cmake >/dev/null || die "cmake not found (Debian: apt-get install cmake)"
# The checkout's own HEAD only: a copy without .git inside another repository
# would otherwise report that repository's commit.
commit=${GGML_COMMIT:-}
if [ -z "$commit" ]; then
	commit=unknown
	top=$(git -C "$src" rev-parse --show-toplevel 2>/dev/null || true)
	[ "$top" != "$src" ] || commit=$(git -C "$src" rev-parse HEAD)
fi

mkdir -p "$(dirname "$out")"
out=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
bdir="$out.ggml"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if [ ! -f "$bdir/CMakeCache.txt" ]; then
	echo "adapters/ggml: configuring ggml ($backend) in $bdir"
	cmake -S "$ggml" -B "$bdir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
		-DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF -DGGML_CUDA=$cuda -DCMAKE_CUDA_ARCHITECTURES="$arch" >"$bdir.log" 2>&1 ||
		{ tail -20 "$bdir.log" >&2; die "cmake configure failed (log: $bdir.log)"; }
fi
echo "adapters/ggml: building ggml ($backend) in $bdir"
cmake --build "$bdir" -j"$(nproc)" --target ggml >>"$bdir.log" 2>&1 ||
	{ tail -20 "$bdir.log" >&2; die "building ggml failed (log: $bdir.log)"; }
libdir=$(dirname "$(find "$bdir" -name 'libggml.so' | head -1)")
[ -f "$libdir/libggml.so" ] || die "no libggml.so under $bdir"
libs=(-lggml -lggml-base -lggml-cpu)
defs=(-DSSMK_GGML_COMMIT="\"$commit\"" -DSSMK_GGML_SCAN_K=$k)
rpaths=(-Wl,-rpath,"$libdir")
if [ "$cuda" = ON ]; then
	cudadir=$(dirname "$(find "$bdir" -name 'libggml-cuda.so' | head -1)")
	libs+=(-L"$cudadir" -lggml-cuda)
	rpaths+=(-Wl,-rpath,"$cudadir")
	defs+=(-DSSMK_GGML_CUDA=1)
fi
cpudir=$(dirname "$(find "$bdir" -name 'libggml-cpu.so' | head -1)")
basedir=$(dirname "$(find "$bdir" -name 'libggml-base.so' | head -1)")
"$cc" -O2 -std=c11 -fPIC -shared -Wall -Wextra -Werror -fvisibility=hidden \
	-I"$ggml/include" -I"$root/cudalib/include" "${defs[@]}" \
	-o "$out" "$here/ssmk_ggml.c" -L"$libdir" -L"$cpudir" -L"$basedir" "${libs[@]}" \
	"${rpaths[@]}" -Wl,-rpath,"$cpudir" -Wl,-rpath,"$basedir" -lpthread -lm \
	-Wl,--version-script="$root/kernels/src/ssmk.map" -Wl,--no-undefined
echo "adapters/ggml: $out (ggml ${commit:0:12}, $backend backend, ggml_ssm_scan with K: $k)"

#!/usr/bin/env bash
# Builds an ssmk library from a Mamba-family tree's selective-scan kernel:
#
#   adapters/mamba/build.sh MAMBA_SRC OUT.so [FLAVOR]
#
# MAMBA_SRC is the tree's csrc/selective_scan folder (upstream
# state-spaces/mamba, a fork, or MzeroMiko/VMamba's
# kernels/selective_scan/csrc/selective_scan); FLAVOR is upstream (zoh only),
# fork (the tree's SSMParamsBase has discretization_method, in the ABI's
# order), vmamba (VMamba's cusoflex kernels: zoh, real A, variable B/C, no z)
# or auto (default: vmamba when the folder has cusoflex/, else fork when
# selective_scan.h declares discretization_method, else upstream).
#
# For upstream and fork trees it compiles adapters/mamba/ssmk_mamba.cu and the tree's
# selective_scan_fwd_fp32.cu (with _fp16 and _bf16, and the backward's
# selective_scan_bwd_fp32_real.cu and _complex.cu, and _fp16_real.cu and
# _bf16_real.cu, where the tree has them: SSMK_MAMBA_NARROW=0,
# SSMK_MAMBA_BWD=0 and SSMK_MAMBA_BWD_NARROW=0 leave them out); for VMamba
# the cusoflex kernels of float32, fp16 and bf16, forward and backward
# (SSMK_MAMBA_BWD=0 leaves the backward out), instantiated by files of ours
# that include the tree's kernel headers; with the
# nvcc flags of the tree's setup.py
# (found two folders up; the usual Mamba flags when there is none), against
# the PyTorch headers of the python3 that imports torch (PYTHON to choose),
# for CUDA_ARCH (default 90), and links c10 with an rpath. Nothing of the
# tree is copied: the .so is built from the user's checkout in place.
set -euo pipefail
src=${1:?usage: adapters/mamba/build.sh MAMBA_SRC OUT.so [upstream|fork|vmamba|auto]}
out=${2:?usage: adapters/mamba/build.sh MAMBA_SRC OUT.so [upstream|fork|vmamba|auto]}
flavor=${3:-auto}
arch=${CUDA_ARCH:-90}
arch=${arch#sm_}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
nvcc=${NVCC:-nvcc}
python=${PYTHON:-python3}
die() { echo "adapters/mamba: $*" >&2; exit 1; }

[ -d "$src" ] || die "MAMBA_SRC=$src is not a folder (want the tree's csrc/selective_scan)"
src=$(cd "$src" && pwd)
if [ "$flavor" = auto ] && [ -f "$src/cusoflex/selective_scan_oflex.h" ]; then flavor=vmamba; fi
need=(selective_scan.h selective_scan_common.h selective_scan_fwd_kernel.cuh selective_scan_fwd_fp32.cu)
[ "$flavor" = vmamba ] && need=(selective_scan_common.h cusoflex/selective_scan_oflex.h cusoflex/selective_scan_core_fwd.cu)
for f in "${need[@]}"; do
	[ -f "$src/$f" ] || die "$src has no $f: MAMBA_SRC must be a Mamba-family csrc/selective_scan folder"
done
command -v "$nvcc" >/dev/null || die "$nvcc not found (set NVCC, or put CUDA's bin/ on PATH)"
command -v "$python" >/dev/null || die "$python not found (PyTorch's headers are found through it; set PYTHON)"
torch=$("$python" - <<'EOF' 2>&1
import torch, torch.utils.cpp_extension as ext
print(" ".join("-I" + p for p in ext.include_paths()))
print(ext.library_paths()[0])
print(int(torch._C._GLIBCXX_USE_CXX11_ABI))
print(torch.__version__)
EOF
) || die "PyTorch not importable by $python (its c10 headers are needed): $(echo "$torch" | tail -1)"
torch_inc=$(sed -n 1p <<<"$torch")
torch_lib=$(sed -n 2p <<<"$torch")
cxx11abi=$(sed -n 3p <<<"$torch")
torch_version=$(sed -n 4p <<<"$torch")

case $flavor in
auto) if grep -q 'discretization_method' "$src/selective_scan.h"; then flavor=fork; else flavor=upstream; fi ;;
upstream | fork | vmamba) ;;
*) die "FLAVOR=$flavor, want upstream, fork, vmamba or auto" ;;
esac
methods=0
if [ "$flavor" = fork ]; then
	grep -q 'discretization_method' "$src/selective_scan.h" ||
		die "FLAVOR=fork but $src/selective_scan.h has no discretization_method field"
	methods=1
fi

# The tree's own nvcc flags: the quoted options of setup.py's CUDA (not HIP)
# branch, append_nvcc_threads([...]) (Mamba), else its "nvcc": [...] list
# (VMamba); ptxas -v only adds noise.
setup=$(cd "$src/../.." && pwd)/setup.py
flags=()
if [ -f "$setup" ]; then
	mapfile -t flags < <("$python" - "$setup" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r'append_nvcc_threads\(\s*\[(.*?)\]', text, re.S) or re.search(r'"nvcc":\s*\[(.*?)\]', text, re.S)
if m:
    for f in re.findall(r'"(-[^"]+)"', m.group(1)):
        if f != "--ptxas-options=-v":
            print(f)
EOF
)
fi
if [ ${#flags[@]} -eq 0 ]; then
	echo "adapters/mamba: no nvcc flags found in $setup; using Mamba's usual ones" >&2
	flags=(-O3 -std=c++17 -U__CUDA_NO_HALF_OPERATORS__ -U__CUDA_NO_HALF_CONVERSIONS__ -U__CUDA_NO_BFLOAT16_OPERATORS__
		-U__CUDA_NO_BFLOAT16_CONVERSIONS__ -U__CUDA_NO_BFLOAT162_OPERATORS__ -U__CUDA_NO_BFLOAT162_CONVERSIONS__
		--expt-relaxed-constexpr --expt-extended-lambda --use_fast_math -lineinfo)
fi
# The tree's commit, for the device name and the findings: MAMBA_COMMIT, else
# the checkout's own git (not an enclosing repository's, e.g. this one's).
commit=${MAMBA_COMMIT:-}
if [ -z "$commit" ] && top=$(git -C "$src" rev-parse --show-toplevel 2>/dev/null) && [ "$top" != "$root" ]; then
	commit=$(git -C "$src" rev-parse --short=12 HEAD)
fi
commit=${commit:-unknown}

mkdir -p "$(dirname "$out")"
# The tree's kernel takes minutes to compile: its object is kept beside the
# library and rebuilt when a source of the tree or the flags change.
obj=${out%.so}.obj
mkdir -p "$obj"
common=("${flags[@]}" -gencode "arch=compute_${arch},code=sm_${arch}" -Xcompiler -fPIC
	-D_GLIBCXX_USE_CXX11_ABI="$cxx11abi" -I"$src" -I"$root/cudalib/include" $torch_inc)
# VMamba's cusoflex headers come first: its selective_scan.h is another kernel's.
if [ "$flavor" = vmamba ]; then common=(-I"$src/cusoflex" "${common[@]}"); fi
# A tree from before CCCL 3 (Mamba 1.1.1's reverse_scan.cuh, which forks carry)
# calls cub::LaneId and cub::CTA_SYNC, which CUDA 13's CUB no longer has:
# cub_compat.cuh defines them where they are missing.
if grep -qE 'cub::(LaneId|CTA_SYNC)\(' "$src"/*.cuh "$src"/*.h 2>/dev/null; then
	common+=(-include "$here/cub_compat.cuh")
	echo "adapters/mamba: the tree calls cub::LaneId or cub::CTA_SYNC: adapters/mamba/cub_compat.cuh provides them"
fi
echo "adapters/mamba: $flavor tree $src (commit $commit), PyTorch $torch_version, sm_$arch"
echo "adapters/mamba: the tree's nvcc flags: ${flags[*]}"
# The kernel files: kind k compiles ksrc[k], the tree's selective_scan_<k>.cu
# (Mamba: one file per input type and direction), or for VMamba, whose
# cusoflex/selective_scan_core_fwd.cu and _bwd.cu instantiate every type in one
# file each, a file of ours written into the object folder that includes the
# tree's kernel header and instantiates one input type (output of the input
# type, as the ABI's out and dout are), so that they compile in parallel.
declare -A ksrc
vmamba=0
if [ "$flavor" = vmamba ]; then
	vmamba=1
	narrow=1
	bwd=0
	kinds=(fwd_fp32 fwd_fp16 fwd_bf16)
	bwd_kinds=()
	if [ "${SSMK_MAMBA_BWD:-1}" = 1 ] && [ -f "$src/cusoflex/selective_scan_bwd_kernel_oflex.cuh" ]; then
		bwd=1
		bwd_kinds=(bwd_fp32 bwd_fp16 bwd_bf16)
	fi
	bwd_narrow=$bwd
	declare -A vtype=([fp32]=float [fp16]=c10::Half [bf16]=c10::BFloat16)
	for k in "${kinds[@]}" "${bwd_kinds[@]}"; do
		dir=${k%%_*} t=${vtype[${k#*_}]}
		params=SSMParamsBase
		[ "$dir" = bwd ] && params=SSMParamsBwd
		printf '#include "selective_scan_%s_kernel_oflex.cuh"\ntemplate void selective_scan_%s_cuda<1, %s, float, %s>(%s &, cudaStream_t);\n' \
			"$dir" "$dir" "$t" "$t" "$params" >"$obj/vmamba_$k.cu"
		ksrc[$k]=$obj/vmamba_$k.cu
	done
else
	# The fp16 and bf16 instantiations too where the tree has them (SSMK_MAMBA_NARROW=0
	# leaves them out: a third of the compile time each); the files compile in parallel.
	kinds=(fp32)
	narrow=0
	if [ "${SSMK_MAMBA_NARROW:-1}" = 1 ] && [ -f "$src/selective_scan_fwd_fp16.cu" ] && [ -f "$src/selective_scan_fwd_bf16.cu" ]; then
		kinds=(fp32 fp16 bf16)
		narrow=1
	fi
	kinds=("${kinds[@]/#/fwd_}")
	# The backward kernels (selective_scan_bwd_fp32_real.cu and _complex.cu) where the
	# tree has them: the slowest files of all (SSMK_MAMBA_BWD=0 leaves them out).
	bwd=0
	bwd_kinds=()
	if [ "${SSMK_MAMBA_BWD:-1}" = 1 ] && [ -f "$src/selective_scan_bwd_kernel.cuh" ] &&
		[ -f "$src/selective_scan_bwd_fp32_real.cu" ] && [ -f "$src/selective_scan_bwd_fp32_complex.cu" ]; then
		bwd=1
		bwd_kinds=(bwd_fp32_real bwd_fp32_complex)
	fi
	# Their fp16 and bf16 instantiations with real A, where the tree has them and the
	# 16-bit forward is built (SSMK_MAMBA_BWD_NARROW=0 leaves them out).
	bwd_narrow=0
	if [ "$bwd" = 1 ] && [ "$narrow" = 1 ] && [ "${SSMK_MAMBA_BWD_NARROW:-1}" = 1 ] &&
		[ -f "$src/selective_scan_bwd_fp16_real.cu" ] && [ -f "$src/selective_scan_bwd_bf16_real.cu" ]; then
		bwd_narrow=1
		bwd_kinds+=(bwd_fp16_real bwd_bf16_real)
	fi
	for k in "${kinds[@]}" "${bwd_kinds[@]}"; do ksrc[$k]=$src/selective_scan_$k.cu; done
fi
# The headers of VMamba's cusoflex folder enter its stamps too.
kheaders=()
if [ "$vmamba" = 1 ]; then kheaders=("$src"/cusoflex/*.h "$src"/cusoflex/*.cuh); fi
set -x
pids=()
for k in "${kinds[@]}" "${bwd_kinds[@]}"; do
	stamp=$(printf '%s\n' "${common[@]}" | cat - "$src"/*.h "$src"/*.cuh "${kheaders[@]}" "${ksrc[$k]}" | sha256sum | cut -c1-16)
	if [ "$(cat "$obj/$k.stamp" 2>/dev/null)" != "$stamp" ]; then
		("$nvcc" "${common[@]}" -c "${ksrc[$k]}" -o "$obj/$k.o" && echo "$stamp" >"$obj/$k.stamp") &
		pids+=($!)
	fi
done
for p in "${pids[@]}"; do wait "$p" || die "the tree's selective_scan kernels failed to compile"; done
"$nvcc" "${common[@]}" -DSSMK_MAMBA_VMAMBA=$vmamba -DSSMK_MAMBA_METHODS=$methods -DSSMK_MAMBA_NARROW=$narrow -DSSMK_MAMBA_BWD=$bwd -DSSMK_MAMBA_BWD_NARROW=$bwd_narrow -DSSMK_MAMBA_COMMIT="\"$commit\"" \
	-c "$here/ssmk_mamba.cu" -o "$obj/adapter.o"
kernels=()
for k in "${kinds[@]}" "${bwd_kinds[@]}"; do kernels+=("$obj/$k.o"); done
"$nvcc" -shared -o "$out" "$obj/adapter.o" "${kernels[@]}" -L"$torch_lib" -lc10 -lc10_cuda \
	-Xlinker -rpath="$torch_lib" -Xlinker --version-script="$root/kernels/src/ssmk.map"

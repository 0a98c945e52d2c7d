#!/usr/bin/env bash
# scripts/scan-registers.sh LIB [MAX]: one line on the registers of the scan
# kernels in a built CUDA library (cuobjdump -res-usage), naming every kernel
# over MAX (default 128). With MAX given, exits 1 when there is one.
#
# Why 128: the scan runs blocks of 128 threads, and a kernel over 128
# registers fits fewer than 4 of them per SM. Every variant that crossed it
# lost 10–50 % (docs/performance.md), one of them unnoticed in review. make cuda-check runs this with MAX = 128
# on CI's sm_90 build (nvcc 11.8); scripts/gpu.sh prints it for the GPU
# machine's own build, whose nvcc may count differently.
set -euo pipefail
lib=${1:?usage: scan-registers.sh LIB [MAX]}
max=${2:-}
command -v cuobjdump >/dev/null || { echo "scan-registers.sh: cuobjdump not found (it comes with nvcc)" >&2; exit 2; }
[ -f "$lib" ] || { echo "scan-registers.sh: no library at $lib" >&2; exit 2; }
[ -z "$max" ] || [[ "$max" =~ ^[0-9]+$ ]] || { echo "scan-registers.sh: MAX must be a number of registers, got '$max'" >&2; exit 2; }
cuobjdump -res-usage "$lib" 2>/dev/null | awk -v limit="${max:-128}" -v strict="${max:+1}" '
# scan_kernel<ScanTraits<T, CPLX, M, VEC, IN>> mangled: ...ScanTraitsI f|d Lb 0|1 E Li [n]M E Lb 0|1 E IN
function field(s,   i) { i = index(s, "E"); return substr(s, 1, i - 1) }
/Function .*scan_kernel(_narrow)?.*ScanTraitsI/ { f = $0; next }
f != "" && /REG:/ {
    regs = $1; sub(/^REG:/, "", regs); regs += 0
    if (regs > top) top = regs
    if (regs > limit) {
        s = f; sub(/.*ScanTraitsI/, "", s)
        dtype = substr(s, 1, 1) == "f" ? "fp32" : "fp64"
        if (s ~ /bfloat16/) dtype = "bf16"   # ScanTraits<float, …, IN>: the 16-bit input types
        else if (s ~ /half16/) dtype = "fp16"
        kind = substr(s, 4, 1) == "1" ? "complex" : "real"
        s = substr(s, 6); sub(/^Li/, "", s); m = field(s); s = substr(s, length(m) + 2)
        split("zoh foh bilinear poly highorder rk4", names, " ")
        name = m ~ /^n/ ? "all methods" : names[m + 1]
        case_ = substr(s, 3, 1) == "1" ? "Mamba case" : "general"
        list = list (n++ ? "; " : "") dtype " " kind " " name " (" case_ "): " regs
    }
    f = ""
}
END {
    if (top == 0) { print "registers: no scan kernel found"; exit 2 }
    why = limit == 128 ? " (fewer than 4 blocks of 128 threads per SM)" : ""
    if (n) print "registers: " n " scan kernels over " limit why ": " list
    else print "registers: every scan kernel within " limit "; the most " top
    if (n && strict) exit 1
}'

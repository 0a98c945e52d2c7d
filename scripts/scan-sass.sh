#!/usr/bin/env bash
# scripts/scan-sass.sh LIB BASELINE [--update] | LIB --print: the shape of the fp32 real forward kernels that
# make bench times (scan_kernel for each method, Mamba case: variable B/C in 16-byte runs), as their registers,
# stack bytes and the instruction counts of their loops of over 150 instructions (the tile loop and the state
# loops), compared with BASELINE. Exits 1, naming what changed, when they differ and BASELINE was written by
# the same nvcc; with another nvcc it only reports. --update rewrites BASELINE; --print only prints the shape
# (scripts/explore/explore.sh's report of each variant, the older builds' kernel names included).
#
# Why: ptxas reschedules these loops for changes far from them. A field added to the kernel's parameters and
# read once per row (3cbba4e) grew every state loop by 4–11 instructions and cost every method 2–3.5 % on the
# H200, unnoticed for two days (docs/performance.md). A change of shape is not a change of speed, in either
# direction, but it is the sign that one needs timing: side by side with the committed kernel on a GPU
# (scripts/explore/compare.sh), then --update in the same commit, the figures in its message.
set -euo pipefail
usage="usage: scan-sass.sh LIB BASELINE [--update], or scan-sass.sh LIB --print"
lib=${1:?$usage}
base=${2:?$usage}
mode=${3:-}
if [ "$base" = --print ]; then
  mode=--print
  [ $# -eq 2 ] || { echo "scan-sass.sh: --print takes no third argument ($usage)" >&2; exit 2; }
fi
[ -z "$mode" ] || [ "$mode" = --update ] || [ "$mode" = --print ] || { echo "scan-sass.sh: the third argument must be --update, got '$mode'" >&2; exit 2; }
command -v cuobjdump >/dev/null || { echo "scan-sass.sh: cuobjdump not found (it comes with nvcc)" >&2; exit 2; }
[ -f "$lib" ] || { echo "scan-sass.sh: no library at $lib" >&2; exit 2; }
nvccv=$("${NVCC:-nvcc}" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')
names=(zoh foh bilinear poly highorder rk4)
sass=$(mktemp); res=$(mktemp)
trap 'rm -f "$sass" "$res"' EXIT
cuobjdump -sass "$lib" > "$sass" 2>/dev/null
cuobjdump -res-usage "$lib" > "$res" 2>/dev/null
now=$(for m in 0 1 2 3 4 5; do
  # ScanTraits<float, false, m, true, float> with CS = false; the other endings are the
  # names of the builds before the redesign and the phase 1, which explore.sh may time beside it
  f=$(grep -oE "_Z[0-9A-Za-z_]*scan_kernel[0-9A-Za-z_]*IfLb0ELi${m}ELb1E(Li32E|EE|fEE|fEELb0E)EEvNS_10ScanParamsE" "$sass" | head -1)
  [ -n "$f" ] || { echo "scan-sass.sh: no fp32 forward kernel of method $m in $lib" >&2; exit 2; }
  regs=$(grep -A1 "Function $f:" "$res" | sed -n 's/.*REG:\([0-9]*\).*/\1/p')
  stack=$(grep -A1 "Function $f:" "$res" | sed -n 's/.*STACK:\([0-9]*\).*/\1/p')
  # the function's listing runs from its "Function :" line to the next one
  loops=$(awk -v f="$f" '
    function hex(s,   i, c, v) { v = 0; s = tolower(s); for (i = 1; i <= length(s); i++) { c = index("0123456789abcdef", substr(s, i, 1)); v = v * 16 + c - 1 }; return v }
    /Function :/ { on = index($0, f) > 0; next }
    on && match($0, /\/\*[0-9a-f][0-9a-f][0-9a-f][0-9a-f]+\*\//) {
      a = hex(substr($0, RSTART + 2, RLENGTH - 4)); n++; at[a] = n
      if (match($0, /BRA [^;]*0x[0-9a-f]+/)) {
        s = substr($0, RSTART, RLENGTH); sub(/.*0x/, "", s); t = hex(s)
        if (t <= a && (t in at) && n - at[t] + 1 > 150) printf "%s%d", (k++ ? " " : ""), n - at[t] + 1
      }
    }' "$sass")
  echo "${names[$m]} regs $regs stack $stack loops $loops"
done)
if [ "$mode" = --print ]; then echo "$now"; exit 0; fi
if [ "$mode" = --update ]; then
  { echo "# scripts/scan-sass.sh: fp32 real forward kernels, sm_90, nvcc $nvccv"; echo "$now"; } > "$base"
  echo "scan-sass: $base rewritten"; exit 0
fi
[ -f "$base" ] || { echo "scan-sass.sh: no baseline at $base (write one with --update)" >&2; exit 2; }
basev=$(sed -n '1s/.*nvcc \([0-9.]*\).*/\1/p' "$base")
changed=$(diff <(grep -v '^#' "$base") <(echo "$now") || true)
if [ -z "$changed" ]; then
  echo "scan-sass: the fp32 forward kernels' loops and registers are the baseline's ($base)"; exit 0
fi
echo "scan-sass: the fp32 forward kernels changed shape against $base (nvcc $basev; this build nvcc $nvccv):"
echo "$changed" | sed -n 's/^</  baseline:/p; s/^>/  now:     /p'
if [ "$basev" != "$nvccv" ]; then echo "scan-sass: another nvcc's baseline: reported, not judged"; exit 0; fi
echo "scan-sass: time the change side by side with the committed kernel on a GPU (scripts/explore/compare.sh),"
echo "  then make sass-baseline, and commit both with the figures"
exit 1

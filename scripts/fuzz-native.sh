#!/usr/bin/env bash
# The libFuzzer harness for the CPU backend (fuzz/native/ssmk_fuzz.cpp):
# builds build/ssmk_fuzz_native with clang (-fsanitize=fuzzer,address,undefined)
# and runs it for FUZZTIME (60s by default; s, m or h) from the committed
# seeds (fuzz/native/seeds) and the special-value dictionary. New corpus
# entries go to build/fuzz-native-corpus; a crash or failed check is written
# to build/fuzz-native-artifacts/ and printed, and the script exits non-zero.
# Replay one file: build/ssmk_fuzz_native FILE
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 0 ] || { echo "fuzz-native: takes no arguments (got: $*); the duration is FUZZTIME, e.g. FUZZTIME=5m $0" >&2; exit 2; }
CLANGXX=${CLANGXX:-clang++}
command -v "$CLANGXX" >/dev/null || { echo "fuzz-native: $CLANGXX not found; install clang (Debian: apt-get install clang libclang-rt-14-dev libomp-14-dev)" >&2; exit 2; }
bin=build/ssmk_fuzz_native
mkdir -p build build/fuzz-native-corpus build/fuzz-native-artifacts
if [ ! -x $bin ] || [ -n "$(find fuzz/native/ssmk_fuzz.cpp kernels/src cudalib/include -newer $bin -type f)" ]; then
	echo "fuzz-native: building $bin"
	"$CLANGXX" -std=c++17 -g -O1 -fopenmp -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
		-Icudalib/include fuzz/native/ssmk_fuzz.cpp -o $bin ||
		{ echo "fuzz-native: the build failed (missing libclang-rt-14-dev or libomp-14-dev?)" >&2; exit 2; }
fi
t=${FUZZTIME:-60s}
[[ $t =~ ^[1-9][0-9]*[smh]?$ ]] || { echo "fuzz-native: FUZZTIME=$t: want a whole number of seconds, minutes or hours (30s, 5m, 1h)" >&2; exit 2; }
case $t in
*h) secs=$((${t%h} * 3600)) ;; *m) secs=$((${t%m} * 60)) ;; *s) secs=${t%s} ;; *) secs=$t ;;
esac
echo "fuzz-native: $bin for ${secs}s (ASan + UBSan; corpus build/fuzz-native-corpus)"
log=build/fuzz-native.log
$bin -max_total_time="$secs" -print_final_stats=1 -dict=fuzz/native/ssmk.dict \
	-artifact_prefix=build/fuzz-native-artifacts/ build/fuzz-native-corpus fuzz/native/seeds >"$log" 2>&1 &
pid=$!
while kill -0 $pid 2>/dev/null; do
	sleep 10
	kill -0 $pid 2>/dev/null && grep -E '^#[0-9]+' "$log" | tail -1 | sed 's/^/fuzz-native: /'
done
wait $pid
rc=$?
if [ $rc -ne 0 ]; then
	grep -E 'ssmk_fuzz|runtime error|ERROR|SUMMARY|^scan|^method|^batch|^[a-z_]+:|Test unit written' "$log" | head -30
	echo "fuzz-native: FAILED (exit $rc); the input is in build/fuzz-native-artifacts/, the log in $log"
	exit 1
fi
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
new=$(sed -n 's/^stat::new_units_added: *//p' "$log")
cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+')
echo
printf '%-18s %-4s %8s %10s %8s %6s  %s\n' target rc time execs execs/s new coverage
printf '%-18s %-4s %7ss %10s %8s %6s  %s\n' ssmk_fuzz_native ok "$secs" "$execs" "$rate" "$new" "$cov"

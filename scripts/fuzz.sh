#!/usr/bin/env bash
# Coverage-guided fuzzing of the library under test with Go's fuzzer.
#
#   scripts/fuzz.sh [TARGET...]     fuzz each target (default: FuzzDiscretize,
#                                   FuzzScan, FuzzBackward of ./fuzz, and the bridged
#                                   FuzzMamba2Prefill, FuzzMamba2Isolation, FuzzMamba2Step,
#                                   FuzzMamba2StepIsolation, FuzzMamba2Backward of ./verify/mamba2,
#                                   FuzzMamba3Forward, FuzzMamba3Step, FuzzMamba3Isolation,
#                                   FuzzMamba3Backward of ./verify/mamba3)
#                                   for FUZZTIME (default 60s), then print execs, execs/s
#                                   and new corpus entries
#
# Environment: FUZZTIME (a go duration or Nx), FUZZTIME_BRIDGED (the bridged
# targets' own, default FUZZTIME), FUZZ_PARALLEL (workers; default
# GOMAXPROCS), FUZZ_MINIMIZE (time spent shrinking each new corpus entry;
# default 2s: Go's 60s default can take a short run's whole budget), FUZZ_BIN (a test binary built with `go test -c -fuzz=. ./fuzz`,
# for machines without Go, e.g. a GPU host: scripts/gpu.sh), SSMK_LIB or
# SSMK_BACKEND (which library: see cudalib.OpenDefault), SSMK_BRIDGE (the
# bridged targets' kernel; default the numpy path). A failure stops the
# target, is written to its package's testdata/fuzz/<Target>/ and printed;
# commit it so `go test` replays it from then on.
set -uo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-60s}
[[ $FUZZTIME =~ ^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$|^[0-9]+x$ ]] ||
	{ echo "fuzz.sh: FUZZTIME=$FUZZTIME: want a Go duration (30s, 5m, 1h30m) or a count of inputs (1000x)" >&2; exit 2; }
targets=("$@")
defaults=(FuzzDiscretize FuzzScan FuzzBackward FuzzMamba2Prefill FuzzMamba2Isolation FuzzMamba2Step FuzzMamba2StepIsolation
	FuzzMamba2Backward FuzzMamba3Forward FuzzMamba3Step FuzzMamba3Isolation FuzzMamba3Backward)
# the package of a target: the bridged kernels' targets live beside their suite
pkg_of() { case "$1" in FuzzMamba2*) echo verify/mamba2 ;; FuzzMamba3*) echo verify/mamba3 ;; *) echo fuzz ;; esac; }
logdir=${OUT:-out}/fuzz
mkdir -p "$logdir"
logdir=$(cd "$logdir" && pwd)
# A name that matches no target would fuzz nothing and report ok: refuse it.
# A package that cannot start (no library at SSMK_LIB, a build error) says why before anything is fuzzed.
cannot_start() {
	tail -8 <<<"$1" >&2
	echo "fuzz.sh: the fuzz targets cannot start (above): check SSMK_LIB / SSMK_BACKEND (make lib builds the CPU library)" >&2
	exit 2
}
if [ -n "${FUZZ_BIN:-}" ]; then
	known=$(cd fuzz && "$(cd "$(dirname "$FUZZ_BIN")" && pwd)/$(basename "$FUZZ_BIN")" -test.list '^Fuzz' 2>&1) || cannot_start "$known"
else
	known=$(go test ./fuzz -list '^Fuzz' 2>&1) || cannot_start "$known"
	bridged=$(go test ./verify/mamba2 -list '^Fuzz' 2>&1) || cannot_start "$bridged"
	bridged3=$(go test ./verify/mamba3 -list '^Fuzz' 2>&1) || cannot_start "$bridged3"
	known="$known $bridged $bridged3"
fi
known=$(grep -E '^Fuzz' <<<"$known" | xargs)
# by default every target there is (FUZZ_BIN holds ./fuzz's alone)
if [ ${#targets[@]} -eq 0 ]; then
	for t in "${defaults[@]}"; do [[ " $known " != *" $t "* ]] || targets+=("$t"); done
fi
for t in "${targets[@]}"; do
	[[ " $known " == *" $t "* ]] || { echo "fuzz.sh: no fuzz target $t (targets: $known; the duration is FUZZTIME=$FUZZTIME)" >&2; exit 2; }
done
par=(-fuzzminimizetime "${FUZZ_MINIMIZE:-2s}")
[ -z "${FUZZ_PARALLEL:-}" ] || par+=(-parallel "$FUZZ_PARALLEL")
rows=()
findings=()
fail=0
for t in "${targets[@]}"; do
	log=$logdir/$t.log
	echo "fuzz: $t for $FUZZTIME (log: $log)"
	if [ -n "${FUZZ_BIN:-}" ]; then
		bin=$(cd "$(dirname "$FUZZ_BIN")" && pwd)/$(basename "$FUZZ_BIN")
		(cd fuzz && "$bin" -test.run='^$' -test.fuzz="^$t\$" -test.fuzztime="$FUZZTIME" \
			-test.fuzzcachedir="$logdir/cache" "${par[@]/#-/-test.}") 2>&1 | tee "$log" | grep --line-buffered -E 'elapsed: ([0-9]+m)?(0|15|30|45)s,|FAIL|Failing|---' 
	else
		ft=$FUZZTIME
		[ "$(pkg_of "$t")" = fuzz ] || ft=${FUZZTIME_BRIDGED:-$FUZZTIME}
		go test "./$(pkg_of "$t")" -run '^$' -fuzz "^$t\$" -fuzztime "$ft" "${par[@]}" 2>&1 | tee "$log" |
			grep --line-buffered -E 'elapsed: ([0-9]+m)?(0|15|30|45)s,|FAIL|Failing|---'
	fi
	rc=${PIPESTATUS[0]}
	status=ok
	if [ "$rc" -ne 0 ]; then
		status=FAIL
		# Go's fuzz coordinator (before Go 1.27) can report its own -fuzztime
		# deadline as a failure when a worker is still in a call as it
		# expires: "context deadline exceeded" and no input written
		# (golang/go#75804). That is no finding about the library.
		if ! grep -q 'Failing input written' "$log" && grep -qE '^\s+context deadline exceeded$' "$log"; then
			status=flake
			echo "fuzz: $t: 'context deadline exceeded' as -fuzztime ran out, no input written: Go's coordinator race (golang/go#75804, fixed in Go 1.27), not a finding"
		fi
	fi
	[ "$status" != FAIL ] || fail=1
	if [ "$status" = FAIL ]; then
		# The failure's reason and diagnosis, as the test wrote them, on the
		# terminal (not only in the log), and the input that reproduces it.
		why=$(awk '/--- FAIL/ {p = 1; next} /Failing input written|^FAIL|^=== / {p = 0} p && NF' "$log" | sed -E 's/^ +//; s/^[a-z_]+_test\.go:[0-9]+: //' | head -12)
		input=$(grep -oE 'testdata/fuzz/[^ ]+' "$log" | head -1)
		# a failing entry of the committed corpus: --- FAIL: Target/entry
		[ -n "$input" ] || input=$(grep -oE -- "--- FAIL: $t/[^ ]+" "$log" | head -1 | sed -E "s|--- FAIL: $t/|testdata/fuzz/$t/|")
		echo "fuzz: $t FAILED:"
		sed 's/^/    /' <<<"${why:-(no message: see $log)}"
		diag=$(grep -m1 -E '^\s*diagnosis:' "$log" | sed -E 's/^\s*//')
		[ -z "$diag" ] || grep -qF "$diag" <<<"$why" || echo "    $diag"
		[ -z "$input" ] || echo "    input: $(pkg_of "$t")/$input (go test ./$(pkg_of "$t") -run '$t/$(basename "$input")' replays it)"
		first=$(head -1 <<<"$why")
		[[ $first != *: ]] || first="$first $(sed -n 2p <<<"$why")"
		findings+=("$t: $first${input:+ ($(pkg_of "$t")/$input)}")
	fi
	last=$(grep -E '^fuzz: elapsed: .*execs:' "$log" | tail -1)
	base=$(grep -oE 'gathering baseline coverage: [0-9]+/[0-9]+' "$log" | tail -1 | sed 's/.*\///')
	# "elapsed: 1m0s, execs: 863896 (0/sec), new interesting: 74 (total: 276)"
	el=$(sed -E 's/.*elapsed: ([0-9hms.]+),.*/\1/' <<<"$last" | awk '{s=0; if (match($0,/[0-9]+h/)) s+=3600*substr($0,RSTART,RLENGTH-1);
		if (match($0,/[0-9]+m/)) s+=60*substr($0,RSTART,RLENGTH-1); if (match($0,/[0-9.]+s/)) s+=substr($0,RSTART,RLENGTH-1); print s}')
	ex=$(sed -E 's/.*execs: ([0-9]+).*/\1/' <<<"$last")
	new=$(sed -E 's/.*new interesting: ([0-9]+).*/\1/' <<<"$last")
	rate=$(awk -v e="${ex:-0}" -v s="${el:-0}" 'BEGIN{ if (s > 0) printf "%.0f", e/s; else print "-" }')
	# The fastest 3-second interval: the rate while mutating, without the
	# pauses in which new corpus entries are minimised.
	peak=$(grep -oE '\(([0-9]+)/sec\)' "$log" | tr -dc '0-9\n' | sort -n | tail -1)
	rows+=("$(printf '%-16s %-5s %8ss %12s %10s %10s %8s %8s' "$t" "$status" "${el:--}" "${ex:--}" "$rate" "${peak:--}" "${base:--}" "${new:--}")")
done
echo
printf '%-16s %-5s %9s %12s %10s %10s %8s %8s\n' target rc elapsed execs execs/s peak/s corpus new
printf '%s\n' "${rows[@]}"
echo "workers: ${FUZZ_PARALLEL:-$(nproc) (GOMAXPROCS)}; library: ${SSMK_LIB:-${SSMK_BACKEND:-auto}}; non-finite policy: ${SSMK_NONFINITE_POLICY:+held (SSMK_NONFINITE_POLICY=1)}${SSMK_NONFINITE_POLICY:-where the library declares it (SSMK_CAP_NONFINITE)}"
if [ ${#findings[@]} -gt 0 ]; then
	echo
	echo "findings (the first line of each; the whole above and in $logdir):"
	printf '  %s\n' "${findings[@]}"
fi
exit $fail

#!/usr/bin/env bash
# Runs the suite on a GPU machine that has nvcc but no Go.
#
#   scripts/gpu.sh build [abi|bridged|bridged-fuzz|all]   (default abi; bridged-fuzz: the bridged suites instrumented for fuzz-bridged)
#                                   here (Go, no GPU): cross-compile the test
#                                   binaries into carry/ (CGO_ENABLED=0: purego
#                                   needs no cgo; stripped), with cmd/gate and
#                                   cmd/mutants: abi, the library's packages;
#                                   bridged, verify/mamba2 and verify/mamba3; all,
#                                   both (over the 64 MiB a device call carries)
#   scripts/gpu.sh run [PKG...]     there (nvcc, GPU, no Go): build
#                                   build/libssmk_cuda.so, run every carried test
#                                   binary against it (SSMK_BACKEND=cuda); logs to
#                                   $OUT (or out/gpu), a table last
#   scripts/gpu.sh gate             there: the gate against the CUDA build:
#                                   make baseline, make gate BASELINE=…, and the
#                                   gate of a deliberately slowed build
#                                   (-DSSMK_SLOW_WORK=1) against the same
#                                   baseline, which must fail; one .tgz each
#   scripts/gpu.sh bench            there: Check7 at 8×512×1024×16 and 8×2048×4096×16,
#                                   fp32/fp64 real/complex and bf16/fp16 real
#                                   (BENCH_DTYPES; BENCH_COMPLEX=false: real A
#                                   alone), after the accuracy tests against
#                                   the same build; with BENCH_MAMBA_LIB=adapter.so,
#                                   Mamba's own kernel in fp32 and bf16 beside it;
#                                   a dated table and the speed targets it
#                                   shows, met or missed (make bench)
#   scripts/gpu.sh sanitize         there: compute-sanitizer memcheck, racecheck,
#                                   initcheck and synccheck over the binding's
#                                   kernel tests and, with carry/verify.test,
#                                   the backward's fixed cases (make sanitize)
#   scripts/gpu.sh variants NAME=FLAGS …
#                                   there: build one libssmk_cuda.so per variant
#                                   (the sources of carry/kernels_NAME/ where present,
#                                   extra nvcc flags FLAGS) and time each with
#                                   BenchmarkPlanMambaBlock; a table of µs per
#                                   variant and method last (scripts/explore/,
#                                   docs/performance.md)
#   scripts/gpu.sh report [TIME]    there: the whole judgement of one library: the
#                                   suite with the seven checks (run), then a fuzz
#                                   campaign of TIME (default 2m); SSMK_LIB=… names
#                                   the library (default: the project's CUDA build);
#                                   the summary is $OUT/verify-report/summary.txt
#   scripts/gpu.sh adapter MAMBA_SRC OUT.so [upstream|fork|vmamba|auto]
#                                   there: an ssmk library from a Mamba-family
#                                   tree's csrc/selective_scan (adapters/mamba/build.sh)
#   scripts/gpu.sh ggml GGML_SRC [build|run|all]
#                                   there: ggml's ggml_ssm_scan on its CUDA and CPU
#                                   backends (adapters/ggml/build.sh, into
#                                   GGML_BUILD, default /tmp/ssmk-ggml, kept while
#                                   the machine is warm), then the verify suite
#                                   against each in the Mamba-1 path and the
#                                   Mamba-2 path (heads of 64), and TestSideBySide
#                                   of the two backends; summaries in
#                                   $OUT/ggml-*, a table last
#   scripts/gpu.sh mamba2 CHECKOUT [COMMIT]
#                                   there (torch, Triton): upstream's Mamba-2
#                                   kernels (mamba_chunk_scan_combined,
#                                   selective_state_update) from a checkout of
#                                   state-spaces/mamba through the bridge
#                                   (bridge/python/adapters/mamba2_upstream.py):
#                                   the suite of verify/mamba2, then the planted
#                                   Triton mutants (MAMBA2_MUTANTS=0 leaves them
#                                   out); $OUT/mamba2/summary.txt, a table last
#   scripts/gpu.sh engine upstream|vllm|megatron|ggml|ssmk CHECKOUT [COMMIT]
#                                   there: verify/mamba2 (less the backward and
#                                   the planted mutants) against a copy of
#                                   Mamba-2's kernels from a checkout of
#                                   state-spaces/mamba, vllm-project/vllm or
#                                   NVIDIA/Megatron-LM (adapters/mamba2_COPY.py,
#                                   docs/engines.md), or (ggml, ssmk) a library
#                                   of the ssmk ABI through mamba2_ssmk (ggml's:
#                                   scripts/gpu.sh ggml GGML_SRC build);
#                                   $OUT/mamba2/summary.txt
#   scripts/gpu.sh crosscopy COPY=CHECKOUT[@COMMIT] ...
#                                   there: engine for each copy at once, then
#                                   one table of every case and copy
#                                   (cmd/crosscopy): $OUT/crosscopy/summary.txt
#   scripts/gpu.sh scale COPY=CHECKOUT[@COMMIT] ...
#                                   there: TestMamba2Scale against each copy
#                                   (a million tokens, x and a state pool past
#                                   2^31 elements, dstate 256, Mamba-2 2.7B's
#                                   layer at 64K tokens, fused-projection
#                                   views); tens of GiB of host memory
#   scripts/gpu.sh scale3 CHECKOUT[@COMMIT]
#                                   there: TestMamba3Scale against upstream's
#                                   Mamba-3 kernels (a million tokens, V past
#                                   2^31 elements, 64 heads with a state of 128
#                                   at 64K tokens, a decode step whose state
#                                   passes 2^31 elements), one case at a time
#   scripts/gpu.sh mamba2-backward CHECKOUT [COMMIT]
#                                   there: upstream's Mamba-2 backward
#                                   (mamba_chunk_scan_combined under autograd),
#                                   verify/mamba2's backward tests in four
#                                   processes at once (float32, bf16 with
#                                   float32 states, the other pairs, the
#                                   properties): Triton's first compilations
#                                   take minutes, in parallel they fit one
#                                   10-minute lease; $OUT/mamba2-backward-*/
#   scripts/gpu.sh mamba3 CHECKOUT [COMMIT]
#                                   there: upstream's Mamba-3 SISO kernels
#                                   (mamba3_siso_combined, mamba3_siso_step)
#                                   through the bridge (adapters/mamba3_upstream.py):
#                                   the suite of verify/mamba3, then the planted
#                                   Triton mutants (MAMBA3_MUTANTS=0 leaves them
#                                   out); $OUT/mamba3/summary.txt
#   scripts/gpu.sh generated FAMILY CHECKOUT N [FROM]
#                                   there: the generated population of upstream's
#                                   Triton kernels (cmd/mutants -bridged FAMILY
#                                   -checkout): N mutants of the seeded order
#                                   (SEED, default 20261202) from FROM on, each a
#                                   copy of the checkout's mamba_ssm with one line
#                                   mutated, judged by the whole suite verify/FAMILY
#                                   (MUTANT_JOBS at once, default 4; BUDGET, a Go
#                                   duration, stops the launches; BASELINE, an
#                                   earlier part's .jsonl journal, spares judging
#                                   the unmutated kernel again, which otherwise
#                                   runs in BASELINE_SHARDS processes, default 8,
#                                   before the mutants; ADAPTER_ARGS, the adapter's
#                                   own, e.g. pin=1: one configuration an
#                                   autotuner key; SKIP_JUDGED, earlier parts'
#                                   journals, leaves out what they judged; ONLY,
#                                   comma-separated IDs of the sample, judges
#                                   those alone: a population judged again); the
#                                   journal and summary in $OUT/generated
#                                   (cmd/mutants -regrade J1,J2,… grades parts
#                                   as one)
#   scripts/gpu.sh mutants [K,K,…]  there: the CUDA library's planted mutants
#                                   (cmd/mutants -cuda: DeviceShared and
#                                   CUDACatalogue), built in parallel through
#                                   an object cache (build/mutants/objcache),
#                                   the suite against each from the carried
#                                   binaries (MUTANT_JOBS at once, default 1); the
#                                   kill matrix last, mutants.json in
#                                   $OUT/mutants-cuda
#   scripts/gpu.sh fuzz-bridged FAMILY CHECKOUT|numpy [TIME]
#                                   there: the bridged fuzz targets of verify/FAMILY
#                                   (mamba2, mamba3) against upstream's kernels in
#                                   CHECKOUT (numpy: SSMK_BRIDGE's, default the numpy
#                                   path), each for TIME (5m), one after another, a
#                                   finding moved aside and the target going on;
#                                   logs and found inputs in $OUT (docs/fuzzing.md)
#   scripts/gpu.sh fuzz [TIME]      there: fuzz the CUDA build with the three Go fuzz
#                                   targets at once for TIME (default 5m; workers
#                                   per target FUZZ_PARALLEL, default 6), then
#                                   replay the committed corpus and every new
#                                   entry under compute-sanitizer memcheck
#
# Extra go-test flags for the binaries go in GPU_TEST_FLAGS (e.g.
# "-test.run=Scan -test.bench=PlanMambaBlock -test.benchtime=1x"); flags of
# the verify suite alone (-sizes, -scripts, -trials, …) in VERIFY_FLAGS.
# With Go on the GPU machine none of this is needed:
#   make lib-cuda && SSMK_BACKEND=cuda go test ./...
set -uo pipefail
cd "$(dirname "$0")/.."
# mamba1/, mamba2/ and mamba3/ are pure Go (no library): their tests judge nothing on a GPU, and
# their binaries would take the carry past 64 MiB beside the others.
PKGS_DEFAULT="kernels cudalib golden verify fuzz"

build() {
	# what to carry: abi (the library's test binaries), bridged (the bridged
	# suites verify/mamba2 and verify/mamba3), bridged-fuzz (the same with
	# the fuzzer's coverage instrumentation, for fuzz-bridged), or all;
	# cmd/gate and cmd/mutants with each; a device call carries 64 MiB
	local what=${1:-abi}
	case $what in abi | bridged | bridged-fuzz | all) ;; *) echo "usage: scripts/gpu.sh build [abi|bridged|bridged-fuzz|all]"; exit 2 ;; esac
	rm -rf carry && mkdir -p carry
	# a module of its own: copies of kernels/ for scripts/explore stay out of ./...
	printf 'module carry\n' >carry/go.mod
	if [ "${what#bridged}" = "$what" ]; then # abi or all
		for pkg in ${PKGS:-$PKGS_DEFAULT}; do
			echo "building carry/$pkg.test"
			# The fuzz binary carries the fuzzer's coverage instrumentation (-fuzz=.),
			# so that it can fuzz as well as replay its corpus.
			fz=(); [ "$pkg" != fuzz ] || fz=(-fuzz=.)
			CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c "${fz[@]}" -ldflags='-s -w' -o "carry/$pkg.test" "./$pkg" || exit 1
		done
	fi
	echo "building carry/gate, carry/mutants and carry/crosscopy"
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -ldflags='-s -w' -o carry/gate ./cmd/gate || exit 1
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -ldflags='-s -w' -o carry/mutants ./cmd/mutants || exit 1
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -ldflags='-s -w' -o carry/crosscopy ./cmd/crosscopy || exit 1
	if [ "$what" != abi ]; then
		# The fuzzer's instrumentation only where asked for: its coverage
		# counters are shared by every goroutine, and the parallel loops over
		# the deployment sizes' arrays crawl on 16 cores bouncing them
		# (docs/engines.md, Scale).
		local fz=() how="through the bridge"
		[ "$what" != bridged-fuzz ] || { fz=(-fuzz=.); how="through the bridge; with the fuzzer's instrumentation"; touch carry/fuzz-instrumented; }
		for b in mamba2 mamba3; do
			echo "building carry/$b.test (verify/$b: $how)"
			CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go test -c "${fz[@]}" -ldflags='-s -w' -o carry/$b.test ./verify/$b || exit 1
		done
	fi
	du -ch carry/* | tail -1
	local kb; kb=$(du -sk carry | cut -f1)
	[ "$kb" -lt 60000 ] || { echo "carry/ is ${kb} KiB: over the 64 MiB a device call may carry (scripts/gpu.sh build abi or bridged: half of it)" >&2; exit 1; }
}

# table_row NAME RC LOG START: run's table line for a test binary's log.
table_row() {
	printf '%-20s %-4s %5d %5d %5d %6ds' "$1" "$([ "$2" -eq 0 ] && echo ok || echo FAIL)" \
		"$(grep -c -- '^\s*--- PASS' "$3")" "$(grep -c -- '^\s*--- FAIL' "$3")" "$(grep -c -- '^\s*--- SKIP' "$3")" $((SECONDS - $4))
}

run() {
	local out=${OUT:-out/gpu}
	mkdir -p "$out"
	nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader 2>&1 | tee "$out/nvidia-smi.txt"
	nvcc --version | tail -2
	local t0=$SECONDS
	local pkgs=("$@")
	if [ -n "${SSMK_LIB:-}" ]; then
		# A user's library: the suite, not the project's own binding and
		# reference tests, judges it.
		[ -f "$SSMK_LIB" ] || { echo "gpu.sh: SSMK_LIB=$SSMK_LIB does not exist"; exit 1; }
		SSMK_LIB=$(cd "$(dirname "$SSMK_LIB")" && pwd)/$(basename "$SSMK_LIB")
		export SSMK_LIB
		[ ${#pkgs[@]} -gt 0 ] || pkgs=(verify golden)
		echo "library under test: SSMK_LIB=$SSMK_LIB"
	else
		# mamba2.test and mamba3.test judge kernels behind the bridge: scripts/gpu.sh mamba2, mamba3
		[ ${#pkgs[@]} -gt 0 ] || pkgs=($(cd carry && ls *.test | sed 's/\.test$//' | grep -vx 'mamba[23]'))
		kernels/build-cuda.sh build/libssmk_cuda.so "${CUDA_ARCH:-90}" >"$out/build.log" 2>&1 || {
			cat "$out/build.log"; echo "gpu.sh: the CUDA build failed"; exit 1; }
		echo "built build/libssmk_cuda.so in $((SECONDS - t0)) s"
	fi
	local rows=()
	local fail=0
	for pkg in "${pkgs[@]}"; do
		local bin=carry/$pkg.test log=$out/$pkg.log
		[ -x "$bin" ] || { echo "gpu.sh: no $bin (run scripts/gpu.sh build first)"; exit 1; }
		local s=$SECONDS
		local extra=() rc=0
		[ "$pkg" != verify ] || extra=(-report "$(cd "$out" && pwd)/verify-report" ${VERIFY_FLAGS:-})
		if [ "$pkg" = verify ] && [[ "${GPU_TEST_FLAGS:-}" != *-test.run* ]]; then
			# Check7 in a fresh process of its own first, as make gate does: after
			# Check1–6 in one process an H100 timed foh at 1.278× zoh, alone at
			# 1.144× (docs/performance.md); the rest after it, merged (-append).
			c7='^TestCheck7MethodComparison$'
			rm -f "$out/verify-report/report.json"
			(cd "$pkg" && SSMK_BACKEND=cuda "../$bin" -test.v -test.timeout=540s -test.run="$c7" ${GPU_TEST_FLAGS:-} "${extra[@]}") >"$log" 2>&1 || rc=$?
			(cd "$pkg" && SSMK_BACKEND=cuda "../$bin" -test.v -test.timeout=540s -test.skip="$c7" ${GPU_TEST_FLAGS:-} "${extra[@]}" -append) >>"$log" 2>&1 || rc=$?
		else
			(cd "$pkg" && SSMK_BACKEND=cuda "../$bin" -test.v -test.timeout=540s ${GPU_TEST_FLAGS:-} "${extra[@]}") >"$log" 2>&1 || rc=$?
		fi
		[ $rc -eq 0 ] || fail=1
		rows+=("$(table_row "$pkg" $rc "$log" $s)")
		grep -E -- '--- FAIL|^\s+[a-z_]+_test.go:[0-9]+: (library|selection|device|copy|largest)|^Benchmark|FAIL|panic' "$log" | head -60
	done
	if python3 -c 'import numpy' 2>/dev/null; then python3 golden/check_numpy.py || fail=1; fi
	[ ! -f "$out/verify-report/summary.txt" ] || { echo; cat "$out/verify-report/summary.txt"; }
	echo
	printf '%-20s %-4s %5s %5s %5s %7s\n' package rc pass fail skip time
	printf '%s\n' "${rows[@]}"
	return $fail
}

mutants() {
	local out=${OUT:-out/gpu}
	mkdir -p "$out"
	[ -x carry/mutants ] || { echo "gpu.sh: no carry/mutants (run scripts/gpu.sh build first)"; exit 1; }
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
	local only=()
	[ -z "${1:-}" ] || only=(-only "$1")
	# MUTANT_JOBS mutants judged at once (default 1): accuracy runs time
	# nothing, and one GPU holds several suites.
	carry/mutants -cuda -bin carry -arch "${CUDA_ARCH:-90}" -out "$out/mutants-cuda" -j "${MUTANT_JOBS:-1}" "${only[@]}"
}

fuzz() {
	local out=${OUT:-out/gpu} t=${1:-5m}
	out=$(mkdir -p "$out" && cd "$out" && pwd)
	[ -x carry/fuzz.test ] || { echo "gpu.sh: no carry/fuzz.test (run scripts/gpu.sh build first)"; exit 1; }
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
	[ -n "${SSMK_LIB:-}" ] || lib_cuda "$out"
	local fail=0 pids=() before
	before=$(ls fuzz/testdata/fuzz/*/)
	for target in ${FUZZ_TARGETS:-FuzzDiscretize FuzzScan FuzzBackward}; do
		OUT=$out/$target SSMK_BACKEND=${SSMK_BACKEND:-cuda} FUZZ_BIN=carry/fuzz.test FUZZTIME=$t FUZZ_PARALLEL=${FUZZ_PARALLEL:-6} \
			scripts/fuzz.sh $target >"$out/$target.txt" 2>&1 &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p" || fail=1; done
	# A failing input is written under fuzz/testdata/fuzz/: bring it home.
	for target in FuzzDiscretize FuzzScan FuzzBackward; do
		for f in fuzz/testdata/fuzz/$target/*; do
			# flat names: the device tool returns only shallow files
			grep -qx "$(basename "$f")" <<<"$before" || cp "$f" "$out/found-$target-$(basename "$f")"
		done
	done
	# Replay the committed corpus and this run's new entries under memcheck:
	# the host canaries cannot see device memory, compute-sanitizer can.
	for target in FuzzDiscretize FuzzScan FuzzBackward; do
		cp "$out/$target"/fuzz/cache/$target/* "fuzz/testdata/fuzz/$target/" 2>/dev/null
	done
	local n; n=$(find fuzz/testdata/fuzz -mindepth 2 -type f | wc -l)
	echo "memcheck: replaying $n corpus entries"
	local san=(compute-sanitizer --tool memcheck --error-exitcode 99)
	command -v compute-sanitizer >/dev/null || { san=(); echo "memcheck: no compute-sanitizer here, replay only"; }
	(cd fuzz && SSMK_BACKEND=${SSMK_BACKEND:-cuda} timeout "${MEMCHECK_TIME:-240}" "${san[@]}" ../carry/fuzz.test \
		-test.run='^Fuzz' -test.v) >"$out/memcheck.log" 2>&1
	local mc=$?
	[ $mc -eq 0 ] || fail=1
	grep -E 'ERROR SUMMARY|FAIL|--- FAIL' "$out/memcheck.log" | head -20
	for target in ${FUZZ_TARGETS:-FuzzDiscretize FuzzScan FuzzBackward}; do grep -E -A12 -- '--- FAIL' "$out/$target.txt" | head -20; done
	echo
	for target in ${FUZZ_TARGETS:-FuzzDiscretize FuzzScan FuzzBackward}; do tail -3 "$out/$target.txt" | head -2; done
	echo "memcheck replay: $(grep -c -- '--- PASS: Fuzz.*/' "$out/memcheck.log") of $n entries passed, exit $mc" \
		"($(grep -o 'ERROR SUMMARY: [0-9]* errors' "$out/memcheck.log"); 124: stopped after MEMCHECK_TIME=${MEMCHECK_TIME:-240}s)"
	return $fail
}

gate() {
	local out=${OUT:-out/gpu}
	out=$(mkdir -p "$out" && cd "$out" && pwd)
	[ -x carry/gate ] || { echo "gpu.sh: no carry/gate (run scripts/gpu.sh build first)"; exit 1; }
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
	kernels/build-cuda.sh build/libssmk_cuda.so "${CUDA_ARCH:-90}" >"$out/build.log" 2>&1 &&
		SSMK_NVCC_EXTRA="-DSSMK_SLOW_WORK=${SLOW_WORK:-1}" kernels/build-cuda.sh build/libssmk_cuda_slow.so "${CUDA_ARCH:-90}" >>"$out/build.log" 2>&1 ||
		{ tail -30 "$out/build.log"; echo "gpu.sh: the CUDA build failed"; exit 1; }
	local lib slow rc1 rc2 rc3
	lib=$(pwd)/build/libssmk_cuda.so slow=$(pwd)/build/libssmk_cuda_slow.so
	echo "== make baseline (Check7 of $lib)"
	SSMK_LIB=$lib carry/gate -bin carry -out "$out/baseline" -pkgs verify -run Check7 -plots=false \
		-write-baseline "$out/baseline.json" ${GATE_FLAGS:-} 2>&1 | tail -3
	rc1=${PIPESTATUS[0]}
	echo "== make gate BASELINE=baseline.json"
	SSMK_LIB=$lib carry/gate -bin carry -out "$out/gate" -baseline "$out/baseline.json" ${GATE_FLAGS:-} 2>&1 | grep -v '^gate: [a-z]*: running'
	rc2=${PIPESTATUS[0]}
	echo "== the slowed build (-DSSMK_SLOW_WORK=${SLOW_WORK:-1}) against the same baseline"
	SSMK_LIB=$slow carry/gate -bin carry -out "$out/gate-slow" -pkgs verify -run Check7 -baseline "$out/baseline.json" ${GATE_FLAGS:-} 2>&1 | tail -12
	rc3=${PIPESTATUS[0]}
	for d in baseline gate gate-slow; do tar -C "$out" -czf "$out/$d.tgz" "$d" && rm -rf "${out:?}/$d"; done
	echo
	printf '%-34s %s\n' run exit "make baseline" "$rc1" "make gate BASELINE=" "$rc2" "slowed build vs the baseline" "$rc3"
	# The expected outcome: the baseline and the gate pass, the slowed build fails.
	[ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] && [ "$rc3" -eq 1 ]
}

# lib_cuda builds build/libssmk_cuda.so unless it is newer than its sources.
lib_cuda() {
	[ -f build/libssmk_cuda.so ] && [ -z "$(find kernels/src cudalib/include kernels/build-cuda.sh -newer build/libssmk_cuda.so -type f)" ] ||
		kernels/build-cuda.sh build/libssmk_cuda.so "${CUDA_ARCH:-90}" >"$1/build.log" 2>&1 ||
		{ tail -30 "$1/build.log"; echo "gpu.sh: the CUDA build failed"; exit 1; }
	# registers over 128 cost a block per SM (scripts/scan-registers.sh)
	scripts/scan-registers.sh build/libssmk_cuda.so | tee "$1/registers.txt"
}

bench() {
	local out=${OUT:-out/gpu}
	out=$(mkdir -p "$out" && cd "$out" && pwd)
	[ -x carry/verify.test ] && [ -x carry/gate ] || { echo "gpu.sh: no carry/verify.test or carry/gate (run scripts/gpu.sh build first)"; exit 1; }
	local backend=${SSMK_BACKEND:-cuda}
	[ "$backend" != cuda ] || lib_cuda "$out"
	local gpu; gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo "no nvidia-smi")
	echo "== accuracy of this build (the same library the timings use)"
	(cd verify && SSMK_BACKEND=$backend ../carry/verify.test -test.run '^Test(AccuracyEveryCombination|Golden|DiscretizeSweep|DiscretizeEdges|ErrorByDType)$' \
		-report "$out/bench-accuracy") >"$out/bench-accuracy.log" 2>&1
	local acc=$?
	grep -E '^(ok|FAIL|PASS)|--- FAIL' "$out/bench-accuracy.log" | head -5
	# check7 SIZE DTYPE COMPLEX LABEL [SSMK_LIB]: one Check7 into bench/SIZE-DTYPE-COMPLEX-LABEL
	check7() {
		local size=$1 dt=$2 cx=$3 label=$4 lib=${5:-} b d l n
		IFS=x read -r b d l n <<<"$size"
		local dir=$out/bench/$size-$dt-$cx-$label
		mkdir -p "$dir"
		echo "== Check7 $label $size $dt complex=$cx"
		# Check7's own verdict (a method suspiciously fast, say) is
		# reported in the table, not a reason to stop measuring.
		(cd verify && SSMK_LIB=$lib SSMK_BACKEND=$backend ../carry/verify.test -test.run '^TestCheck7MethodComparison$' -batch "$b" -dim "$d" \
			-seqlen "$l" -dstate "$n" -dtype "$dt" -complex="$cx" -max-slowdown 1e9 -report "$dir") >"$dir/check7.log" 2>&1
		[ -f "$dir/check7.json" ] || { tail -20 "$dir/check7.log"; echo "gpu.sh: Check7 wrote no check7.json"; exit 1; }
		grep -h 'SUSPICIOUS\|SLOW' "$dir/check7.log" | sed "s/^ */  $label $size $dt complex=$cx: /"
	}
	for size in ${BENCH_SIZES:-8x512x1024x16 8x2048x4096x16}; do
		for dt in ${BENCH_DTYPES:-fp32 fp64 bf16 fp16}; do
			for cx in ${BENCH_COMPLEX:-false true}; do
				# the CUDA build declares complex A with 16-bit inputs unsupported
				case $dt in bf16 | fp16) [ "$cx" = false ] || continue ;; esac
				check7 "$size" "$dt" "$cx" ssmk
			done
		done
		# BENCH_MAMBA_LIB: Mamba's own kernel (adapters/mamba) in the same visit, real A, in
		# BENCH_MAMBA_DTYPES (default fp32 and bf16; an adapter built with SSMK_MAMBA_NARROW=0 has fp32 alone)
		if [ -n "${BENCH_MAMBA_LIB:-}" ]; then
			for dt in ${BENCH_MAMBA_DTYPES:-fp32 bf16}; do check7 "$size" "$dt" false mamba "$BENCH_MAMBA_LIB"; done
		fi
	done
	# the table and the speed targets it shows, from the runs' check7.json (report.LoadBench)
	carry/gate bench -gpu "$gpu" -accuracy "$acc" "$out/bench" | tee "$out/bench.txt"
	[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "gpu.sh: gate bench could not read $out/bench"; return 1; }
	[ "$backend" != cuda ] || tee -a "$out/bench.txt" <"$out/registers.txt"
	tar -C "$out" -czf "$out/bench-raw.tgz" bench bench-accuracy && rm -rf "${out:?}/bench" "${out:?}/bench-accuracy"
	return $acc
}

variants() {
	local out=${OUT:-out/gpu}
	out=$(mkdir -p "$out" && cd "$out" && pwd)
	[ -x carry/kernels.test ] || { echo "gpu.sh: no carry/kernels.test (run scripts/gpu.sh build first)"; exit 1; }
	[ $# -gt 0 ] || { echo "usage: scripts/gpu.sh variants NAME=FLAGS ..."; exit 2; }
	OUT=$out scripts/explore/explore.sh "$@"
}

sanitize() {
	local out=${OUT:-out/gpu} fail=0
	out=$(mkdir -p "$out" && cd "$out" && pwd)
	for b in kernels cudalib; do [ -x carry/$b.test ] || { echo "gpu.sh: no carry/$b.test (run scripts/gpu.sh build first)"; exit 1; }; done
	lib_cuda "$out"
	local rows=()
	for tool in memcheck racecheck initcheck synccheck; do
		local s=$SECONDS
		(cd kernels && SSMK_BACKEND=cuda compute-sanitizer --tool "$tool" --error-exitcode 99 ../carry/kernels.test \
			-test.run '^Test(ScanMatchesReference|ScanShapes|ScanManyRows|ScanFastPathScales|DiscretizeMatchesReference|InputsUnchanged|Plans|Narrow[A-Za-z]*|Backward[A-Za-z0-9]*)$' \
			-test.skip '^TestBackward(Designs|AutoChoice)$') >"$out/sanitize-$tool.log" 2>&1
		local rc=$?
		# The binding's raw calls: bad arguments straight into C, threads' errors, the copy ceiling.
		(cd cudalib && SSMK_BACKEND=cuda compute-sanitizer --tool "$tool" --error-exitcode 99 ../carry/cudalib.test \
			-test.run '^Test(CValidation|ConcurrentCalls|CopyBandwidth|NarrowDiscretizeRefused)$') >>"$out/sanitize-$tool.log" 2>&1 || rc=$?
		# Every design of each direction forced (the suite's shapes take the row designs): zoh and
		# foh in fp32 and bf16 through each (-short).
		(cd kernels && SSMK_BACKEND=cuda compute-sanitizer --tool "$tool" --error-exitcode 99 ../carry/kernels.test \
			-test.short -test.run '^Test(Forward|Backward)Designs$') >>"$out/sanitize-$tool.log" 2>&1 || rc=$?
		# The backward's kernels over every declared method, dtype and A (16-bit too), the
		# layouts that decide where dB and dC go, dstate beyond a warp, and
		# rows of several chunks, whose chunk states the forward kernel writes
		# (verify's fixed cases; the binding's own tests are a few shapes).
		if [ -x carry/verify.test ]; then
			(cd verify && SSMK_BACKEND=cuda compute-sanitizer --tool "$tool" --error-exitcode 99 ../carry/verify.test \
				-test.run '^Test(Narrow)?Backward(EveryCombination|ChunkBoundaries|SavedStates)$') >>"$out/sanitize-$tool.log" 2>&1 || rc=$?
		fi
		[ $rc -eq 0 ] || fail=1
		rows+=("$(printf '%-10s %-5s %-32s %5ds' "$tool" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" \
			"$(grep -oE '(ERROR SUMMARY: [0-9]+ errors?|RACECHECK SUMMARY: [0-9]+ hazards?)' "$out/sanitize-$tool.log" | tail -1)" $((SECONDS - s)))")
	done
	printf '%-10s %-5s %-32s %6s\n' tool rc summary time
	printf '%s\n' "${rows[@]}"
	return $fail
}

# report: the suite with the seven checks, then a fuzz campaign, against
# one library; both tables last.
report() {
	local out=${OUT:-out/gpu} t=${1:-2m} rc=0
	out=$(mkdir -p "$out" && cd "$out" && pwd)
	OUT=$out run verify golden >"$out/run.txt" 2>&1 || rc=1
	OUT=$out MEMCHECK_TIME=${MEMCHECK_TIME:-60} fuzz "$t" >"$out/fuzz.txt" 2>&1 || rc=1
	cat "$out/run.txt" | tail -60
	echo; echo "fuzz campaign ($t):"; tail -8 "$out/fuzz.txt"
	return $rc
}

ggml() {
	local src=${1:?usage: scripts/gpu.sh ggml GGML_SRC [build|run|all]} what=${2:-all}
	local out=${OUT:-out/gpu} dir=${GGML_BUILD:-/tmp/ssmk-ggml}
	mkdir -p "$out"
	out=$(cd "$out" && pwd)
	if [ "$what" != run ] || [ ! -f "$dir/cuda.so" ]; then
		local t0=$SECONDS
		adapters/ggml/build.sh "$src" "$dir/cuda.so" cuda || exit 1
		adapters/ggml/build.sh "$src" "$dir/cpu.so" cpu || exit 1
		echo "built the ggml adapters in $((SECONDS - t0)) s"
	fi
	[ "$what" != build ] || return 0
	[ -x carry/verify.test ] || { echo "gpu.sh: no carry/verify.test (run PKGS=verify scripts/gpu.sh build first)"; exit 1; }
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1 | tee "$out/nvidia-smi.txt"
	local rows=() fail=0
	for mode in ${GGML_MODES:-0 64}; do
		for be in cuda cpu; do
			local name=ggml-$be-hd$mode s=$SECONDS rc=0
			(cd verify && SSMK_LIB="$dir/$be.so" SSMK_GGML_HEAD_DIM=$mode ../carry/verify.test -test.v -test.timeout=540s \
				-report "$out/$name" ${VERIFY_FLAGS:-}) >"$out/$name.log" 2>&1 || rc=$?
			[ $rc -eq 0 ] || fail=1
			rows+=("$(table_row "$name" $rc "$out/$name.log" $s)")
		done
		local name=ggml-sidebyside-hd$mode s=$SECONDS rc=0
		(cd verify && SSMK_LIB="$dir/cuda.so" SSMK_COMPARE_LIB="$dir/cpu.so" SSMK_GGML_HEAD_DIM=$mode ../carry/verify.test -test.v \
			-test.timeout=540s -test.run='^TestSideBySide$') >"$out/$name.log" 2>&1 || rc=$?
		rows+=("$(table_row "$name" $rc "$out/$name.log" $s)")
	done
	for f in "$out"/ggml-*/summary.txt; do echo "== $f"; sed -n '1,/^$/p;/^failed tests/,$p' "$f" | head -40; done
	grep -h -A16 'side by side:' "$out"/ggml-sidebyside-*.log
	echo
	printf '%-20s %-4s %5s %5s %5s %7s\n' run rc pass fail skip time
	printf '%s\n' "${rows[@]}"
	return $fail
}

# checkout_commit DIR: the commit of a git checkout at DIR (not of a
# repository DIR merely lies in, as an exported tree inside this one does),
# else COMMIT from the environment, else "unknown".
checkout_commit() {
	if [ -e "$1/.git" ]; then git -C "$1" rev-parse --short HEAD 2>/dev/null && return; fi
	echo "${COMMIT:-unknown}"
}

# bridged NAME FOLDER CHECKOUT [COMMIT]: verify/NAME (mamba2, mamba3) against
# upstream's kernels in CHECKOUT through adapters/NAME_upstream.py, then the
# planted Triton mutants (NAME_MUTANTS=0, upper case, leaves them out).
bridged() {
	local name=$1 folder=$2
	shift 2
	[ $# -ge 1 ] && [ -d "$1/$folder" ] || { echo "usage: scripts/gpu.sh $name CHECKOUT [COMMIT] (CHECKOUT holds $folder)"; exit 2; }
	[ -x carry/$name.test ] || { echo "gpu.sh: no carry/$name.test (run scripts/gpu.sh build first)"; exit 1; }
	local src out commit t0=$SECONDS rc=0 mrc=0 upper
	upper=$(echo "$name" | tr a-z A-Z)
	src=$(cd "$1" && pwd)
	out=${OUT:-out/gpu}
	mkdir -p "$out" && out=$(cd "$out" && pwd)
	commit=${2:-$(checkout_commit "$src")}
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
	export SSMK_BRIDGE="${name}_upstream checkout=$src commit=$commit"
	echo "SSMK_BRIDGE=$SSMK_BRIDGE (the first calls compile and autotune the Triton kernels)"
	(cd verify/$name && ../../carry/$name.test -test.v -test.skip TritonMutants ${GPU_TEST_FLAGS:-} -report "$out/$name") >"$out/$name.log" 2>&1 || rc=$?
	local skip=${upper}_MUTANTS
	if [ "${!skip:-1}" != 0 ]; then
		(cd verify/$name && env "SSMK_${upper}_MUTANTS=$src" ../../carry/$name.test -test.v -test.run TritonMutants) >"$out/$name-mutants.log" 2>&1 || mrc=$?
	fi
	cat "$out/$name/summary.txt" 2>/dev/null || tail -30 "$out/$name.log"
	grep -E 'mutants_test.go:[0-9]+: ' "$out/$name-mutants.log" 2>/dev/null | cut -c1-160
	echo "$name: suite $([ $rc -eq 0 ] && echo ok || echo FAIL), mutants $([ $mrc -eq 0 ] && echo ok || echo FAIL), $((SECONDS - t0)) s; logs in $out"
	[ $rc -eq 0 ] && [ $mrc -eq 0 ]
}

# copy_adapter COPY: the adapter and the folder a checkout of COPY holds.
copy_adapter() {
	case $1 in
	upstream) echo "mamba2_upstream mamba_ssm/ops/triton" ;;
	vllm) echo "mamba2_vllm vllm/model_executor/layers/mamba/ops" ;;
	megatron) echo "mamba2_megatron megatron/core/ssm/ops/mamba2" ;;
	ggml | ssmk) echo "mamba2_ssmk -" ;; # CHECKOUT is a library of the ssmk ABI (.so), not a folder
	*) return 1 ;;
	esac
}

# engine COPY CHECKOUT [COMMIT]: verify/mamba2 against a copy of Mamba-2's
# kernels (upstream, vllm, megatron) through its adapter, the backward's
# tests and the planted mutants left out (the engines' copies have no
# backward; GPU_TEST_FLAGS adds flags); $OUT/mamba2.log and $OUT/mamba2/.
engine() {
	local copy=${1:-} ad folder src commit out t0=$SECONDS rc=0
	read -r ad folder <<<"$(copy_adapter "$copy")" || true
	if [ "$ad" = mamba2_ssmk ]; then
		[ $# -ge 2 ] && [ -f "$2" ] || { echo "usage: scripts/gpu.sh engine ggml|ssmk LIBRARY.so [COMMIT] (a library of the ssmk ABI; ggml's: scripts/gpu.sh ggml GGML_SRC build)"; exit 2; }
		[ -x carry/mamba2.test ] || { echo "gpu.sh: no carry/mamba2.test (run scripts/gpu.sh build bridged first)"; exit 1; }
		src=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
		# ggml's Mamba-2 path: heads of 16 channels, the suite's headdim (SSMK_GGML_HEAD_DIM, adapters/ggml)
		[ "$copy" != ggml ] || export SSMK_GGML_HEAD_DIM=${SSMK_GGML_HEAD_DIM:-16}
		export SSMK_BRIDGE="mamba2_ssmk lib=$src name=$copy commit=${3:-unknown}"
	else
		[ -n "$ad" ] && [ $# -ge 2 ] && [ -d "$2/$folder" ] || { echo "usage: scripts/gpu.sh engine upstream|vllm|megatron|ggml|ssmk CHECKOUT [COMMIT] (CHECKOUT holds ${folder:-its ops folder}; ggml and ssmk: a library .so)"; exit 2; }
		[ -x carry/mamba2.test ] || { echo "gpu.sh: no carry/mamba2.test (run scripts/gpu.sh build bridged first)"; exit 1; }
		src=$(cd "$2" && pwd)
		commit=${3:-$(checkout_commit "$src")}
		export SSMK_BRIDGE="$ad checkout=$src commit=$commit"
	fi
	out=${OUT:-out/gpu/$copy}
	mkdir -p "$out" && out=$(cd "$out" && pwd)
	echo "$copy: SSMK_BRIDGE=$SSMK_BRIDGE"
	(cd verify/mamba2 && ../../carry/mamba2.test -test.v -test.timeout=0 -test.skip 'TritonMutants|Backward' ${GPU_TEST_FLAGS:-} -report "$out/mamba2") >"$out/mamba2.log" 2>&1 || rc=$?
	sed -n '1,/^$/p' "$out/mamba2/summary.txt" 2>/dev/null || tail -20 "$out/mamba2.log"
	echo "$copy: suite $([ $rc -eq 0 ] && echo ok || echo FAIL), $((SECONDS - t0)) s; log $out/mamba2.log"
	return $rc
}

# crosscopy COPY=CHECKOUT[@COMMIT] ...: engine for each copy at once, then one
# table of every case against every copy (cmd/crosscopy) in
# $OUT/crosscopy/summary.txt and report.json.
crosscopy() {
	[ $# -ge 1 ] || { echo "usage: scripts/gpu.sh crosscopy upstream=CHECKOUT vllm=CHECKOUT megatron=CHECKOUT"; exit 2; }
	[ -x carry/crosscopy ] || { echo "gpu.sh: no carry/crosscopy (run scripts/gpu.sh build bridged first)"; exit 1; }
	local out=${OUT:-out/gpu} a copy pids=() runs=()
	mkdir -p "$out" && out=$(cd "$out" && pwd)
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
	for a in "$@"; do
		copy=${a%%=*}
		local where=${a#*=} at=""
		[[ $where != *@* ]] || { at=${where##*@}; where=${where%@*}; }
		(OUT=$out/$copy engine "$copy" "$where" $at >"$out/$copy.out" 2>&1) &
		pids+=($!)
		runs+=("$copy=$out/$copy")
	done
	wait "${pids[@]}"
	for a in "$@"; do tail -1 "$out/${a%%=*}.out"; done
	carry/crosscopy -out "$out/crosscopy" "${runs[@]}"
}

# scale COPY=CHECKOUT[@COMMIT] ...: TestMamba2Scale (SSMK_SCALE=1) against each copy:
# the cases of a few GiB for every copy at once, then those of tens of GiB
# (x past 2^31 elements, the pool past 2^31) one copy at a time, so that the
# host's memory holds them; each part's log and report in $OUT/COPY-PART,
# the verdicts of every copy in one table ($OUT/crosscopy, cmd/crosscopy).
scale() {
	[ $# -ge 1 ] || { echo "usage: scripts/gpu.sh scale upstream=CHECKOUT vllm=CHECKOUT megatron=CHECKOUT"; exit 2; }
	[ -x carry/mamba2.test ] || { echo "gpu.sh: no carry/mamba2.test (run scripts/gpu.sh build bridged first)"; exit 1; }
	local out=${OUT:-out/gpu} a copy ad folder src pids=()
	mkdir -p "$out" && out=$(cd "$out" && pwd)
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
	one() { # COPY CHECKOUT[@COMMIT] PART RUN
		local where=$2 at=""
		[[ $where != *@* ]] || { at=${where##*@}; where=${where%@*}; }
		read -r ad folder <<<"$(copy_adapter "$1")"
		src=$(cd "$where" && pwd)
		mkdir -p "$out/$1-$3"
		(cd verify/mamba2 && SSMK_SCALE=1 SSMK_BRIDGE="$ad checkout=$src commit=${at:-$(checkout_commit "$src")}" \
			../../carry/mamba2.test -test.v -test.timeout=0 -test.run "TestMamba2Scale\$/$4" -report "$out/$1-$3/mamba2" >"$out/$1-$3/mamba2.log" 2>&1)
	}
	for a in "$@"; do
		case ${a%%=*} in upstream | vllm | megatron) ;; *) echo "gpu.sh scale: copy ${a%%=*}: want upstream, vllm or megatron (a checkout each)"; exit 2 ;; esac
		one "${a%%=*}" "${a#*=}" small '^(1M-tokens|dstate-256|mamba2-2.7b-64K|mamba2-2.7b-64K-fused-views)$' &
		pids+=($!)
	done
	wait "${pids[@]}"
	for a in "$@"; do one "${a%%=*}" "${a#*=}" large '^(x-past-2\^31-elements|decode-pool-past-2\^31-elements)$'; done
	local runs=()
	for a in "$@"; do
		for part in small large; do
			runs+=("${a%%=*}=$out/${a%%=*}-$part")
			grep -hE '^    --- (PASS|FAIL|SKIP)|scale_test.go:[0-9]+: ' "$out/${a%%=*}-$part/mamba2.log" | cut -c1-220 | sed "s/^/${a%%=*}: /"
		done
	done
	[ ! -x carry/crosscopy ] || carry/crosscopy -all -out "$out/crosscopy" "${runs[@]}"
}

# scale3 CHECKOUT[@COMMIT]: TestMamba3Scale (SSMK_SCALE=1) against upstream's
# Mamba-3 kernels, each case in a process of its own, one after another
# (host memory); $OUT/scale3-CASE.log, a table last.
scale3() {
	[ $# -ge 1 ] || { echo "usage: scripts/gpu.sh scale3 CHECKOUT[@COMMIT]"; exit 2; }
	[ -x carry/mamba3.test ] || { echo "gpu.sh: no carry/mamba3.test (run scripts/gpu.sh build bridged first)"; exit 1; }
	local where=$1 at="" out=${OUT:-out/gpu} src c
	[[ $where != *@* ]] || { at=${where##*@}; where=${where%@*}; }
	[ -d "$where/mamba_ssm/ops/triton/mamba3" ] || { echo "gpu.sh scale3: $where holds no mamba_ssm/ops/triton/mamba3"; exit 2; }
	src=$(cd "$where" && pwd)
	mkdir -p "$out" && out=$(cd "$out" && pwd)
	nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
	for c in '1M-tokens' 'v-past-2\^31-elements' '64-heads-state-128-64K' 'step-state-past-2\^31-elements'; do
		(cd verify/mamba3 && SSMK_SCALE=1 SSMK_BRIDGE="mamba3_upstream checkout=$src commit=${at:-$(checkout_commit "$src")}" \
			../../carry/mamba3.test -test.v -test.timeout=0 -test.run "TestMamba3Scale\$/^$c\$" >"$out/scale3-${c//[\\^]/}.log" 2>&1)
	done
	grep -hE '^    --- (PASS|FAIL|SKIP)|scale_test.go:[0-9]+: ' "$out"/scale3-*.log | cut -c1-220
}

# mamba2_backward CHECKOUT [COMMIT]: the backward's tests of verify/mamba2
# against upstream's kernels, split four ways and run at once; each part's
# summary, then a table.
mamba2_backward() {
	[ $# -ge 1 ] && [ -d "$1/mamba_ssm" ] || { echo "usage: scripts/gpu.sh mamba2-backward CHECKOUT [COMMIT] (CHECKOUT holds mamba_ssm)"; exit 2; }
	[ -x carry/mamba2.test ] || { echo "gpu.sh: no carry/mamba2.test (run scripts/gpu.sh build bridged first)"; exit 1; }
	local src out commit t0=$SECONDS
	src=$(cd "$1" && pwd)
	commit=${2:-$(checkout_commit "$src")}
	out=${OUT:-out/gpu}
	mkdir -p "$out" && out=$(cd "$out" && pwd)
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
	export SSMK_BRIDGE="mamba2_upstream checkout=$src commit=$commit"
	local parts=(fp32 bf16 other-pairs properties)
	local runs=("TestMamba2Backward\$/^fp32\$/" "TestMamba2Backward\$/^bf16\$/^state-fp32\$/"
		"TestMamba2Backward\$/^(bf16|fp16|fp64)\$/" "TestMamba2Backward(SeqStates|PackedEqualsAlone|SplitChained|Repeatable|Padding)\$")
	local skips=("" "" "TestMamba2Backward\$/^bf16\$/^state-fp32\$" "")
	local i pids=()
	for i in 0 1 2 3; do
		(cd verify/mamba2 && s=$SECONDS && ../../carry/mamba2.test -test.v -test.timeout=0 -test.run "${runs[$i]}" ${skips[$i]:+-test.skip "${skips[$i]}"} \
			-report "$out/mamba2-backward-${parts[$i]}" >"$out/mamba2-backward-${parts[$i]}.log" 2>&1
			echo "$? $((SECONDS - s))" >"$out/mamba2-backward-${parts[$i]}.rc") &
		pids+=($!)
	done
	wait "${pids[@]}"
	local fail=0 rows=()
	for i in 0 1 2 3; do
		local name=mamba2-backward-${parts[$i]} rc secs
		read -r rc secs <"$out/$name.rc"
		[ "$rc" -eq 0 ] || fail=1
		echo "== $name"
		sed -n '1,/^$/p;/^failed tests/,$p' "$out/$name/summary.txt" 2>/dev/null | head -30 || tail -20 "$out/$name.log"
		rows+=("$(printf '%-32s %-4s %4d %4d %4d %6ds' "$name" "$([ "$rc" -eq 0 ] && echo ok || echo FAIL)" \
			"$(grep -cE '^\s+--- PASS' "$out/$name.log")" "$(grep -cE '^\s+--- FAIL' "$out/$name.log")" "$(grep -cE '^\s+--- SKIP' "$out/$name.log")" "$secs")")
	done
	echo
	printf '%-32s %-4s %4s %4s %4s %7s\n' part rc pass fail skip time
	printf '%s\n' "${rows[@]}"
	echo "mamba2-backward: $((SECONDS - t0)) s; logs and reports in $out"
	return $fail
}

# generated FAMILY CHECKOUT N [FROM]: the generated Triton population
# (mamba2-backward: the backward's kernels, judged by the Mamba-2 suite's
# backward tests; SUITE_RUN narrows the selection, e.g. to two dtype pairs).
generated() {
	[ $# -ge 3 ] && [ -d "$2/mamba_ssm" ] || { echo "usage: scripts/gpu.sh generated mamba2|mamba2-backward|mamba3 CHECKOUT N [FROM] (CHECKOUT holds mamba_ssm)"; exit 2; }
	local suite=${1%-backward}
	[ -x carry/$suite.test ] && [ -x carry/mutants ] || { echo "gpu.sh: no carry/$suite.test or carry/mutants (run scripts/gpu.sh build first)"; exit 1; }
	local out=${OUT:-out/gpu}
	mkdir -p "$out/generated"
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
	MAMBA_DETERMINISTIC=1 ./carry/mutants -bridged "$1" -checkout "$2" -generate "$3" -generate-from "${4:-0}" -seed "${SEED:-20261202}" \
		-j "${MUTANT_JOBS:-4}" -budget "${BUDGET:-0}" -suite-bin "carry/$suite.test" -suite-run "${SUITE_RUN:-}" ${BASELINE:+-baseline "$BASELINE"} -baseline-shards "${BASELINE_SHARDS:-8}" -adapter-args "${ADAPTER_ARGS:-}" -skip-judged "${SKIP_JUDGED:-}" -only "${ONLY:-}" -out "$out/generated"
}

# fuzz-bridged FAMILY CHECKOUT [TIME]: the bridged fuzz targets of verify/FAMILY
# against upstream's kernels in CHECKOUT, each for TIME (default 5m: Ns, Nm or
# Nh). Each target's corpus is replayed first, not fuzzed (Triton compiles
# the seeds' kernels into its cache; a failing entry is said in full). A
# finding does not end a target's campaign: its input is brought home (flat,
# $OUT/found-TARGET-ID), moved out of the replayed corpus, its causes are
# known from then on, and the target fuzzes on for the time left. An input
# not judged within 8 s is judged in the background (Go ends a fuzz worker
# at 10 s): its failure is a late finding, $OUT/found-TARGET-late-ID with
# the message in .txt. Against a checkout, upstream e9594ce's written-up
# findings are known (FUZZ_KNOWN overrides; SSMK_FUZZ_KNOWN in
# docs/fuzzing.md): counted per target, not reported as findings. Each
# target's fuzz workers' standard error is kept in $OUT/stderr-TARGET.txt.
fuzz_bridged() {
	[ $# -ge 2 ] && { [ -d "$2/mamba_ssm" ] || [ "$2" = numpy ]; } ||
		{ echo "usage: scripts/gpu.sh fuzz-bridged mamba2|mamba3 CHECKOUT|numpy [TIME] (CHECKOUT holds mamba_ssm; numpy: the suite's numpy path, or SSMK_BRIDGE)"; exit 2; }
	local fam=$1 src t=${3:-5m} out=${OUT:-out/gpu} found=0 secs
	case $t in *h) secs=$((${t%h} * 3600)) ;; *m) secs=$((${t%m} * 60)) ;; *s) secs=${t%s} ;; *) secs=$t ;; esac
	[[ $secs =~ ^[0-9]+$ ]] || { echo "fuzz-bridged: TIME=$t: want Ns, Nm or Nh"; exit 2; }
	[ -x carry/$fam.test ] && [ -f carry/fuzz-instrumented ] || { echo "gpu.sh: no carry/$fam.test with the fuzzer's instrumentation (run scripts/gpu.sh build bridged-fuzz first)"; exit 1; }
	out=$(mkdir -p "$out" && cd "$out" && pwd)
	nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
	if [ "$2" != numpy ]; then
		src=$(cd "$2" && pwd)
		export SSMK_BRIDGE="${fam}_upstream checkout=$src commit=$(checkout_commit "$src")" MAMBA_DETERMINISTIC=1
		# upstream e9594ce's findings already written up (docs/journal/findings-*):
		# counted as known, not found again at every float32 or packed input
		local known_mamba2='narrow:tf32,varlen:seq-states-no-init,dt:softplus-log-exp,dt:no-limit,isolation:x-to-sequence,isolation:dt-to-sequence,raises~NoneType,raises~Value after *,output-ulp'
		local known_mamba3='m3:angle-stored-bf16,m3:angle-bf16,raises~at 50:16,raises~K >= 16,raises~at least 16 bytes in the last dimension,raises~end argument must be greater than the start'
		local k=known_$fam
		export SSMK_FUZZ_KNOWN=${FUZZ_KNOWN-${!k}}
	else
		export SSMK_FUZZ_KNOWN=${FUZZ_KNOWN-}
	fi
	echo "fuzz-bridged $fam: known findings (SSMK_FUZZ_KNOWN): ${SSMK_FUZZ_KNOWN:-none}"
	local targets; targets=$(cd verify/$fam && ../../carry/$fam.test -test.list '^Fuzz' 2>/dev/null | grep '^Fuzz')
	local known0=$SSMK_FUZZ_KNOWN
	for target in ${FUZZ_TARGETS:-$targets}; do
		SSMK_FUZZ_KNOWN=$known0
		local env=(SSMK_FUZZ_KNOWN_LOG="$out/known-$target.txt" SSMK_STDERR_LOG="$out/stderr-$target.txt" SSMK_FUZZ_LATE_DIR="$out/late-$target")
		local log=$out/$target-replay.log
		(cd verify/$fam && env "${env[@]}" ../../carry/$fam.test -test.v -test.run="^$target\$") >"$log" 2>&1
		if grep -q -- '^--- FAIL' "$log"; then
			local n; n=$(grep -cE '^\s+--- FAIL' "$log")
			found=$((found + n))
			echo "fuzz: $target: $n entries of the committed corpus fail against this kernel:"
			grep -E '^\s+fuzz_.*test.go:[0-9]+:' "$log" | cut -c1-240
			learn_causes "$log" || { echo "fuzz: $target: a failure without a cause to count as known: not fuzzed"; continue; }
		fi
		local end=$((SECONDS + secs)) round=0
		while [ $((end - SECONDS)) -ge 10 ]; do
			round=$((round + 1))
			log=$out/$target-$round.log
			echo "fuzz: $target for $((end - SECONDS)) s against ${SSMK_BRIDGE:-the numpy path}"
			(cd verify/$fam && env "${env[@]}" ../../carry/$fam.test -test.run='^$' -test.fuzz="^$target\$" -test.fuzztime="$((end - SECONDS))s" \
				-test.parallel="${FUZZ_PARALLEL:-4}" -test.fuzzcachedir="$out/cache-$target") >"$log" 2>&1
			local rc=$?
			grep -E '^\s+fuzz_.*test.go:[0-9]+:|elapsed: .*execs' "$log" | tail -3 | cut -c1-240
			local f hit=0
			for f in $(grep -oE 'testdata/fuzz/[^ ]+' "$log"); do
				hit=1 found=$((found + 1))
				cp "verify/$fam/$f" "$out/found-$target-$(basename "$f")"
				rm -f "verify/$fam/$f" # out of the replayed corpus, so that the campaign goes on
			done
			[ $rc -ne 0 ] || break # the time is up
			if [ $hit -eq 0 ] && grep -q 'context deadline exceeded' "$log"; then
				# the time ran out before the corpus' baseline coverage was in
				echo "fuzz: $target: the time ran out while the fuzzer was still running the corpus (slow first calls; a longer TIME)"
				break
			fi
			[ $hit -eq 1 ] || { found=$((found + 1)); echo "fuzz: $target stopped on no input: $(grep -m1 -A2 -- '--- FAIL' "$log" | tail -1)"; break; }
			# one without a cause to name (a breach, a crash, "none", an
			# exception) cannot be told from the next: the coverage cache
			# that leads back to it goes
			learn_causes "$log" || rm -rf "$out/cache-$target"
		done
		for f in "$out/late-$target"/*.txt; do
			[ -f "$f" ] || continue
			found=$((found + 1))
			cp "${f%.txt}" "$out/found-$target-late-$(basename "${f%.txt}")"
			cp "$f" "$out/found-$target-late-$(basename "$f")"
			echo "fuzz: $target: late finding $(basename "${f%.txt}"): $(head -c 240 "$f")"
		done
	done
	for target in ${FUZZ_TARGETS:-$targets}; do
		[ -s "$out/known-$target.txt" ] && echo "fuzz: $target met known findings: $(sort "$out/known-$target.txt" | uniq -c | awk '{printf "%s %s×; ", $2, $1}')"
	done
	[ $found -eq 0 ] && echo "fuzz-bridged $fam: no finding" || echo "fuzz-bridged $fam: $found findings (above; their inputs are $out/found-*)"
	[ $found -eq 0 ]
}

# learn_causes LOG: the causes of LOG's failures ("diagnosis [TAG]") join
# SSMK_FUZZ_KNOWN, so that the rest of a target's campaign looks for others
# (an exception by the head of its message); false where a failure has no
# cause that can be told from the next.
learn_causes() {
	local failures tags c ok=0 line text
	failures=$(grep -E '^\s+fuzz_.*test.go:[0-9]+:' "$1")
	tags=$(echo "$failures" | grep -oE 'diagnosis \[[^]]*\]' | sed 's/diagnosis \[//; s/\]$//' | grep -v '^raises$' | sort -u)
	# a failure without a diagnosis (a crash) has no cause to know it by
	echo "$failures" | grep -v 'diagnosis \[' | grep -q . && ok=1
	# an exception is known by the head of its message (commas and ~ left out)
	while IFS= read -r line; do
		text=$(echo "${line#*diagnosis \[raises\] }" | sed 's/^.*error: //; s/[,~]//g' | cut -c1-48)
		[ -n "$text" ] || { ok=1; continue; }
		SSMK_FUZZ_KNOWN="${SSMK_FUZZ_KNOWN:+$SSMK_FUZZ_KNOWN,}raises~$text"
		echo "fuzz: [raises~$text] known from here on"
	done < <(echo "$failures" | grep -F 'diagnosis [raises] ' | sort -u)
	for c in $tags; do
		c=${c//+/,}
		c=${c//fwd:/}
		if echo ",$c," | grep -qE '(,|:)(none|unrelated|raises|crash|missing),'; then
			ok=1
			continue
		fi
		SSMK_FUZZ_KNOWN="${SSMK_FUZZ_KNOWN:+$SSMK_FUZZ_KNOWN,}$c"
		echo "fuzz: [$c] known from here on"
	done
	return $ok
}

adapter() {
	[ $# -ge 2 ] || { echo "usage: scripts/gpu.sh adapter MAMBA_SRC OUT.so [upstream|fork|vmamba|auto]"; exit 2; }
	adapters/mamba/build.sh "$@"
}

case "${1:-}" in
build) shift; build "$@" ;;
report) shift; report "$@" ;;
adapter) shift; adapter "$@" ;;
mamba2) shift; bridged mamba2 mamba_ssm/ops/triton "$@" ;;
mamba2-backward) shift; mamba2_backward "$@" ;;
engine) shift; engine "$@" ;;
crosscopy) shift; crosscopy "$@" ;;
scale) shift; scale "$@" ;;
scale3) shift; scale3 "$@" ;;
mamba3) shift; bridged mamba3 mamba_ssm/ops/triton/mamba3 "$@" ;;
ggml) shift; ggml "$@" ;;
gate) shift; gate "$@" ;;
bench) shift; bench "$@" ;;
sanitize) shift; sanitize "$@" ;;
variants) shift; variants "$@" ;;
run) shift; run "$@" ;;
fuzz) shift; fuzz "$@" ;;
fuzz-bridged) shift; fuzz_bridged "$@" ;;
mutants) shift; mutants "$@" ;;
generated) shift; generated "$@" ;;
*) sed -n '2,/^set -uo/p' "$0" | sed '$d'; exit 2 ;;
esac

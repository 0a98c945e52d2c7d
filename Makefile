# ssmverify — see README.md. Every target does its own set-up.
SHELL := /bin/bash
GO      ?= go
CXX     ?= g++
NVCC    ?= nvcc
# CUDA_ARCH: 90 by default; 80, 87, ... accepted (with or without "sm_").
CUDA_ARCH ?= 90
BUILD    := build
SRC      := kernels/src
INC      := cudalib/include
HEADERS  := $(INC)/ssmk.h $(SRC)/ssmk_methods.h $(SRC)/ssmk_complex.h $(SRC)/ssmk_host.h $(SRC)/ssmk_narrow.h $(SRC)/ssmk_derivs.h $(SRC)/cpu_plan.h
# The CPU build: the forward and the ABI's core, and the backward pass.
CPU_SRC  := $(SRC)/cpu.cpp $(SRC)/cpu_backward.cpp
CUDA_SRC := $(wildcard $(SRC)/cuda/*.cu $(SRC)/cuda/*.cuh $(SRC)/cuda/*.h)
# The C, C++ and CUDA sources make lint formats (.clang-format).
CLANG_FORMAT_SRC := $(wildcard $(SRC)/*.cpp $(SRC)/*.h $(INC)/*.h $(SRC)/cuda/* scripts/explore/*.cpp) fuzz/native/ssmk_fuzz.cpp adapters/mamba/ssmk_mamba.cu adapters/ggml/ssmk_ggml.c
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
WARN     := -Wall -Wextra -Werror
CXXFLAGS ?= -O3 -std=c++17 -fPIC -fopenmp -fvisibility=hidden $(WARN)

.PHONY: all help lib lib-cuda cuda-check sass-baseline test verify mamba2 mamba3 ggml mutants mutants-cuda-build mutants-generated mutants-bridged fuzz fuzz-native gate gate-bin baseline bench sanitize vet fmt-check lint bench-ref gpu-build clean

all: lib

## help: this list of targets
help:
	@awk '/^## / { sub(/^## /, ""); if (match($$0, /^[a-z-]+( \/ [a-z-]+)*:/)) printf "\n"; print "  " $$0 }' $(MAKEFILE_LIST)

## lib: the CPU build of the kernels, build/libssmk_cpu.so
lib: $(BUILD)/libssmk_cpu.so

$(BUILD)/libssmk_cpu.so: $(CPU_SRC) $(HEADERS) $(SRC)/ssmk.map
	@mkdir -p $(BUILD)
	$(CXX) $(CXXFLAGS) -I$(INC) -shared -o $@ $(CPU_SRC) -Wl,--version-script=$(SRC)/ssmk.map -Wl,--no-undefined

# A mutant of the CPU build: one planted bug, the patch cmd/mutants/patches/K-*.patch applied to a copy of
# kernels/ (build/mutants/tree-mK; the shipped sources hold no trace of it), then compiled as the CPU build is.
# MUTANT_OPT replaces the optimization level: make mutants builds the accuracy mutants at -O1, in half the time
# and with the same arithmetic (ISO C++ without -ffast-math: no contraction, no reassociation), the check faults,
# which timings decide, at the base build's -O3.
MUTANT_OPT ?= -O3
MUTANT_PATCHES := $(wildcard cmd/mutants/patches/*.patch)
$(BUILD)/mutants/libssmk_cpu_m%.so: $(CPU_SRC) $(HEADERS) $(SRC)/ssmk.map $(MUTANT_PATCHES)
	@mkdir -p $(@D)
	$(GO) run ./cmd/mutants -tree $* $(BUILD)/mutants/tree-m$*
	$(CXX) $(filter-out -O%,$(CXXFLAGS)) $(MUTANT_OPT) -I$(BUILD)/mutants/tree-m$*/cudalib/include -shared -o $@ \
		$(patsubst $(SRC)/%,$(BUILD)/mutants/tree-m$*/kernels/src/%,$(CPU_SRC)) -Wl,--version-script=$(SRC)/ssmk.map -Wl,--no-undefined

# The CPU build declaring an engine's features (no z, variable B/C only; SSMK_CPU_ENGINE in cpu_plan.h), which
# make mutants holds to the suite: it must pass, with what it does not take listed as not supported.
$(BUILD)/libssmk_cpu_engine.so: $(CPU_SRC) $(HEADERS) $(SRC)/ssmk.map
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -DSSMK_CPU_ENGINE=1 -I$(INC) -shared -o $@ $(CPU_SRC) -Wl,--version-script=$(SRC)/ssmk.map -Wl,--no-undefined

## lib-cuda: the CUDA build, build/libssmk_cuda.so (nvcc; CUDA_ARCH=90 by default)
lib-cuda: $(BUILD)/libssmk_cuda.so

$(BUILD)/libssmk_cuda.so: $(CUDA_SRC) $(HEADERS) $(SRC)/ssmk.map kernels/build-cuda.sh
	kernels/build-cuda.sh $@ $(CUDA_ARCH)

## cuda-check: compile the CUDA sources for CHECK_ARCHS (sm_80 and sm_90) without running them (CI has no GPU), and
## fail if a sm_90 scan kernel needs more than 128 registers (fewer blocks per SM: scripts/scan-registers.sh) or
## the fp32 forward kernels' loops and registers left the baseline's shape (scripts/scan-sass.sh: time it on a GPU)
# The sources branch on the architecture only at sm_90 (__CUDA_ARCH__ >= 900), so sm_80 stands for sm_86, sm_87
# and sm_89 too; CHECK_ARCHS="80 87 90" compiles those as well (each arch is a whole build, ~100 s on 2 cores).
SASS_BASELINE := kernels/testdata/sass-fp32-forward.txt
CHECK_ARCHS ?= 80 90
cuda-check:
	@case " $(CHECK_ARCHS) " in *" 90 "*) ;; *) echo "cuda-check: CHECK_ARCHS must include 90 (the register and SASS checks read sm_90's build)"; exit 2;; esac
	@for a in $(CHECK_ARCHS); do kernels/build-cuda.sh $(BUILD)/cuda-check/libssmk_cuda_sm_$$a.so $$a || exit 1; done
	@echo "cuda-check: the CUDA sources compile for $(patsubst %,sm_%,$(CHECK_ARCHS))"
	@scripts/scan-registers.sh $(BUILD)/cuda-check/libssmk_cuda_sm_90.so 128
	@scripts/scan-sass.sh $(BUILD)/cuda-check/libssmk_cuda_sm_90.so $(SASS_BASELINE)

## sass-baseline: rewrite the fp32 forward kernels' shape that cuda-check compares with (after timing the change)
sass-baseline:
	kernels/build-cuda.sh $(BUILD)/cuda-check/libssmk_cuda_sm_90.so 90
	scripts/scan-sass.sh $(BUILD)/cuda-check/libssmk_cuda_sm_90.so $(SASS_BASELINE) --update

## test: everything CI runs (builds the CPU library first), then the Mamba-2 prefill's properties on the numpy path
## in the engines' varlen layout (layout=varlen: vLLM's and Megatron's calling convention, docs/engines.md), and
## Mamba-2's prefill and decode on the CPU library through the ABI (mamba2_ssmk: the way ggml's path is judged)
test: lib
	$(GO) test ./...
	SSMK_BRIDGE="numpy_ssd layout=varlen" $(GO) test ./verify/mamba2 -count=1 \
		-run 'TestMamba2(Prefill|Boundaries|SplitResume|PackedEqualsAlone|DecodeAfterPrefill|ChunkStates)$$'
	SSMK_BRIDGE="mamba2_ssmk lib=$(abspath $(BUILD)/libssmk_cpu.so) name=the-CPU-build" $(GO) test ./verify/mamba2 -count=1 \
		-run 'TestMamba2(Prefill|Decode|SplitResume|DecodeUntouchedSlots|DecodeChain)$$'

## lint: gofmt, go vet, staticcheck, and clang-format of the C, C++ and CUDA sources (what CI checks)
lint: fmt-check vet
	$(STATICCHECK) ./...
	@if ! command -v clang-format >/dev/null; then \
		echo "lint: clang-format not found: the C, C++ and CUDA sources' format is not checked (Debian: apt-get install clang-format)"; \
		[ -z "$$CI" ] || exit 1; exit 0; fi
	@clang-format --style=file --dry-run -Werror $(CLANG_FORMAT_SRC) && echo "lint: clang-format clean"

## vet / fmt-check: go vet; gofmt
vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go' | while read -r f; do [ -f "$$f" ] && echo "$$f"; done)); \
		if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## verify: the main job: build the library (CPU; CUDA too when nvcc and a GPU are present), run the golden files
## tests, the verification suite against the library, then Mamba-2 and Mamba-3 through the bridge (verify/mamba2,
## verify/mamba3), print each summary and the run's verdict last (cmd/suite: exit 0 pass, 1 fail, 2 could not run,
## 3 undecided); writes out/report.json, out/summary.txt, out/mamba2/ and out/mamba3/, each run from an empty report
# With SSMK_LIB naming a library of its own, the CPU build is not built (the suite judges SSMK_LIB alone).
verify: $(if $(SSMK_LIB),,lib)
	@if [ -z "$(SSMK_LIB)" ] && command -v nvcc >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then $(MAKE) lib-cuda; fi
	@$(GO) build -o $(BUILD)/suite ./cmd/suite && $(BUILD)/suite -out out

## mamba2, mamba3: the Mamba-2 (prefill, decode) or Mamba-3 (forward, step, backward) suite alone, against the
## kernel SSMK_BRIDGE names ("ADAPTER key=value …"; default the numpy paths), into out/mamba2 or out/mamba3; on a
## GPU machine without Go: scripts/gpu.sh mamba2 CHECKOUT, scripts/gpu.sh mamba3 CHECKOUT (docs/bridge.md)
mamba2:
	@$(GO) build -o $(BUILD)/suite ./cmd/suite && $(BUILD)/suite -out out -parts mamba2
mamba3:
	@$(GO) build -o $(BUILD)/suite ./cmd/suite && $(BUILD)/suite -out out -parts mamba3

## mutants: build the CPU library with each planted bug of the catalogue, run the suite against it until a test
## kills it, print which one and its diagnosis; MUTANTS_FLAGS=-matrix runs every test against every mutant
MUTANTS_FLAGS ?=
mutants: lib
	$(GO) run ./cmd/mutants $(MUTANTS_FLAGS)

## mutants-cuda-build: compile the CUDA library and each of its 34 mutants with nvcc, no GPU (build/mutants/; units
## that do not include a mutant's patched file come from the object cache): a patch gone stale fails here, not on the
## GPU's time (35 builds in 39 minutes on 2 cores, 3 GB under build/mutants/; scripts/gpu.sh mutants judges them on a GPU)
mutants-cuda-build:
	$(GO) run ./cmd/mutants -cuda -build-only -arch 90

## mutants-generated: the diagnosis measured on bugs nobody planted for it: GENERATED (100) mutants drawn with SEED (1)
## from mechanical mutations of the CPU build's sources, each judged by the suite; the kill rate and the share
## diagnosed at the mutated region (out/generated.json)
GENERATED ?= 100
SEED ?= 1
mutants-generated: lib
	$(GO) run ./cmd/mutants -generate $(GENERATED) -seed $(SEED)

## mutants-bridged: the chunked kernels' diagnosis measured likewise: BRIDGED_GENERATED (30) mutants of the numpy
## BRIDGED_FAMILY path (mamba2: bridge/python/adapters/numpy_ssd.py, about 2.5 min a mutant on 2 cores; mamba3:
## numpy_mamba3.py) drawn with SEED, each judged by its whole bridged suite (python3 and NumPy),
## out/generated-FAMILY.json; upstream's Triton kernels: scripts/gpu.sh generated FAMILY CHECKOUT N on a GPU machine
BRIDGED_GENERATED ?= 30
BRIDGED_FAMILY ?= mamba2
mutants-bridged:
	$(GO) run ./cmd/mutants -bridged $(BRIDGED_FAMILY) -generate $(BRIDGED_GENERATED) -seed $(SEED)

## ggml: build the ssmk adapter over ggml_ssm_scan from GGML_SRC (a ggml or llama.cpp checkout) for GGML_BACKEND (cpu, or cuda) and verify it; SSMK_GGML_HEAD_DIM=k verifies the Mamba-2 path (docs/adapters.md)
GGML_BACKEND ?= cpu
ggml:
	@test -n "$(GGML_SRC)" || { echo "make ggml: set GGML_SRC to a ggml or llama.cpp checkout (docs/adapters.md)"; exit 2; }
	adapters/ggml/build.sh $(GGML_SRC) $(BUILD)/ggml/$(GGML_BACKEND).so $(GGML_BACKEND)
	SSMK_LIB=$(CURDIR)/$(BUILD)/ggml/$(GGML_BACKEND).so $(MAKE) --no-print-directory verify

## gate: the merge gate (cmd/gate): accuracy, golden, fuzz-corpus replay, the seven checks and the
## convergence orders against the library under test (SSMK_LIB to choose); writes OUT/report.json (out/gate),
## junit.xml, report.md and plots; BASELINE=file compares Check7 with a stored baseline. Exit 0 only on a pass.
OUT ?= out/gate
BASELINE ?=
MAX_REGRESSION ?= 0.05
GATE_FLAGS ?=
## (make's own exit status is 2 on any failure; build/gate itself exits 0 pass, 1 fail, 2 could not run,
## 3 performance undecided: CI jobs that distinguish them call build/gate directly)
gate: lib gate-bin
	$(BUILD)/gate -out $(OUT) -max-regression $(MAX_REGRESSION) $(if $(BASELINE),-baseline $(BASELINE)) $(GATE_FLAGS)

## gate-bin: build/gate, the gate command
gate-bin:
	$(GO) build -o $(BUILD)/gate ./cmd/gate

## baseline: measure Check7 and store its samples as a baseline (BASELINE_FILE, default baseline.json)
BASELINE_FILE ?= baseline.json
baseline: lib gate-bin
	$(BUILD)/gate -out out/baseline -pkgs verify -run Check7 -plots=false -write-baseline $(BASELINE_FILE) $(GATE_FLAGS)

## fuzz: each Go fuzz target (fuzz/) for FUZZTIME against the library under test (SSMK_LIB to choose);
## prints execs, execs/s and new corpus entries; a failure is written to fuzz/testdata/fuzz/<Target>/
FUZZTIME ?= 60s
fuzz: lib
	FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

## fuzz-native: the libFuzzer harness of the CPU backend (clang, ASan, UBSan) for FUZZTIME
fuzz-native:
	FUZZTIME=$(FUZZTIME) scripts/fuzz-native.sh

## bench-ref: the reference scan against the CPU kernel, one thread each
bench-ref: lib
	$(GO) test ./mamba1 ./kernels -run '^$$' -bench 'ScanReference|ScanKernelCPU' -benchtime 20x

## bench: on a GPU machine: Check7 at both sizes of the performance issue, fp32/fp64, real/complex, after the
## accuracy tests against the same build; prints the table (scripts/gpu.sh bench, which needs gpu-build first
## on a machine without Go)
bench: gpu-build
	scripts/gpu.sh bench

## sanitize: on a GPU machine: compute-sanitizer memcheck, racecheck, initcheck, synccheck over the kernel tests
sanitize: gpu-build
	scripts/gpu.sh sanitize

## gpu-build: cross-compile the test binaries into carry/ for a GPU machine without Go (scripts/gpu.sh);
## GPU_BUILD=abi (default: the library's), bridged (verify/mamba2, verify/mamba3) or all (over a device call's carry)
gpu-build:
	scripts/gpu.sh build $(or $(GPU_BUILD),abi)

clean:
	rm -rf $(BUILD) carry

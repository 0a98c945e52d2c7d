// Package mamba2 is the verification suite of Mamba-2's kernels — the
// chunked prefill (mamba_chunk_scan_combined) and the decode step
// (selective_state_update) — reached through the bridge to kernels
// launched from Python (package bridge).
//
// Its tests (go test ./verify/mamba2) judge the kernel that SSMK_BRIDGE
// names ("ADAPTER [key=value …]", e.g. "mamba2_upstream
// checkout=$HOME/mamba"), by default the suite's own numpy path
// (bridge/python/adapters/numpy_ssd.py), against package mamba2's float64
// reference and error model:
//
//   - TestMamba2Prefill, TestMamba2Decode: every declared dtype and state
//     dtype with each option alone and all together, packed sequences with
//     a boundary inside a chunk and a sequence of one step, lengths that
//     are not a multiple of the chunk; each failure diagnosed
//     (diagnose.SSDPrefill, diagnose.SSDStep), each crash of the kernel
//     reported as such while the run goes on;
//   - TestMamba2SplitResume: a prefill split anywhere and resumed from its
//     own final state equals one pass;
//   - TestMamba2DecodeAfterPrefill: decode steps from a prefill's final
//     state equal the prefill of the longer sequence;
//   - TestMamba2DecodeDrift: 10⁴ decode steps chained from a prefill's
//     state equal the longer prefill in each state type, the worst ratio
//     by windows of steps reported (drift before it fails);
//   - TestMamba2DecodeUntouchedSlots: a decode step leaves every slot
//     no row names (a padding row's null slot included) bit for bit;
//   - TestMamba2PackedEqualsAlone: a packed row equals each sequence alone;
//   - TestMamba2ErrorGrowth: the error's growth with position for each
//     state type, prefill and a chain of decode steps (a table in the
//     report);
//   - TestMamba2Timing: the prefill and the step timed in the worker, and
//     Check6's decision that less work never costs more;
//   - TestMamba2DiagnosisOfPlantedSlips: the diagnosis names the slips
//     planted in the numpy path (whatever SSMK_BRIDGE says);
//   - TestMamba2TritonMutants (SSMK_MAMBA2_MUTANTS=checkout): bugs planted
//     in copies of upstream's Triton files, killed and named.
//
// TestMain (package bridgetest) writes report.json and summary.txt into
// -report (the schema of package report, with the worker's description:
// versions, GPU, commit, the autotuner's choices).
package mamba2

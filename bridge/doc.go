// Package bridge drives kernels launched from Python — Triton (and any
// kernel PyTorch can call) — from the suite, through a worker process.
//
// The suite starts `python3 -m ssmbridge.worker ADAPTER [key=value …]`
// (bridge/python) and exchanges framed messages with it over the worker's
// stdin and stdout: a 4-byte little-endian length, a JSON header, then the
// raw bytes of the arrays the header lists (protocol.go). Arrays cross as
// their bytes, so fp16 and bf16 values arrive bit for bit; the worker
// copies them to the device, runs the adapter's function, and sends the
// outputs back the same way. The ADAPTER is a small Python module, the
// user's or one of bridge/python/adapters, mapping the suite's problem to
// the kernel's function (which it loads from the user's checkout).
//
// A kernel that crashes the process (a segfault), hangs past the call's
// timeout, or leaves the device in a sticky error (the worker answers
// kind "fault" and exits, since its CUDA context is poisoned) ends the
// worker, never the suite: the call returns a *CrashError with the
// worker's last words, and the next call starts a fresh worker. What the
// worker says about itself (Python, torch, Triton and driver versions,
// the GPU and its architecture, the kernel's source commit, and after
// each call the configuration its autotuner chose) is Hello's, for the
// report. Timing is the worker's: CUDA events around each launch of
// inputs kept on the device, after warm-up launches.
//
// SSD is Mamba-2's kernels behind the bridge: a prefill
// (mamba_chunk_scan_combined) and a decode step (selective_state_update)
// on package mamba2's problems.
package bridge

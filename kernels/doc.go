// Package kernels is the project's own implementation of the ssmk ABI
// (cudalib/include/ssmk.h): the CPU build (src/cpu.cpp, src/cpu_backward.cpp,
// built by make lib into build/libssmk_cpu.so) and the CUDA build
// (src/cuda/, built by build-cuda.sh into build/libssmk_cuda.so), which share
// the methods' arithmetic (src/ssmk_methods.h), complex numbers
// (src/ssmk_complex.h), derivatives (src/ssmk_derivs.h) and 16-bit types
// (src/ssmk_narrow.h).
//
// It holds no Go code but its tests, which load a build through package
// cudalib, the binding any ABI library is loaded with. They test what is
// particular to these builds, not what the ABI asks of every library (the
// verification suite, package verify, asks that):
//
//   - each forward and backward design of the CUDA build forced in turn
//     (SSMK_FORWARD, SSMK_BACKWARD) on every method, input type and
//     option, within the error model, and the automatic choice recognised
//     by its outputs' bits (gate.DesignTests selects these for the gate);
//   - the builds' answers against the float64 reference on small shapes, in
//     every dtype, with and without an initial state, plans against direct
//     calls, the inputs left alone, the error scale's tightness;
//   - the compiled kernels' shape: registers per thread and the fp32
//     forward's SASS loops against a baseline (make cuda-check's scripts,
//     tested here with stand-in tools), the object cache's dependency scan
//     against g++ -MM, and the sources' readability.
//
// Mutation testing (cmd/mutants) plants its bugs in a copy of this folder.
package kernels

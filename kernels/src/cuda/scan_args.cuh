/*
 * scan_args.cuh — what both directions' kernels read of a launch's
 * arguments, filled once from the ABI's ssmk_scan_args.
 *
 * The forward's ScanParams (scan_kernel.cuh) and the backward's BwdParams
 * (bwd_block.cuh) extend ScanInputs with what each direction adds; the
 * shape, the options and the input pointers are copied from the ABI's
 * arguments in one place (scan_inputs), not once per direction.
 */
#ifndef SSMK_SCAN_ARGS_CUH
#define SSMK_SCAN_ARGS_CUH

#include "ssmk.h"

namespace ssmk {

/* The shape, the options and the inputs of a launch (device pointers). */
struct ScanInputs {
    int batch, dim, seqlen, dstate, n_groups;
    int method, is_variable_B, is_variable_C, softplus;
    long long rows; /* batch · dim */
    const void *u, *delta, *A, *B, *C, *D, *z, *delta_bias;
};

/* The inputs of a (whose pointers are the device's). */
inline ScanInputs scan_inputs(const ssmk_scan_args &a) {
    ScanInputs in;
    in.batch = a.batch;
    in.dim = a.dim;
    in.seqlen = a.seqlen;
    in.dstate = a.dstate;
    in.n_groups = a.n_groups;
    in.method = a.method;
    in.is_variable_B = a.is_variable_B;
    in.is_variable_C = a.is_variable_C;
    in.softplus = a.delta_softplus;
    in.rows = (long long)a.batch * a.dim;
    in.u = a.u;
    in.delta = a.delta;
    in.A = a.A;
    in.B = a.B;
    in.C = a.C;
    in.D = a.D;
    in.z = a.z;
    in.delta_bias = a.delta_bias;
    return in;
}

} /* namespace ssmk */

#endif

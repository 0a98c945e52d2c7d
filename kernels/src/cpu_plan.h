/*
 * cpu_plan.h — what the CPU build's two translation units share: the
 * OpenMP team, host copies, and the plan (forward, discretize or
 * backward). cpu.cpp holds the forward and the ABI's core; cpu_backward.cpp
 * the backward pass.
 */
#ifndef SSMK_CPU_PLAN_H
#define SSMK_CPU_PLAN_H

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "ssmk.h"
#include "ssmk_host.h"

namespace ssmk {

/* The CPU build takes the 16-bit input types, in float32, with real and
 * complex A, in its scan and its backward. */
constexpr NarrowInputs kNarrowInputs = NARROW_COMPLEX;

/* SSMK_CPU_ENGINE=1 builds the CPU library as a fused kernel of an engine
 * declares itself (VMamba's selective scan, ggml_ssm_scan): through
 * ssmk_scan_features it takes D, delta_bias, softplus on or off and
 * variable B/C, no gate z and no constant B/C, and it refuses every call
 * outside that (SSMK_EUNSUPPORTED), forward and backward. The arithmetic
 * is the CPU build's. make mutants runs the suite against it, which must
 * pass: a test that asks such a library for what it did not declare
 * (instead of fitting its problem to the declaration) fails there. */
#ifndef SSMK_CPU_ENGINE
#define SSMK_CPU_ENGINE 0
#endif
constexpr uint32_t kEngineOptions =
    SSMK_FEAT_D | SSMK_FEAT_DELTA_BIAS | SSMK_FEAT_SOFTPLUS_OFF | SSMK_FEAT_SOFTPLUS_ON | SSMK_FEAT_VARIABLE_BC;

/* engine_takes refuses, for SSMK_CPU_ENGINE, a call (validated) outside
 * the engine declaration. */
inline int32_t engine_takes(const ssmk_scan_args *a) {
    if (SSMK_CPU_ENGINE && (a->z || !a->is_variable_B || !a->is_variable_C))
        return fail(SSMK_EUNSUPPORTED,
                    "this build (SSMK_CPU_ENGINE) takes variable B/C and no z: z %s, is_variable_B = %d, "
                    "is_variable_C = %d (ssmk_scan_features)",
                    a->z ? "given" : "NULL", a->is_variable_B, a->is_variable_C);
    return SSMK_OK;
}

/* The CPU build's argument checks of a scan and of a backward pass. */
inline int32_t validate_call(const ssmk_scan_args *a) {
    if (int32_t st = validate_scan(a, SSMK_MAX_DSTATE, kNarrowInputs)) return st;
    return engine_takes(a);
}
inline int32_t validate_bwd_call(const ssmk_scan_args *a, const ssmk_scan_grads *g) {
    if (int32_t st = validate_bwd(a, g, SSMK_MAX_DSTATE, kNarrowInputs)) return st;
    return engine_takes(a);
}

inline int g_threads = 0; /* 0: not yet read from OpenMP */

/* The size of the library's OpenMP team (ssmk_set_num_threads). */
inline int threads() {
    int n = __atomic_load_n(&g_threads, __ATOMIC_RELAXED);
    if (n <= 0) {
        n = omp_get_max_threads();
        __atomic_store_n(&g_threads, n, __ATOMIC_RELAXED);
    }
    return n;
}

/* Runs row(r) for every r < rows on the library's OpenMP team. */
template <typename F>
void for_rows(int64_t rows, F row) {
    const int nt = threads();
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t r = 0; r < rows; r++) row(r);
}

/* An owned copy of a host array, or nullptr for an absent one. */
inline void *dup(const void *src, int64_t count, size_t elem, bool *oom) {
    if (!src) return nullptr;
    void *p = malloc((size_t)count * elem);
    if (!p) {
        *oom = true;
        return nullptr;
    }
    memcpy(p, src, (size_t)count * elem);
    return p;
}

/* A backward plan's saved states (ssmk_plan_create_bwd_saved): the state
 * entering every chunk of every row, which a run with states and without
 * grads fills and runs with grads alone read. */
struct BwdSaved {
    std::vector<unsigned char> starts;
    bool states = true, grads = true;
};

/* The backward pass on validated arguments (cpu_backward.cpp); saved: the
 * stages to run and the states between them, or NULL for both at once. */
void run_backward(const ssmk_scan_args *a, const void *h0, const ssmk_scan_grads *g, BwdSaved *saved = nullptr);

} /* namespace ssmk */

struct ssmk_plan {
    enum Kind { SCAN, DISCRETIZE, BACKWARD } kind = SCAN;
    bool launched = false;
    ssmk_scan_args args{};
    /* discretize */
    int32_t method = 0, dtype = 0, is_complex = 0;
    int64_t n = 0;
    void *delta = nullptr, *A = nullptr, *abar = nullptr, *bcoef = nullptr;
    const void *h0 = nullptr; /* the plan's copy of the initial state, or NULL */
    ssmk_scan_grads grads{};  /* backward: the plan's own dout, dlast_state and gradient buffers */
    bool saved = false;       /* backward: a plan on saved states, held in bwd */
    ssmk::BwdSaved bwd;
    ssmk::ScanSizes sz{};
    std::vector<void *> owned;

    ~ssmk_plan() {
        for (void *p : owned) free(p);
    }
};

#endif /* SSMK_CPU_PLAN_H */

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

#ifndef SSMK_MUTANT
#define SSMK_MUTANT 0
#endif

namespace ssmk {

/* The CPU build takes the 16-bit input types, in float32, with real and
 * complex A, in its scan and its backward. */
constexpr NarrowInputs kNarrowInputs = NARROW_COMPLEX;

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

/* The backward pass on validated arguments (cpu_backward.cpp). */
void run_backward(const ssmk_scan_args *a, const void *h0, const ssmk_scan_grads *g);

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
    ssmk::ScanSizes sz{};
    std::vector<void *> owned;
#if SSMK_MUTANT == 18
    int tuning_launches = 0;
#endif

    ~ssmk_plan() {
        for (void *p : owned) free(p);
    }
};

#endif /* SSMK_CPU_PLAN_H */

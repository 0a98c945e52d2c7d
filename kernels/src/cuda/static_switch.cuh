/*
 * static_switch.cuh — from run-time values to template arguments, in the
 * manner of Mamba's static_switch.h: for the host dispatch of the scan
 * (scan_launch.cuh) and of the backward (backward.cu), and in the backward
 * kernel for foh's branch of a thread's run.
 */
#ifndef SSMK_STATIC_SWITCH_CUH
#define SSMK_STATIC_SWITCH_CUH

#include <type_traits>

#include "../ssmk_methods.h"

namespace ssmk {

/* f(std::integral_constant<int, M>{}) for the method m (rk4 for any other
 * value: the ABI's arguments are validated before a launch). */
template <class F>
void method_switch(int m, F &&f) {
    switch (m) {
    case ZOH:
        return f(std::integral_constant<int, ZOH>{});
    case FOH:
        return f(std::integral_constant<int, FOH>{});
    case BILINEAR:
        return f(std::integral_constant<int, BILINEAR>{});
    case POLY:
        return f(std::integral_constant<int, POLY>{});
    case HIGHORDER:
        return f(std::integral_constant<int, HIGHORDER>{});
    default:
        return f(std::integral_constant<int, RK4>{});
    }
}

/* f(std::true_type{}) or f(std::false_type{}) */
template <class F>
void bool_switch(bool b, F &&f) {
    if (b)
        f(std::true_type{});
    else
        f(std::false_type{});
}

/* f(std::integral_constant<int, br>{}) on the device, so that a per-thread
 * choice selects straight-line code; f must not reach a barrier, which the
 * threads of a block on other branches would not. */
template <class F>
__device__ __forceinline__ void foh_branch_switch(FohBranch br, F &&f) {
    if (br == FOH_NEAR)
        f(std::integral_constant<int, FOH_NEAR>{});
    else if (br == FOH_FAR)
        f(std::integral_constant<int, FOH_FAR>{});
    else
        f(std::integral_constant<int, FOH_EXACT>{});
}

} /* namespace ssmk */

#endif /* SSMK_STATIC_SWITCH_CUH */

/*
 * ssmk_narrow.h — the 16-bit input types of the mixed-precision dtypes
 * (SSMK_F16, SSMK_BF16): IEEE binary16 and bfloat16 bit patterns, widened
 * to float exactly and narrowed from float by one rounding to nearest, ties
 * to even, as a kernel stores its output.
 *
 * binary16: 1 sign, 5 exponent (bias 15), 10 fraction bits; normal values
 * 2^-14 … 65504, subnormals down to 2^-24; a float at or above 65520 rounds
 * to infinity. bfloat16: the upper 16 bits of a float (8 exponent, 7
 * fraction bits), float's range. Both are computed with integer operations
 * so that the CPU build rounds without depending on a compiler's _Float16
 * or the rounding mode; the CUDA kernels narrow by the hardware's cvt.rn,
 * the same rounding to nearest, ties to even, in one instruction (a NaN
 * stays a NaN, its payload the hardware's).
 */
#ifndef SSMK_NARROW_H
#define SSMK_NARROW_H

#include <stdint.h>
#include <string.h>

#include "ssmk_methods.h" /* SSMK_HD, cplx */

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>
#endif

namespace ssmk {

struct half16 {
    uint16_t bits;
};
struct bfloat16 {
    uint16_t bits;
};

SSMK_HD uint32_t float_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}
SSMK_HD float bits_float(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}

SSMK_HD float widen(float v) { return v; }
SSMK_HD double widen(double v) { return v; }
SSMK_HD float widen(bfloat16 v) { return bits_float((uint32_t)v.bits << 16); }
SSMK_HD float widen(half16 v) {
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half(v.bits)); /* one conversion instruction */
#endif
    const uint32_t s = (uint32_t)(v.bits & 0x8000u) << 16, e = (v.bits >> 10) & 0x1fu, m = v.bits & 0x3ffu;
    if (e == 0) { /* zero or subnormal: m·2^-24, exact in float */
        const float f = (float)m * 5.9604644775390625e-8f;
        return bits_float(float_bits(f) | s);
    }
    if (e == 31) return bits_float(s | 0x7f800000u | (m << 13)); /* ±Inf, NaN */
    return bits_float(s | ((e + 112u) << 23) | (m << 13));
}

template <typename I>
SSMK_HD auto widen(cplx<I> v) -> cplx<decltype(widen(v.re))> {
    return cmake(widen(v.re), widen(v.im));
}

/* to_bfloat16 and to_half16: x rounded to nearest, ties to even. */
SSMK_HD bfloat16 to_bfloat16(float x) {
#if defined(__CUDA_ARCH__)
    return bfloat16{__bfloat16_as_ushort(__float2bfloat16_rn(x))};
#endif
    const uint32_t b = float_bits(x);
    if ((b & 0x7fffffffu) > 0x7f800000u) return bfloat16{(uint16_t)((b >> 16) | 0x40u)}; /* NaN stays NaN */
    return bfloat16{(uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16)};
}

SSMK_HD half16 to_half16(float x) {
#if defined(__CUDA_ARCH__)
    return half16{__half_as_ushort(__float2half_rn(x))};
#endif
    const uint32_t b = float_bits(x), s = (b >> 16) & 0x8000u, ax = b & 0x7fffffffu;
    if (ax > 0x7f800000u) return half16{(uint16_t)(s | 0x7e00u)};  /* NaN */
    if (ax >= 0x477ff000u) return half16{(uint16_t)(s | 0x7c00u)}; /* |x| >= 65520 (and Inf): Inf */
    if (ax < 0x38800000u) {                                        /* below 2^-14: a subnormal or 0 */
        /* |x|·2^24 is exact in float; rounded to an integer, ties to even,
         * by adding and subtracting 2^23 (no libm, no rounding mode). */
        const float q = bits_float(ax) * 16777216.0f;
        const float r = (q + 8388608.0f) - 8388608.0f;
        return half16{(uint16_t)(s | (uint16_t)r)};
    }
    uint32_t h = ((ax >> 23) - 112u) << 10 | ((ax >> 13) & 0x3ffu);
    const uint32_t rem = ax & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* a carry into the exponent is right */
    return half16{(uint16_t)(s | h)};
}

/* narrow<I>(x): a computed value x stored as an element of the input type
 * I (float and double: as it is). */
template <typename I>
struct Narrowing {
    template <typename T>
    static SSMK_HD I from(T x) {
        return x;
    }
};
template <>
struct Narrowing<bfloat16> {
    static SSMK_HD bfloat16 from(float x) { return to_bfloat16(x); }
};
template <>
struct Narrowing<half16> {
    static SSMK_HD half16 from(float x) { return to_half16(x); }
};
template <typename I, typename T>
SSMK_HD I narrow(T x) {
    return Narrowing<I>::from(x);
}

#ifdef __CUDACC__
/* Two floats narrowed to the 16-bit type I as narrow<I> rounds them, packed
 * into one 32-bit word (lo in the low half, at the lower address): on the
 * device one cvt.rn for the pair (mutant 26 keeps its truncation here too). */
template <typename I>
__device__ __forceinline__ uint32_t narrow_pair(float lo, float hi) {
    uint32_t w;
    if constexpr (std::is_same<I, bfloat16>::value) {
        const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
        memcpy(&w, &h, 4);
    } else {
        static_assert(std::is_same<I, half16>::value, "a 16-bit input type");
        const __half2 h = __floats2half2_rn(lo, hi);
        memcpy(&w, &h, 4);
    }
    return w;
}
#endif

/* The element type of a 16-bit input type's widened values (float), or the
 * type itself. */
template <typename I>
struct Widened {
    using type = I;
};
template <>
struct Widened<half16> {
    using type = float;
};
template <>
struct Widened<bfloat16> {
    using type = float;
};

} /* namespace ssmk */

#endif

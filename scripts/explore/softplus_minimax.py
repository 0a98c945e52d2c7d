#!/usr/bin/env python3
"""The float coefficients of log1p_unit (kernels/src/ssmk_methods.h): softplus's log1p(t), t = e^−|v| in [0, 1].

log1p(t) = t + t²·Q(t) with Q(t) = (log1p(t) − t)/t²: a Remez exchange (phi1_minimax.py's) for the
polynomial of each degree that minimises Q's relative error on [0, 1]; the coefficients rounded to
float; and the worst error of fma(t·t, Q(t), t) evaluated in float by Horner's rule with FMA, in units
of 2^-24 relative to log1p(t), over 400,001 points. scripts/explore/softplus_accuracy.cpp checks the
chosen one on every float. Run: python3 scripts/explore/softplus_minimax.py
"""
import math

from phi1_minimax import f32, remez


def q(t):
    if abs(t) < 1e-3:  # the series, where the quotient cancels
        return -0.5 + t / 3 - t * t / 4 + t ** 3 / 5 - t ** 4 / 6
    return (math.log1p(t) - t) / (t * t)


def worst(coef, n=400001):
    w, at = 0.0, 0.0
    for i in range(1, n):
        t = f32(i / (n - 1))
        p = coef[-1]
        for ck in reversed(coef[:-1]):
            p = f32(p * t + ck)
        r = f32(f32(t * t) * p + t)
        e = abs(r - math.log1p(t)) / math.log1p(t) / 2 ** -24
        if e > w:
            w, at = e, t
    return w, at


if __name__ == "__main__":
    for deg in (6, 7, 8, 9):
        c, err = remez(deg, 0.0, 1.0, f=q)
        cf = [f32(v) for v in c]
        w, at = worst(cf)
        print(f"degree {deg}: Q within {err:.3g} relative; float t + t²·Q(t) within {w:.2f} · 2^-24 (at t = {at:.4g})")
        print("   coefficients t^0 …:", ", ".join(repr(v) + "f" for v in cf))

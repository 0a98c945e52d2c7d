#!/usr/bin/env python3
"""The float coefficients of phi1_series and phi1_near (kernels/src/ssmk_methods.h).

φ1(x) = (e^x − 1)/x on [−1/2, 1/2] (phi1_series) and on [−3/4, 0] (phi1_near,
the float near branch of stable tiles): a Remez exchange for the polynomial of
each degree that minimises the relative error max |p/φ1 − 1|, in double
(plain Python, no dependencies); the coefficients rounded to float; and the
worst error of their float evaluation by Horner's rule with FMA (each step
rounded once to float), in units of 2^-24, over 200,001 points, beside the
degree-7 Taylor polynomial's on [−1/2, 1/2]. Run: python3 scripts/explore/phi1_minimax.py
"""
import math
import struct


def f32(x):
    return struct.unpack('f', struct.pack('f', x))[0]


def phi1(x):
    return 1.0 if x == 0 else math.expm1(x) / x


def solve(a, b):
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        p = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[p] = m[p], m[c]
        for r in range(n):
            if r != c:
                f = m[r][c] / m[c][c]
                for k in range(c, n + 1):
                    m[r][k] -= f * m[c][k]
    return [m[i][n] / m[i][i] for i in range(n)]


def remez(deg, lo, hi, iters=30, f=phi1):
    """The degree-deg polynomial minimising max |p/f − 1| on [lo, hi], and that error."""
    n = deg + 2
    xs = [(lo + hi) / 2 + (hi - lo) / 2 * math.cos(math.pi * (n - 1 - i) / (n - 1)) for i in range(n)]
    grid = [lo + (hi - lo) * i / 20000 for i in range(20001)]
    for _ in range(iters):
        rows = [[x ** k / f(x) for k in range(deg + 1)] + [(-1) ** i] for i, x in enumerate(xs)]
        c = solve(rows, [1.0] * n)[:deg + 1]
        e = [sum(ck * x ** k for k, ck in enumerate(c)) / f(x) - 1 for x in grid]
        ext = [i for i in range(len(grid))
               if i in (0, len(grid) - 1) or (abs(e[i]) >= abs(e[i - 1]) and abs(e[i]) >= abs(e[i + 1]))]
        alt = []
        for i in ext:  # alternating extrema: keep the larger of a same-sign pair
            if alt and (e[alt[-1]] > 0) == (e[i] > 0):
                if abs(e[i]) > abs(e[alt[-1]]):
                    alt[-1] = i
            else:
                alt.append(i)
        while len(alt) > n:
            alt.pop(0 if abs(e[alt[0]]) < abs(e[alt[-1]]) else -1)
        if len(alt) < n:
            break
        xs = [grid[i] for i in alt]
    return c, max(abs(v) for v in e)


def horner_worst(coef, lo, hi):
    worst = 0.0
    for i in range(200001):
        x = f32(lo + (hi - lo) * i / 200000)
        p = coef[-1]
        for ck in reversed(coef[:-1]):
            p = f32(p * x + ck)
        worst = max(worst, abs(p - phi1(x)) / phi1(x) / 2 ** -24)
    return worst


def main():
    for lo, hi, degs in ((-0.5, 0.5, (5, 6, 7)), (-0.75, 0.0, (4, 5, 6))):
        print(f"[{lo}, {hi}]")
        for deg in degs:
            c, err = remez(deg, lo, hi)
            cf = [f32(v) for v in c]
            print(f"degree {deg}: relative error {err:.3g}, float Horner within {horner_worst(cf, lo, hi):.2f} · 2^-24")
            print("   coefficients x^0 …:", ", ".join(repr(v) + "f" for v in cf))
    taylor = [f32(1 / math.factorial(k + 1)) for k in range(8)]
    print(f"Taylor degree 7 on [-0.5, 0.5]: float Horner within {horner_worst(taylor, -0.5, 0.5):.2f} · 2^-24")


if __name__ == "__main__":
    main()

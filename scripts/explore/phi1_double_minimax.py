#!/usr/bin/env python3
"""Double coefficients of minimax φ1(x) = Σ_k x^k/(k+1)! and φ1'(x) = Σ_k (k+1)/(k+2)!·x^k on [−1/2, 1/2].

foh forms φ1 and φ1' near 0 by Taylor series in double (ssmk_methods.h's phi1_series to degree 14,
ssmk_derivs.h's dphi1_series to degree 15). For each, a Remez exchange (mpmath, 60 digits) for the polynomial
of each degree that minimises the relative error max |p/f − 1|; the coefficients rounded to double; and the
worst error of their double evaluation by Horner's rule with FMA (each step rounded once), in units of 2^-53,
over 20,001 points, beside the Taylor polynomial's. Run: python3 scripts/explore/phi1_double_minimax.py
(about a minute; needs mpmath).
"""
import mpmath as mp

mp.mp.dps = 60
A, B = mp.mpf(-0.5), mp.mpf(0.5)


def phi1(x):
    x = mp.mpf(x)
    return mp.mpf(1) if x == 0 else mp.expm1(x) / x


def dphi1(x):
    # the series itself: the quotient (e^x − φ1)/x cancels at tiny x even at 60 digits (Remez's nodes reach 1e-61)
    x = mp.mpf(x)
    if abs(x) < mp.mpf('1e-6'):
        return mp.fsum((k + 1) / mp.factorial(k + 2) * x**k for k in range(12))
    return (mp.exp(x) - phi1(x)) / x


f = None


def remez(n, iters=30):
    m = n + 2
    xs = [(A + B) / 2 + (B - A) / 2 * mp.cos(mp.pi * (m - 1 - i) / (m - 1)) for i in range(m)]
    E = mp.mpf(0)
    for _ in range(iters):
        M = mp.matrix(m, m)
        rhs = mp.matrix(m, 1)
        for i, x in enumerate(xs):
            fx = f(x)
            for j in range(n + 1):
                M[i, j] = x**j
            M[i, n + 1] = (-1)**i * fx
            rhs[i] = fx
        sol = mp.lu_solve(M, rhs)
        c = [sol[j] for j in range(n + 1)]
        E = sol[n + 1]
        err = lambda x: mp.polyval(c[::-1], x) / f(x) - 1
        # the extrema of err between sign changes: a fine grid, refined
        grid = [A + (B - A) * i / 4000 for i in range(4001)]
        vals = [err(x) for x in grid]
        ext = []
        seg = [0]
        for k in range(1, len(grid)):
            if mp.sign(vals[k]) != mp.sign(vals[seg[-1]]) and vals[k] != 0:
                seg.append(k)
        bounds = seg + [len(grid)]
        for s in range(len(bounds) - 1):
            k = max(range(bounds[s], bounds[s + 1]), key=lambda t: abs(vals[t]))
            ext.append(grid[k])
        if len(ext) != m:
            break
        xs = ext
    return c, abs(E)


def f64(x):
    return float(x)


def horner64(c, x):
    # c: double coefficients, highest degree first; each FMA rounded once
    p = mp.mpf(c[0])
    for a in c[1:]:
        p = mp.mpf(f64(p * x + a))
    return p


def worst(c):
    w = 0
    for i in range(20001):
        x = mp.mpf(f64(A + (B - A) * i / 20000))
        w = max(w, abs(horner64(c, x) / f(x) - 1))
    return w / mp.mpf(2)**-53


for name, fn, coef, deg, tries in (("phi1", phi1, lambda k: 1 / mp.factorial(k + 1), 14, (10, 11, 12)),
                                    ("dphi1", dphi1, lambda k: (k + 1) / mp.factorial(k + 2), 15, (11, 12, 13))):
    f = fn
    taylor = [f64(coef(k)) for k in range(deg, -1, -1)]
    print(f"{name}: Taylor degree {deg}: evaluation {float(worst(taylor)):.2f} u")
    for n in tries:
        c, E = remez(n)
        cd = [f64(x) for x in c[::-1]]
        print(f"{name}: minimax degree {n}: relative {float(E):.3e} ({float(E / mp.mpf(2)**-53):.3f} u), "
              f"evaluation {float(worst(cd)):.2f} u")
        print("   ", ", ".join(repr(x) for x in cd))

"""Float64 NumPy oracles of the clinical calibration measures, written from the definitions.

Nothing here imports jaxcal.
"""

from __future__ import annotations

import numpy as np
from sklearn.isotonic import IsotonicRegression


def cir_pava(x, y, w):
    """Oron & Flournoy's cirPAVA (R package cir, defaults strict=FALSE, interiorStrict=TRUE,
    ybounds=0:1), literally: pool the first violating (or interior-flat) pair, x and y
    as weighted means, until none is left. Returns the knots (x, y).

    ``x`` distinct and increasing, ``y`` the mean outcome at each x, ``w`` the weights.
    """
    x, y, w = (np.asarray(a, np.float64).copy() for a in (x, y, w))
    while len(x) > 1:
        d = np.diff(y)
        viol = d < 0
        flat = (d == 0) & ~(np.isin(y[:-1], (0.0, 1.0)) & np.isin(y[1:], (0.0, 1.0)))
        bad = np.flatnonzero(viol | flat)
        if not len(bad):
            break
        i = bad[0]
        tw = w[i] + w[i + 1]
        y[i] = (y[i] * w[i] + y[i + 1] * w[i + 1]) / tw
        x[i] = (x[i] * w[i] + x[i + 1] * w[i + 1]) / tw
        w[i] = tw
        x, y, w = (np.delete(a, i + 1) for a in (x, y, w))
    return x, y


def cir_predict(knots_x, knots_y, s):
    """R's approx(..., rule=2) on the knots: linear inside, flat outside."""
    return np.interp(s, knots_x, knots_y)


def venn_abers_brute(s, y, t):
    """(p0, p1) at each test score by two isotonic regressions per test point."""
    out = []
    for point in t:
        pair = []
        for label in (0, 1):
            ir = IsotonicRegression().fit(np.append(s, point), np.append(y, label))
            pair.append(ir.predict([point])[0])
        out.append(pair)
    return np.array(out)


def hosmer_lemeshow(p, y, edges):
    """C = sum (O - E)^2 / (E (1 - E / n)) over right-closed bins of ``edges``."""
    idx = np.clip(np.searchsorted(edges, p, side="left") - 1, 0, len(edges) - 2)
    m = len(edges) - 1
    n = np.bincount(idx, minlength=m)
    o = np.bincount(idx, y, minlength=m)
    e = np.bincount(idx, p, minlength=m)
    keep = n > 0
    mean = e[keep] / n[keep]
    var = n[keep] * mean * (1 - mean)
    return float(np.sum((o[keep] - e[keep]) ** 2 / var)), int(keep.sum())


def byar(o, e, z):
    """Byar's interval of O / E."""
    low = 0.0 if o == 0 else o * (1 - 1 / (9 * o) - z / (3 * np.sqrt(o))) ** 3
    up = o + 1
    high = up * (1 - 1 / (9 * up) + z / (3 * np.sqrt(up))) ** 3
    return low / e, high / e

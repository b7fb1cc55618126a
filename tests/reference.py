"""Float64 NumPy oracles: naive per-bin loops, written from the definitions, not from jaxcal.

Bin membership compares each value with the edges k/M rounded to the input's dtype, the
convention DESIGN.md fixes, using explicit Python loops over bins.
"""

from __future__ import annotations

import numpy as np


def uniform_bin(values: np.ndarray, n_bins: int, closed: str, dtype=np.float64) -> np.ndarray:
    """Bin of each value by explicit comparison with dtype-rounded edges."""
    edges = (np.arange(n_bins + 1, dtype=np.float64) / n_bins).astype(dtype).astype(np.float64)
    values = np.asarray(values, dtype=np.float64)
    out = np.empty(values.shape, dtype=np.int64)
    for i, v in np.ndenumerate(values):
        for b in range(n_bins):
            lo, hi = edges[b], edges[b + 1]
            if closed == "right":
                inside = (lo < v <= hi) or (b == 0 and v == lo)
            else:
                inside = (lo <= v < hi) or (b == n_bins - 1 and v == hi)
            if inside:
                out[i] = b
                break
    return out


def quantile_bin(values, n_bins, closed, weights=None):
    """Weighted-quantile bins, from the definition in jaxcal._core.binning.quantile_edges."""
    v = np.asarray(values, dtype=np.float64)
    w = np.ones_like(v) if weights is None else np.asarray(weights, dtype=np.float64)
    order = np.argsort(v, kind="stable")
    cum = np.cumsum(w[order])
    inner = []
    for b in range(1, n_bins):
        target = b * cum[-1] / n_bins
        if closed == "right":
            i = next(i for i, c in enumerate(cum) if c >= target)
        else:
            i = next((i for i, c in enumerate(cum) if c > target), len(v) - 1)
        inner.append(v[order][i])
    out = np.empty(len(v), dtype=np.int64)
    for i, x in enumerate(v):
        out[i] = sum(x > e for e in inner) if closed == "right" else sum(x >= e for e in inner)
    return out


def _gaps(scores, targets, bins, n_bins, weights):
    """Per-bin (weight, count, mean score, mean target) lists from a Python loop."""
    rows = []
    for b in range(n_bins):
        idx = [i for i in range(len(scores)) if bins[i] == b and weights[i] > 0]
        wb = sum(weights[i] for i in idx)
        if wb == 0:
            rows.append((0.0, 0, 0.0, 0.0))
            continue
        conf = sum(weights[i] * scores[i] for i in idx) / wb
        acc = sum(weights[i] * targets[i] for i in idx) / wb
        rows.append((wb, len(idx), conf, acc))
    return rows


def binary_ce(
    scores,
    targets,
    n_bins=15,
    *,
    binning="uniform",
    closed="right",
    norm="l1",
    debias=False,
    weights=None,
    dtype=np.float64,
):
    """(calibration error, total weight) of scores vs binary targets."""
    scores = np.asarray(scores, dtype=np.float64)
    targets = np.asarray(targets, dtype=np.float64)
    weights = np.ones_like(scores) if weights is None else np.asarray(weights, np.float64)
    if binning == "uniform":
        bins = uniform_bin(scores, n_bins, closed, dtype)
    else:
        bins = quantile_bin(scores, n_bins, closed, weights)
    rows = _gaps(scores, targets, bins, n_bins, weights)
    total = sum(r[0] for r in rows)
    if total == 0:
        return 0.0, 0.0
    if norm == "max":
        return max(abs(acc - conf) for wb, _, conf, acc in rows if wb > 0), total
    if norm == "l1":
        return sum(wb / total * abs(acc - conf) for wb, _, conf, acc in rows), total
    sq = 0.0
    for wb, n, conf, acc in rows:
        if wb == 0:
            continue
        term = (acc - conf) ** 2
        if debias:
            term = term - acc * (1 - acc) / (n - 1) if n >= 2 else 0.0
        sq += wb / total * term
    return sq, total  # squared (the caller takes the root after averaging)


def _finish(value, norm):
    return float(np.sqrt(max(value, 0.0))) if norm == "l2" else float(value)


def confidence(probs):
    probs = np.asarray(probs, dtype=np.float64)
    return probs.max(axis=1), probs.argmax(axis=1)


def ece(probs, labels, n_bins=15, *, norm="l1", debias=False, dtype=np.float64, **kw):
    probs = np.asarray(probs)
    labels = np.asarray(labels)
    if probs.ndim == 1:
        value, _ = binary_ce(
            probs, labels == 1, n_bins, norm=norm, debias=debias, dtype=dtype, **kw
        )
    else:
        conf, pred = confidence(probs)
        value, _ = binary_ce(
            conf, pred == labels, n_bins, norm=norm, debias=debias, dtype=dtype, **kw
        )
    return _finish(value, norm)


def classwise_ece(probs, labels, n_bins=15, *, norm="l1", debias=False, **kw):
    probs = np.asarray(probs, dtype=np.float64)
    values = [
        binary_ce(probs[:, k], labels == k, n_bins, norm=norm, debias=debias, **kw)[0]
        for k in range(probs.shape[1])
    ]
    return _finish(max(values) if norm == "max" else float(np.mean(values)), norm)


def top_label_ece(
    probs, labels, n_bins=15, *, norm="l1", debias=False, average="label", weights=None, **kw
):
    conf, pred = confidence(probs)
    labels = np.asarray(labels)
    w = np.ones(len(labels)) if weights is None else np.asarray(weights, np.float64)
    values, masses = [], []
    for c in np.unique(pred):
        m = pred == c
        value, mass = binary_ce(
            conf[m], labels[m] == c, n_bins, norm=norm, debias=debias, weights=w[m], **kw
        )
        if mass > 0:
            values.append(value)
            masses.append(mass)
    if not values:
        return 0.0
    if norm == "max":
        return max(values)
    share = (
        np.asarray(masses) / np.sum(masses)
        if average == "sample"
        else np.full(len(values), 1 / len(values))
    )
    return _finish(float(np.dot(share, values)), norm)


def brier_decomposition(probs, labels, n_bins=15, *, closed="right"):
    """Murphy/Stephenson terms summed over one-vs-rest columns, by explicit loops."""
    probs = np.asarray(probs, dtype=np.float64)
    labels = np.asarray(labels)
    cols = probs[:, None] if probs.ndim == 1 else probs
    outcomes = (
        (labels == 1)[:, None] if probs.ndim == 1 else labels[:, None] == np.arange(probs.shape[1])
    )
    terms = np.zeros(6)
    n = len(labels)
    for f, o in zip(cols.T, outcomes.T.astype(np.float64), strict=True):
        bins = uniform_bin(f, n_bins, closed)
        o_bar = o.mean()
        rel = res = wbv = wbc = 0.0
        for b in range(n_bins):
            m = bins == b
            if not m.any():
                continue
            fb, ob = f[m].mean(), o[m].mean()
            rel += m.sum() / n * (fb - ob) ** 2
            res += m.sum() / n * (ob - o_bar) ** 2
            wbv += np.sum((f[m] - fb) ** 2) / n
            wbc += 2 * np.sum((o[m] - ob) * (f[m] - fb)) / n
        terms += [np.mean((f - o) ** 2), rel, res, o_bar * (1 - o_bar), wbv, wbc]
    return terms


def corp(scores, targets, weights=None):
    """CORP in float64 from the definitions: knots = exact distinct scores, textbook PAV.

    Returns (knots, calibrated value per knot, weight per knot).
    """
    s = np.asarray(scores, dtype=np.float64)
    t = np.asarray(targets, dtype=np.float64)
    w = np.ones_like(s) if weights is None else np.asarray(weights, dtype=np.float64)
    keep = w > 0
    knots, inverse = np.unique(s[keep], return_inverse=True)
    wk = np.bincount(inverse, weights=w[keep], minlength=knots.size)
    sk = np.bincount(inverse, weights=(w * t)[keep], minlength=knots.size)
    blocks = []  # [sum w t, sum w, number of knots]
    for a, b in zip(sk, wk, strict=True):
        blocks.append([a, b, 1])
        while len(blocks) > 1 and blocks[-2][0] * blocks[-1][1] >= blocks[-1][0] * blocks[-2][1]:
            a2, b2, c2 = blocks.pop()
            blocks[-1][0] += a2
            blocks[-1][1] += b2
            blocks[-1][2] += c2
    fitted = np.concatenate([np.full(c, a / b) for a, b, c in blocks])
    return knots, fitted, wk


def _xlogy(x, y):
    return np.where(x > 0, x * np.log(np.where(x > 0, y, 1.0)), 0.0)


FLOAT32_EPS = float(np.finfo(np.float32).eps)


def score_decomposition(
    scores, targets, weights=None, *, score="brier", calibrated=None, eps=FLOAT32_EPS
):
    """(S, MCB, DSC, UNC) in float64 by the definitions S - S_C, S_R - S_C, S_R, with the
    recalibrated forecast of each sample ``calibrated`` (default: CORP); ``eps`` clips the
    forecasts' log score as :func:`jaxcal.log_loss` does in that dtype."""
    s = np.asarray(scores, dtype=np.float64)
    t = np.asarray(targets, dtype=np.float64)
    w = np.ones_like(s) if weights is None else np.asarray(weights, dtype=np.float64)
    if calibrated is None:
        knots, fitted, _ = corp(s, t, w)
        calibrated = fitted[np.clip(np.searchsorted(knots, s), 0, knots.size - 1)]
    base = np.full_like(s, np.sum(w * t) / np.sum(w))

    def mean_score(x, clip):
        if score == "brier":
            return np.sum(w * (x - t) ** 2) / np.sum(w)
        if clip:  # the forecasts' log score: the outcome's probability clipped (log_loss)
            x = np.clip(np.where(t == 1, x, 1 - x), eps, 1 - eps)
            return np.sum(w * -np.log(x)) / np.sum(w)
        return np.sum(w * -(_xlogy(t, x) + _xlogy(1 - t, 1 - x))) / np.sum(w)

    s_f, s_c, s_r = mean_score(s, True), mean_score(calibrated, False), mean_score(base, False)
    return s_f, s_f - s_c, s_r - s_c, s_r


def murphy(scores, targets, thresholds, weights=None):
    """Mean elementary score at each threshold, from the (N, T) definition."""
    s = np.asarray(scores, dtype=np.float64)[:, None]
    t = np.asarray(targets, dtype=np.float64)[:, None]
    w = np.ones(s.shape[0]) if weights is None else np.asarray(weights, dtype=np.float64)
    th = np.asarray(thresholds, dtype=np.float64)[None, :]
    e = (1 - th) * ((s <= th) & (t == 1)) + th * ((s > th) & (t == 0))
    return (w[:, None] * e).sum(axis=0) / w.sum()

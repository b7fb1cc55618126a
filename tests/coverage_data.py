"""Shared data and checks of the jaxcal.coverage tests (tests/test_coverage_*.py).

Data are drawn in float32 and handed to MAPIE as the same values in float64, so that the
interval comparisons (``l <= y <= u``) are identical on both sides and the coverages agree
exactly; float64 runs use ``x64()``. The shapes are fixed (N, L, K) so that the test files
reuse each other's compilations.
"""

from __future__ import annotations

import functools

import jax
import numpy as np

from tests.helpers import assert_close, count_compiles

N, L, K = 300, 3, 5
LEVELS = np.array([0.8, 0.9, 0.95])


def intervals(seed: int, n: int = N, levels: int = L, crossed: bool = False):
    """Heteroscedastic intervals with continuous (untied) widths, float32 values."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 3, n)
    y = (np.sin(x) + rng.normal(0, 0.2 + 0.3 * x)).astype(np.float32)
    half = np.stack([(0.1 + 0.4 * x) * s for s in np.linspace(0.6, 1.6, levels)], axis=1)
    half = half * rng.uniform(0.5, 1.5, (n, levels))
    centre = np.sin(x)[:, None] + rng.normal(0, 0.1, (n, levels))
    lo, up = (centre - half).astype(np.float32), (centre + half).astype(np.float32)
    if crossed:
        flip = rng.uniform(size=(n, levels)) < 0.2
        lo, up = np.where(flip, up, lo), np.where(flip, lo, up)
    return y, lo, up


def prediction_sets(seed: int, n: int = N, k: int = K, levels: int = L):
    """Nested prediction sets of varied sizes (some empty, some full) and labels."""
    rng = np.random.default_rng(seed)
    scores = rng.dirichlet(np.ones(k) * 0.7, n)
    labels = np.array([rng.choice(k, p=p) for p in scores])
    thresholds = np.quantile(scores, [0.7, 0.55, 0.4])[:levels]
    sets = scores[:, :, None] >= thresholds[None, None, :]
    sets[:7, :, :] = False  # empty sets
    sets[7:12, :, :] = True  # full sets
    return labels.astype(np.int32), sets


def as_f64(*arrays):
    return tuple(np.asarray(a, np.float64) for a in arrays)


def mapie_pis(lo, up):
    """MAPIE's ``(N, 2, ...)`` interval array from the two bounds, in float64."""
    return np.stack([np.asarray(lo, np.float64), np.asarray(up, np.float64)], axis=1)


def repeat_rows(counts, *arrays):
    return [np.repeat(a, counts, axis=0) for a in arrays]


def repetition_weights():
    """Integer weights summing to N, the weights of the repetition tests (same draw in all)."""
    return np.random.default_rng(10).multinomial(N, np.ones(N) / N)


@functools.cache
def conformal_regression():
    """Test targets and MAPIE split-conformal intervals ``(N, 2, L)`` on the diabetes data."""
    from mapie.regression import SplitConformalRegressor
    from mapie.utils import train_conformalize_test_split
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import Ridge

    x, y = load_diabetes(return_X_y=True)
    x_tr, x_cal, x_te, y_tr, y_cal, y_te = train_conformalize_test_split(
        x, y, train_size=0.5, conformalize_size=0.25, test_size=0.25, random_state=0
    )
    # "gamma" scores give widths proportional to the prediction: all different.
    reg = SplitConformalRegressor(
        Ridge(alpha=0.1), confidence_level=list(LEVELS), conformity_score="gamma", prefit=False
    )
    reg.fit(x_tr, y_tr).conformalize(x_cal, y_cal)
    _, pis = reg.predict_interval(x_te)
    return y_te.astype(np.float64), pis


@functools.cache
def conformal_classification():
    """Test labels and MAPIE split-conformal (APS) sets ``(N, 10, L)`` on the digits data."""
    from mapie.classification import SplitConformalClassifier
    from mapie.utils import train_conformalize_test_split
    from sklearn.datasets import load_digits
    from sklearn.naive_bayes import GaussianNB

    x, y = load_digits(return_X_y=True)
    x_tr, x_cal, x_te, y_tr, y_cal, y_te = train_conformalize_test_split(
        x, y, train_size=0.5, conformalize_size=0.25, test_size=0.25, random_state=0
    )
    clf = SplitConformalClassifier(
        GaussianNB(), confidence_level=list(LEVELS), conformity_score="aps", prefit=False
    )
    clf.fit(x_tr, y_tr).conformalize(x_cal, y_cal)
    _, sets = clf.predict_set(x_te)
    return y_te, sets


def assert_jit_matches_eager(calls):
    """Each ``name: (fn, args)`` under ``jit`` equals the eager call and compiles once."""
    for name, (fn, args) in calls.items():
        jitted = count_compiles(fn)
        first = jitted(*args)
        # jit fuses the kernel into the caller's computation: float32 sums may round
        # differently from the eager kernel's, by a few ulps of the result.
        jax.tree.map(lambda a, b: assert_close(a, b, rtol=1e-5, atol=1e-6), first, fn(*args))
        # second call with new values of the same shapes: no retrace
        shifted = tuple(a if a.dtype != np.float32 else a + np.float32(0.5) for a in args)
        jitted(*shifted)
        assert jitted.compiles() == 1, name


def seed_formula_case():
    """One float64 level of ``intervals(5)``: y, lower, upper ``(N,)``, covered, width."""
    y, lo, up = as_f64(*intervals(5, levels=1))
    lo, up = lo[:, 0], up[:, 0]
    return y, lo, up, (lo <= y) & (y <= up), up - lo

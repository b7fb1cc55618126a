"""CORP bands and bootstrap intervals (jaxcal.stats._resampling.corp): one sort for all
resamples gives what refitting each resample from scratch gives."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal import corp_curve, score_decomposition
from jaxcal._core.random import indices, resample_seeds
from jaxcal.stats import corp_bands, score_decomposition_ci
from tests.helpers import assert_close

RNG = np.random.default_rng(3)
N = 400
P = RNG.uniform(size=N).round(2).astype(np.float32)
Y = (RNG.uniform(size=N) < P).astype(np.int32)
KEY = jax.random.key(7)


@pytest.mark.parametrize("method", ["corp", "binned"])
def test_bootstrap_samples_equal_the_decomposition_of_explicit_resamples(method):
    r = 40
    ci = score_decomposition_ci(P, Y, key=KEY, score="log", method=method, n_resamples=r)
    assert_close(
        np.array(ci.estimate), np.array(score_decomposition(P, Y, score="log", method=method))
    )
    idx = np.asarray(indices(resample_seeds(KEY, r), N))
    for j in (0, 17, 39):
        d = score_decomposition(P[idx[j]], Y[idx[j]], score="log", method=method)
        got = [float(s[j]) for s in ci.samples]
        assert_close(np.array(got), np.array([float(v) for v in d]), rtol=1e-5, atol=1e-6)
    for lo, est_samples, hi in zip(ci.low, ci.samples, ci.high, strict=True):
        q = np.quantile(np.asarray(est_samples), [0.025, 0.975])
        assert_close(np.array([float(lo), float(hi)]), q, rtol=1e-5, atol=1e-7)


def test_bands_do_not_depend_on_the_batch_size():
    for kind in ("consistency", "confidence"):
        a = corp_bands(P, Y, key=KEY, kind=kind, n_resamples=30)
        b = corp_bands(P, Y, key=KEY, kind=kind, n_resamples=30, batch_size=7)
        for x, z in zip(a, b, strict=True):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(z))


def test_consistency_band_of_a_calibrated_model_holds_its_curve():
    p = RNG.uniform(size=3000).astype(np.float32)
    y = (RNG.uniform(size=3000) < p).astype(np.int32)
    b = corp_bands(p, y, key=KEY, n_resamples=200, confidence=0.9)
    n = int(b.size)
    low, high, x = (np.asarray(v)[:n] for v in (b.low, b.high, b.forecasts))
    assert np.all(low <= high)
    assert np.mean((low <= x + 0.05) & (x - 0.05 <= high)) > 0.95  # centred near the diagonal
    curve = corp_curve(p, y)
    inside = (low <= np.asarray(curve.calibrated)[:n]) & (np.asarray(curve.calibrated)[:n] <= high)
    assert inside.mean() > 0.6


def test_confidence_band_holds_the_curve_and_fills_undrawn_knots():
    b = corp_bands(P, Y, key=KEY, kind="confidence", n_resamples=100)
    n = int(b.size)
    c = np.asarray(b.calibrated)[:n]
    low, high = np.asarray(b.low)[:n], np.asarray(b.high)[:n]
    assert np.all(np.isfinite(low)) and np.all(low <= high)
    assert np.mean((low <= c + 1e-6) & (c <= high + 1e-6)) > 0.9


def test_classwise_bands_stack_the_classes_and_bad_options():
    probs = RNG.dirichlet(np.ones(3), size=300).astype(np.float32)
    labels = RNG.integers(0, 3, size=300)
    b = corp_bands(probs, labels, key=KEY, reduction="classwise", n_resamples=20)
    assert b.low.shape == (3, 300) and b.size.shape == (3,)
    with pytest.raises(ValueError, match="`kind`"):
        corp_bands(P, Y, key=KEY, kind="prediction")
    with pytest.raises(ValueError, match="`confidence`"):
        score_decomposition_ci(P, Y, key=KEY, confidence=1.5)


def test_ci_jits():
    fn = jax.jit(lambda p, k: score_decomposition_ci(p, Y, key=k, n_resamples=20).high)
    out = fn(jnp.asarray(P), KEY)
    assert_close(
        np.array(out), np.array(score_decomposition_ci(P, Y, key=KEY, n_resamples=20).high)
    )


def test_one_resample_is_refused_as_documented():
    """D3: the docstrings said R >= 1; R = 1 raises "must be at least 2"."""
    for fn in (corp_bands, score_decomposition_ci):
        assert "n_resamples: R >= 2" in fn.__doc__ and "R >= 1" not in fn.__doc__
        with pytest.raises(ValueError, match="at least 2"):
            fn(np.array([0.2, 0.7]), np.array([0, 1]), key=jax.random.key(0), n_resamples=1)
        with pytest.raises(ValueError, match=r"jax\.random\.key\(0\)"):  # E8: on purpose
            fn(np.array([0.2, 0.7]), np.array([0, 1]), key=0, n_resamples=8)

"""CORP reliability of a mean forecast and its squared-error decomposition against
model-diagnostics' decompose and scikit-learn's IsotonicRegression."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from jaxcal import regression as R
from tests.helpers import assert_close, x64


def _data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    mean = np.round(rng.normal(size=n), 1)  # ties in the forecast
    y = 0.5 + 1.3 * mean + rng.normal(size=n)
    w = rng.uniform(0.5, 2.0, n)
    return mean, y, w


def test_equals_model_diagnostics_and_sklearn():
    mean, y, w = _data()
    fitted = IsotonicRegression().fit(mean, y, sample_weight=w)
    iso = fitted.predict(mean)
    unc = np.average((np.average(y, weights=w) - y) ** 2, weights=w)
    score = np.average((mean - y) ** 2, weights=w)
    rec = np.average((iso - y) ** 2, weights=w)
    with x64():
        d = R.mean_score_decomposition(jnp.asarray(mean), jnp.asarray(y), weights=jnp.asarray(w))
        r = R.mean_reliability(jnp.asarray(mean), jnp.asarray(y), weights=jnp.asarray(w))
    assert_close(d, (score, score - rec, unc - rec, unc))
    size = int(r.size)
    assert size == len(np.unique(mean))
    assert_close(r.recalibrated[:size], fitted.predict(np.asarray(r.forecast[:size])))
    md = pytest.importorskip("model_diagnostics.scoring")
    ref = md.decompose(y, mean, weights=w, scoring_function=md.SquaredError())
    got = dict(zip(("score", "miscalibration", "discrimination", "uncertainty"), d, strict=True))
    for name, value in got.items():
        assert_close(value, ref[name][0])


def test_padding_and_identity():
    mean, y, _ = _data(n=50, seed=1)
    f = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
    d = R.mean_score_decomposition(f(mean), f(y))
    assert_close(d.score, d.miscalibration - d.discrimination + d.uncertainty, atol=1e-5)
    nan = jnp.full((4,), jnp.nan)
    w = jnp.concatenate([jnp.ones(50), jnp.zeros(4)])
    padded = jax.jit(lambda m, y, w: R.mean_score_decomposition(m, y, weights=w))(
        jnp.concatenate([f(mean), nan]), jnp.concatenate([f(y), nan]), w
    )
    jax.tree.map(lambda a, b: assert_close(a, b, atol=1e-5), padded, d)
    with pytest.raises(ValueError, match="`mean` must be finite"):
        R.mean_reliability(jnp.concatenate([f(mean), nan]), jnp.zeros(54))

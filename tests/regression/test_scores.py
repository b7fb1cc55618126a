"""Proper scores against float64 NumPy formulas, scoringrules and properscoring; gradients
against finite differences."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from jaxcal import regression as R
from tests.helpers import assert_close, x64


def _data(n=40, s=7, seed=0):
    rng = np.random.default_rng(seed)
    mean, std = rng.normal(size=n), rng.uniform(0.5, 2.0, n)
    y = mean + std * rng.normal(size=n)
    ens = mean[:, None] + std[:, None] * rng.normal(size=(n, s))
    tau = np.array([0.05, 0.25, 0.5, 0.75, 0.95])
    qv = mean[:, None] + std[:, None] * stats.norm.ppf(tau)[None, :]
    return mean, std, y, ens, tau, qv


def _oracle_crps_ens(ens, y, fair):
    s = ens.shape[1]
    a = np.abs(ens - y[:, None]).mean(1)
    pairs = np.abs(ens[:, :, None] - ens[:, None, :]).sum((1, 2))
    return a - pairs / (2 * s * (s - 1) if fair else 2 * s * s)


def test_scores_equal_formulas():
    mean, std, y, ens, tau, qv = _data()
    z = (y - mean) / std
    crps_g = std * (z * (2 * stats.norm.cdf(z) - 1) + 2 * stats.norm.pdf(z) - 1 / np.sqrt(np.pi))
    nll = -stats.norm.logpdf(y, mean, std)
    diff = qv - y[:, None]
    pin = ((diff > 0) - tau[None, :]) * diff
    lo, up = mean - 1.64 * std, mean + 1.64 * std
    isc = (up - lo) + 20 * (np.maximum(lo - y, 0) + np.maximum(y - up, 0))
    j = lambda a: jnp.asarray(a)  # noqa: E731
    with x64():
        assert_close(R.crps_gaussian(j(mean), j(std), j(y), reduction="none"), crps_g)
        assert_close(R.log_score_gaussian(j(mean), j(std), j(y)), nll.mean())
        for fair in (True, False):
            est = "fair" if fair else "plugin"
            got = R.crps_ensemble(j(ens), j(y), estimator=est, reduction="none")
            assert_close(got, _oracle_crps_ens(ens, y, fair))
        assert_close(R.pinball_loss(j(qv), j(tau), j(y)), pin.mean())
        assert_close(R.crps_quantile(j(qv), j(tau), j(y), reduction="none"), 2 * pin.mean(1))
        assert_close(R.interval_score(j(lo), j(up), j(y), alpha=0.1), isc.mean())


def test_scores_equal_scoringrules_and_properscoring():
    sr = pytest.importorskip("scoringrules")
    ps = pytest.importorskip("properscoring")
    mean, std, y, ens, tau, qv = _data(seed=1)
    j = lambda a: jnp.asarray(a)  # noqa: E731
    with x64():
        assert_close(R.crps_gaussian(j(mean), j(std), j(y)), sr.crps_normal(y, mean, std).mean())
        assert_close(R.crps_gaussian(j(mean), j(std), j(y)), ps.crps_gaussian(y, mean, std).mean())
        assert_close(
            R.log_score_gaussian(j(mean), j(std), j(y)), sr.logs_normal(y, mean, std).mean()
        )
        fair = R.crps_ensemble(j(ens), j(y), reduction="none")
        plug = R.crps_ensemble(j(ens), j(y), estimator="plugin", reduction="none")
        assert_close(fair, sr.crps_ensemble(y, ens, estimator="fair"))
        assert_close(plug, sr.crps_ensemble(y, ens, estimator="nrg"))
        assert_close(plug, ps.crps_ensemble(y, ens))
        got = R.crps_quantile(j(qv), j(tau), j(y), reduction="none")
        assert_close(got, sr.crps_quantile(y, qv, tau))
        lo, up = mean - std, mean + std
        got = R.interval_score(j(lo), j(up), j(y), alpha=0.3, reduction="none")
        assert_close(got, sr.interval_score(y, lo, up, 0.3))


def test_gradients_against_finite_differences():
    mean, std, y, ens, tau, qv = _data(n=12, seed=2)
    with x64():
        args = [jnp.asarray(a) for a in (mean, std, y)]
        for fn in (R.crps_gaussian, R.log_score_gaussian):
            f = lambda m, s, fn=fn: fn(m, s, args[2])  # noqa: E731
            jax.test_util.check_grads(f, args[:2], 1, modes="rev")
        e, yy = jnp.asarray(ens), args[2]
        jax.test_util.check_grads(lambda x: R.crps_ensemble(x, yy), (e,), 1, modes="rev")
        q, t = jnp.asarray(qv), jnp.asarray(tau)
        jax.test_util.check_grads(lambda x: R.pinball_loss(x, t, yy), (q,), 1, modes="rev")


def test_padding_weights_and_bad_input():
    mean, std, y, ens, _, _ = _data(n=10, seed=3)
    f32 = lambda a: jnp.asarray(a, jnp.float32)  # noqa: E731
    pad = lambda a: jnp.concatenate([f32(a), jnp.full((3, *a.shape[1:]), jnp.nan)])  # noqa: E731
    w = jnp.concatenate([jnp.ones(10), jnp.zeros(3)])
    f = jax.jit(lambda e, y, w: R.crps_ensemble(e, y, weights=w))
    assert_close(f(pad(ens), pad(y), w), R.crps_ensemble(f32(ens), f32(y)))
    g = jax.grad(lambda m: R.crps_gaussian(m, pad(std), pad(y), weights=w))(pad(mean))
    assert np.isfinite(np.asarray(g)).all()
    with pytest.raises(ValueError, match="`std` must be > 0"):
        R.crps_gaussian(f32(mean), -f32(std), f32(y))
    with pytest.raises(ValueError, match="`lower` must be <= `upper`"):
        R.interval_score(f32(mean + 1), f32(mean), f32(y))
    with pytest.raises(ValueError, match="`estimator`"):
        R.crps_ensemble(f32(ens), f32(y), estimator="nrg")
    with pytest.raises(ValueError, match="`samples` must be finite"):
        R.crps_ensemble(pad(ens), jnp.zeros(13))

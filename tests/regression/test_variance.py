"""ENCE, UCE, C-QCE and M-QCE against netcal 1.4.0 (values recorded once from netcal, which
pulls in PyTorch and is not in the test extra) and a float64 NumPy port of its binning."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal import regression as R
from tests.helpers import assert_close, x64

#: netcal 1.4.0 (torch 2.13.0 CPU) on _netcal_data(): QCE(marginal=True / False, bins=10),
#: ENCE(bins=10 / 5), UCE(bins=10 / 5), q = linspace(0.05, 0.95, 19), reduction "mean".
NETCAL = {
    "qce_marginal": 0.08973684210526314,
    "qce_conditional": 0.11573684210526315,
    "ence10": 0.3011088975284085,
    "uce10": 1.3592788478577806,
    "ence5": 0.3065024575141494,
    "uce5": 1.3592788478577809,
}


def _netcal_data():
    rng = np.random.default_rng(7)
    n = 200
    mean = rng.normal(size=n)
    std = rng.uniform(0.3, 2.0, n)
    y = mean + 1.4 * std * rng.normal(size=n)
    return mean, std, y


def _oracle(mean, std, y, n_bins, by):
    """netcal's binning (np.histogram edges, last bin closed) and its ENCE / UCE."""
    s = std if by == "std" else std**2
    edges = np.linspace(s.min(), s.max(), n_bins + 1)
    idx = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, n_bins - 1)
    out = []
    for b in range(n_bins):
        m = idx == b
        if m.any():
            out.append((m.mean(), (std[m] ** 2).mean(), ((y[m] - mean[m]) ** 2).mean()))
    share, mv, mse = map(np.array, zip(*out, strict=True))
    if by == "std":
        return np.mean(np.abs(np.sqrt(mv) - np.sqrt(mse)) / np.sqrt(mv))
    return np.sum(share * np.abs(mse - mv))


def test_equal_netcal():
    mean, std, y = _netcal_data()
    with x64():
        g, yj = R.Gaussian(jnp.asarray(mean), jnp.asarray(std)), jnp.asarray(y)
        assert_close(R.qce(g, yj), NETCAL["qce_marginal"])
        assert_close(R.conditional_qce(g, yj), NETCAL["qce_conditional"])
        for b in (10, 5):
            assert_close(R.ence(g, yj, n_bins=b), NETCAL[f"ence{b}"])
            assert_close(R.uce(g, yj, n_bins=b), NETCAL[f"uce{b}"])
            assert_close(R.ence(g, yj, n_bins=b), _oracle(mean, std, y, b, "std"))
            assert_close(R.uce(g, yj, n_bins=b), _oracle(mean, std, y, b, "var"))


def test_netcal_itself_when_installed():
    netcal = pytest.importorskip("netcal.metrics.regression")
    mean, std, y = _netcal_data()
    with x64():
        g, yj = R.Gaussian(jnp.asarray(mean), jnp.asarray(std)), jnp.asarray(y)
        assert_close(R.ence(g, yj, n_bins=7), netcal.ENCE(bins=7).measure((mean, std), y))
        assert_close(R.uce(g, yj, n_bins=7), netcal.UCE(bins=7).measure((mean, std), y))


def test_curve_padding_and_calibrated_model():
    rng = np.random.default_rng(0)
    n = 4000
    mean, std = rng.normal(size=n), rng.uniform(0.5, 2.0, n)
    y = mean + std * rng.normal(size=n)
    g = R.Gaussian(jnp.asarray(mean, jnp.float32), jnp.asarray(std, jnp.float32))
    yj = jnp.asarray(y, jnp.float32)
    c = R.variance_curve(g, yj, n_bins=5)
    assert_close(jnp.sum(c.weights), 1.0)
    assert np.all(np.abs(np.asarray(c.rmse) / np.asarray(c.rmv) - 1) < 0.1)
    assert float(R.ence(g, yj, n_bins=5)) < 0.05
    nan = jnp.full((3,), jnp.nan)
    gp = R.Gaussian(jnp.concatenate([g.mean, nan]), jnp.concatenate([g.std, nan]))
    w = jnp.concatenate([jnp.ones(n), jnp.zeros(3)])
    got = jax.jit(lambda g, y, w: R.uce(g, y, n_bins=5, weights=w))(
        gp, jnp.concatenate([yj, nan]), w
    )
    assert_close(got, R.uce(g, yj, n_bins=5))


def test_bad_input():
    with pytest.raises(ValueError, match=r"`pred` must be a jaxcal\.regression\.Gaussian"):
        R.ence(R.Samples(jnp.zeros((3, 2))), jnp.zeros(3))
    with pytest.raises(ValueError, match="`n_bins`"):
        R.uce(R.Gaussian(jnp.zeros(3), jnp.ones(3)), jnp.zeros(3), n_bins=0)

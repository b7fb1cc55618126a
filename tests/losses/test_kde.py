"""jaxcal.losses.ece_kde_loss: the metric on softmax(logits), finite gradients, padding."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcal
from tests.helpers import assert_close


def test_equals_the_metric_on_softmax():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(50, 4)).astype(np.float32) * 2
    y = rng.integers(0, 4, 50)
    p = jax.nn.softmax(jnp.asarray(z), axis=1)
    for kind in ("canonical", "marginal", "top_label"):
        got = jaxcal.losses.ece_kde_loss(z, y, bandwidth=0.05, kind=kind, p=2)
        assert_close(got, jaxcal.ece_kde(p, y, bandwidth=0.05, kind=kind, p=2), rtol=1e-5)
    zb = rng.normal(size=50).astype(np.float32)
    yb = rng.integers(0, 2, 50)
    got = jaxcal.losses.ece_kde_loss(zb, yb, bandwidth=0.05)
    assert_close(
        got, jaxcal.ece_kde(jax.nn.sigmoid(jnp.asarray(zb)), yb, bandwidth=0.05), rtol=1e-5
    )
    got = jaxcal.losses.ece_kde_loss(z, y)
    assert_close(got, jaxcal.ece_kde(p, y), rtol=1e-5)


def test_saturated_logits_and_singleton_classes_have_finite_gradients():
    z = jnp.asarray([[1e4, 0.0, -1e4], [0.0, 30.0, 0.0], [2.0, 1.0, 0.5], [0.1, 0.2, 0.3]])
    y = jnp.asarray([0, 1, 2, 0])  # class 2 appears once
    for kind in ("canonical", "marginal", "top_label"):
        g = jax.grad(
            lambda z, kind=kind: jaxcal.losses.ece_kde_loss(z, y, bandwidth=0.01, kind=kind)
        )(z)
        assert bool(jnp.all(jnp.isfinite(g))), kind


def test_padding_rows_change_nothing_under_jit():
    rng = np.random.default_rng(1)
    z = rng.normal(size=(20, 3)).astype(np.float32)
    y = rng.integers(0, 3, 20).astype(np.int32)
    zp = np.concatenate([z, np.full((4, 3), np.nan, np.float32)])
    yp = np.concatenate([y, np.full(4, -100, np.int32)])
    w = np.r_[np.ones(20), np.zeros(4)].astype(np.float32)
    f = jax.jit(lambda z, y, w: jaxcal.losses.ece_kde_loss(z, y, bandwidth=0.1, weights=w))
    assert_close(f(zp, yp, w), jaxcal.losses.ece_kde_loss(z, y, bandwidth=0.1), rtol=1e-5)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="`logits`"):
        jaxcal.losses.ece_kde_loss(np.array([[np.nan, 1.0]]), np.array([0]))
    with pytest.raises(ValueError, match="`p`"):
        jaxcal.losses.ece_kde_loss(np.zeros((3, 2)), np.zeros(3, int), p=0)

"""jaxcal.streaming.l2_ece_interval: the one-shot interval from a streamed binary state."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

import jaxcal
from jaxcal import streaming
from tests.helpers import assert_close, x64


def test_streamed_equals_one_shot():
    rng = np.random.default_rng(0)
    z = rng.random(1000).astype(np.float32)
    y = (rng.random(1000) < z**1.2).astype(np.int32)
    w = rng.uniform(0.5, 2, 1000).astype(np.float32)
    for weights in (None, w):
        s = streaming.init(10, 2, binary=True, closed="left", resolution=40)
        for i in range(0, 1000, 128):
            s = streaming.update(
                s, z[i : i + 128], y[i : i + 128], None if weights is None else weights[i : i + 128]
            )
        one = jaxcal.stats.l2_ece_interval(z, y, n_bins=10, weights=weights)
        for a, b in zip(streaming.l2_ece_interval(s), one, strict=True):
            assert_close(a, b, rtol=2e-4, atol=1e-7)
        coarse = jaxcal.stats.l2_ece_interval(z, y, n_bins=5, weights=weights)
        for a, b in zip(
            streaming.l2_ece_interval(s, n_bins=5, confidence=0.9), coarse, strict=True
        ):
            assert_close(a, b, rtol=2e-4, atol=1e-7)


def test_float64_state_matches_tightly():
    rng = np.random.default_rng(1)
    with x64():
        z = rng.random(500)
        y = (rng.random(500) < z).astype(np.int32)
        s = streaming.update(streaming.init(8, 2, binary=True, closed="left"), jnp.asarray(z), y)
        for a, b in zip(
            streaming.l2_ece_interval(s), jaxcal.stats.l2_ece_interval(z, y, n_bins=8), strict=True
        ):
            assert_close(a, b, rtol=1e-10, atol=1e-14)


def test_multiclass_states_and_bad_options_are_refused():
    s = streaming.init(5, 3)
    with pytest.raises(ValueError, match="`state` must be binary"):
        streaming.l2_ece_interval(s)
    b = streaming.init(5, 2, binary=True)
    with pytest.raises(ValueError, match="`confidence`"):
        streaming.l2_ece_interval(b, confidence=0.0)
    with pytest.raises(ValueError, match="`n_bins`"):
        streaming.l2_ece_interval(b, n_bins=3)

"""jaxcal.ece_sweep against google-research caltrain's em_monotonic_sweep
(tests/reference_binned.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcal
from jaxcal.metrics._ece_sweep import _mul64
from tests import reference_binned as ref
from tests.helpers import assert_close, x64


@pytest.mark.parametrize("n", [2, 3, 8, 50, 400, 3000])
def test_against_the_reference(n):
    rng = np.random.default_rng(n)
    for power in (1.0, 2.0):
        z = rng.random(n)
        y = (rng.random(n) < z**power).astype(int)
        with x64():
            for norm, p in (("l2", 2), ("l1", 1)):
                want, _ = ref.em_ece_sweep(z, y, p)
                assert_close(jaxcal.ece_sweep(z, y, norm=norm), want, rtol=1e-10, atol=1e-15)


def test_top_label_and_float32():
    rng = np.random.default_rng(1)
    probs = rng.dirichlet(np.ones(5), 800)
    labels = rng.integers(0, 5, 800)
    conf, correct = probs.max(1), (probs.argmax(1) == labels).astype(int)
    with x64():
        want, _ = ref.em_ece_sweep(conf, correct)
        assert_close(jaxcal.ece_sweep(probs, labels), want, rtol=1e-10)
    assert_close(jaxcal.ece_sweep(probs.astype(np.float32), labels), want, rtol=1e-4)


def test_exact_products_for_the_monotonicity_check():
    rng = np.random.default_rng(2)
    a = rng.integers(0, 2**31, 1000, dtype=np.uint64)
    b = rng.integers(0, 2**31, 1000, dtype=np.uint64)
    hi, lo = _mul64(jnp.asarray(a, jnp.uint32), jnp.asarray(b, jnp.uint32))
    got = (np.asarray(hi, np.uint64) << np.uint64(32)) | np.asarray(lo, np.uint64)
    assert np.array_equal(got, a * b)


def test_mask_gradient_and_bad_input():
    rng = np.random.default_rng(3)
    z = rng.random(100).astype(np.float32)
    y = (rng.random(100) < z).astype(np.int32)
    w = np.r_[np.ones(80), np.zeros(20)].astype(np.float32)
    assert_close(jaxcal.ece_sweep(z, y, weights=w), jaxcal.ece_sweep(z[:80], y[:80]))
    g = jax.grad(lambda p: jaxcal.ece_sweep(p, y))(jnp.asarray(z))
    assert bool(jnp.all(jnp.isfinite(g)))
    assert float(jaxcal.ece_sweep(z, y, weights=np.zeros(100))) == 0.0
    with pytest.raises(ValueError, match="`weights` must be a 0/1 mask"):
        jaxcal.ece_sweep(z, y, weights=np.full(100, 0.5))
    with pytest.raises(ValueError, match="`norm`"):
        jaxcal.ece_sweep(z, y, norm="max")

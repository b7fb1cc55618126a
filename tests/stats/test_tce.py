"""jaxcal.tce against facebookresearch/tce (tests/reference_binned.py) and
scipy.stats.binomtest; the size-limited PAV of jaxcal/_core/isotonic.py."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from scipy.stats import binomtest

import jaxcal
from jaxcal._core.isotonic import limited_pava_stack
from jaxcal.stats._binned.tce import binom_two_sided
from tests import reference_binned as ref
from tests.helpers import assert_close, x64


def test_binomial_test_is_scipys():
    cases = [
        (k, n, p)
        for n in (1, 2, 7, 40, 333)
        for k in sorted({0, 1, n // 3, n // 2, n - 1, n})
        for p in (0.0, 0.013, 0.25, 0.5, 0.61, 0.999, 1.0)
    ]
    k, n, p = (np.array(c, float) for c in zip(*cases, strict=True))
    want = [binomtest(int(a), int(b), c).pvalue for a, b, c in cases]
    with x64():
        got = binom_two_sided(jnp.asarray(k), jnp.asarray(n), jnp.asarray(p), 12)
    assert_close(got, want, rtol=1e-9, atol=1e-300)


def test_limited_pava_blocks_are_the_references():
    rng = np.random.default_rng(0)
    # the stack alone (n_min = 0); the final n_min block is tce's, tested through tce
    for n, n_max in ((200, 1000), (200, 15), (150, 30), (90, 3)):
        y = (rng.random(n) < np.sort(rng.random(n))).astype(float)
        _, counts, totals = ref.pavabc(np.arange(n, dtype=float), y, 0, n_max)
        sums, _, top = limited_pava_stack(jnp.ones(n), jnp.asarray(y), jnp.int32(n), 0, n_max)
        top = int(top)
        assert np.array_equal(np.asarray(sums[1 : top + 1, 1]), totals)
        assert np.array_equal(np.asarray(sums[1 : top + 1, 0]), counts)


@pytest.mark.parametrize("strategy", ["pavabc", "quantile"])
def test_against_the_reference(strategy):
    rng = np.random.default_rng(1)
    for n in (40, 300, 1500):
        z = rng.random(n)
        y = (rng.random(n) < z**1.4).astype(int)
        with x64():
            for kw in (
                {},
                {"n_min": 20, "n_max": 50},
                {"n_min": 3, "n_max": 5},
                {"n_bin": 7},
                {"siglevel": 0.2},
            ):
                got = jaxcal.tce(z, y, strategy=strategy, **kw)
                assert_close(got, ref.tce(z, y, strategy=strategy, **kw), rtol=1e-12)


def test_top_label_float32_and_mask():
    rng = np.random.default_rng(2)
    probs = rng.dirichlet(np.ones(3), 400)
    labels = rng.integers(0, 3, 400)
    conf, correct = probs.max(1), (probs.argmax(1) == labels).astype(int)
    with x64():
        assert_close(jaxcal.tce(probs, labels), ref.tce(conf, correct), rtol=1e-12)
    assert abs(float(jaxcal.tce(probs.astype(np.float32), labels)) - ref.tce(conf, correct)) <= 1.0
    w = np.r_[np.ones(300), np.zeros(100)]
    with x64():
        for strategy in ("pavabc", "quantile"):
            a = jaxcal.tce(probs, labels, weights=w, strategy=strategy)
            assert_close(a, ref.tce(conf[:300], correct[:300], strategy=strategy), rtol=1e-12)


def test_bad_options():
    z, y = np.linspace(0.1, 0.9, 12), np.arange(12) % 2
    with pytest.raises(ValueError, match="`n_min` must be below"):
        jaxcal.tce(z, y, n_min=12)
    with pytest.raises(ValueError, match="`strategy`"):
        jaxcal.tce(z, y, strategy="uniform")
    with pytest.raises(ValueError, match="`siglevel`"):
        jaxcal.tce(z, y, siglevel=1.0)
    with pytest.raises(ValueError, match="0/1 mask"):
        jaxcal.tce(z, y, weights=np.full(12, 2.0))

"""jaxcal.ece_kde, proper_calibration_error and kde_bandwidth against float64 NumPy ports
of the reference code (tests/reference_kde.py: tpopordanoska/ece-kde and
tpopordanoska/proper-calibration-error)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcal
from tests import reference_kde as ref
from tests.helpers import assert_close, x64


def _data(k, n=45, seed=0):
    rng = np.random.default_rng(seed + k)
    f = rng.dirichlet(np.ones(k) * 0.7, n)
    y = np.array([rng.choice(k, p=q**2 / (q**2).sum()) for q in f])
    return f, y


@pytest.mark.parametrize("kind", ["canonical", "marginal", "top_label"])
@pytest.mark.parametrize("k", [3, 10])
def test_against_the_reference(kind, k):
    f, y = _data(k)
    with x64():
        for p in (1, 2):
            for b in (0.003, 0.05, 0.6):
                got = jaxcal.ece_kde(f, y, bandwidth=b, p=p, kind=kind)
                assert_close(got, ref.get_ece_kde(f, y, b, p, kind), rtol=1e-9)


def test_binary_is_twice_the_positive_class_and_equals_two_columns():
    rng = np.random.default_rng(4)
    s = rng.random(60)
    y = (rng.random(60) < s**2).astype(int)
    with x64():
        for p in (1, 2):
            got = jaxcal.ece_kde(s, y, bandwidth=0.02, p=p)
            assert_close(got, ref.get_ece_kde(s[:, None], y, 0.02, p, "canonical"), rtol=1e-9)
            two = jaxcal.ece_kde(np.stack([1 - s, s], 1), y, bandwidth=0.02, p=p)
            assert_close(got, two, rtol=1e-9)


def test_reference_special_cases_of_the_binary_path():
    """get_kde_for_ece: no positive label (ratio 0), one positive (its row removed and
    |0 - f|^p added): the same rule, an empty numerator gives 0."""
    s = np.array([0.1, 0.35, 0.6, 0.8, 0.3])
    with x64():
        for y in (np.zeros(5, int), np.array([0, 0, 1, 0, 0])):
            for p in (1, 2):
                got = jaxcal.ece_kde(s, y, bandwidth=0.1, p=p)
                assert_close(got, ref.get_ece_kde(s[:, None], y, 0.1, p, "canonical"), rtol=1e-9)


def test_bandwidth_none_is_the_references_choice():
    for k in (2, 3):
        f, y = _data(k, 50, seed=7)
        with x64():
            b = ref.get_bandwidth(f)
            assert float(jaxcal.kde_bandwidth(f)) == b
            assert_close(jaxcal.ece_kde(f, y), ref.get_ece_kde(f, y, b, 1, "canonical"), rtol=1e-9)
            b = ref.get_bandwidth_proper(f)
            assert float(jaxcal.kde_bandwidth(f, selection="proper_ce")) == b
            want = ref.get_bregman_ce(ref.negative_entropy, f, y, b)
            assert_close(jaxcal.proper_calibration_error(f, y), want, rtol=1e-9)
    s = np.random.default_rng(0).random(70)
    with x64():
        assert float(jaxcal.kde_bandwidth(s)) == ref.get_bandwidth(s[:, None])


@pytest.mark.parametrize("k", [3, 6])
def test_proper_calibration_error_against_the_reference(k):
    f, y = _data(k, 40, seed=3)
    with x64():
        for div, convex in (("kl", ref.negative_entropy), ("l2", ref.l2_norm)):
            for b in (0.01, 0.2):
                got = jaxcal.proper_calibration_error(f, y, divergence=div, bandwidth=b)
                assert_close(got, ref.get_bregman_ce(convex, f, y, b), rtol=1e-9, atol=1e-14)
                got = jaxcal.proper_calibration_error(
                    f, y, divergence=div, bandwidth=b, kind="classwise"
                )
                want = ref.get_classwise_bregman_ce(convex, f, y, b)
                assert_close(got, want, rtol=1e-9, atol=1e-14)
        l2 = jaxcal.proper_calibration_error(f, y, divergence="l2", bandwidth=0.05)
        assert_close(l2, jaxcal.ece_kde(f, y, bandwidth=0.05, p=2), rtol=1e-12)


def test_binary_proper_error_equals_two_columns():
    rng = np.random.default_rng(5)
    s = rng.random(50)
    y = (rng.random(50) < s).astype(int)
    with x64():
        for div in ("kl", "l2"):
            a = jaxcal.proper_calibration_error(s, y, divergence=div, bandwidth=0.05)
            b = jaxcal.proper_calibration_error(
                np.stack([s, 1 - s], 1), 1 - y, divergence=div, bandwidth=0.05
            )
            assert_close(a, b, rtol=1e-10)


def test_float32_at_100_classes_is_finite_with_finite_gradients():
    rng = np.random.default_rng(6)
    f = rng.dirichlet(np.ones(100) * 0.1, 400).astype(np.float32)
    f[:5] = np.eye(100, dtype=np.float32)[:5]  # exact zeros and ones
    y = rng.integers(0, 100, 400)
    for b in (None, 1e-3, 0.1):
        v = jaxcal.ece_kde(f, y, bandwidth=b)
        assert np.isfinite(float(v))
    for kind in ("canonical", "marginal", "top_label"):
        for p in (1, 2):
            g = jax.grad(
                lambda q, kind=kind, p=p: jaxcal.ece_kde(q, y, bandwidth=0.01, p=p, kind=kind)
            )(jnp.asarray(f))
            assert bool(jnp.all(jnp.isfinite(g))), (kind, p)
    g = jax.grad(lambda q: jaxcal.proper_calibration_error(q, y, bandwidth=0.01))(jnp.asarray(f))
    assert bool(jnp.all(jnp.isfinite(g)))
    with x64():
        want = jaxcal.ece_kde(f.astype(np.float64), y, bandwidth=0.1)
    assert_close(jaxcal.ece_kde(f, y, bandwidth=0.1), want, rtol=1e-4)


def test_gradient_matches_float64_differences():
    f, y = _data(3, 30, seed=9)
    with x64():

        def loss(q):
            return jaxcal.ece_kde(q, y, bandwidth=0.05, p=2)

        g = jax.grad(loss)(jnp.asarray(f))
        d = np.random.default_rng(0).normal(size=f.shape) * 1e-6
        d -= d.mean(1, keepdims=True)
        fd = (loss(f + d) - loss(f - d)) / 2
        assert_close(jnp.sum(g * d), fd, rtol=1e-5, atol=1e-14)


def test_zero_weights_drop_rows():
    f, y = _data(3, 40, seed=11)
    w = np.r_[np.ones(32), np.zeros(8)]
    with x64():
        for kind in ("canonical", "marginal", "top_label"):
            a = jaxcal.ece_kde(f, y, bandwidth=0.05, kind=kind, weights=w)
            assert_close(a, jaxcal.ece_kde(f[:32], y[:32], bandwidth=0.05, kind=kind), rtol=1e-10)
        a = jaxcal.ece_kde(f, y, weights=w)
        assert_close(a, jaxcal.ece_kde(f[:32], y[:32]), rtol=1e-10)
        a = jaxcal.proper_calibration_error(f, y, weights=w, kind="classwise")
        assert_close(
            a, jaxcal.proper_calibration_error(f[:32], y[:32], kind="classwise"), rtol=1e-10
        )
    assert float(jaxcal.ece_kde(f, y, bandwidth=0.1, weights=np.zeros(40))) == 0.0


def test_bad_options_name_the_argument():
    f, y = _data(3, 10)
    with pytest.raises(ValueError, match="`kind`"):
        jaxcal.ece_kde(f, y, kind="classwise")
    with pytest.raises(ValueError, match="`p`"):
        jaxcal.ece_kde(f, y, p=0.5)
    with pytest.raises(ValueError, match="`bandwidth`"):
        jaxcal.ece_kde(f, y, bandwidth=-1.0)
    with pytest.raises(ValueError, match="`divergence`"):
        jaxcal.proper_calibration_error(f, y, divergence="js")
    with pytest.raises(ValueError, match="`kind`"):
        jaxcal.proper_calibration_error(f, y, kind="marginal")
    with pytest.raises(ValueError, match="`selection`"):
        jaxcal.kde_bandwidth(f, selection="scott")
    with pytest.raises(ValueError, match="at least 2 samples"):
        jaxcal.kde_bandwidth(f[:1])
    for _ in range(2):
        with pytest.raises(ValueError, match="`probs`"):
            jaxcal.ece_kde(f * 2, y, bandwidth=0.1)

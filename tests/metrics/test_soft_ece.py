"""Soft-binned ECE (jaxcal.metrics._soft_ece) against Eq. (11) of Karandikar et al. (2021)."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
from jax.test_util import check_grads

import jaxcal
from jaxcal.metrics import _soft_ece
from jaxcal.metrics._soft_ece import soft_ece, soft_membership
from tests.helpers import assert_close, x64
from tests.reference_soft import N_GRAD, N, binary, multiclass, np_soft_ece


def _temperature(n_bins, ratio):
    """T at which a score on a bin centre gives each adjacent bin ``ratio`` of its own."""
    return 1.0 / (n_bins**2 * math.log(1.0 / ratio))


@pytest.mark.parametrize("norm", ["l1", "l2"])
@pytest.mark.parametrize("temperature", [1e-4, 2e-3, 0.05])
def test_soft_ece_matches_paper_formula(norm, temperature):
    _, probs, labels = multiclass()
    p, y = binary()
    w = np.random.default_rng(2).random(N)
    with x64():
        for args in [(probs, labels), (p, y)]:
            for weights in [None, w]:
                got = soft_ece(
                    *args, temperature=temperature, norm=norm, weights=weights, n_bins=12
                )
                want = np_soft_ece(*args, temperature, 12, norm, weights)
                assert_close(got, want, rtol=1e-9)  # float64 sums over 400 x 12 terms


def test_soft_ece_float32_against_float64_oracle():
    _, probs, labels = multiclass()
    got = soft_ece(jnp.asarray(probs, jnp.float32), labels)
    want = np_soft_ece(probs, labels, _temperature(15, 0.01))
    assert got.dtype == jnp.float32
    assert_close(got, want, rtol=1e-5)  # float32 exp and sums over 6000 terms


@pytest.mark.parametrize("ratio", [0.5, 0.1, 1e-3])
def test_temperature_gives_the_adjacent_bin_ratio_not_the_reference_sign_error(ratio):
    n_bins = 15
    anchors = (np.arange(n_bins) + 0.5) / n_bins
    with x64():
        u = np.asarray(soft_membership(jnp.asarray(anchors), n_bins, _temperature(n_bins, ratio)))
    own = np.diag(u)
    # float64 ratios of exps whose arguments reach log(1e3) ~ 7: a few ulps each
    assert_close(np.diag(u, 1) / own[:-1], np.full(n_bins - 1, ratio), rtol=1e-9)
    assert_close(np.diag(u, -1) / own[1:], np.full(n_bins - 1, ratio), rtol=1e-9)
    assert np.all(u.argmax(axis=1) == np.arange(n_bins))
    # The reference code's decay form, T = 1 / (log(decay) M^2), is negative: it puts the
    # most mass on the farthest bin. soft_ece refuses a non-positive temperature.
    t_ref = 1.0 / (math.log(ratio) * n_bins**2)
    assert t_ref < 0
    logits = -((anchors[:, None] - anchors[None, :]) ** 2) / t_ref
    bad = scipy.special.softmax(logits, axis=1)  # the reference's membership, stably
    far = np.where(np.arange(n_bins) < n_bins // 2, n_bins - 1, 0)
    middle = n_bins // 2  # equidistant from both ends
    assert np.all(np.delete(bad.argmax(axis=1) == far, middle))
    with pytest.raises(ValueError, match="temperature"):
        soft_ece(jnp.asarray(anchors), jnp.ones(n_bins, jnp.int32), temperature=t_ref)


def test_default_temperature_is_the_documented_one():
    p, y = binary()
    assert_close(soft_ece(p, y), soft_ece(p, y, temperature=_temperature(15, 0.01)))
    assert_close(
        soft_ece(p, y, n_bins=7), soft_ece(p, y, n_bins=7, temperature=_temperature(7, 0.01))
    )


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_soft_ece_tends_to_hard_ece_as_temperature_vanishes(norm):
    n_bins = 10
    rng = np.random.default_rng(3)
    # Scores at least 0.2 bin widths from every edge; a miscalibration whose sign changes
    # across bins (with one sign everywhere the l1 soft ECE is the global gap for any T).
    centres = (rng.integers(0, n_bins, 2000) + 0.5) / n_bins
    s = centres + rng.uniform(-0.3, 0.3, 2000) / n_bins
    y = (rng.random(2000) < s + 0.15 * np.sin(2 * np.pi * s)).astype(np.int32)
    with x64():
        hard = float(jaxcal.ece(s, y, n_bins=n_bins, norm=norm))
        errors = [
            abs(float(soft_ece(s, y, n_bins=n_bins, temperature=t, norm=norm)) - hard)
            for t in (1e-2, 1e-3, 3e-4, 1e-4)
        ]
    assert all(a > b for a, b in itertools.pairwise(errors))
    assert errors[-1] < 1e-12
    assert errors[0] > 1e-3  # the limit is not reached trivially


def test_soft_ece_tends_to_global_gap_as_temperature_grows():
    p, y = binary()
    w = np.random.default_rng(4).random(N)
    with x64():
        global_gap = abs(np.sum(w * (y - p)) / w.sum())
        for norm in ("l1", "l2"):
            got = soft_ece(p, y, temperature=1e9, norm=norm, weights=w)
            assert_close(got, global_gap, rtol=1e-7)  # residual O(1/T) spread over bins


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_soft_ece_gradients_match_finite_differences(norm):
    # d/d(probs), d/d(weights) and d/d(temperature) of the closed-form JVP, forward and
    # reverse mode; l1 on confidences (through softmax), l2 on binary scores (sigmoid).
    rng = np.random.default_rng(5)
    w = rng.random(N_GRAD) + 0.5
    if norm == "l1":
        z, _, y = multiclass(n=N_GRAD)
        link = jax.nn.softmax
    else:
        z, y = rng.normal(size=N_GRAD), (rng.random(N_GRAD) < 0.5).astype(np.int32)
        link = jax.nn.sigmoid

    # log T: a relative step, so the finite difference is accurate at small T too
    def f(z, w, log_t):
        return soft_ece(link(z), y, temperature=jnp.exp(log_t), norm=norm, weights=w)

    with x64():
        for t in (1e-3, 2e-2):
            # eps 1e-6: |excess_j| and the argmax have kinks; keep steps far inside them
            check_grads(f, (jnp.asarray(z), jnp.asarray(w), jnp.log(t)), 1, eps=1e-6)


def test_soft_ece_gradients_match_autodiff_of_the_plain_formula():
    # The closed-form JVP against autodiff through a direct jnp transcription.
    p, y = binary()
    w = np.random.default_rng(8).random(N)
    t = 3e-3
    with x64():
        p, w = jnp.asarray(p), jnp.asarray(w)
        yf = jnp.asarray(y, jnp.float64)

        def plain(p, w):
            anchors = (jnp.arange(15.0) + 0.5) / 15
            u = jax.nn.softmax(-((p[:, None] - anchors[None, :]) ** 2) / t, axis=1)
            mass = (w[:, None] * u).sum(0)
            gap = ((w * (yf - p))[:, None] * u).sum(0) / mass
            return jnp.sqrt(jnp.sum(mass / w.sum() * gap**2))

        got = jax.grad(lambda p, w: soft_ece(p, y, temperature=t, norm="l2", weights=w), (0, 1))
        want = jax.grad(plain, (0, 1))
        for a, b in zip(got(p, w), want(p, w), strict=True):
            assert_close(a, b, rtol=1e-8, atol=1e-12)  # different float64 operation order


def test_soft_ece_chunked_path_matches_single_pass(monkeypatch):

    logits, _, labels = multiclass()
    w = np.random.default_rng(9).random(N)
    with x64():

        def value_and_grad():
            f = lambda z: soft_ece(jax.nn.softmax(z), labels, norm="l2", weights=w)  # noqa: E731
            return jax.value_and_grad(f)(jnp.asarray(logits))

        whole = value_and_grad()
        monkeypatch.setattr(_soft_ece, "_CHUNK", 60)  # 256 samples -> 5 chunks, the last padded
        chunked = value_and_grad()
    assert_close(chunked[0], whole[0])
    assert_close(chunked[1], whole[1])


def test_l2_second_derivatives_are_finite_with_near_empty_bins():
    """D07: every second derivative of the l2 soft ECE was NaN once a soft bin was empty."""
    s = jnp.linspace(0.3, 0.7, 8)
    y = jnp.array([0, 1] * 4)
    hess = jax.hessian(lambda t: jaxcal.soft_ece(t, y, norm="l2"))(s)
    assert np.all(np.isfinite(np.asarray(hess)))

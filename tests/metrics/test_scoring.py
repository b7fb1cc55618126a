"""Brier score, log loss and the exact Brier decomposition."""

import jax
import numpy as np
import pytest
from sklearn.metrics import brier_score_loss
from sklearn.metrics import log_loss as sk_log_loss

import jaxcal
from tests import reference
from tests.helpers import assert_close, x64


def _case(seed, n=300, k=4):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(k, 0.6), n)
    labels = np.array([rng.choice(k, p=p) for p in probs])
    return probs, labels, rng.random(n)


def test_binary_against_sklearn():
    probs, labels, w = _case(0, k=2)
    p, y = probs[:, 1], (labels == 1).astype(int)
    with x64():
        assert_close(jaxcal.brier_score(p, y), brier_score_loss(y, p))
        assert_close(jaxcal.brier_score(p, y, weights=w), brier_score_loss(y, p, sample_weight=w))
        assert_close(jaxcal.log_loss(p, y), sk_log_loss(y, p))
        assert_close(jaxcal.log_loss(p, y, weights=w), sk_log_loss(y, p, sample_weight=w))


def test_multiclass_against_sklearn():
    probs, labels, w = _case(1)
    with x64():
        assert_close(jaxcal.log_loss(probs, labels), sk_log_loss(labels, probs))
        assert_close(
            jaxcal.log_loss(probs, labels, weights=w), sk_log_loss(labels, probs, sample_weight=w)
        )
        # Brier summed over classes (the tutorial's convention).
        one_hot = np.eye(4)[labels]
        assert_close(jaxcal.brier_score(probs, labels), np.mean(np.sum((probs - one_hot) ** 2, 1)))


def test_log_loss_clips_a_zero_probability_for_the_true_class():
    p = np.array([[1.0, 0.0], [0.5, 0.5]], np.float32)
    value = jaxcal.log_loss(p, np.array([1, 0]))
    expected = (-np.log(np.finfo(np.float32).eps) - np.log(0.5)) / 2
    assert_close(value, expected)
    with x64():
        assert_close(
            jaxcal.log_loss(p.astype(np.float64), np.array([1, 0])),
            sk_log_loss([1, 0], p.astype(np.float64), labels=[0, 1]),
        )


@pytest.mark.parametrize("k", [1, 3])
def test_decomposition_matches_reference_and_is_exact(k):
    probs, labels, _ = _case(2, n=400, k=max(k, 2))
    if k == 1:
        probs, labels = probs[:, 1], (labels == 1).astype(int)
    with x64():
        d = jaxcal.brier_decomposition(probs, labels, n_bins=10)
        assert_close(np.array(d), reference.brier_decomposition(probs, labels, 10))
        assert_close(d.brier, jaxcal.brier_score(probs, labels))
        identity = (
            d.reliability
            - d.resolution
            + d.uncertainty
            + d.within_bin_variance
            - d.within_bin_covariance
        )
        assert_close(identity, d.brier)
    d32 = jaxcal.brier_decomposition(probs.astype(np.float32), labels, n_bins=10)
    identity = (
        d32.reliability
        - d32.resolution
        + d32.uncertainty
        + d32.within_bin_variance
        - d32.within_bin_covariance
    )
    assert_close(identity, d32.brier, atol=1e-6)  # float32 sums of O(1) terms: a few ulps


def test_decomposition_weighted_quantile_and_jit():
    probs, labels, w = _case(3, n=250, k=3)
    for opts in ({"binning": "quantile"}, {"closed": "left"}, {"weights": w}):
        d = (
            jax.jit(jaxcal.brier_decomposition)(probs, labels, **opts)
            if "weights" in opts
            else jaxcal.brier_decomposition(probs, labels, **opts)
        )
        identity = (
            d.reliability
            - d.resolution
            + d.uncertainty
            + d.within_bin_variance
            - d.within_bin_covariance
        )
        assert_close(identity, d.brier, atol=1e-6)  # float32 sums of O(1) terms: a few ulps
    rep = np.random.default_rng(0).integers(0, 3, 250)
    assert_close(
        np.array(jaxcal.brier_decomposition(probs, labels, weights=rep.astype(np.float32))),
        np.array(jaxcal.brier_decomposition(np.repeat(probs, rep, 0), np.repeat(labels, rep))),
        atol=1e-6,  # weights against repetition: float32 sums in another order
    )


def test_real_data_decomposition_and_scores():
    from sklearn.datasets import load_breast_cancer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split

    x, y = load_breast_cancer(return_X_y=True)
    x_fit, x_test, y_fit, y_test = train_test_split(x, y, random_state=0)
    p = LogisticRegression(max_iter=5000).fit(x_fit, y_fit).predict_proba(x_test)[:, 1]
    with x64():
        assert_close(jaxcal.brier_score(p, y_test), brier_score_loss(y_test, p))
        assert_close(jaxcal.log_loss(p, y_test), sk_log_loss(y_test, p))
        assert_close(
            np.array(jaxcal.brier_decomposition(p, y_test)),
            reference.brier_decomposition(p, y_test, 15),
        )


def test_grad_of_scores():
    probs, labels, _ = _case(4, n=50, k=3)
    g = jax.grad(lambda p: jaxcal.brier_score(p, labels))(probs.astype(np.float32))
    assert_close(g, 2 * (probs - np.eye(3)[labels]) / 50, atol=1e-6)  # float32 gradient
    g = jax.grad(lambda p: jaxcal.log_loss(p, labels))(probs.astype(np.float32))
    assert np.isfinite(np.asarray(g)).all()

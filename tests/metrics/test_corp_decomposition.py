"""The score decomposition (jaxcal.metrics._corp_decomposition) against model-diagnostics, a float64
oracle, the identity S = MCB - DSC + UNC, Murphy's binned decomposition and real data."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcal
from jaxcal import score_decomposition
from tests import reference
from tests.helpers import assert_close, x64

RNG = np.random.default_rng(1)
N = 5000
P = RNG.uniform(0.001, 0.999, size=N).round(3)
Y = (RNG.uniform(size=N) < P**1.3).astype(np.int32)
W = RNG.uniform(0.2, 2.0, size=N)
DIGITS = np.load("jaxcal/data/digits_gaussian_nb.npz")  # exact 0s and 1s


@pytest.mark.parametrize("score", ["brier", "log"])
@pytest.mark.parametrize("weighted", [False, True])
def test_equals_model_diagnostics_decompose(score, weighted):
    md = pytest.importorskip("model_diagnostics.scoring")
    w = W if weighted else None
    scoring = md.SquaredError() if score == "brier" else md.LogLoss()
    ref = md.decompose(Y.astype(float), P, w, scoring_function=scoring)
    expected = [ref[k][0] for k in ("score", "miscalibration", "discrimination", "uncertainty")]
    with x64():
        got = score_decomposition(
            jnp.asarray(P),
            jnp.asarray(Y),
            score=score,
            weights=None if w is None else jnp.asarray(w),
        )
    assert_close(np.array([float(v) for v in got]), np.array(expected))


@pytest.mark.parametrize("score", ["brier", "log"])
def test_float32_against_the_float64_oracle_and_the_identity(score):
    got = score_decomposition(P.astype(np.float32), Y, score=score, weights=W.astype(np.float32))
    expected = reference.score_decomposition(P.astype(np.float32), Y, W, score=score)
    # float32 sums of N = 5000 terms; MCB is a difference of two means of size ~0.2
    assert_close(np.array([float(v) for v in got]), np.array(expected), rtol=1e-4, atol=2e-6)
    s, mcb, dsc, unc = (float(v) for v in got)
    assert abs(s - (mcb - dsc + unc)) <= 4 * np.finfo(np.float32).eps * unc
    assert mcb >= 0 and dsc >= 0


@pytest.mark.parametrize("score", ["brier", "log"])
def test_real_data_with_exact_zeros_and_ones_is_finite_and_exact(score):
    probs, labels = DIGITS["probs"], DIGITS["labels"]
    for reduction in ("classwise", "top_label"):
        d = score_decomposition(probs, labels, score=score, reduction=reduction)
        values = np.array([float(v) for v in d])
        assert np.all(np.isfinite(values)), (reduction, values)
        assert abs(values[0] - (values[1] - values[2] + values[3])) <= 1e-6 * max(values[0], 1)
    # the top-label problem against the float64 oracle
    conf, correct = probs.max(1), (probs.argmax(1) == labels).astype(np.int32)
    d = score_decomposition(probs, labels, score=score, reduction="top_label")
    expected = reference.score_decomposition(conf, correct, score=score)
    assert_close(np.array([float(v) for v in d]), np.array(expected), rtol=1e-5, atol=1e-6)


def test_score_equals_brier_score_and_log_loss():
    probs, labels = DIGITS["probs"], DIGITS["labels"]
    assert_close(score_decomposition(probs, labels).score, jaxcal.brier_score(probs, labels))
    p = P.astype(np.float32)
    assert_close(score_decomposition(p, Y, score="log").score, jaxcal.log_loss(p, Y))
    assert_close(score_decomposition(p, Y).score, jaxcal.brier_score(p, Y))


def test_classwise_is_the_sum_of_the_one_vs_rest_problems():
    probs, labels = DIGITS["probs"], DIGITS["labels"]
    d = score_decomposition(probs, labels, score="log")
    parts = [
        score_decomposition(probs[:, k], (labels == k).astype(np.int32), score="log")
        for k in range(probs.shape[1])
    ]
    # float32 sums of 10 terms
    assert_close(np.array(d), np.sum(np.array(parts), axis=0), rtol=1e-5)


def test_binned_method_is_murphys_decomposition():
    p = P.astype(np.float32)
    d = score_decomposition(p, Y, method="binned", n_bins=10)
    b = jaxcal.brier_decomposition(p, Y, n_bins=10)
    assert_close(d.discrimination, b.resolution)
    assert_close(d.uncertainty, b.uncertainty)
    rel = b.reliability + b.within_bin_variance - b.within_bin_covariance
    assert_close(d.miscalibration, rel, atol=1e-6)  # a difference of float32 means ~0.2
    # and the float64 oracle with each forecast recalibrated to its bin's mean outcome
    bins = reference.uniform_bin(P, 10, "left")
    means = np.array([Y[bins == b].mean() for b in range(10)])
    with x64():
        got = score_decomposition(
            jnp.asarray(P), jnp.asarray(Y), score="log", method="binned", n_bins=10, closed="left"
        )
    expected = reference.score_decomposition(
        P, Y, score="log", calibrated=means[bins], eps=np.finfo(np.float64).eps
    )
    assert_close(np.array([float(v) for v in got]), np.array(expected))


def test_jit_vmap_grad():
    p = jnp.asarray(P.astype(np.float32))
    y = jnp.asarray(Y)
    fn = jax.jit(lambda q: score_decomposition(q, y, score="log"))
    assert_close(np.array(fn(p)), np.array(score_decomposition(p, y, score="log")))
    stacked = jnp.stack([p, p**2])
    batched = jax.vmap(lambda q: score_decomposition(q, y))(stacked)
    assert_close(np.array(batched)[:, 1], np.array(score_decomposition(p**2, y)))
    g_mcb = jax.grad(lambda q: score_decomposition(q, y).miscalibration)(p)
    g_score = jax.grad(lambda q: jaxcal.brier_score(q, y))(p)
    assert_close(g_mcb, g_score)  # DSC and UNC depend on the order only
    g_dsc = jax.grad(lambda q: score_decomposition(q, y).discrimination)(p)
    assert np.all(np.asarray(g_dsc) == 0)


def test_degenerate_inputs_have_documented_finite_answers():
    p = np.array([0.0, 0.2, 0.7, 1.0], np.float32)
    zeros = np.zeros(4, np.int32)
    for score in ("brier", "log"):
        d = score_decomposition(p, zeros, score=score)
        assert float(d.uncertainty) == 0 and float(d.discrimination) == 0
        assert np.isfinite(float(d.miscalibration))
        masked = score_decomposition(p, zeros, score=score, weights=np.zeros(4, np.float32))
        assert [float(v) for v in masked] == [0.0, 0.0, 0.0, 0.0]


def test_bad_options_name_the_argument():
    for kw, name in (({"score": "crps"}, "score"), ({"method": "knn"}, "method")):
        with pytest.raises(ValueError, match=f"`{name}`"):
            score_decomposition(P, Y, **kw)
    with pytest.raises(ValueError, match="`reduction`"):
        score_decomposition(P, Y, reduction="mean")

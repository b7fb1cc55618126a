"""Risk at a coverage, coverage at a risk, and the AUROC of correctness."""

import jax
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from jaxcal import selective
from tests import reference_selective as ref
from tests.helpers import assert_close, x64


def _probs(seed, n=250, k=4):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(k, 0.4), n)
    labels = np.array([rng.choice(k, p=p) for p in probs])
    return probs, labels


def test_torch_uncertainty_docstring_examples():
    # CovAtxRisk's docstring: 0.8 at risk 0.3
    probs = np.array([[0.9, 0.1], [0.6, 0.4], [0.8, 0.2], [0.5, 0.5], [0.7, 0.3]])
    targets = np.array([0, 1, 0, 1, 0])
    assert_close(selective.coverage_at_risk(probs, targets, risk=0.3), np.float32(0.8))
    # RiskAtxCov's docstring: 0.25 at coverage 0.5. Its fourth point falls in a tie (two
    # samples at 0.8, one wrong): 0.25 when the wrong one is accepted first (its sort's
    # order there, and a stable sort's), 0 otherwise; jaxcal gives the mean, 0.125.
    probs = np.array(
        [[0.9, 0.1], [0.7, 0.3], [0.95, 0.05], [0.8, 0.2], [0.6, 0.4], [0.3, 0.7], [0.85, 0.15],
         [0.2, 0.8]]
    )  # fmt: skip
    targets = np.array([0, 1, 0, 1, 0, 1, 0, 1])
    scores, errors = ref.tu_scores_errors(probs, targets)
    assert ref.tu_risk_at_cov(scores, errors, 0.5) == 0.25
    swapped = [0, 1, 2, 7, 4, 5, 6, 3]  # the tied pair in the other order
    assert ref.tu_risk_at_cov(scores[swapped], errors[swapped], 0.5) == 0.0
    assert_close(selective.risk_at_coverage(probs, targets, coverage=0.5), np.float32(0.125))


@pytest.mark.parametrize("level", [0.1, 0.3, 0.5, 0.8, 0.95, 1.0])
def test_risk_at_coverage_against_torch_uncertainty_port(level):
    probs, labels = _probs(0)
    scores, errors = ref.tu_scores_errors(probs, labels)
    with x64():
        assert_close(
            selective.risk_at_coverage(probs, labels, coverage=level),
            ref.tu_risk_at_cov(scores, errors, level),
        )
    # float32: a level k/N reached exactly is found despite round-off (0.3 * 10)
    ten = selective.risk_at_coverage(
        confidence=scores[:10], correct=1 - errors[:10].astype(int), coverage=0.3
    )
    assert_close(ten, np.float32(ref.tu_risk_at_cov(scores[:10], errors[:10], 0.3)))


def test_several_levels_at_once():
    probs, labels = _probs(1)
    many = selective.risk_at_coverage(probs, labels, coverage=(0.8, 0.9, 0.95))
    assert many.shape == (3,)
    for value, level in zip(many, (0.8, 0.9, 0.95), strict=True):
        assert_close(value, selective.risk_at_coverage(probs, labels, coverage=level))
    cov = selective.coverage_at_risk(probs, labels, risk=[0.05, 0.1])
    assert cov.shape == (2,)


@pytest.mark.parametrize("level", [0.05, 0.1, 0.2, 0.4])
def test_coverage_at_risk_against_torch_uncertainty_port(level):
    probs, labels = _probs(2)
    scores, errors = ref.tu_scores_errors(probs, labels)
    expected = ref.tu_cov_at_risk(scores, errors, level)
    rates = ref.tu_rejection_rates(scores, errors)
    admissible = np.flatnonzero(rates <= level)
    with x64():
        value = float(selective.coverage_at_risk(probs, labels, risk=level))
    # the definition: the largest coverage with risk <= level (0 when there is none)
    assert value == pytest.approx((admissible[-1] + 1) / len(rates) if admissible.size else 0.0)
    if not np.isnan(expected):
        assert value == pytest.approx(expected)


def test_torch_uncertainty_cov_at_risk_indexing_defect():
    # Most confident wrong, next right: risks 1, 1/2; at risk 0.6 full coverage qualifies.
    scores, errors = np.array([0.9, 0.8]), np.array([1.0, 0.0])
    assert np.isnan(ref.tu_cov_at_risk(scores, errors, 0.6))
    assert (
        float(selective.coverage_at_risk(confidence=scores, correct=np.array([0, 1]), risk=0.6))
        == 1.0
    )
    assert (
        float(selective.coverage_at_risk(confidence=scores, correct=np.array([0, 0]), risk=0.5))
        == 0.0
    )


@pytest.mark.parametrize("weighted", [False, True])
def test_correctness_auroc_against_sklearn(weighted):
    probs, labels = _probs(3)
    conf = np.round(probs.max(1), 2)  # ties count half in both
    correct = (probs.argmax(1) == labels).astype(int)
    w = np.random.default_rng(3).random(len(conf)) if weighted else None
    with x64():
        assert_close(
            selective.correctness_auroc(confidence=conf, correct=correct, weights=w),
            roc_auc_score(correct, conf, sample_weight=w),
        )
        assert_close(
            selective.correctness_auroc(probs, labels, weights=w),
            roc_auc_score(correct, probs.max(1), sample_weight=w),
        )


def test_correctness_auroc_of_a_quality_splits_each_sample():
    rng = np.random.default_rng(4)
    conf, q = rng.random(30), rng.random(30)
    with x64():
        # each sample as two weighted rows: mass q correct, 1 - q wrong (ties half)
        both = np.concatenate([conf, conf])
        y = np.concatenate([np.ones(30), np.zeros(30)])
        w = np.concatenate([q, 1 - q])
        assert_close(
            selective.correctness_auroc(confidence=conf, correct=q),
            roc_auc_score(y, both, sample_weight=w),
        )
    assert float(selective.correctness_auroc(confidence=conf, correct=np.ones(30, int))) == 0.5


def test_groups_and_jit():
    probs, labels = _probs(5, n=120)
    ids = np.arange(120) % 4
    for fn in (selective.risk_at_coverage, selective.coverage_at_risk, selective.correctness_auroc):
        out = fn(probs, labels, groups=ids, n_groups=4)
        assert out.shape == (4,)
        for g in range(4):
            assert_close(out[g], fn(probs[ids == g], labels[ids == g]), err_msg=fn.__name__)
        jitted = jax.jit(lambda p, y, fn=fn: fn(p, y))
        assert_close(jitted(probs, labels), fn(probs, labels))


def test_level_errors():
    p, y = np.array([0.2, 0.9]), np.array([0, 1])
    with pytest.raises(ValueError, match=r"`coverage` must lie in \(0, 1\]; got 0.0"):
        selective.risk_at_coverage(p, y, coverage=0.0)
    with pytest.raises(ValueError, match=r"`risk` must lie in \[0, 1\]; got 1.5"):
        selective.coverage_at_risk(p, y, risk=1.5)
    with pytest.raises(ValueError, match="`coverage` must be a Python number"):
        jax.jit(lambda c: selective.risk_at_coverage(p, y, coverage=c))(0.5)

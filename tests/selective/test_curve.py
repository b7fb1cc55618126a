"""The risk-coverage curve: references' running error rates, ties averaged, groups, padding."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxcal import selective
from tests import reference_selective as ref
from tests.helpers import assert_close, x64


def _probs(seed, n=200, k=4):
    rng = np.random.default_rng(seed)
    probs = rng.dirichlet(np.full(k, 0.5), n)
    labels = np.array([rng.choice(k, p=p) for p in probs])
    return probs, labels


def test_matches_torch_uncertainty_running_error_rates():
    probs, labels = _probs(0)
    scores, errors = ref.tu_scores_errors(probs, labels)
    with x64():
        c = selective.risk_coverage_curve(probs, labels)
        assert_close(c.risk, ref.tu_rejection_rates(scores, errors))
        assert_close(c.coverage, np.arange(1, 201) / 200)
        assert_close(c.generalized_risk, ref.tu_rejection_rates(scores, errors) * c.coverage)
        assert_close(c.threshold, np.sort(scores)[::-1])
        assert bool(np.all(c.working_point))  # continuous scores: no ties


def test_torch_uncertainty_docstring_example_curve():
    probs = np.array([[0.7, 0.3], [0.6, 0.4], [0.8, 0.2]])
    c = selective.risk_coverage_curve(probs, np.array([0, 1, 0]))
    assert_close(c.risk, np.array([0, 0, 1 / 3], np.float32))


def test_ties_are_the_mean_over_the_orders_of_the_tied_samples():
    conf = np.array([0.5, 0.9, 0.5, 0.5, 0.2, 0.9, 0.5])
    correct = np.array([1, 0, 0, 1, 0, 1, 0])
    risks = 1.0 - correct
    with x64():
        c = selective.risk_coverage_curve(confidence=conf, correct=correct)

        def curve(ranks, r):
            acc, err, _ = ref.running_risks(ranks, r)
            return err / acc

        assert_close(c.risk, ref.tie_average(curve, conf, risks))
        assert c.working_point.tolist() == [False, True, False, False, False, True, True]


def test_permutation_invariant_with_ties():
    rng = np.random.default_rng(3)
    conf = rng.integers(0, 5, 60) / 4.0  # five distinct values: long runs of ties
    correct = rng.integers(0, 2, 60)
    base = selective.risk_coverage_curve(confidence=conf, correct=correct)
    for seed in range(3):
        perm = np.random.default_rng(seed).permutation(60)
        other = selective.risk_coverage_curve(confidence=conf[perm], correct=correct[perm])
        assert_close(other.risk, base.risk)


def test_one_dimensional_scores_of_any_scale_and_a_quality():
    rng = np.random.default_rng(1)
    score = 40 * rng.normal(size=50)  # log-likelihoods, negative entropies: any real
    quality = rng.random(50)
    with x64():
        c = selective.risk_coverage_curve(confidence=score, correct=quality)
        acc, err, _ = ref.running_risks(score, 1 - quality)
        assert_close(c.risk, err / acc)


def test_weights_against_the_definition():
    rng = np.random.default_rng(2)
    score, correct, w = rng.random(40), rng.integers(0, 2, 40), rng.random(40)
    w[::7] = 0.0
    with x64():
        c = selective.risk_coverage_curve(confidence=score, correct=correct, weights=w)
        acc, err, _ = ref.running_risks(score, 1 - correct, w)
        assert_close(c.coverage, acc / acc[-1])
        assert_close(c.risk, np.where(acc > 0, err / np.where(acc > 0, acc, 1), 0))


def test_groups_are_the_curves_of_the_masked_weights():
    probs, labels = _probs(4, n=60)
    ids = np.arange(60) % 3
    out = selective.risk_coverage_curve(probs, labels, groups=ids, n_groups=3)
    assert out.risk.shape == (3, 60)
    for g in range(3):
        one = selective.risk_coverage_curve(probs, labels, weights=(ids == g).astype(float))
        for a, b in zip(out, one, strict=True):
            assert_close(np.asarray(a[g], np.float64), np.asarray(b, np.float64))
    masks = np.stack([ids == 0, ids != 0], axis=1)
    both = selective.risk_coverage_curve(probs, labels, groups=masks)
    assert_close(both.risk[0], out.risk[0])


def test_padding_rows_of_weight_zero_under_jit():
    probs, labels = _probs(5, n=30)
    w = np.ones(30)
    padded_p = np.concatenate([probs, np.full((5, 4), np.nan)])
    padded_y = np.concatenate([labels, np.full(5, -100)])
    padded_w = np.concatenate([w, np.zeros(5)])
    fn = jax.jit(lambda p, y, w: selective.aurc(p, y, weights=w))
    assert_close(fn(padded_p, padded_y, padded_w), selective.aurc(probs, labels))
    fn = jax.jit(lambda p, y, w: selective.risk_coverage_curve(p, y, weights=w).risk[-1])
    error_rate = np.mean(probs.argmax(1) != labels)
    assert_close(fn(padded_p, padded_y, padded_w), np.float32(error_rate))


def test_real_data_with_ties_matches_brute_force_on_a_subset():
    data = np.load("jaxcal/data/digits_gaussian_nb.npz")
    probs, labels = data["probs"].astype(np.float64), data["labels"]
    conf = probs.max(1)
    assert len(np.unique(conf)) < len(conf)  # naive Bayes saturates: tied confidences at 1
    with x64():
        c = selective.risk_coverage_curve(probs, labels)
        risks = (probs.argmax(1) != labels).astype(float)
        order = np.argsort(-conf, kind="stable")
        # within each run of ties the accepted errors grow linearly: check run by run
        acc = np.arange(1, len(conf) + 1)
        err = np.asarray(c.risk) * acc
        for _, run in itertools.groupby(range(len(conf)), key=lambda i: conf[order[i]]):
            run = list(run)
            lo, hi = run[0], run[-1]
            before = err[lo - 1] if lo else 0.0
            slope = risks[order[lo : hi + 1]].mean()
            assert_close(err[lo : hi + 1], before + slope * np.arange(1, hi - lo + 2))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_low_precision_inputs_give_float32(dtype):
    probs, labels = _probs(6, n=20)
    c = selective.risk_coverage_curve(jnp.asarray(probs, dtype), labels)
    assert c.risk.dtype == jnp.float32

"""Cross-fitted recalibration: folds, metrics after it, the calibration/refinement split."""

import functools

import jax
import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression

import jaxcal
from jaxcal import calibrators, stats
from jaxcal.stats._resampling.recalibrated import fold_ids
from tests.helpers import assert_close, count_compiles, x64


def _binary(seed, n=300):
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.02, 0.98, n)
    y = (rng.random(n) < p**2).astype(np.int32)  # overconfident
    return p, y


def test_folds_are_balanced_and_random():
    folds = np.asarray(fold_ids(jax.random.key(0), 103, 5))
    assert sorted(np.bincount(folds).tolist()) == [20, 20, 21, 21, 21]
    other = np.asarray(fold_ids(jax.random.key(1), 103, 5))
    assert (folds != other).any()


def test_cross_fit_isotonic_against_sklearn_per_fold():
    p, y = _binary(0)
    key = jax.random.key(3)
    folds = np.asarray(fold_ids(key, len(p), 4))
    with x64():
        ours = np.asarray(stats.cross_fit(calibrators.isotonic(), p, y, key=key, n_folds=4))
    expected = np.empty(len(p))
    for k in range(4):
        train = folds != k
        iso = IsotonicRegression(out_of_bounds="clip", y_min=0, y_max=1).fit(p[train], y[train])
        expected[~train] = iso.predict(p[~train])
    assert_close(ours, expected)


def test_recalibrated_platt_against_sklearn_logistic_regression():
    p, y = _binary(1)
    key = jax.random.key(4)
    folds = np.asarray(fold_ids(key, len(p), 5))
    logit = np.log(p / (1 - p))
    expected = np.empty(len(p))
    for k in range(5):
        train = folds != k
        clf = LogisticRegression(C=1e12, tol=1e-12, max_iter=10_000).fit(
            logit[train, None], y[train]
        )
        expected[~train] = clf.predict_proba(logit[~train, None])[:, 1]
    with x64():
        brier = stats.recalibrated(jaxcal.brier_score, calibrators.platt_scaling(), p, y, key=key)
        # the two solvers stop at their own tolerances (1e-10 here, sklearn's 1e-12)
        assert_close(brier, np.mean((expected - y) ** 2), rtol=1e-7)
        ece = stats.recalibrated(
            functools.partial(jaxcal.ece, n_bins=10), calibrators.platt_scaling(), p, y, key=key
        )
        cross = stats.cross_fit(calibrators.platt_scaling(), p, y, key=key)
        assert_close(ece, jaxcal.ece(cross, y, n_bins=10))


def test_multiclass_temperature_on_logits_and_weights():
    data = np.load("jaxcal/data/digits_gaussian_nb.npz")  # naive Bayes: overconfident
    z, y = data["logits"], data["labels"]
    w = np.random.default_rng(0).uniform(0.5, 2.0, len(y))
    cal = calibrators.temperature_scaling()
    key = jax.random.key(5)
    value = stats.recalibrated(jaxcal.log_loss, cal, z, y, key=key, weights=w)
    probs = stats.cross_fit(cal, z, y, key=key, weights=w)
    assert_close(value, jaxcal.log_loss(probs, y, weights=w))
    assert float(value) < float(jaxcal.log_loss(jax.nn.softmax(z), y, weights=w))


def test_calibration_refinement_split():
    p, y = _binary(2)
    key = jax.random.key(6)
    # isotonic's 0/1 plateaus are for the Brier score; the log score wants Platt's
    cases = (("brier", jaxcal.brier_score, calibrators.isotonic()),
             ("log", jaxcal.log_loss, calibrators.platt_scaling()))  # fmt: skip
    for score, fn, cal in cases:
        split = jaxcal.calibration_refinement(p, y, calibrator=cal, key=key, score=score)
        assert_close(split.score, fn(p, y))
        assert_close(split.calibration + split.refinement, split.score)
        cross = stats.cross_fit(cal, p, y, key=key)
        assert_close(split.refinement, fn(cross, y))
        assert float(split.calibration) > 0  # overconfident: recalibration helps
    # a calibrated model: the (cross-fitted) calibration term is about 0
    rng = np.random.default_rng(7)
    q = rng.random(4000)
    z = (rng.random(4000) < q).astype(np.int32)
    calm = jaxcal.calibration_refinement(q, z, calibrator=calibrators.platt_scaling(), key=key)
    assert abs(float(calm.calibration)) < 2e-3


def test_folds_vmapped_compile_once_and_equal_calibrators_share_code():
    p, y = _binary(3, n=120)
    fn = count_compiles(
        lambda p, y, k: stats.recalibrated(
            jaxcal.brier_score, calibrators.platt_scaling(), p, y, key=k
        )
    )
    fn(p, y, jax.random.key(0))
    fn(p[::-1], y[::-1], jax.random.key(1))
    assert fn.compiles() == 1
    a = stats.recalibrated(jaxcal.brier_score, calibrators.isotonic(), p, y, key=jax.random.key(0))
    b = stats.recalibrated(jaxcal.brier_score, calibrators.isotonic(), p, y, key=jax.random.key(0))
    assert float(a) == float(b)


def test_errors():
    p, y = _binary(4, n=10)
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="`n_folds` must be at most the number of samples 10"):
        stats.recalibrated(jaxcal.brier_score, calibrators.isotonic(), p, y, key=key, n_folds=11)
    with pytest.raises(ValueError, match="`n_folds` must be an integer >= 2"):
        stats.cross_fit(calibrators.isotonic(), p, y, key=key, n_folds=1)
    with pytest.raises(ValueError, match="`calibrator` must have `fit"):
        stats.cross_fit(jaxcal.ece, p, y, key=key)
    with pytest.raises(ValueError, match="must take probabilities"):
        jaxcal.calibration_refinement(
            p, y, calibrator=calibrators.platt_scaling(inputs="logits"), key=key
        )
    with pytest.raises(ValueError, match=r"`x` must be \(N, K\) rows for this calibrator"):
        stats.cross_fit(calibrators.temperature_scaling(), p, y, key=key)
    with pytest.raises(ValueError, match="`key` must be a JAX PRNG key"):
        stats.cross_fit(calibrators.isotonic(), p, y, key=0)

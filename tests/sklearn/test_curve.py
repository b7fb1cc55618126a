"""calibration_curve and CalibrationDisplay against scikit-learn's; n_bins='cube_root'."""

import functools

import jax
import matplotlib
import numpy as np
import pytest
from sklearn import calibration as skcal
from sklearn.datasets import make_classification
from sklearn.linear_model import LogisticRegression

import jaxcal
from jaxcal._core.binning import cube_root_bins
from jaxcal.sklearn import CalibrationDisplay, calibration_curve
from tests.helpers import assert_close

matplotlib.use("Agg")


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
@pytest.mark.parametrize("n_bins", [1, 5, 10, 37])
def test_binary_equals_scikit_learn(strategy, n_bins):
    rng = np.random.default_rng(n_bins)
    p = rng.beta(2, 3, 300)
    p[:20] = np.round(p[:20], 1)  # values on the edges k/10
    y = (rng.random(300) < p).astype(int)
    ours = calibration_curve(y, p, n_bins=n_bins, strategy=strategy)
    theirs = skcal.calibration_curve(y, p, n_bins=n_bins, strategy=strategy)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)


def test_pos_label_and_string_labels():
    rng = np.random.default_rng(0)
    p = rng.random(100)
    y = np.where(rng.random(100) < p, "spam", "ham")
    ours = calibration_curve(y, p, pos_label="spam", n_bins=4)
    theirs = skcal.calibration_curve(y, p, pos_label="spam", n_bins=4)
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="pos_label"):
        calibration_curve(y, p)


def test_cube_root_rule():
    assert [cube_root_bins(n) for n in (1, 7, 8, 9, 64, 65, 10**6, 10**6 + 1)] == [
        1, 2, 2, 3, 4, 5, 100, 101,
    ]  # fmt: skip
    rng = np.random.default_rng(1)
    p, y = rng.random(1000), rng.integers(0, 2, 1000)
    ours = calibration_curve(y, p, n_bins="cube_root", strategy="quantile")
    theirs = skcal.calibration_curve(y, p, n_bins=10, strategy="quantile")
    np.testing.assert_array_equal(ours[0], theirs[0])


def test_cube_root_wherever_jaxcal_takes_n_bins():
    rng = np.random.default_rng(2)
    p, y = rng.random(125), rng.integers(0, 2, 125)  # 5 bins
    for fn in (jaxcal.ece, jaxcal.brier_decomposition, jaxcal.reliability_curve):
        a, b = fn(p, y, n_bins="cube_root"), fn(p, y, n_bins=5)
        for x, z in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
            assert_close(x, z)
    probs = rng.dirichlet(np.ones(3), 125)
    labels = rng.integers(0, 3, 125)
    for fn in (jaxcal.classwise_ece, jaxcal.top_label_ece, jaxcal.metrics.ece):
        assert_close(fn(probs, labels, n_bins="cube_root"), fn(probs, labels, n_bins=5))
    jitted = jax.jit(functools.partial(jaxcal.ece, n_bins="cube_root"))
    assert_close(jitted(p, y), jaxcal.ece(p, y, n_bins=5))
    assert_close(
        jaxcal.score_decomposition(p, y, method="binned", n_bins="cube_root").miscalibration,
        jaxcal.score_decomposition(p, y, method="binned", n_bins=5).miscalibration,
    )
    bands = jaxcal.stats.reliability_intervals(p, y, n_bins="cube_root")
    assert bands.low.shape == (5,)
    with pytest.raises(ValueError, match="or 'cube_root'; got 'sqrt'"):
        jaxcal.ece(p, y, n_bins="sqrt")
    with pytest.raises(ValueError, match="needs the number of samples"):
        jaxcal.calibrators.histogram_binning(n_bins="cube_root")


def test_multiclass_top_label_curve():
    rng = np.random.default_rng(3)
    probs = rng.dirichlet(np.ones(4), 500)
    y = np.array([rng.choice(4, p=r) for r in probs])
    prob_true, prob_pred = calibration_curve(y, probs, n_bins=10)
    conf, correct = probs.max(1), probs.argmax(1) == y
    expected = skcal.calibration_curve(correct.astype(int), conf, n_bins=10)
    np.testing.assert_array_equal(prob_true, expected[0])
    np.testing.assert_array_equal(prob_pred, expected[1])
    named = np.array(["a", "b", "c", "d"])
    again = calibration_curve(named[y], probs, n_bins=10)
    np.testing.assert_array_equal(again[0], prob_true)


def test_display_binary_equals_scikit_learn_and_multiclass_draws():
    X, y = make_classification(n_samples=300, random_state=0)
    clf = LogisticRegression().fit(X, y)
    ours = CalibrationDisplay.from_estimator(clf, X, y, n_bins=7)
    theirs = skcal.CalibrationDisplay.from_estimator(clf, X, y, n_bins=7)
    np.testing.assert_array_equal(ours.prob_true, theirs.prob_true)
    assert ours.ax_.get_xlabel() == theirs.ax_.get_xlabel()
    X3, y3 = make_classification(n_samples=300, n_classes=3, n_informative=4, random_state=0)
    clf3 = LogisticRegression().fit(X3, y3)
    disp = CalibrationDisplay.from_estimator(clf3, X3, y3, n_bins="cube_root")
    conf = clf3.predict_proba(X3)
    expected = calibration_curve(y3, conf, n_bins=cube_root_bins(300))
    np.testing.assert_array_equal(disp.prob_true, expected[0])
    assert disp.ax_.get_xlabel() == "Mean top-label probability"
    matplotlib.pyplot.close("all")


@pytest.mark.parametrize("row", [0, 1, 2])
def test_top_label_curve_refuses_nan(row):
    """Issue 34.7 (Q5): NaN in (N, K) probabilities gave NaN bin means silently."""
    p = np.array([[0.2, 0.8], [0.6, 0.4], [0.5, 0.5]])
    p[row, 1] = np.nan
    for _ in range(2):
        with pytest.raises(ValueError, match=f"`y_prob` must be finite.*in row {row}"):
            calibration_curve(np.array([1, 0, 1]), p, n_bins=2)

"""CalibratedClassifierCV: scikit-learn's results from jaxcal's calibrators, and its checks."""

import pickle

import numpy as np
import pytest
from sklearn import calibration as skcal
from sklearn.datasets import make_classification
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB
from sklearn.svm import LinearSVC
from sklearn.utils import estimator_checks

from jaxcal import calibrators
from jaxcal.sklearn import CalibratedClassifierCV, expected_failed_checks
from jaxcal.sklearn._methods import fit_calibration, predict_calibrated
from tests.helpers import assert_close

# Platt: scikit-learn's L-BFGS-B stops at gtol 1e-6, jaxcal's at 1e-10 (float64); the
# temperature fits at their own tolerances too: probabilities agree to about 1e-6.
_TOL = {"sigmoid": 1e-6, "temperature": 1e-6, "isotonic": 1e-10}


def _data(n_classes, n=400, seed=0):
    return make_classification(n_samples=n, n_classes=n_classes, n_informative=4, random_state=seed)


@pytest.mark.parametrize("method", ["sigmoid", "isotonic", "temperature"])
@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("ensemble", [True, False])
def test_matches_scikit_learn(method, n_classes, ensemble):
    X, y = _data(n_classes)
    for estimator in (LogisticRegression(), GaussianNB()):  # decision_function / proba only
        ours = CalibratedClassifierCV(estimator, method=method, cv=3, ensemble=ensemble)
        theirs = skcal.CalibratedClassifierCV(estimator, method=method, cv=3, ensemble=ensemble)
        p = ours.fit(X, y).predict_proba(X)  # float64 inside, whatever the process's setting
        q = theirs.fit(X, y).predict_proba(X)
        assert p.dtype == np.float64 and p.shape == (400, n_classes)
        assert_close(p, q, rtol=_TOL[method], atol=_TOL[method])
        assert (ours.predict(X) == theirs.predict(X)).mean() > 0.99


def test_frozen_estimator_and_sample_weight():
    X, y = _data(2)
    w = np.random.default_rng(0).uniform(0.5, 2.0, len(y))
    model = LogisticRegression().fit(X[:200], y[:200])
    ours = CalibratedClassifierCV(FrozenEstimator(model), method="isotonic")
    theirs = skcal.CalibratedClassifierCV(FrozenEstimator(model), method="isotonic")
    # FrozenEstimator.fit takes no sample_weight: both warn that only the calibration uses it
    with pytest.warns(UserWarning, match="sample weights will only be used"):
        p = ours.fit(X[200:], y[200:], sample_weight=w[200:]).predict_proba(X)
    with pytest.warns(UserWarning, match="sample weights will only be used"):
        q = theirs.fit(X[200:], y[200:], sample_weight=w[200:]).predict_proba(X)
    assert len(ours.calibrated_classifiers_) == 1  # ensemble="auto" is False when frozen
    assert_close(p, q)


def test_string_labels_and_a_jaxcal_calibrator():
    X, y = _data(3)
    names = np.array(["ant", "bee", "cat"])[y]
    for method in (
        "venn_abers",
        calibrators.beta_calibration(inputs="probs"),
        calibrators.dirichlet(l2=1e-3),
    ):
        clf = CalibratedClassifierCV(GaussianNB(), method=method, cv=3).fit(X, names)
        proba = clf.predict_proba(X)
        assert_close(proba.sum(1), np.ones(len(y)))
        assert set(clf.predict(X)) <= set(names)
        assert (clf.predict(X) == names).mean() > 0.7


def test_isotonic_at_scale_is_scikit_learns():
    """In float32, isotonic regression merged scores within 1e-6 and moved the steps by
    0.02 at N = 1e5; the calibration runs in float64 (jax.enable_x64, local to the call)."""
    X, y = _data(3, n=20_000)
    model = FrozenEstimator(GaussianNB().fit(X, y))
    p = CalibratedClassifierCV(model, method="isotonic").fit(X, y).predict_proba(X)
    q = skcal.CalibratedClassifierCV(model, method="isotonic").fit(X, y).predict_proba(X)
    # float64 round-off of the interpolation between steep knots: 3e-9 apart
    assert_close(p, q, rtol=1e-7, atol=1e-8)
    assert not __import__("jax").config.jax_enable_x64  # the process's setting untouched


def test_fitted_estimator_pickles():
    X, y = _data(2, n=120)
    clf = CalibratedClassifierCV(LinearSVC(), method="sigmoid", cv=3).fit(X, y)
    again = pickle.loads(pickle.dumps(clf))
    assert_close(again.predict_proba(X), clf.predict_proba(X))


def test_errors():
    X, y = _data(2, n=60)
    with pytest.raises(ValueError, match="`method` must be one of 'sigmoid'"):
        CalibratedClassifierCV(method="platt").fit(X, y)
    with pytest.raises(ValueError, match="`ensemble` must be 'auto', True or False"):
        CalibratedClassifierCV(ensemble="yes").fit(X, y)
    with pytest.raises(ValueError, match="Requesting 40-fold cross-validation"):
        CalibratedClassifierCV(cv=40).fit(X, y)


@pytest.mark.parametrize(
    "check",
    [
        estimator_checks.check_classifiers_train,
        estimator_checks.check_estimators_pickle,
        estimator_checks.check_fit_idempotent,
        estimator_checks.check_methods_subset_invariance,
    ],
    ids=lambda c: c.__name__,
)
def test_a_few_estimator_checks(check):
    check("CalibratedClassifierCV", CalibratedClassifierCV())


def test_venn_abers_does_not_depend_on_the_last_bit_of_the_response():
    """Q8 of the 2026-11-28 findings: a response differing by round-off between a 1-row
    and a 30-row call (BLAS) sat on a calibration score, where Venn-Abers jumps; scores
    within round-off of a calibration score are now read as it, on any machine."""
    rng = np.random.default_rng(8)
    scores = rng.normal(size=(40, 1))
    y = (rng.random(40) < 1 / (1 + np.exp(-2 * scores[:, 0]))).astype(int)
    fitted = fit_calibration("venn_abers", scores, y, np.array([1]), 2, None, False)
    # the calibration scores where Venn-Abers jumps: a hair above differs from the score
    gap = np.diff(np.sort(scores[:, 0])).min() / 4
    jumps = ~np.all(
        predict_calibrated(fitted, scores + gap) == predict_calibrated(fitted, scores), axis=1
    )
    on = scores[jumps]
    assert on.shape[0] >= 5
    for near in (np.nextafter(on, -np.inf), np.nextafter(on, np.inf), on * (1 + 1e-14)):
        np.testing.assert_array_equal(
            predict_calibrated(fitted, near), predict_calibrated(fitted, on)
        )


@pytest.mark.slow  # about a minute per method on one core
# check_supervised_y_no_nan feeds y = inf: NumPy warns "invalid value encountered in
# cast" inside scikit-learn's type_of_target before its ValueError, and the suite's
# warnings-as-errors would turn the warning into the error (scikit-learn's own
# CalibratedClassifierCV fails that check the same way under -W error)
@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("method", ["sigmoid", "isotonic", "temperature", "venn_abers"])
def test_check_estimator_passes_every_check(method):
    """All 63 checks of scikit-learn 1.9 pass for sigmoid, isotonic and temperature, 61
    for Venn-Abers (``expected_failed_checks``); check_array_api_input is skipped by
    scikit-learn unless SCIPY_ARRAY_API is set (the estimator declares no array API
    support)."""
    estimator = CalibratedClassifierCV(method=method)
    expected = expected_failed_checks(estimator)
    assert bool(expected) == (method == "venn_abers")
    results = estimator_checks.check_estimator(
        estimator,
        on_fail=None,
        on_skip=None,
        expected_failed_checks=expected,
    )
    failed = [
        (r["check_name"], str(r["exception"])[:200]) for r in results if r["status"] == "failed"
    ]
    assert failed == []
    skipped = {r["check_name"] for r in results if r["status"] == "skipped"}
    assert skipped <= {"check_array_api_input"}

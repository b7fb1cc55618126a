"""Top-label and classwise reductions: definitions, argmax and simplex, real data."""

import warnings

import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.naive_bayes import GaussianNB
from sklearn.neural_network import MLPClassifier

import jaxcal
from jaxcal import calibrators as cal
from tests import reference
from tests import reference_calibrators as ref
from tests.helpers import assert_close

K = 4
HIST = cal.histogram_binning(5)
TOP_HIST = cal.top_label(HIST)  # built once: each factory call is a new compile
CW_HIST = cal.classwise(HIST)


def _probs(seed, n=400, k=K):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(k, 0.7), size=n).astype(np.float32)
    p /= p.sum(axis=1, keepdims=True)
    return p, rng.integers(0, k, n)  # random labels: calibrated confidences are small


def test_top_label_is_per_class_histogram_binning():
    p, labels = _probs(0)
    q = TOP_HIST.apply(TOP_HIST.fit(p, labels), p)
    conf, pred = p.max(axis=1), p.argmax(axis=1)
    correct = (pred == labels).astype(float)
    top = np.asarray(q)[np.arange(len(p)), pred]
    for c in range(K):
        rows = pred == c
        bins = reference.uniform_bin(conf[rows], 5, "right", np.float32)
        means = ref.histogram_means(bins, correct[rows], 5)
        # the top entry is the bin mean, raised where needed to stay the largest entry
        rest = np.where(np.arange(K)[None, :] == c, 0, p[rows])
        share = rest.max(axis=1) / rest.sum(axis=1)
        assert_close(top[rows], np.maximum(means[bins], share / (1 + share)), atol=1e-6)


@pytest.mark.parametrize("name", ["top_label", "classwise"])
def test_reductions_keep_argmax_and_rows_on_simplex(name):
    p, labels = _probs(1)
    p[:5] = np.float32(1 / K)  # ties: argmax is the first index
    p[5:10] = np.eye(K, dtype=np.float32)[np.arange(5) % K]  # all mass on the top class
    p[10:15] = np.array([0.3, 0.3, 0.2, 0.2], np.float32)  # tie between two top classes
    c = TOP_HIST if name == "top_label" else CW_HIST
    q = np.asarray(c.apply(c.fit(p, labels), p))
    np.testing.assert_array_equal(q.argmax(axis=1), p.argmax(axis=1))
    assert np.all(q >= 0)
    assert_close(q.sum(axis=1), np.ones(len(p)), atol=1e-6)


def test_top_label_shares_the_rest_in_proportion():
    p, labels = _probs(2)
    q = np.asarray(TOP_HIST.apply(TOP_HIST.fit(p, labels), p))
    pred = p.argmax(axis=1)
    others = np.arange(K)[None, :] != pred[:, None]
    ratio = np.where(others, q / np.where(others, p, 1), np.nan)
    spread = np.nanmax(ratio, axis=1) - np.nanmin(ratio, axis=1)
    assert np.all(spread < 1e-4 * np.nanmax(ratio, axis=1))  # one factor (1 - q)/(1 - c)


def test_unpredicted_class_falls_back_to_identity():
    p, labels = _probs(3)
    never = p.argmax(axis=1) == 3
    fit_p, fit_y = p[~never], labels[~never]  # class 3 is never predicted in the fit data
    params = TOP_HIST.fit(fit_p, fit_y)
    q = np.asarray(TOP_HIST.apply(params, p))
    assert_close(q[never], p[never], atol=1e-6)
    # classwise: a class absent from the labels keeps its column before renormalising
    absent = labels != 2
    cw = CW_HIST.fit(p[absent], labels[absent])
    assert not bool(jnp.any(cw.filled[2]))
    assert_close(HIST.apply(HIST.fit(p[:1, 2], [0], weights=[0.0]), p[:, 2]), p[:, 2])


def test_reductions_reject_bad_binary_calibrators():
    with pytest.raises(ValueError, match=r'binary.*inputs="probs"'):
        cal.top_label(cal.platt_scaling(inputs="logits"))
    with pytest.raises(ValueError, match=r"binary.*Calibrator"):
        cal.classwise("isotonic")
    with pytest.raises(ValueError, match="inputs"):
        cal.top_label(HIST, inputs="scores")
    with pytest.raises(ValueError, match=r"logits.*2-D"):
        TOP_HIST.fit(np.array([0.2, 0.8]), [0, 1])
    with pytest.raises(ValueError, match="sum to 1"):
        TOP_HIST.fit(np.array([[0.2, 0.2]]), [0])


def test_reductions_accept_logits_inputs():
    p, labels = _probs(4)
    c = cal.top_label(HIST, inputs="logits")
    logits = np.log(p) + 3.0
    q = c.apply(c.fit(logits, labels), logits)
    assert_close(q, TOP_HIST.apply(TOP_HIST.fit(p, labels), p), atol=1e-5)


_DIGITS = {}


def _digits(model):
    """Held-out predictions of a scikit-learn model on digits: (cal probs, cal y, test ...)."""
    if model not in _DIGITS:
        x, y = load_digits(return_X_y=True)
        xtr, xrest, ytr, yrest = train_test_split(x, y, train_size=600, random_state=0, stratify=y)
        xcal, xte, ycal, yte = train_test_split(
            xrest, yrest, train_size=600, random_state=0, stratify=yrest
        )
        clf = {
            "gaussian_nb": GaussianNB(),  # over-confident
            "logistic_c1e-4": LogisticRegression(C=1e-4, max_iter=5000),  # under-confident
            "mlp_15_epochs": MLPClassifier((32,), max_iter=15, random_state=0),  # under-trained
        }[model]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the MLP stops before converging on purpose
            clf.fit(xtr, ytr)

        def probs(xs):
            p = clf.predict_proba(xs).astype(np.float32)
            return p / p.sum(axis=1, keepdims=True)

        _DIGITS[model] = (probs(xcal), ycal, probs(xte), yte)
    return _DIGITS[model]


BINARIES = {
    "histogram": HIST,
    "isotonic": cal.isotonic(),
    "platt": cal.platt_scaling(),
    "beta": cal.beta_calibration(),
    "scaling_binning": cal.scaling_binning(10),
}
REDUCTIONS = {
    (r, b): getattr(cal, r)(binary)
    for r in ("top_label", "classwise")
    for b, binary in BINARIES.items()
}
FAST = {("gaussian_nb", "top_label", "isotonic"), ("gaussian_nb", "classwise", "histogram")}


@pytest.mark.parametrize(
    "model, reduction, binary",
    [
        pytest.param(m, r, b, marks=() if (m, r, b) in FAST else pytest.mark.slow)
        for m in ("gaussian_nb", "logistic_c1e-4", "mlp_15_epochs")
        for r in ("top_label", "classwise")
        for b in BINARIES
    ],
)
def test_digits_top_label_ece_drops_on_held_out_data(model, reduction, binary):
    pcal, ycal, ptest, ytest = _digits(model)
    c = REDUCTIONS[(reduction, binary)]
    q = c.apply(c.fit(pcal, ycal), ptest)
    before = float(jaxcal.top_label_ece(ptest, ytest))
    after = float(jaxcal.top_label_ece(q, ytest))
    assert after < before, (model, reduction, binary, before, after)
    np.testing.assert_array_equal(np.argmax(q, axis=1), np.argmax(ptest, axis=1))

"""The calibration step: logits as scikit-learn converts them, padding, one-vs-rest."""

import numpy as np
from sklearn import calibration as skcal

from jaxcal.sklearn import _methods
from tests.helpers import assert_close


def test_logits_as_scikit_learn_converts_them():
    rng = np.random.default_rng(0)
    proba = rng.dirichlet(np.ones(4), 20)
    margins = rng.normal(size=(20, 4))
    for x in (proba, margins):
        assert_close(_methods.to_logits(x, False), skcal._convert_to_logits(x))
    d = rng.normal(size=(20, 1))
    assert_close(_methods.to_logits(d, False), skcal._convert_to_logits(d))
    p1 = rng.random((20, 1))  # a binary predict_proba's positive column
    assert_close(_methods.to_logits(p1, True), np.log(np.concatenate([1 - p1, p1], 1) + 1e-12))


def test_padding_sizes_are_few():
    sizes = {_methods.padded_size(n) for n in range(1, 1000)}
    assert sizes == {16, 32, 64, 128, 256, 512, 1024}


def test_one_vs_rest_rows_are_normalised_and_zero_rows_uniform():
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, 50)
    preds = np.eye(3)[y] + 0.1 * rng.normal(size=(50, 3))  # each column's lowest: not its class
    fitted = _methods.fit_calibration("isotonic", preds, y, np.arange(3), 3, None, False)
    out = _methods.predict_calibrated(fitted, preds)
    assert_close(out.sum(1), np.ones(50))
    far = np.full((2, 3), -50.0)  # below every training score: isotonic gives 0, 0, 0
    zero = _methods.predict_calibrated(fitted, far)
    assert_close(zero, np.full((2, 3), 1 / 3))

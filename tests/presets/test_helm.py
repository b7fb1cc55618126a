"""HELM's calibration statistics against float64 ports of HELM and uncertainty-calibration."""

import jax
import numpy as np
import pytest

from jaxcal import presets
from tests import reference_harness as ref
from tests.helpers import assert_close, x64


def _case(seed, n):
    rng = np.random.default_rng(seed)
    p = rng.beta(4, 2, n)
    correct = (rng.random(n) < p**2).astype(int)  # overconfident
    return p, correct


@pytest.mark.parametrize(("seed", "n"), [(0, 500), (1, 37), (2, 8)])
def test_against_helm_port(seed, n):
    p, correct = _case(seed, n)
    expected = ref.helm_calibration_stats(p, correct)
    with x64():
        out = presets.helm_calibration(p, correct).helm_stats()
    exact = ["ece_10_bin", "ece_1_bin", "selective_cov_acc_area", "selective_acc@10"]
    for name in exact:
        assert_close(out[name], expected[name], err_msg=name)
    # scikit-learn's L-BFGS stops at its tolerance (tol=1e-4): the exact maximum-likelihood
    # fit here differs from it by about that, relative
    for name in ["platt_coef", "platt_intercept", "platt_ece_10_bin", "platt_ece_1_bin"]:
        assert_close(out[name], expected[name], rtol=2e-3, atol=2e-4, err_msg=name)


def test_platt_is_the_maximum_likelihood_fit():
    statsmodels = pytest.importorskip("statsmodels.api")
    p, correct = _case(3, 400)
    x = np.log(p / (1 - p))
    fit = statsmodels.Logit(correct, statsmodels.add_constant(x)).fit(disp=0, tol=1e-12)
    with x64():
        out = presets.helm_calibration(p, correct)
        assert_close(out.platt_coef, fit.params[1], rtol=1e-7)
        assert_close(out.platt_intercept, fit.params[0], rtol=1e-7, atol=1e-9)
        # with the fit's exact parameters, the Platt ECEs are the port's to round-off
        cal = 1 / (1 + np.exp(-(fit.params[1] * x + fit.params[0])))
        assert_close(out.platt_ece_10_bin, ref.get_ece_em(cal, correct, 10), rtol=1e-6)


def test_ties_in_max_probs():
    rng = np.random.default_rng(4)
    p = np.round(rng.beta(4, 2, 300), 1)  # eleven values: long runs of ties
    correct = (rng.random(300) < p).astype(int)
    expected = ref.helm_calibration_stats(p, correct)
    with x64():
        out = presets.helm_calibration(p, correct).helm_stats()
    # equal-mass bins put ties in one bin whatever the order: exact
    assert_close(out["ece_10_bin"], expected["ece_10_bin"])
    # the selective statistics average the orders of ties (the reference's quicksort
    # picks one); the area of the mean convention moves by less than the ties' spread
    assert abs(float(out["selective_cov_acc_area"]) - expected["selective_cov_acc_area"]) < 0.01


def test_all_right_or_all_wrong_as_helm():
    p = np.linspace(0.2, 0.9, 30)
    for correct in (np.ones(30, int), np.zeros(30, int)):
        out = presets.helm_calibration(p, correct)
        assert float(out.platt_ece_10_bin) == 0.0 and float(out.platt_ece_1_bin) == 0.0
        assert np.isnan(float(out.platt_coef)) and np.isnan(float(out.platt_intercept))
        expected = ref.helm_calibration_stats(p, correct)
        assert_close(out.ece_10_bin, np.float32(expected["ece_10_bin"]))


def test_jit_and_vmap():
    p, correct = _case(5, 64)
    eager = presets.helm_calibration(p, correct)
    jitted = jax.jit(presets.helm_calibration)(p, correct)
    for a, b in zip(eager, jitted, strict=True):
        assert_close(a, b, rtol=1e-4, atol=1e-5)  # the Platt fit stops at its float32 tolerance
    batched = jax.vmap(presets.helm_calibration)(
        np.stack([p, p[::-1]]), np.stack([correct, correct[::-1]])
    )
    assert_close(batched.ece_10_bin[0], batched.ece_10_bin[1])

"""Scale-free weights (issue 20, D14): any positive rescaling gives the same answer.

Each weighted kernel scales its weights by a power of two near their largest before
squaring or summing them (:func:`jaxcal._core.numerics.normalize_weights`), so weights of 1e30
neither overflow ``sum w`` nor, at 1e-30, underflow ``sum w**2``. One jitted function per
metric takes the scale as a traced argument: hypothesis varies its value, never a shape,
so each metric compiles once.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxcal
from jaxcal import stats
from jaxcal._core.numerics import normalize_weights
from tests.helpers import assert_close

_RNG = np.random.default_rng(20)
N = 64
SCORES = _RNG.uniform(size=N).astype(np.float32)
OUTCOMES = (_RNG.uniform(size=N) < SCORES).astype(np.int32)
PROBS = _RNG.dirichlet(np.ones(4), size=N).astype(np.float32)
LABELS = _RNG.integers(0, 4, N).astype(np.int32)
BASE = _RNG.uniform(0.5, 2.0, N).astype(np.float32)
BASE[::9] = 0  # zero weights mask rows at every scale

METRICS = {
    "ece": lambda w: jaxcal.ece(PROBS, LABELS, weights=w),
    "ece_quantile_l2": lambda w: jaxcal.ece(
        PROBS, LABELS, weights=w, binning="quantile", norm="l2"
    ),
    "classwise_ece": lambda w: jaxcal.classwise_ece(PROBS, LABELS, weights=w),
    "brier_score": lambda w: jaxcal.brier_score(PROBS, LABELS, weights=w),
    "log_loss": lambda w: jaxcal.log_loss(PROBS, LABELS, weights=w),
    "calibration_tests": lambda w: stats.calibration_tests(SCORES, OUTCOMES, weights=w),
    "mmce": lambda w: jaxcal.mmce(PROBS, LABELS, weights=w),
    "smooth_ece": lambda w: jaxcal.smooth_ece(SCORES, OUTCOMES, weights=w),
    "brier_decomposition": lambda w: jaxcal.brier_decomposition(PROBS, LABELS, weights=w),
    "score_decomposition": lambda w: jaxcal.score_decomposition(SCORES, OUTCOMES, weights=w),
}

#: One compiled function per metric: the scale is an argument, so it never recompiles.
_SCALED = {name: jax.jit(lambda c, f=f: f(jnp.asarray(BASE) * c)) for name, f in METRICS.items()}


@pytest.mark.parametrize("name", sorted(METRICS))
@settings(max_examples=6, deadline=None)
@given(exponent=st.integers(-30, 30), mantissa=st.floats(1.0, 9.99))
def test_weight_scale_changes_nothing(name, exponent, mantissa):
    expected = METRICS[name](BASE)
    scale = np.float32(mantissa * 10.0**exponent)
    actual = _SCALED[name](scale)
    leaves = zip(
        jax.tree_util.tree_leaves(actual), jax.tree_util.tree_leaves(expected), strict=True
    )
    for a, e in leaves:
        # a non-power-of-two scale rounds each weight once: a few float32 ulps
        assert_close(a, e, rtol=1e-4, atol=1e-6, err_msg=f"{name} at scale {scale}")


def test_ks_p_value_of_huge_and_tiny_weights():
    # D14's reproducer: all weights 1e20 gave p = 1, 1e-20 gave p = 0 (against 0.93).
    expected = stats.ks_test(SCORES, OUTCOMES).p_value
    for c in (1e20, 1e-20, 1e36):
        got = stats.ks_test(SCORES, OUTCOMES, weights=np.full(N, c, np.float32)).p_value
        assert_close(got, expected, rtol=1e-4, err_msg=str(c))  # rounding of c * 1


def test_ece_of_weights_near_float32_max():
    # 1e36 gave ECE 0 and 1e38 NaN: sum w overflowed.
    expected = jaxcal.ece(SCORES, OUTCOMES)
    for c in (1e36, 3e38):
        assert_close(jaxcal.ece(SCORES, OUTCOMES, weights=np.full(N, c, np.float32)), expected)


def test_curves_report_weights_in_the_callers_scale():
    curve = jaxcal.reliability_curve(SCORES, OUTCOMES, n_bins=4, weights=BASE * np.float32(1e30))
    plain = jaxcal.reliability_curve(SCORES, OUTCOMES, n_bins=4, weights=BASE)
    assert_close(curve.weights, plain.weights * np.float32(1e30), rtol=1e-4)  # one rounding
    assert_close(curve.mean_accuracy, plain.mean_accuracy)
    corp = jaxcal.corp_curve(SCORES, OUTCOMES, weights=BASE * np.float32(1e-30))
    plain = jaxcal.corp_curve(SCORES, OUTCOMES, weights=BASE)
    assert_close(corp.weight / np.float32(1e-30), plain.weight, rtol=1e-4)  # one rounding
    assert_close(corp.calibrated, plain.calibrated)


def test_subnormal_weights_are_rejected():
    # XLA:CPU reads subnormals as 0 (1e-45 weights gave ECE 0): a clear error instead.
    with pytest.raises(ValueError, match=r"`weights` must be 0 or at least 1.18e-38.*index 0"):
        jaxcal.ece(SCORES, OUTCOMES, weights=np.full(N, 1e-45, np.float32))
    jaxcal.ece(SCORES, OUTCOMES, weights=np.ones(N, np.float32))  # compiled and seen
    with pytest.raises(ValueError, match=r"got 1e-40 at index 3"):  # from the kernel summary
        w = np.ones(N, np.float32)
        w[3] = 1e-40
        jaxcal.ece(SCORES, OUTCOMES, weights=w)


def test_normalize_weights_is_exact_for_powers_of_two():
    w = jnp.asarray(BASE)
    for e in (-120, -60, 0, 60, 120):
        scaled, _ = normalize_weights(w * jnp.float32(2.0**e))
        np.testing.assert_array_equal(scaled, normalize_weights(w)[0])

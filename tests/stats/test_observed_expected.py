"""Observed/expected ratio with Byar's interval, and prevalence reweighting."""

import jax
import numpy as np
import pytest
from scipy.stats import norm

from jaxcal.stats import observed_expected_ratio, prevalence_weights
from tests.helpers import assert_close, x64
from tests.reference_clinical import byar

rng = np.random.default_rng(15)
N = 300
P = rng.beta(1, 6, N)
Y = (rng.random(N) < 1.3 * P).astype(np.int32)


def test_ratio_and_byar_interval():
    with x64():
        res = observed_expected_ratio(P, Y, confidence=0.9)
    o, e = Y.sum(), P.sum()
    assert_close(res.ratio, o / e)
    assert_close([res.low, res.high], byar(o, e, norm.ppf(0.95)))
    assert_close([res.observed, res.expected], [o, e])
    zero = observed_expected_ratio(P, np.zeros(N, np.int32))
    assert float(zero.low) == 0.0 and float(zero.high) > 0


def test_unit_weights_and_per_class():
    base = observed_expected_ratio(P, Y)
    ones = observed_expected_ratio(P, Y, weights=np.ones(N))
    assert_close(list(ones), list(base))
    probs = np.stack([1 - P, P], axis=1)
    per = observed_expected_ratio(probs, Y)
    assert_close(per.ratio[1], base.ratio)
    assert_close(per.high[1], base.high)


def test_prevalence_weights_move_the_event_rate():
    w = prevalence_weights(Y, 0.4)
    assert_close(float((w * Y.astype(np.float32)).sum() / w.sum()), 0.4, rtol=1e-6)  # f32
    assert_close(float(w.sum()), N, rtol=1e-6)  # float32 sum of N weights
    res = observed_expected_ratio(P, Y, prevalence=0.4)
    assert_close(res.observed, 0.4 * N, rtol=1e-5)  # float32
    with pytest.raises(ValueError, match="`prevalence`"):
        prevalence_weights(Y, 1.0)
    with pytest.raises(ValueError, match="`prevalence` needs"):
        observed_expected_ratio(np.stack([1 - P, P], 1), Y, prevalence=0.3)


def test_jit_and_vmap():
    f = jax.jit(lambda p, y: observed_expected_ratio(p, y).ratio)
    boot = rng.integers(0, N, (4, N))
    out = jax.vmap(f)(P[boot].astype(np.float32), Y[boot])
    assert_close(out[2], Y[boot[2]].sum() / P[boot[2]].sum(), rtol=1e-5)  # float32 sums


def test_grad_and_prevalence_weights_under_jit_and_vmap():
    with x64():
        jax.test_util.check_grads(
            lambda p: observed_expected_ratio(p, Y).ratio, (P,), order=1, modes=["rev"]
        )
    f = jax.jit(lambda y: prevalence_weights(y, 0.25))
    labels = np.stack([Y, 1 - Y])
    assert_close(jax.vmap(f)(labels)[1], prevalence_weights(1 - Y, 0.25))


@pytest.mark.parametrize("scale", [1e37, 1e30, 1e-30])
def test_interval_of_huge_and_tiny_weights(scale):
    # w * w overflowed float32 at 1e30 (a NaN interval) and underflowed at 1e-30 (0, 0):
    # Kish's n_eff is scale-free, so the ratio and interval are those of weights near 1.
    p, w = P.astype(np.float32), (rng.random(N) + 0.5).astype(np.float32)
    base = observed_expected_ratio(p, Y, weights=w)
    res = observed_expected_ratio(p, Y, weights=w * np.float32(scale))
    # a non-power-of-two scale rounds each weight once: a few float32 ulps
    assert_close(res[:3], base[:3], rtol=1e-5)
    total = float(np.sum(w * p, dtype=np.float64)) * scale
    assert_close(res.expected, total if total < 3e38 else np.inf, rtol=1e-5)  # likewise
    shifted = observed_expected_ratio(p, Y, weights=w * np.float32(scale), prevalence=0.3)
    assert_close(
        shifted[:3], observed_expected_ratio(p, Y, weights=w, prevalence=0.3)[:3], rtol=1e-5
    )  # likewise

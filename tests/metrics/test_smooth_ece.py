"""Smooth ECE (jaxcal.metrics._smooth_ece) against the mirror-image oracle and relplot."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import relplot
from jax.test_util import check_grads

from jaxcal.metrics._smooth_ece import SMECE_MIN_BANDWIDTH, smooth_ece
from tests.helpers import assert_close, x64
from tests.reference_soft import N_GRAD, N, binary, multiclass, np_smooth_ece


@pytest.mark.parametrize("sigma", [0.02, 0.1, 0.3, 1.0])
def test_smooth_ece_matches_mirror_image_oracle(sigma):
    p, y = binary()
    w = np.random.default_rng(15).random(N)
    with x64():
        for weights in (None, w):
            got = smooth_ece(p, y, bandwidth=sigma, weights=weights)
            # grid assignment widens the kernel by (1/4096)^2/6 in variance: ~1e-5 at 0.02
            assert_close(got, np_smooth_ece(p, y, sigma, weights), rtol=2e-5, atol=1e-7)


@pytest.mark.parametrize("seed,shift", [(0, 0.0), (1, 0.1), (2, -0.2), (3, 0.3)])
def test_smooth_ece_matches_relplot(seed, shift):
    p, y = binary(n=3000, seed=seed, shift=shift)
    got_auto = smooth_ece(jnp.asarray(p, jnp.float32), y)
    # relplot stops its bandwidth bisection at 2**-10 and reports the upper end.
    assert_close(got_auto, relplot.smECE(p, y), atol=1e-3, rtol=0)
    for sigma in (0.02, 0.05, 0.1):
        got = smooth_ece(jnp.asarray(p, jnp.float32), y, bandwidth=sigma)
        # relplot: 200 equal-weight evaluation points and a kernel truncated at +-0.5
        assert_close(got, relplot.smECE_sigma(p, y, sigma), atol=5e-4, rtol=0)


def test_smooth_ece_multiclass_matches_relplot_on_confidences():
    logits, probs, labels = multiclass(n=3000, k=10, seed=16)
    f, correct = relplot.multiclass_logits_to_confidences(logits, labels)
    assert_close(
        smooth_ece(jnp.asarray(probs, jnp.float32), labels),
        relplot.smECE(f, correct),
        atol=1e-3,
        rtol=0,
    )  # relplot's bisection precision, as above


def test_smooth_ece_is_its_own_bandwidth_and_monotone_in_sigma():
    p, y = binary(shift=0.15)
    with x64():
        star = float(smooth_ece(p, y))
        # sigma* is bisected to float64 precision; the value moves by the slope times that
        assert_close(smooth_ece(p, y, bandwidth=star), star, rtol=1e-9)
        values = [float(smooth_ece(p, y, bandwidth=s)) for s in np.geomspace(1e-3, 1, 25)]
    assert all(a >= b - 1e-12 for a, b in itertools.pairwise(values))


def test_smooth_ece_floor_bandwidth_when_calibrated_at_grid_level():
    # Residuals all zero: smECE_sigma = 0 < sigma everywhere, so the search clamps at 1e-3.
    p = jnp.array([0.0, 1.0, 0.0, 1.0])
    assert float(smooth_ece(p, jnp.array([0, 1, 0, 1]))) == 0.0
    assert SMECE_MIN_BANDWIDTH == 1e-3


def test_smooth_ece_gradients_match_finite_differences():
    rng = np.random.default_rng(17)
    z, w = rng.normal(size=N_GRAD), rng.random(N_GRAD) + 0.5
    y = (rng.random(N_GRAD) < 0.6).astype(np.int32)

    def f(z, w, h):
        p = jax.nn.sigmoid(z)
        # fixed bandwidth, plus the fixed point, whose bandwidth moves with the data
        # (implicit-function gradient); one function, one compilation
        return smooth_ece(p, y, bandwidth=h, weights=w) + 0.5 * smooth_ece(p, y, weights=w)

    with x64():
        # eps 1e-6: scores move across the 1/4096 grid nodes (kinks of the linear
        # assignment) and |r(t)| has kinks at its zeros; keep steps far inside them.
        args = (jnp.asarray(z), jnp.asarray(w), jnp.asarray(0.05))
        check_grads(f, args, 1, modes=("rev",), eps=1e-6)


def test_smooth_ece_integer_weights_repeat_samples():
    p, y = binary(n=60)
    reps = np.random.default_rng(20).integers(0, 4, 60)
    with x64():
        got = smooth_ece(p, y, weights=reps.astype(np.float64))
        want = smooth_ece(np.repeat(p, reps), np.repeat(y, reps))
        assert_close(got, want, rtol=1e-9)  # float64, grid sums in another order

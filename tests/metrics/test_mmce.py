"""MMCE (jaxcal.metrics._mmce) against the kernel-matrix formula of Kumar, Sarawagi & Jain (2018)."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from jaxcal.metrics._mmce import laplace_quadratic_form, mmce
from tests.helpers import assert_close, x64
from tests.reference_soft import N_GRAD, N, binary, multiclass, np_mmce, scores_targets


@pytest.mark.parametrize("variant", ["unweighted", "weighted"])
@pytest.mark.parametrize("bandwidth", [0.4, 0.05])
def test_mmce_matches_kernel_matrix_oracle(variant, bandwidth):
    _, probs, labels = multiclass()
    p, y = binary()
    w = np.random.default_rng(10).random(N)
    with x64():
        for args in [(probs, labels), (p, y)]:
            for weights in [np.ones(N), w]:  # (weights=None: the float32 test below)
                got = mmce(*args, bandwidth=bandwidth, variant=variant, weights=weights)
                want = np_mmce(*args, bandwidth, variant, weights)
                assert_close(got, want, rtol=1e-9)  # float64, sums over 6.6e4 kernel terms


def test_mmce_float32_against_float64_oracle():
    _, probs, labels = multiclass()
    got = mmce(jnp.asarray(probs, jnp.float32), labels)
    assert_close(got, np_mmce(probs, labels), rtol=1e-5)  # float32 scan over 256 terms


def test_laplace_quadratic_form_with_ties_signs_and_narrow_kernels():
    rng = np.random.default_rng(11)
    x = np.round(rng.random(N), 1)  # 11 distinct values: heavy ties, segment edges, 0 and 1
    a = rng.normal(size=N)
    with x64():
        quad = jax.jit(laplace_quadratic_form)
        for h in (0.3, 0.01, 1e-3):
            got = quad(jnp.asarray(x), jnp.asarray(a), jnp.asarray(h))
            want = a @ np.exp(-np.abs(x[:, None] - x[None, :]) / h) @ a
            assert_close(got, want, rtol=1e-10)  # exact up to float64 round-off


def test_mmce_integer_weights_repeat_samples():
    p, y = binary(n=50)
    reps = np.random.default_rng(12).integers(0, 4, 50)
    with x64():
        for variant in ("unweighted", "weighted"):
            got = mmce(p, y, variant=variant, weights=reps.astype(np.float64))
            want = mmce(np.repeat(p, reps), np.repeat(y, reps), variant=variant)
            assert_close(got, want, rtol=1e-9)  # float64, the same terms in another order


def test_mmce_gradients_match_finite_differences():
    logits, _, labels = multiclass(n=N_GRAD)
    w = np.random.default_rng(13).random(N_GRAD) + 0.5

    def f(z, w, h):  # both variants in one function: one compilation
        p = jax.nn.softmax(z)
        return mmce(p, labels, bandwidth=h, weights=w) + 0.7 * mmce(
            p, labels, bandwidth=h, variant="weighted", weights=w
        )

    with x64():
        # eps 1e-6: the Laplacian kernel has a kink at r_i = r_j, and 96 confidences lie
        # closer than the default step of 1e-4. Reverse mode: plain autodiff here (no
        # custom rule), and forward mode would double the compilations.
        args = (jnp.asarray(logits), jnp.asarray(w), jnp.asarray(0.4))
        check_grads(f, args, 1, modes=("rev",), eps=1e-6)


def _blocked_np_mmce(probs, labels):
    r, c = scores_targets(probs, labels)
    a = (c - r) / r.size
    q = sum(
        a[i : i + 1000] @ np.exp(-np.abs(r[i : i + 1000, None] - r[None, :]) / 0.4) @ a
        for i in range(0, r.size, 1000)
    )
    return math.sqrt(q)


def test_mmce_twenty_thousand_samples_fit_and_differentiate():
    _, probs, labels = multiclass(n=20_000, k=10, seed=14)
    value, grad = jax.value_and_grad(lambda p: mmce(p, labels))(jnp.asarray(probs, jnp.float32))
    assert np.isfinite(value) and np.all(np.isfinite(grad))
    assert float(jnp.max(jnp.abs(grad))) > 0


@pytest.mark.slow
def test_mmce_twenty_thousand_samples_against_blocked_oracle():
    _, probs, labels = multiclass(n=20_000, k=10, seed=14)
    want = _blocked_np_mmce(probs, labels)
    assert_close(mmce(jnp.asarray(probs, jnp.float32), labels), want, rtol=1e-4)  # 2e4 terms
    with x64():
        assert_close(mmce(probs, labels), want, rtol=1e-9)  # float64, 4e8 kernel terms


def test_documented_degenerate_values():
    # six samples, the shape of the boundary cases in tests/metrics/test_objectives.py
    p = jnp.array([0.2, 0.9, 0.7, 0.4, 0.6, 0.1])
    assert float(mmce(p, jnp.ones(6, jnp.int32), variant="weighted")) == 0.0  # all correct
    assert float(mmce(p, jnp.zeros(6, jnp.int32), variant="weighted")) == 0.0  # all wrong

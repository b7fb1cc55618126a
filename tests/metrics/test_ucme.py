"""jaxcal.ucme against CalibrationErrors.jl's test vectors (``test/ucme.jl``) and the
float64 oracle (tests/reference_kernel.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcal
from tests import reference_kernel as ref
from tests.helpers import assert_close, x64

ONE_HOT = np.array([[1.0, 0.0], [0.0, 1.0]])
TEST_P = np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]])
TEST_Y = np.array([0, 0, 1])  # Julia's [1, 1, 2]
A = (np.exp(-2) + np.exp(-0.5) + 1) / 12
B = (1 - np.exp(-1)) ** 2 / 6
# test/ucme.jl "UCME: Binary examples" (Julia's 1-based targets)
BINARY_EXAMPLES = {(1, 2): 0.0, (1, 1): A, (2, 1): B, (2, 2): A}


def test_reference_binary_examples():
    for (a, b), expected in BINARY_EXAMPLES.items():
        y = np.array([a - 1, b - 1])
        got = jaxcal.ucme(
            ONE_HOT, y, test_probs=TEST_P, test_labels=TEST_Y, kernel="gaussian", bandwidth=1.0
        )
        assert_close(got, expected, atol=1e-7)
        # probabilities with Bool targets; ScaleTransform(sqrt(2)) is h = 1/sqrt(2)
        got = jaxcal.ucme(
            np.array([1.0, 0.0]),
            (y == 0).astype(int),
            test_probs=np.array([1.0, 0.5, 0.0]),
            test_labels=np.array([1, 1, 0]),
            kernel="gaussian",
            bandwidth=1 / np.sqrt(2),
        )
        assert_close(got, expected, atol=1e-7)


@pytest.mark.parametrize("kernel", ["laplacian", "gaussian"])
def test_binary_equals_two_columns(kernel):
    """test/ucme.jl "binary classification": scale s on scalars = s / sqrt(2) on vectors."""
    rng = np.random.default_rng(0)
    p = rng.random(50)
    y = (rng.random(50) < p).astype(int)
    q = rng.random(4)
    z = rng.integers(0, 2, 4)
    with x64():
        a = jaxcal.ucme(p, y, test_probs=q, test_labels=z, kernel=kernel, bandwidth=0.3)
        b = jaxcal.ucme(
            np.stack([p, 1 - p], 1),
            1 - y,
            test_probs=np.stack([q, 1 - q], 1),
            test_labels=1 - z,
            kernel=kernel,
            bandwidth=0.3 * np.sqrt(2),
        )
        assert_close(a, b, rtol=1e-10)


@pytest.mark.parametrize("kernel", ["laplacian", "gaussian"])
@pytest.mark.parametrize("k", [1, 4])
def test_against_the_oracle(kernel, k):
    rng = np.random.default_rng(k)
    n, m = 40, 5
    if k == 1:
        probs, q = rng.random(n), rng.random(m)
        labels, z = rng.integers(0, 2, n), rng.integers(0, 2, m)
    else:
        probs, q = rng.dirichlet(np.ones(k), n), rng.dirichlet(np.ones(k), m)
        labels, z = rng.integers(0, k, n), rng.integers(0, k, m)
    with x64():
        got = jaxcal.ucme(probs, labels, test_probs=q, test_labels=z, kernel=kernel, bandwidth=0.5)
        assert_close(got, ref.ucme(probs, labels, q, z, kernel, 0.5), rtol=1e-10)
        got = jaxcal.ucme(probs, labels, test_probs=q, test_labels=z, kernel=kernel)
        h = ref.median_distance(probs)
        assert_close(got, ref.ucme(probs, labels, q, z, kernel, h), rtol=1e-10)
        # weights: zero weights drop rows
        w = np.r_[np.ones(30), np.zeros(10)]
        got = jaxcal.ucme(probs, labels, test_probs=q, test_labels=z, bandwidth=0.5, weights=w)
        assert_close(got, ref.ucme(probs[:30], labels[:30], q, z, "laplacian", 0.5), rtol=1e-10)


def test_reference_basic_properties_nonnegative():
    """test/ucme.jl "Basic properties": every estimate > 0 (1000 data sets of 20)."""
    rng = np.random.default_rng(2)
    for nclasses in (2, 10, 100):
        probs = rng.dirichlet(np.ones(nclasses), (1000, 20))
        labels = (rng.random((1000, 20, 1)) > probs.cumsum(-1)).sum(-1).clip(0, nclasses - 1)
        q = rng.dirichlet(np.ones(nclasses), 5)
        z = rng.integers(0, nclasses, 5)

        def f(p, y, q=q, z=z):
            return jaxcal.ucme(p, y, test_probs=q, test_labels=z, bandwidth=10.0)

        with x64():
            est = np.asarray(jax.vmap(f)(probs, labels))
        assert np.all(est > 0)


def test_gradient_is_finite():
    rng = np.random.default_rng(3)
    probs = jnp.asarray(rng.dirichlet(np.ones(3), 30), jnp.float32)
    labels = rng.integers(0, 3, 30)
    q = rng.dirichlet(np.ones(3), 4).astype(np.float32)

    def f(p):
        return jaxcal.ucme(p, labels, test_probs=q, test_labels=np.arange(4) % 3, bandwidth=0.2)

    assert bool(jnp.all(jnp.isfinite(jax.grad(f)(probs))))


def test_bad_test_locations_name_the_argument():
    p, y = np.array([0.2, 0.7, 0.4]), np.array([0, 1, 1])
    with pytest.raises(ValueError, match="`test_probs` must have shape"):
        jaxcal.ucme(p, y, test_probs=np.ones((2, 2)) / 2, test_labels=np.array([0, 1]))
    with pytest.raises(ValueError, match="`test_labels`"):
        jaxcal.ucme(p, y, test_probs=np.array([0.2, 0.5]), test_labels=np.array([0, 2]))
    with pytest.raises(ValueError, match="`test_probs`"):
        jaxcal.ucme(p, y, test_probs=np.array([0.2, 1.5]), test_labels=np.array([0, 1]))
    with pytest.raises(ValueError, match="`kernel`"):
        jaxcal.ucme(p, y, test_probs=np.array([0.2]), test_labels=np.array([0]), kernel="x")

"""jaxcal.skce against CalibrationErrors.jl's test vectors (``test/skce.jl``) and a float64
loop-by-loop oracle (tests/reference_kernel.py)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcal
from jaxcal.metrics._kernels import laplace_pair_sum
from tests import reference_kernel as ref
from tests.helpers import assert_close, x64

E1 = np.exp(-1)
ONE_HOT = np.array([[1.0, 0.0], [0.0, 1.0]])
# SqExponentialKernel() (no scaling) is the gaussian with h = 1 on the vectors;
# SqExponentialKernel() ∘ ScaleTransform(sqrt(2)) on probabilities is h = 1/sqrt(2).
H_PROB = 1 / np.sqrt(2)

# CalibrationErrors.jl test/skce.jl, "Two-dimensional example": predictions [1,0], [0,1]
# with targets (Julia's 1-based classes) and the expected values of each estimator.
TWO_POINT = {
    "unbiased": {(1, 2): 0.0, (1, 1): 0.0, (2, 1): -2 * E1, (2, 2): 0.0},
    "biased": {(1, 2): 0.0, (1, 1): 0.5, (2, 1): 1 - E1, (2, 2): 0.5},
    "block": {(1, 2): 0.0, (1, 1): 0.0, (2, 1): -2 * E1, (2, 2): 0.0},
}


@pytest.mark.parametrize("estimator", ["unbiased", "biased", "block"])
def test_reference_two_point_example(estimator):
    for (a, b), expected in TWO_POINT[estimator].items():
        labels = np.array([a - 1, b - 1])
        got = jaxcal.skce(ONE_HOT, labels, kernel="gaussian", bandwidth=1.0, estimator=estimator)
        assert_close(got, expected, atol=1e-6)
        # probabilities [1, 0] with Bool targets: true = class 1 of Julia = our label 1
        binary = np.array([1.0, 0.0])
        targets = (labels == 0).astype(int)  # Julia's target true <-> first class
        got = jaxcal.skce(binary, targets, kernel="gaussian", bandwidth=H_PROB, estimator=estimator)
        assert_close(got, expected, atol=1e-6)


def test_reference_block_example_replicated():
    """test/skce.jl "Block: Two-dimensional example": ten copies, blocksize 2."""
    probs = np.tile(ONE_HOT, (10, 1))
    for (a, b), expected in TWO_POINT["block"].items():
        labels = np.tile([a - 1, b - 1], 10)
        got = jaxcal.skce(probs, labels, kernel="gaussian", bandwidth=1.0, estimator="block")
        assert_close(got, expected, atol=1e-6)
        targets = np.tile([int(a == 1), int(b == 1)], 10)
        got = jaxcal.skce(
            np.tile([1.0, 0.0], 10), targets, kernel="gaussian", bandwidth=H_PROB, estimator="block"
        )
        assert_close(got, expected, atol=1e-6)


@pytest.mark.parametrize("kernel", ["laplacian", "gaussian"])
def test_binary_equals_two_columns_with_sqrt2_bandwidth(kernel):
    """test/skce.jl: the scalar kernel with scale s equals the vector kernel with s/sqrt(2)."""
    rng = np.random.default_rng(0)
    p = rng.random(300)
    y = (rng.random(300) < p).astype(int)
    with x64():
        for est in ("unbiased", "biased", "block"):
            a = jaxcal.skce(p, y, kernel=kernel, bandwidth=0.3, estimator=est)
            b = jaxcal.skce(
                np.stack([p, 1 - p], 1),
                1 - y,
                kernel=kernel,
                bandwidth=0.3 * np.sqrt(2),
                estimator=est,
            )
            assert_close(a, b, rtol=1e-9)


@pytest.mark.parametrize("kernel", ["laplacian", "gaussian"])
@pytest.mark.parametrize("k", [1, 3, 10])
def test_against_the_oracle(kernel, k):
    rng = np.random.default_rng(k)
    n = 37
    if k == 1:
        probs = rng.random(n)
        labels = (rng.random(n) < probs**1.5).astype(int)
    else:
        probs = rng.dirichlet(np.ones(k), n)
        labels = rng.integers(0, k, n)
    w = rng.uniform(0.2, 3, n)
    with x64():
        for est in ("unbiased", "biased", "block"):
            for weights in (None, w):
                got = jaxcal.skce(
                    probs,
                    labels,
                    kernel=kernel,
                    bandwidth=0.4,
                    estimator=est,
                    block_size=5,
                    weights=weights,
                )
                want = ref.skce(probs, labels, kernel, 0.4, est, 5, weights)
                assert_close(got, want, rtol=1e-9, atol=1e-13)
            # the median heuristic
            h = ref.median_distance(probs)
            got = jaxcal.skce(probs, labels, kernel=kernel, estimator=est, block_size=5)
            assert_close(got, ref.skce(probs, labels, kernel, h, est, 5), rtol=1e-9, atol=1e-13)


def test_top_label_is_the_binary_skce_of_confidence_and_correctness():
    rng = np.random.default_rng(5)
    probs = rng.dirichlet(np.ones(4) * 0.5, 400)
    labels = rng.integers(0, 4, 400)
    conf = probs.max(1)
    correct = (probs.argmax(1) == labels).astype(int)
    with x64():
        for kernel in ("laplacian", "gaussian"):
            got = jaxcal.skce(probs, labels, kernel=kernel, kind="top_label", bandwidth=0.2)
            assert_close(got, jaxcal.skce(conf, correct, kernel=kernel, bandwidth=0.2), rtol=1e-12)
        got = jaxcal.skce(probs[:30], labels[:30], kind="top_label", bandwidth=0.2)
        assert_close(got, ref.skce(conf[:30], correct[:30], "laplacian", 0.2), rtol=1e-9)


def test_sorted_path_against_the_quadratic_form():
    """N >= 256 scalar Laplacian takes the sorted recurrence: equal to the dense sum."""
    rng = np.random.default_rng(6)
    n = 900
    p = np.round(rng.random(n), 2)  # many ties
    y = (rng.random(n) < p).astype(int)
    w = rng.uniform(0, 2, n)
    e = y - p
    k = np.exp(-np.abs(p[:, None] - p[None, :]) / 0.25)
    a = w * e
    off = a @ k @ a - np.sum(a * a)
    with x64():
        got = jaxcal.skce(p, y, bandwidth=0.25, weights=w)
        assert_close(got, 2 * off / (w.sum() ** 2 - (w * w).sum()), rtol=1e-10)
        got = jaxcal.skce(p, y, bandwidth=0.25, weights=w, estimator="biased")
        assert_close(got, 2 * (a @ k @ a) / w.sum() ** 2, rtol=1e-10)
        assert_close(
            laplace_pair_sum(jnp.asarray(p), jnp.asarray(a), jnp.float64(0.25)), off, rtol=1e-10
        )


def test_tiles_float32_against_float64():
    """N = 2100, K = 5: three tiles; float32 agrees with float64 to the documented size."""
    rng = np.random.default_rng(7)
    n = 2100
    probs = rng.dirichlet(np.ones(5), n)
    labels = np.array([rng.choice(5, p=q**2 / (q**2).sum()) for q in probs])  # miscalibrated
    with x64():
        want = float(jaxcal.skce(probs, labels, bandwidth=0.3))
        dense = np.exp(-np.sqrt(((probs[:, None] - probs[None]) ** 2).sum(-1)) / 0.3)
        e = np.eye(5)[labels] - probs
        hm = dense * (e @ e.T)
        assert_close(want, (hm.sum() - np.trace(hm)) / (n * (n - 1)), rtol=1e-9)
    got = jaxcal.skce(probs.astype(np.float32), labels, bandwidth=0.3)
    assert got.dtype == jnp.float32
    assert_close(got, want, rtol=1e-3)  # float32: a difference of sums of N^2 terms


def test_reference_basic_properties():
    """test/skce.jl "Basic properties": 1000 data sets of 20 calibrated samples: the
    unbiased estimates take both signs with mean ~ 0 (atol 1e-3), the biased ones are
    positive; the block estimator with blocksize 2 is the mean of the pairs' unbiased
    estimates and with blocksize N the unbiased estimator."""
    rng = np.random.default_rng(8)
    kw = dict(kernel="laplacian", bandwidth=10.0)  # ExponentialKernel() ∘ ScaleTransform(0.1)
    for nclasses in (2, 10, 100):
        probs = rng.dirichlet(np.ones(nclasses), (1000, 20))
        u = rng.random((1000, 20, 1))
        labels = (u > probs.cumsum(-1)).sum(-1).clip(0, nclasses - 1)
        with x64():
            unbiased = jax.vmap(lambda p, y: jaxcal.skce(p, y, **kw))(probs, labels)
            biased = jax.vmap(lambda p, y: jaxcal.skce(p, y, estimator="biased", **kw))(
                probs, labels
            )
            block = jax.vmap(lambda p, y: jaxcal.skce(p, y, estimator="block", **kw))(probs, labels)
            full = jax.vmap(lambda p, y: jaxcal.skce(p, y, estimator="block", block_size=20, **kw))(
                probs, labels
            )
            pairs = jax.vmap(lambda p, y: jaxcal.skce(p, y, **kw))(
                probs.reshape(10000, 2, nclasses), labels.reshape(10000, 2)
            ).reshape(1000, 10)
            unbiased, biased, block, full, pairs = map(
                np.asarray, (unbiased, biased, block, full, pairs)
            )
        assert np.any(unbiased > 0) and np.any(unbiased < 0)
        assert abs(np.mean(unbiased)) < 1e-3
        assert np.all(biased > 0)
        assert np.any(block > 0) and np.any(block < 0) and abs(np.mean(block)) < 5e-3
        assert_close(block, pairs.mean(1), rtol=1e-9, atol=1e-15)
        assert_close(full, unbiased, rtol=1e-12, atol=1e-15)
    p = rng.random((1000, 20))
    y = (rng.random((1000, 20)) < p).astype(int)
    with x64():
        unbiased = jax.vmap(lambda p, y: jaxcal.skce(p, y, **kw))(p, y)
        biased = jax.vmap(lambda p, y: jaxcal.skce(p, y, estimator="biased", **kw))(p, y)
        unbiased, biased = np.asarray(unbiased), np.asarray(biased)
    assert np.any(unbiased > 0) and np.any(unbiased < 0) and abs(np.mean(unbiased)) < 1e-3
    assert np.all(biased > 0)


def test_gradients_are_finite_and_match_float64_differences():
    rng = np.random.default_rng(9)
    probs = rng.dirichlet(np.ones(3), 50)
    labels = rng.integers(0, 3, 50)
    probs[0] = probs[1]  # a zero distance
    with x64():
        for kernel in ("laplacian", "gaussian"):

            def f(p, kernel=kernel):
                return jaxcal.skce(p, labels, kernel=kernel, bandwidth=0.3)

            g = jax.grad(f)(jnp.asarray(probs))
            assert np.all(np.isfinite(g))
            d = rng.normal(size=probs.shape) * 1e-6
            d -= d.mean(1, keepdims=True)
            fd = (f(probs + d) - f(probs - d)) / 2
            assert_close(jnp.sum(g * d), fd, rtol=1e-4, atol=1e-12)
    p = jnp.asarray(np.r_[0.0, 1.0, rng.random(300)], jnp.float32)
    y = jnp.asarray(np.r_[0, 1, (rng.random(300) < 0.5)], jnp.int32)
    g = jax.grad(lambda p: jaxcal.skce(p, y))(p)
    assert bool(jnp.all(jnp.isfinite(g)))


def test_degenerate_inputs_have_documented_values():
    assert float(jaxcal.skce(np.array([0.3]), np.array([1]))) == 0.0
    assert float(jaxcal.skce(np.array([0.3, 0.6]), np.array([1, 0]), weights=np.zeros(2))) == 0.0
    assert (
        float(jaxcal.skce(np.array([0.3, 0.6]), np.array([1, 0]), weights=np.array([1.0, 0.0])))
        == 0.0
    )
    # all predictions equal: the median heuristic falls back to 1, finite
    assert np.isfinite(float(jaxcal.skce(np.full(10, 0.5), np.arange(10) % 2)))


def test_bad_options_name_the_argument():
    p, y = np.array([0.2, 0.7, 0.4]), np.array([0, 1, 1])
    with pytest.raises(ValueError, match="`kernel`"):
        jaxcal.skce(p, y, kernel="rbf")
    with pytest.raises(ValueError, match="`estimator`"):
        jaxcal.skce(p, y, estimator="linear")
    with pytest.raises(ValueError, match="`kind`"):
        jaxcal.skce(p, y, kind="classwise")
    with pytest.raises(ValueError, match="`bandwidth`"):
        jaxcal.skce(p, y, bandwidth=0.0)
    with pytest.raises(ValueError, match=r"`block_size` must be an integer >= 2"):
        jaxcal.skce(p, y, estimator="block", block_size=1)
    with pytest.raises(ValueError, match="`block_size` must be at most the number of samples"):
        jaxcal.skce(p, y, estimator="block", block_size=4)
    for _ in range(2):  # every call, not only the first
        with pytest.raises(ValueError, match="`probs`"):
            jaxcal.skce(np.array([0.2, 1.7, 0.4]), y)
        with pytest.raises(ValueError, match="`labels`"):
            jaxcal.skce(p, np.array([0, 2, 1]))


_LARGE = """
import json, sys, time
import numpy as np
import jaxcal

def peak_mib():
    # VmHWM, the peak resident set of this process's memory map: unlike getrusage's
    # ru_maxrss, which survives fork and exec, it starts afresh in the child (CI's test
    # worker had grown to 6 GB, and ru_maxrss reported that before any work here).
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmHWM")) / 1024

rng = np.random.default_rng(10)
n, k = 100_000, 10
probs = rng.dirichlet(np.ones(k), n).astype(np.float32)
labels = rng.integers(0, k, n)
before = peak_mib()
t = time.perf_counter()
value = float(jaxcal.skce(probs, labels, bandwidth=0.5))
seconds = time.perf_counter() - t
print(json.dumps({"value": value, "seconds": seconds, "peak_mib": peak_mib(), "before_mib": before}))
"""


@pytest.mark.slow
def test_large_multiclass_runs_in_bounded_memory():
    """N = 1e5, K = 10 in a fresh process with XLA's default code generation (the test
    session compiles at -O0): the (N, N) kernel matrix would be 40 GB in float32; the
    tiles keep the peak resident memory of the whole process under 1.5 GiB."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ, XLA_FLAGS="", JAX_PLATFORMS="cpu")
    root = str(Path(__file__).parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-c", _LARGE],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert np.isfinite(out["value"])
    assert out["peak_mib"] < 1536, out


@pytest.mark.slow
def test_binary_laplacian_at_a_million_samples():
    """The sorted path: N = 1e6 takes well under a second of compute (a quadratic sum
    would take hours)."""
    rng = np.random.default_rng(11)
    p = rng.random(1_000_000).astype(np.float32)
    y = (rng.random(1_000_000) < p).astype(np.int32)
    assert np.isfinite(float(jaxcal.skce(p, y)))

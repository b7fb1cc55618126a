"""The top label of every row: max and first index (NumPy's tie rule) on every code path.

``jaxcal/_core/confidence.py`` picks its algorithm by K: one variadic reduction per row
(K <= 32), the variadic reduction over blocks of a divisor of K (K < 256), plain block
maxima and a gathered block (larger K), two passes (no divisor in range, a prime K).
Each path is checked against NumPy's ``max`` and ``argmax`` on rows with exact ties at
the max (first, last, within and across blocks, uniform rows), in float32, bfloat16 and
under ``vmap``, and through the public functions (``confidence_and_correctness``,
``ece``, ``top_label_ece``, ``streaming.update``).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxcal
from jaxcal._core import confidence
from tests import reference
from tests.helpers import assert_close

# K on each path: <= 32 (one variadic row), blocked variadic (33 = 3 x 11, 100, 200),
# block maxima (256, 1000, 4096, 32000), two passes (37, 101, 997: primes).
CLASSES = (3, 10, 32, 33, 100, 200, 37, 101, 256, 1000, 997, 4096, 32000)


def _tied_rows(k: int, seed: int = 0) -> np.ndarray:
    """Softmax-like rows (float32) with exact ties at the max in many places."""
    rng = np.random.default_rng(seed)
    n = max(64, min(4000, 400_000 // k))
    p = rng.random((n, k), dtype=np.float32) ** 4
    top = p.max(axis=1)
    p[::5, 0] = top[::5]  # the first entry ties the max (at the end too below)
    p[1::5, k - 1] = top[1::5]  # the last entry ties
    p[2::5, k // 2] = top[2::5]  # a tie in another block
    p[3::5, : min(k, 5)] = top[3::5, None]  # ties inside the first block
    p[4::7] = 1.0  # uniform rows: every entry ties
    p /= p.sum(axis=1, keepdims=True)
    return p.astype(np.float32)


def _path(k: int) -> str:
    if k <= confidence._VARIADIC_MAX_CLASSES:
        return "variadic rows"
    if k < confidence._BLOCKED_MIN_CLASSES and confidence._variadic_block(k):
        return "variadic blocks"
    return "block maxima" if confidence.block_size(k) else "two passes"


def test_every_path_is_covered():
    assert {_path(k) for k in CLASSES} == {
        "variadic rows",
        "variadic blocks",
        "block maxima",
        "two passes",
    }


@pytest.mark.parametrize("k", CLASSES)
def test_row_max_and_first_index_equal_numpy_with_exact_ties(k):
    p = _tied_rows(k)
    rows = jax.jit(confidence.row_stats)(jnp.asarray(p))
    assert np.array_equal(np.asarray(rows.max), p.max(axis=1)), _path(k)
    assert np.array_equal(np.asarray(rows.argmax), p.argmax(axis=1)), _path(k)
    assert_close(rows.checked_sum, p.astype(np.float64).sum(axis=1).astype(np.float32))


@pytest.mark.parametrize("k", [10, 100, 1000, 997])
def test_bfloat16_rows_and_vmap(k):
    p = _tied_rows(k, seed=1)
    low = jnp.asarray(p, jnp.bfloat16)  # rounding makes more ties
    expect = np.asarray(low.astype(jnp.float32))
    rows = jax.jit(confidence.row_stats)(low)
    assert rows.max.dtype == jnp.bfloat16
    assert np.array_equal(np.asarray(rows.argmax), expect.argmax(axis=1))
    n = (p.shape[0] // 2) * 2
    batched = jax.jit(jax.vmap(confidence.row_stats))(jnp.asarray(p[:n]).reshape(2, n // 2, k))
    assert np.array_equal(np.asarray(batched.argmax).reshape(-1), p[:n].argmax(axis=1))


@pytest.mark.parametrize("k", [40, 300, 997])
def test_checked_sum_flags_negative_entries_and_non_finite_rows(k):
    p = np.full((4, k), 1 / k, np.float32)
    p[1, 3], p[1, 4] = -0.25, 0.25 + 2 / k  # sums to 1, with a negative entry
    p[2, 5] = np.nan
    p[3, 6] = np.inf
    rows = confidence.row_stats(jnp.asarray(p))
    total = np.asarray(rows.checked_sum)
    assert abs(total[0] - 1) < 1e-5 and total[1] > 4
    assert not np.isfinite(total[2]) and not np.isfinite(total[3])


@pytest.mark.parametrize("k", [10, 100, 256, 1000, 997])
def test_public_functions_follow_the_first_index_rule(k):
    p = _tied_rows(k, seed=2)
    rng = np.random.default_rng(k)
    pred = p.argmax(axis=1)
    # labels on the first tied index, on a later tied one, and elsewhere
    later = np.where(p == p.max(axis=1, keepdims=True), np.arange(k), -1).max(axis=1)
    labels = np.where(rng.random(len(p)) < 0.5, pred, later).astype(np.int32)
    labels[::3] = rng.integers(0, k, len(labels[::3]))
    conf, correct = jax.jit(jaxcal.confidence_and_correctness)(p, labels)
    assert np.array_equal(np.asarray(conf), p.max(axis=1))
    assert np.array_equal(np.asarray(correct), pred == labels)
    assert_close(
        jaxcal.ece(p, labels, n_bins=10),
        np.float32(reference.ece(p, labels, 10, dtype=np.float32)),
    )
    assert_close(
        jax.jit(lambda p, y: jaxcal.top_label_ece(p, y, n_bins=10))(p, labels),
        np.float32(reference.top_label_ece(p, labels, 10, dtype=np.float32)),
    )
    state = jaxcal.streaming.update(jaxcal.streaming.init(10, k), p, labels)
    assert_close(jaxcal.streaming.compute(state)["ece"], jaxcal.ece(p, labels, n_bins=10))


def test_block_sizes_divide_k_and_stay_in_range():
    for k in range(2, 5000):
        b = confidence.block_size(k)
        if b is not None:
            assert k % b == 0 and 4 <= b <= 64 and k // b >= 2, k
        v = confidence._variadic_block(k)
        if v is not None:
            assert k % v == 0 and 8 <= v <= 25 and k // v >= 2, k
    assert confidence.block_size(1000) == 25 and confidence.block_size(32000) == 64
    assert confidence.block_size(997) is None

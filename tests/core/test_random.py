"""Counter-based random draws (jaxcal._core.random): Threefry words, indices and labels.

Oracles: JAX's own Threefry primitive, ``jax.random.split`` and ``jax.random.bits`` for
the random stream, NumPy for the multiply-shift map, and label frequencies against the
probabilities (binomial bands).
"""

from __future__ import annotations

import jax
import jax.extend.random as jex_random
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

import jaxcal
from jaxcal._core.random import (
    indices,
    mulhi,
    resample_seeds,
    seed_words,
    split_seeds,
    threefry2x32,
    threshold,
    words,
)
from jaxcal.stats import consistency_test
from tests.helpers import x64
from tests.resampling_data import KEY, P, R, Y, consistency_labels

# ---------------------------------------------------------------- the random stream


def test_threefry_matches_jax_primitive():
    rng = np.random.default_rng(0)
    k = rng.integers(0, 2**32, (6, 2), dtype=np.uint32)
    x = rng.integers(0, 2**32, (2, 1000), dtype=np.uint32)
    for k0, k1 in k:
        ours = threefry2x32(jnp.uint32(k0), jnp.uint32(k1), jnp.asarray(x[0]), jnp.asarray(x[1]))
        ref = jex_random.threefry2x32_p.bind(
            jnp.uint32(k0), jnp.uint32(k1), jnp.asarray(x[0]), jnp.asarray(x[1])
        )
        np.testing.assert_array_equal(np.asarray(ours[0]), np.asarray(ref[0]))
        np.testing.assert_array_equal(np.asarray(ours[1]), np.asarray(ref[1]))


def test_resample_seeds_are_jax_random_split():
    key = jax.random.key(11)
    seeds = resample_seeds(key, 9)
    np.testing.assert_array_equal(seeds, jax.random.key_data(jax.random.split(key, 9)))
    children = split_seeds(seeds)
    ref = jax.vmap(jax.random.split)(jax.random.split(key, 9))
    np.testing.assert_array_equal(children, jax.random.key_data(ref))


def test_stream_is_jax_random_bits_uint64():
    """Word 2j + w of a stream is word w (big-endian) of jax.random.bits(k, uint64)[j]."""
    keys = jax.random.split(jax.random.key(3), 3)
    stream = np.asarray(words(seed_words(keys), 11))
    with x64():
        for r in range(3):
            ref = np.asarray(jax.random.bits(keys[r], (6,), jnp.uint64))
            pairs = np.stack([ref >> np.uint64(32), ref & np.uint64(0xFFFFFFFF)], axis=1)
            np.testing.assert_array_equal(stream[r], pairs.reshape(-1)[:11].astype(np.uint32))


@pytest.mark.slow
def test_rbg_keys_are_hashed_to_threefry_keys():
    key = jax.random.key(5, impl="rbg")
    keys = jax.random.split(key, 4)
    seeds = seed_words(keys)
    assert seeds.shape == (4, 2) and seeds.dtype == jnp.uint32
    data = np.asarray(jax.random.key_data(keys[1]))  # 4 words, folded by Threefry
    ref = jex_random.threefry2x32_p.bind(*(jnp.uint32(v) for v in data))
    np.testing.assert_array_equal(np.asarray(seeds[1]), np.array([ref[0], ref[1]]))
    res = consistency_test(jaxcal.ece, P, Y, key=key, n_resamples=R)
    again = consistency_test(jaxcal.ece, P, Y, key=key, n_resamples=R)
    np.testing.assert_array_equal(res.null, again.null)


def test_threshold_is_exact_for_float32():
    p = np.array([0.0, 2.0**-9, 0.1, 0.5, 0.7, 1 - 2.0**-24, 1.0], np.float32)
    t = np.asarray(threshold(jnp.asarray(p))).astype(np.float64)
    np.testing.assert_array_equal(t[1:-1] / 2.0**32, p[1:-1].astype(np.float64))
    assert t[0] == 0 and t[-1] == 2**32 - 1
    # Tiny probabilities keep their value to within 2**-32 (jax.random.bernoulli: 2**-23).
    tiny = np.array([1e-9, 3e-7], np.float32)
    t_tiny = np.asarray(threshold(jnp.asarray(tiny))).astype(np.float64) / 2.0**32
    assert np.all(np.abs(t_tiny - tiny) < 2.0**-32)


def test_mulhi_and_indices():
    rng = np.random.default_rng(1)
    w = rng.integers(0, 2**32, 5000, dtype=np.uint32)
    for n in (1, 2, 7, 1000, 99991, 2**31 - 2):
        ref = (w.astype(np.uint64) * np.uint64(n)) >> np.uint64(32)
        np.testing.assert_array_equal(np.asarray(mulhi(jnp.asarray(w), n)), ref.astype(np.int64))
    seeds = seed_words(jax.random.split(jax.random.key(0), 400))
    idx = np.asarray(indices(seeds, 7)).reshape(-1)
    counts = np.bincount(idx, minlength=7)
    assert counts.sum() == 2800 and idx.min() >= 0 and idx.max() < 7
    assert scipy.stats.chisquare(counts).pvalue > 1e-4


# ---------------------------------------------------------------- resampled labels


def test_bernoulli_labels_have_the_predicted_frequencies():
    p = jnp.asarray(np.array([0.0, 1.0, 0.5, 0.1, 0.9, 0.03, 0.77], np.float32))
    seeds = seed_words(jax.random.split(KEY, 4000))
    labels = np.asarray(consistency_labels(seeds, p))
    freq = labels.mean(axis=0)
    assert freq[0] == 0 and freq[1] == 1  # p = 0 and 1 never flip
    sd = np.sqrt(np.asarray(p) * (1 - np.asarray(p)) / 4000)
    assert np.all(np.abs(freq[2:] - np.asarray(p)[2:]) < 4.5 * sd[2:])
    # Different samples get independent labels.
    corr = np.corrcoef(labels[:, 2:].T)
    assert np.max(np.abs(corr - np.eye(5))) < 0.08


@pytest.mark.parametrize("k", [4, 40])  # compare-all and binary-search draws
def test_categorical_labels_have_the_rows_frequencies(k):
    rng = np.random.default_rng(k)
    rows = rng.dirichlet(np.ones(k) * 0.7, 3)
    rows[0, : k // 2] = 0  # zero-probability classes are never drawn
    rows[0] /= rows[0].sum()
    rows[2] = 0
    rows[2, k - 1] = 1  # a certain last class
    probs = jnp.asarray(rows.astype(np.float32))
    r = 6000
    labels = np.asarray(consistency_labels(seed_words(jax.random.split(KEY, r)), probs))
    for i in range(3):
        freq = np.bincount(labels[:, i], minlength=k) / r
        expected = np.asarray(probs[i], np.float64)
        assert np.all(freq[expected == 0] == 0)
        sd = np.sqrt(expected * (1 - expected) / r)
        assert np.all(np.abs(freq - expected) <= 4.5 * sd + 1e-12)
    # The draw is categorical, not K independent Bernoullis: exactly one class per row.
    assert labels.min() >= 0 and labels.max() < k

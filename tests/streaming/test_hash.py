"""The ``"hash"`` Poisson generator: JAX's uint32 words equal the Python-int reference
(the formula the SQL writes), the weights are Poisson(1), and the replicate states merge
whatever the batching."""

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal import streaming
from jaxcal.streaming._hash import (
    reference_weights,
    replicate_word,
    replicate_words,
    row_word_int,
    row_words,
)
from jaxcal.streaming._poisson import _THRESHOLDS, poisson_weights


def test_words_match_the_integer_reference():
    seed = 2**31 + 12345  # below 2**32: jax.random.key keeps 32 bits without x64
    key = jax.random.key(seed)
    words = np.asarray(replicate_words(key, 5))
    assert words.tolist() == [replicate_word(seed, b) for b in range(5)]
    ids = np.array([0, 1, 7, 2**32 - 1, 2**33 + 5], np.int64)
    pairs = np.stack([ids >> 32, ids & (2**32 - 1)], axis=1).astype(np.uint32)
    got = np.asarray(row_words(jnp.asarray(words), jnp.asarray(pairs)))
    want = [[row_word_int(h, int(i)) for i in ids] for h in words.tolist()]
    assert got.tolist() == want


def test_weights_are_poisson_one_and_match_reference():
    ids = jnp.arange(20000)
    w = np.asarray(poisson_weights(jax.random.key(3), ids, 4, generator="hash"))
    ref = reference_weights(3, range(50), 4, _THRESHOLDS)
    np.testing.assert_array_equal(w[:, :50], ref)
    assert abs(w.mean() - 1) < 0.02 and abs(w.var() - 1) < 0.03
    assert abs(np.mean(w == 0) - np.exp(-1)) < 0.01
    # replicates are not copies of one another
    assert abs(np.corrcoef(w[0], w[1])[0, 1]) < 0.03


def test_hash_replicates_do_not_depend_on_batching():
    p = jax.random.uniform(jax.random.key(1), (40,))
    y = (p > 0.5).astype(jnp.int32)
    key = jax.random.key(9)
    empty = streaming.poisson_init(4, 2, 6, binary=True)
    whole = streaming.poisson_update(empty, p, y, jnp.arange(40), key=key, generator="hash")
    parts = empty
    for lo in (20, 0):
        sl = slice(lo, lo + 20)
        parts = streaming.poisson_update(
            parts, p[sl], y[sl], jnp.arange(40)[sl], key=key, generator="hash"
        )
    np.testing.assert_array_equal(whole.class_count, parts.class_count)
    threefry = streaming.poisson_update(empty, p, y, jnp.arange(40), key=key)
    assert not np.array_equal(whole.class_count, threefry.class_count)

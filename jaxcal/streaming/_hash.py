"""The ``"hash"`` Poisson generator: replicate weights any SQL engine can draw.

The default generator of :func:`~jaxcal.streaming.poisson_update` is Threefry-2x32, twenty
rounds of 32-bit rotations that a warehouse cannot write in portable SQL. ``"hash"`` draws
the multiplicity of example ``id`` in replicate ``b`` from a 32-bit integer hash written
with operations that DuckDB, Spark SQL, BigQuery, Snowflake and PostgreSQL all have (xor,
right shift, addition, multiplication by constants below ``2**31`` and ``mod 2**32``) on
non-negative integers below ``2**63``, so no engine overflows its signed 64-bit integers:

* ``mix(x)``: ``x ^= x >> 16; x = x * 0x7feb352d mod 2**32; x ^= x >> 15;
  x = x * 0x2c1b3c6d mod 2**32; x ^= x >> 16`` (the shape of Wellons's ``lowbias32``, the
  second multiplier chosen below ``2**31``);
* the replicate word ``h_b = mix(mix(seed_hi + mix(seed_lo + 0x61c88647)) + b * 0x61c88647)``,
  from the
  two 32-bit words of the seed ``s`` (``jax.random.key(s)``'s key data is ``(s_hi, s_lo)``)
  and the replicate index b (all sums mod ``2**32``);
* the row word ``w = mix(mix(h_b + id_lo) + id_hi)`` for an id ``id_hi * 2**32 + id_lo``;
* the multiplicity ``#{j : w >= T_j}``, the thresholds ``T_j`` of the Threefry generator
  (``floor(2**32 P(X <= j))``, X ~ Poisson(1), j = 0..11): Poisson(1) within ``2**-32``.

In JAX the same words are uint32 arithmetic (which wraps mod ``2**32``): the SQL of
:func:`jaxcal.sql.state_query` and the streaming state draw the same weights for the same
(seed, id, replicate), whatever the engine, batching or partitioning.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

MASK = 2**32 - 1
MULTIPLIERS = (0x7FEB352D, 0x2C1B3C6D)
SHIFTS = (16, 15, 16)
#: The golden-ratio step between replicate words (below 2**31).
REPLICATE_STEP = 0x61C88647


def mix_int(x: int) -> int:
    """``mix`` on a Python int (the SQL's constants are computed with it)."""
    x ^= x >> SHIFTS[0]
    x = (x * MULTIPLIERS[0]) & MASK
    x ^= x >> SHIFTS[1]
    x = (x * MULTIPLIERS[1]) & MASK
    return x ^ (x >> SHIFTS[2])


def seed_words(seed: int) -> tuple[int, int]:
    """The (high, low) 32-bit words of a seed in ``[0, 2**63)``."""
    return seed >> 32, seed & MASK


def replicate_word(seed: int, b: int) -> int:
    """``h_b`` of the module docstring for seed ``seed`` and replicate ``b``."""
    high, low = seed_words(seed)
    h = mix_int((high + mix_int((low + REPLICATE_STEP) & MASK)) & MASK)
    return mix_int((h + b * REPLICATE_STEP) & MASK)


def row_word_int(h: int, key: int) -> int:
    """``w`` for replicate word ``h`` and a non-negative id ``key`` (reference)."""
    return mix_int((mix_int((h + (key & MASK)) & MASK) + (key >> 32)) & MASK)


def _mix(x: jax.Array) -> jax.Array:
    x = x ^ (x >> SHIFTS[0])
    x = x * jnp.uint32(MULTIPLIERS[0])
    x = x ^ (x >> SHIFTS[1])
    x = x * jnp.uint32(MULTIPLIERS[1])
    return x ^ (x >> SHIFTS[2])


def replicate_words(key: jax.Array, n: int) -> jax.Array:
    """``h_b`` ``(n,)`` uint32 for b = 0..n-1 of a Threefry key (``jax.random.key(s)``)."""
    data = jax.random.key_data(key).reshape(-1).astype(jnp.uint32)
    high, low = (data[0], data[1]) if data.shape[0] >= 2 else (jnp.uint32(0), data[0])
    h = _mix(high + _mix(low + jnp.uint32(REPLICATE_STEP)))
    return _mix(h + jnp.arange(n, dtype=jnp.uint32) * jnp.uint32(REPLICATE_STEP))


def row_words(words: jax.Array, ids: jax.Array) -> jax.Array:
    """``w`` ``(C, N)`` uint32 for replicate words ``(C,)`` and ids ``(N,)`` (below
    ``2**32``) or ``(N, 2)`` uint32 (high, low)."""
    if ids.ndim == 2:
        high, low = ids[:, 0].astype(jnp.uint32), ids[:, 1].astype(jnp.uint32)
    else:
        low = ids.astype(jnp.uint32)
        high = jnp.zeros_like(low)
    return _mix(_mix(words[:, None] + low[None]) + high[None])


def reference_weights(seed: int, ids, n_replicates: int, thresholds) -> np.ndarray:
    """Multiplicities ``(B, N)`` computed with Python ints (a test oracle)."""
    out = np.zeros((n_replicates, len(ids)), np.int32)
    for b in range(n_replicates):
        h = replicate_word(seed, b)
        for i, key in enumerate(ids):
            out[b, i] = int(np.sum(row_word_int(h, int(key)) >= np.asarray(thresholds, np.int64)))
    return out

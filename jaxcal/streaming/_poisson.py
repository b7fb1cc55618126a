"""Poisson bootstrap keyed by example id: B replicate states that merge by sum.

The resampling bootstrap draws N indices from the whole data set, which a stream split
over batches, devices and machines never has in one place. The Poisson bootstrap (Hanley
& MacGibbon 2006; Chamandy et al. 2012, the bootstrap at Google's scale) gives each
example an independent Poisson(1) multiplicity in each replicate instead, so each
replicate is a weighted stream, i.e. one more :class:`~jaxcal.streaming.CalibrationState`, and the B
replicate states merge by addition like the state itself.

Reproducibility: the multiplicity of example ``id`` in replicate b is a function of
(key, id, b) alone, a counter-based Threefry-2x32 draw (the words of
``jaxcal/_core/random.py``): replicates 2q and 2q + 1 take the two words of
``threefry2x32(seed_q, (id_high, id_low))``, seed_q the q-th seed of ``key``. Whatever
the sharding, batching or order of the stream, every example gets the same weights, so
the intervals are the same numbers. (TensorFlow Model Analysis draws its Poisson weights
from per-worker random state: its intervals change with the partitioning.)

A word w becomes k = #{j : w >= T_j}, T_j = floor(2**32 P(X <= j)) for X ~ Poisson(1),
j = 0..11: P(k) matches the Poisson pmf to within 2**-32 (P(X >= 12) < 2**-32 is cut).

``generator="hash"`` draws the words from a 32-bit integer hash of (seed, id, replicate)
instead (``jaxcal/streaming/_hash.py``), written with operations every SQL engine has, so
that :func:`jaxcal.sql.state_query` draws the same replicate weights in a warehouse. The
default stays ``"threefry"``.
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.checks import check_option, check_positive_int, check_probs_labels
from jaxcal._core.random import resample_seeds, threefry2x32
from jaxcal.metrics._ece import AVERAGES, check_norm
from jaxcal.streaming._hash import replicate_words, row_words
from jaxcal.streaming._replicates import replicate_sums
from jaxcal.streaming._state import (
    CalibrationState,
    _compute_kernel,
    add_batch,
    check_bins,
    check_state,
    init,
    mask_padding,
)

_MAX_COUNT = 12
#: floor(2**32 P(X <= j)) for X ~ Poisson(1), j = 0..11.
_THRESHOLDS = np.array(
    [
        math.floor(2**32 * sum(math.exp(-1) / math.factorial(i) for i in range(j + 1)))
        for j in range(_MAX_COUNT)
    ],
    dtype=np.uint32,
)


def poisson_counts(words: jax.Array) -> jax.Array:
    """Poisson(1) draws (int32) from uniform uint32 words, by the inverse CDF."""
    counts = jnp.zeros(words.shape, jnp.int32)
    for t in _THRESHOLDS:  # twelve fused compares, no (..., 12) intermediate
        counts = counts + (words >= t).astype(jnp.int32)
    return counts


#: The replicate weights' generators (``poisson_update``'s ``generator``).
GENERATORS = ("threefry", "hash")


def poisson_weights(
    key: jax.Array, ids: jax.Array, n_replicates: int, generator: str = "threefry"
) -> jax.Array:
    """Multiplicities ``(B, N)`` int32 of the examples ``ids`` in the B replicates.

    ``ids``: ``(N,)`` non-negative integers below 2**32, or ``(N, 2)`` uint32 (high, low)
    words of larger ids. A function of (key, id, replicate) alone.
    """
    if generator == "hash":
        return poisson_counts(row_words(replicate_words(key, n_replicates), ids))
    seeds = resample_seeds(key, -(-n_replicates // 2))  # (Q, 2)
    return seeded_weights(seeds, ids)[:n_replicates]


def seeded_weights(seeds: jax.Array, ids: jax.Array) -> jax.Array:
    """Multiplicities ``(2Q, N)`` int32 of replicates 2q and 2q + 1 for seeds ``(Q, 2)``
    of ``resample_seeds()`` (seed q of a key is the same whatever the
    number asked, so a run of seeds gives those replicates' weights alone)."""
    if ids.ndim == 2:
        high, low = ids[:, 0].astype(jnp.uint32), ids[:, 1].astype(jnp.uint32)
    else:
        low = ids.astype(jnp.uint32)
        high = jnp.zeros_like(low)
    w0, w1 = threefry2x32(seeds[:, :1], seeds[:, 1:], high[None], low[None])
    return poisson_counts(jnp.stack([w0, w1], axis=1).reshape(-1, ids.shape[0]))


def poisson_init(n_bins: int, num_classes: int, n_replicates: int, **options) -> CalibrationState:
    """B empty replicate states: a :class:`~jaxcal.streaming.CalibrationState` whose arrays have a leading
    axis B (``options`` as :func:`~jaxcal.streaming.init`). Merge two with :func:`~jaxcal.streaming.merge`-like addition
    (``jax.tree_util.tree_map(jnp.add, a, b)``) or ``jax.lax.psum``.

    Example:
      >>> from jaxcal import streaming
      >>> reps = streaming.poisson_init(15, 2, 100, binary=True)
      >>> reps.top_count.shape
      (100, 2, 15)
    """
    n_replicates = check_positive_int("n_replicates", n_replicates)
    state = init(n_bins, num_classes, **options)
    return jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (n_replicates, *x.shape)), state)


def _replicates(states: Any) -> CalibrationState:
    states = check_state(states, "states")
    if states.totals.ndim != 2:
        raise ValueError(
            "`states` must be replicate states from poisson_init (a leading axis B); got a "
            "single state."
        )
    return states


#: Replicates whose weighted sums are computed together (memory: N x this many floats
#: per summed quantity). Even: a seed draws two replicates.
REPLICATE_CHUNK = 16


def chunked_sums(sums_of, key, ids, weights, n_replicates, dtype, generator="threefry"):
    """``sums_of(w)`` for the Poisson weights ``w`` ``(C, N)`` of each chunk of C replicates,
    each output with its leading C axes joined into one of B = ``n_replicates``.

    Each chunk draws its own replicates' weights (``seeded_weights()``), so only C x N
    weights are alive at a time, never B x N; a last chunk past B computes replicates that
    are dropped. ``weights``: the rows' ``(N,)`` weights (padding 0), or None.
    ``generator``: ``"threefry"`` or ``"hash"`` (module docstring).
    """
    chunk = min(REPLICATE_CHUNK, n_replicates + n_replicates % 2)
    n_chunks = -(-n_replicates // chunk)
    if generator == "hash":
        seeds = replicate_words(key, n_chunks * chunk).reshape(n_chunks, chunk)
    else:
        seeds = resample_seeds(key, n_chunks * chunk // 2).reshape(n_chunks, chunk // 2, 2)

    def draw(chunk_seeds):
        if generator == "hash":
            return poisson_counts(row_words(chunk_seeds, ids))
        return seeded_weights(chunk_seeds, ids)

    def one_chunk(chunk_seeds):
        w = draw(chunk_seeds).astype(dtype)
        return sums_of(w if weights is None else w * weights.astype(dtype)[None, :])

    sums = jax.lax.map(one_chunk, seeds)
    return jax.tree_util.tree_map(lambda x: x.reshape(-1, *x.shape[2:])[:n_replicates], sums)


@partial(jax.jit, static_argnames="generator")
def _poisson_update_kernel(states, probs, labels, weights, ids, key, generator="threefry"):
    probs, labels, weights = mask_padding(states, probs, labels, weights)

    def sums_of(w):
        return replicate_sums(probs, labels, w, states.resolution, states.closed, states.binary)

    n = states.totals.shape[0]
    sums = chunked_sums(sums_of, key, ids, weights, n, states.dtype, generator)
    return jax.vmap(add_batch)(states, sums)


def poisson_update(
    states: CalibrationState,
    probs: Any,
    labels: Any,
    ids: Any,
    *,
    key: jax.Array,
    weights: Any = None,
    generator: str = "threefry",
) -> CalibrationState:
    """Add a batch to the B replicate states, example ``ids[i]`` with its Poisson weight.

    Args:
      states: from :func:`~jaxcal.streaming.poisson_init` (or a previous ``poisson_update``).
      probs, labels, weights: as :func:`~jaxcal.streaming.update` (the Poisson multiplicity multiplies the
        weight; an example drawn 0 times is absent from that replicate).
      ids: ``(N,)`` non-negative integer ids, unique over the whole stream (e.g. the row
        number in the data set), below 2**32; or ``(N, 2)`` uint32 (high, low) words.
      key: a JAX key, the same for every batch, shard and machine of the stream.
      generator: ``"threefry"`` (default: Threefry-2x32 words) or ``"hash"``: the 32-bit
        integer hash that SQL engines draw too (:func:`jaxcal.sql.state_query` with
        ``row_key``), for ``key = jax.random.key(seed)``; see the module docstring.

    Returns:
      The updated replicate states. The same data give the same states whatever the
      batching, order or sharding (up to float round-off in the sums; counts exactly).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jaxcal import streaming
      >>> p, y = jnp.array([0.1, 0.4, 0.8, 0.9]), jnp.array([0, 1, 1, 1])
      >>> key = jax.random.key(0)
      >>> whole = streaming.poisson_update(streaming.poisson_init(2, 2, 8, binary=True),
      ...                                  p, y, jnp.arange(4), key=key)
      >>> parts = streaming.poisson_init(2, 2, 8, binary=True)
      >>> for i in (3, 1, 0, 2):  # another order, one example at a time
      ...     parts = streaming.poisson_update(parts, p[i:i + 1], y[i:i + 1],
      ...                                      jnp.array([i]), key=key)
      >>> bool(jnp.array_equal(whole.class_count, parts.class_count))
      True
    """
    states = _replicates(states)
    check_option("generator", generator, GENERATORS)
    probs, labels, weights, ids = check_batch(states, probs, labels, ids, weights)
    return _poisson_update_kernel(states, probs, labels, weights, ids, key, generator)


def check_batch(states: CalibrationState, probs, labels, ids, weights):
    """A replicate update's batch checked against ``states``: ``(probs, labels, weights,
    ids)`` as arrays, or a ValueError naming the argument."""
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    fits = probs.ndim == 1 if states.binary else probs.shape[1:] == (states.num_classes,)
    if not fits:
        raise ValueError(
            f"`probs` of shape {probs.shape} does not fit the states (binary={states.binary}, "
            f"num_classes={states.num_classes})."
        )
    ids = jnp.asarray(ids)
    integer = jnp.issubdtype(ids.dtype, jnp.integer)
    if ids.shape[:1] != probs.shape[:1] or ids.ndim not in (1, 2) or not integer:
        raise ValueError(
            f"`ids` must be (N,) integers (or (N, 2) uint32 words) with N = {probs.shape[0]}; "
            f"got shape {ids.shape} and dtype {ids.dtype}."
        )
    return probs, labels, weights, ids


@partial(jax.jit, static_argnames=("norm", "debias", "average"))
def _poisson_compute_kernel(states, norm, debias, average):
    return jax.vmap(lambda s: _compute_kernel(s, norm, debias, average))(states)


def poisson_compute(
    states: CalibrationState, *, n_bins: int | None = None, **options
) -> dict[str, jax.Array]:
    """:func:`~jaxcal.streaming.compute` of every replicate: a dict of ``(B,)`` arrays (``options``:
    ``norm``, ``debias``, ``average``).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jaxcal import streaming
      >>> reps = streaming.poisson_update(streaming.poisson_init(2, 2, 8, binary=True),
      ...     jnp.array([0.1, 0.4, 0.8, 0.9]), jnp.array([0, 1, 1, 1]), jnp.arange(4),
      ...     key=jax.random.key(0))
      >>> streaming.poisson_compute(reps)["brier"].shape
      (8,)
    """
    states = _replicates(states)
    n_bins = check_bins(states, n_bins)
    norm, debias = options.pop("norm", "l1"), options.pop("debias", False)
    average = options.pop("average", "label")
    if options:
        raise ValueError(f"unknown options {sorted(options)}; use norm, debias, average.")
    check_norm(norm, debias)
    check_option("average", average, AVERAGES)
    states = dataclasses.replace(states, closed="right", n_bins=n_bins)
    return _poisson_compute_kernel(states, norm, debias, average)


def poisson_interval(
    states: CalibrationState, *, confidence: float = 0.95, **options
) -> dict[str, jax.Array]:
    """Percentile intervals ``(2,)`` (low, high) of every :func:`~jaxcal.streaming.compute` output over the
    replicates (``options`` as :func:`~jaxcal.streaming.poisson_compute`).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jaxcal import streaming
      >>> p = jax.random.uniform(jax.random.key(1), (1000,))
      >>> y = (jax.random.uniform(jax.random.key(2), (1000,)) < p).astype(jnp.int32)
      >>> reps = streaming.poisson_update(streaming.poisson_init(15, 2, 200, binary=True),
      ...                                 p, y, jnp.arange(1000), key=jax.random.key(0))
      >>> low, high = streaming.poisson_interval(reps)["brier"].tolist()
      >>> low < float(jnp.mean((p - y) ** 2)) < high
      True
    """
    if not 0 < confidence < 1:
        raise ValueError(f"`confidence` must be in (0, 1); got {confidence}.")
    values = poisson_compute(states, **options)
    levels = jnp.array([(1 - confidence) / 2, (1 + confidence) / 2])
    return {name: jnp.quantile(v.astype(levels.dtype), levels) for name, v in values.items()}

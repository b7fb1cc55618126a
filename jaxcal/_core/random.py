"""Counter-based random draws of the resampling procedures: words, indices and labels.

Random numbers. On XLA:CPU the cost of the resampling procedures is the random numbers
(10^8 of them for 1000 resamples of 10^5 labels), and ``jax.random`` is slow there: its
Threefry-2x32 runs as a rolled loop over whole arrays (``jax.random.bernoulli``: 1.0
CPU-seconds for 10^8 labels on this project's CPU) and the ``rbg``/``unsafe_rbg``
implementations call XLA's RngBitGenerator, which does not fuse (1.2-1.3 CPU-s; see
``benchmarks/bench_bootstrap.py``). This module evaluates the *same* Threefry-2x32
function (20 rounds, Salmon et al. 2011; bit-identical to
``jax.extend.random.threefry2x32_p``) unrolled in ``jnp`` operations, so that XLA fuses
it with the comparison that turns the words into labels and vectorises the whole loop
(0.21 CPU-s with one label per block, 0.10 CPU-s with two). Each Threefry block yields
two 32-bit words and both are used: the stream of a resample with key ``k`` is word
``2j + w`` = word ``w`` of ``threefry2x32(key_data(k), (0, j))``, which is
``jax.random.bits(k, (n // 2,), jnp.uint64)`` read as big-endian pairs of 32-bit words.
(Keys of other implementations, e.g. ``rbg``, are first folded into a Threefry key; see
``seed_words()``.)

Labels. A probability p becomes the threshold t = floor(p * 2**32) (t = 2**32 - 1 for
p = 1, meaning "always") and a label is 1 when the word is below t: P(label = 1) = p to
within 2**-32 (exactly for float32 p >= 2**-9), against 2**-23 for
``jax.random.bernoulli``. A row of K class probabilities draws its class with *one* word
compared with the K - 1 thresholds of the row's normalised cumulative sums (a binary
search when K > 16), never with K draws.

Pairing. The two words of a block go to two samples, taken in order of increasing score
(the probability of the positive class, or the top-label confidence): samples 2j and
2j + 1 of that order share block j (``LabelPlan``). Neighbours in score share a
bin, which the fast path of the binned metrics uses (``jaxcal/stats/_resampling/binned_null.py``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.numerics import compute_dtype
from jaxcal._core.sort import argsort

#: The largest word: as a threshold it means "always" (a probability of 1).
MAX_WORD = np.uint32(0xFFFFFFFF)

#: Up to this many classes a categorical draw compares the word with every threshold of
#: the row; beyond it, a binary search over the row's cumulative thresholds.
_COMPARE_ALL_MAX_CLASSES = 16

_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


# --------------------------------------------------------------------------------------
# Random words: Threefry-2x32 (20 rounds), unrolled so that XLA fuses and vectorises it.


def _rotl(x: jax.Array, r: int) -> jax.Array:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def threefry2x32(k0, k1, x0, x1) -> tuple[jax.Array, jax.Array]:
    """Threefry-2x32 of the counters ``(x0, x1)`` under the key ``(k0, k1)`` (broadcasting).

    Salmon, Moraes, Dror & Shaw (2011), 20 rounds; the same function as JAX's
    ``threefry2x32_p`` (checked bit for bit in the tests).
    """
    ks = (k0, k1, k0 ^ k1 ^ np.uint32(0x1BD11BDA))
    x0 = x0 + ks[0]
    x1 = x1 + ks[1]
    for i in range(5):
        for r in _ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = _rotl(x1, r) ^ x0
        x0 = x0 + ks[(i + 1) % 3]
        x1 = x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1


def blocks(seeds: jax.Array, counters: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Words ``(2j, 2j + 1)`` of the streams of ``seeds`` ``(b, 2)`` at blocks ``counters``.

    Returns two uint32 arrays of shape ``(b,) + counters.shape``.
    """
    c = counters[None]
    k0 = seeds[:, 0].reshape((-1,) + (1,) * counters.ndim)
    k1 = seeds[:, 1].reshape((-1,) + (1,) * counters.ndim)
    return threefry2x32(k0, k1, jnp.zeros_like(c), c)


def words(seeds: jax.Array, n: int) -> jax.Array:
    """The first ``n`` words of the streams of ``seeds`` ``(b, 2)``: uint32 ``(b, n)``."""
    half = -(-n // 2)
    w0, w1 = blocks(seeds, jnp.arange(half, dtype=jnp.uint32))
    return jnp.stack([w0, w1], axis=-1).reshape(seeds.shape[0], 2 * half)[:, :n]


def seed_words(keys: jax.Array) -> jax.Array:
    """Threefry key words ``(R, 2)`` uint32 of typed keys ``(R,)``.

    A Threefry key is its own key data. Other implementations' key data (4 words for
    ``rbg``) are folded into two words by Threefry itself: (k0, k1) <- threefry((k0, k1),
    (k2j, k2j+1)) for each further pair of words.
    """
    data = jax.random.key_data(keys).reshape(keys.shape[0], -1).astype(jnp.uint32)
    if data.shape[1] % 2:
        data = jnp.concatenate([data, jnp.zeros_like(data[:, :1])], axis=1)
    k0, k1 = data[:, 0], data[:, 1]
    for j in range(2, data.shape[1], 2):
        k0, k1 = threefry2x32(k0, k1, data[:, j], data[:, j + 1])
    return jnp.stack([k0, k1], axis=1)


def resample_seeds(key: jax.Array, n: int) -> jax.Array:
    """Threefry key words ``(n, 2)`` of the n resamples of ``key``.

    For a Threefry key these are the words of ``jax.random.split(key, n)`` (JAX's
    default, partitionable split: block r of the key's Threefry stream), computed by the
    fused Threefry, which compiles 2-3x faster than ``jax.random.split``'s rolled loop.
    Other implementations split with ``jax.random.split`` and fold (``seed_words()``).
    """
    if str(jax.random.key_impl(key)) != "threefry2x32":
        return seed_words(jax.random.split(key, n))
    data = jax.random.key_data(key)
    counter = jnp.arange(n, dtype=jnp.uint32)
    k0, k1 = threefry2x32(data[0], data[1], jnp.zeros_like(counter), counter)
    return jnp.stack([k0, k1], axis=1)


def split_seeds(seeds: jax.Array) -> jax.Array:
    """Two child seeds ``(R, 2, 2)`` of each seed ``(R, 2)``, as ``jax.random.split(k)``."""
    counter = jnp.arange(2, dtype=jnp.uint32)[None, :]
    k0, k1 = threefry2x32(seeds[:, :1], seeds[:, 1:], jnp.zeros_like(counter), counter)
    return jnp.stack([k0, k1], axis=2)


def mulhi(w: jax.Array, n: Any) -> jax.Array:
    """floor(w * n / 2**32) for uint32 ``w`` and 0 < n < 2**31, in 32-bit arithmetic.

    Lemire's multiply-shift map of a word to [0, n): each value has probability
    floor(2**32 / n) or ceil(2**32 / n) over 2**32 (relative bias below n / 2**32).
    ``n``: a Python int, or a traced integer scalar (padded inputs: the number of real
    rows, unknown when the program is compiled).
    """
    m = np.uint32(0xFFFF)
    a_lo, a_hi = w & m, w >> np.uint32(16)
    if isinstance(n, (int, np.integer)):
        b_lo, b_hi = np.uint32(n & 0xFFFF), np.uint32(n >> 16)
    else:
        n = jnp.asarray(n).astype(jnp.uint32)
        b_lo, b_hi = n & m, n >> np.uint32(16)
    lh, hl = a_lo * b_hi, a_hi * b_lo
    mid = ((a_lo * b_lo) >> np.uint32(16)) + (lh & m) + (hl & m)
    hi = a_hi * b_hi + (lh >> np.uint32(16)) + (hl >> np.uint32(16)) + (mid >> np.uint32(16))
    return hi.astype(jnp.int32)


def indices(seeds: jax.Array, n: int, rows: Any = None) -> jax.Array:
    """``(b, n)`` int32 indices drawn uniformly with replacement from [0, n).

    ``rows``: on inputs padded to ``n`` rows, the traced number of real rows; the indices
    are then drawn from [0, rows), and the first ``rows`` positions of each resample are
    those of the unpadded draw (word k of a stream does not depend on its length).
    Positions from ``rows`` on are not part of the resample: callers give them weight 0
    (:func:`real_positions`).
    """
    return mulhi(words(seeds, n), n if rows is None else rows)


def real_positions(n: int, rows: Any, dtype: Any) -> jax.Array:
    """``(n,)`` weights of the positions of a resample drawn by ``indices(seeds, n, rows)``:
    1 for the first ``rows``, 0 for the padding positions after them."""
    return (jnp.arange(n) < rows).astype(dtype)


def multiplicities(idx: jax.Array, n: int, dtype, real: jax.Array | None = None) -> jax.Array:
    """How often each of the n samples occurs among the drawn indices ``idx`` ``(N,)``
    (only the positions where ``real`` is 1, when given: padded inputs)."""
    ones = jnp.ones(idx.shape, dtype) if real is None else real
    return jax.ops.segment_sum(ones, idx, n)


# --------------------------------------------------------------------------------------
# Labels from probabilities.


def threshold(p: jax.Array) -> jax.Array:
    """uint32 t with P(word < t) = p to within 2**-32; ``MAX_WORD`` means "always"."""
    dtype = compute_dtype(p.dtype)
    p = jnp.clip(p.astype(dtype), 0, 1)
    one = p >= 1
    scaled = jnp.floor(jnp.where(one, 0, p) * np.asarray(2.0**32, dtype))
    return jnp.where(one, MAX_WORD, scaled.astype(jnp.uint32))


def below(w: jax.Array, t: jax.Array) -> jax.Array:
    """Whether word ``w`` falls below threshold ``t`` (always, for ``t == MAX_WORD``)."""
    return (w < t) | (t == MAX_WORD)


def class_thresholds(probs: jax.Array) -> jax.Array:
    """``(N, K - 1)`` thresholds of the rows' cumulative sums, normalised to end at 1."""
    dtype = compute_dtype(probs.dtype)
    c = jnp.cumsum(probs.astype(dtype), axis=1)
    total = c[:, -1:]
    total = jnp.where(total > 0, total, 1)
    return threshold(c[:, :-1] / total)


def label_thresholds(probs: jax.Array) -> jax.Array:
    """Thresholds ``(N,)`` of 1-D ``probs``, or ``(N, K - 1)`` of the rows of 2-D ones."""
    return threshold(probs) if probs.ndim == 1 else class_thresholds(probs)


def _categorical(w: jax.Array, thresholds: jax.Array) -> jax.Array:
    """Class of each word: the number of cumulative thresholds at or below it.

    ``w`` ``(b, n)``, ``thresholds`` ``(n, K - 1)``; returns int32 ``(b, n)``.
    """
    km1 = thresholds.shape[1]
    if km1 == 0:
        return jnp.zeros(w.shape, jnp.int32)
    if km1 <= _COMPARE_ALL_MAX_CLASSES:
        above = ~below(w[..., None], thresholds[None])
        return above.sum(axis=-1, dtype=jnp.int32)
    # Binary search for the first threshold above the word (the predicate is monotone).
    lo = jnp.zeros(w.shape, jnp.int32)
    hi = jnp.full(w.shape, km1, jnp.int32)
    rows = jnp.arange(thresholds.shape[0], dtype=jnp.int32)[None, :]
    for _ in range(int(np.ceil(np.log2(km1 + 1)))):
        mid = (lo + hi) // 2
        t = thresholds[rows, jnp.minimum(mid, km1 - 1)]
        go_right = (mid < km1) & ~below(w, t)
        lo = jnp.where(go_right, mid + 1, lo)
        hi = jnp.where(go_right, hi, mid)
    return lo


def draw(w: jax.Array, thresholds: jax.Array) -> jax.Array:
    """Labels (int32, shape of ``w``) for 1-D thresholds ``(n,)`` or rows ``(n, K - 1)``."""
    if thresholds.ndim == 1:
        return below(w, thresholds[None]).astype(jnp.int32)
    return _categorical(w, thresholds)


class LabelPlan(NamedTuple):
    """Where each sample's word comes from: position ``rank`` of the score order."""

    thresholds: jax.Array  # (N,) or (N, K - 1), in the samples' order
    block: jax.Array  # (N,) uint32: rank // 2, the Threefry block of the sample
    second: jax.Array  # (N,) bool: rank % 2 == 1, the sample takes the block's second word


def label_plan(probs: jax.Array, scores: jax.Array) -> LabelPlan:
    """The plan of consistency-resampled labels of ``probs`` paired in order of ``scores``.

    ``scores`` ``(N,)`` are those the binned metrics bin (the positive-class probability,
    or the top-label confidence: ``scores_and_targets()``), so that
    the two samples of a block are neighbours in score.
    """
    n = probs.shape[0]
    order = argsort(scores)
    rank = jnp.zeros(n, jnp.uint32).at[order].set(jnp.arange(n, dtype=jnp.uint32))
    return LabelPlan(label_thresholds(probs), rank >> np.uint32(1), (rank & np.uint32(1)) == 1)


def resampled_labels(seeds: jax.Array, plan: LabelPlan) -> jax.Array:
    """Consistency-resampled labels ``(b, N)`` of the samples, in their original order.

    Sample i draws from word rank(i) of each stream (its position in score order). Each
    sample evaluates its own Threefry block (elementwise and vectorised; gathering from
    a stream laid out in score order would be a scattered, unvectorised read).
    """
    w0, w1 = blocks(seeds, plan.block)
    return draw(jnp.where(plan.second[None], w1, w0), plan.thresholds)

"""Fast path of consistency resampling for binned metrics: per-bin counts of resampled hits.

The consistency resamples draw the labels of two neighbours in score from one Threefry
block (``jaxcal/_core/random.py``), and neighbours in score share a bin. So for a binned
metric the per-bin counts of hits (positive labels, or correct top labels) of a whole
batch of resamples are one int8 matrix product, with no scatter (``hit_counts()``);
the metric then follows from the observed per-bin sums with the resampled hit counts in
place of the observed ones (``ece_from_counts()``). These are the same labels the
generic path draws, so the same per-bin counts; the final float arithmetic may differ in
the last bit. :func:`jaxcal.consistency_test` takes this path for a metric that declares
its binned form; :func:`jaxcal.consistency_bands` always does.

Declaration. A metric declares its binned form with the attribute ``binned_form``: the
keyword options of :func:`jaxcal.ece` it fixes, meaning ``metric(probs, labels, **kw) ==
jaxcal.ece(probs, labels, **binned_form, **kw)`` for the options ``kw`` of ``ece`` that
its signature takes (``ece.binned_form = {}``, ``mce.binned_form = {"norm": "max"}``,
set in ``jaxcal/metrics/_ece.py``). ``binned_spec()`` reads it through ``functools.partial``
(whose keywords it collects) and ``jax.jit`` wrappers (``__wrapped__``). Any other
wrapper takes the generic path, even one made by ``functools.wraps``, which copies the
attribute: it may change the value. Nothing is recognised by identity, and the generic
path gives the same result, only slower.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.binning import BinStats, check_binning
from jaxcal._core.confidence import scores_and_targets
from jaxcal._core.random import MAX_WORD, below, blocks, class_thresholds, threshold
from jaxcal._core.sort import argsort
from jaxcal.metrics._ece import binned_stats, check_norm, ece, gap_norm

#: With ``batch_size=None`` a batch of the fast path holds about this many labels (its
#: batches hold only int8 pair counts; the generic path's hold 2**20).
AUTO_BATCH_LABELS_FAST = 2**23

#: The options of :func:`jaxcal.ece` that a binned form may set.
OPTIONS = ("n_bins", "binning", "norm", "closed", "debias")
_DEFAULTS = {
    name: p.default for name, p in inspect.signature(ece).parameters.items() if name in OPTIONS
}


class BinnedSpec(NamedTuple):
    """The options of the binned metric (a hashable static argument)."""

    n_bins: int
    binning: str
    norm: str
    closed: str
    debias: bool


def _declared(metric: Any) -> tuple[Any, dict[str, Any], dict[str, Any]] | None:
    """``(function, its binned_form, keywords bound by partials)``, or None (undeclared)."""
    keywords: dict[str, Any] = {}
    fn = metric
    while True:
        if isinstance(fn, functools.partial):
            if fn.args:
                return None
            keywords = {**fn.keywords, **keywords}  # an outer partial's keywords win
            fn = fn.func
        elif isinstance(fn, jax.stages.Wrapped) and hasattr(fn, "__wrapped__"):
            fn = fn.__wrapped__
        elif hasattr(fn, "__wrapped__"):
            return None
        else:
            break
    form = getattr(fn, "binned_form", None)
    return None if form is None else (fn, dict(form), keywords)


def binned_spec(metric: Any) -> BinnedSpec | None:
    """The validated options of ``metric``'s declared binned form, or None (generic path).

    None also when the bound keywords are not options of ``ece`` that the function takes
    and its form leaves free (e.g. ``norm`` for :func:`jaxcal.mce`), or include weights:
    the metric itself then runs, and says what is wrong. Options not bound take the
    function's defaults, else those of ``ece``.

    Example:
      >>> from functools import partial
      >>> import jax, jaxcal
      >>> binned_spec(jax.jit(partial(jaxcal.mce, n_bins=10)))
      BinnedSpec(n_bins=10, binning='uniform', norm='max', closed='right', debias=False)
      >>> binned_spec(lambda p, y: jaxcal.ece(p, y)) is None
      True
    """
    declared = _declared(metric)
    if declared is None:
        return None
    fn, form, keywords = declared
    params = inspect.signature(fn).parameters
    free = {name for name in OPTIONS if name in params} - set(form)
    if keywords.pop("weights", None) is not None or set(keywords) - free:
        return None
    defaults = {n: params[n].default for n in free if params[n].default is not params[n].empty}
    options = {**_DEFAULTS, **defaults, **keywords, **form}
    if options["n_bins"] == "cube_root":  # resolved per call by the metric itself
        return None
    n_bins = check_binning(options["n_bins"], options["binning"], options["closed"])
    check_norm(options["norm"], options["debias"])
    return BinnedSpec(
        n_bins, options["binning"], options["norm"], options["closed"], bool(options["debias"])
    )


class HitPlan(NamedTuple):
    """Per-pair data of the fast path; pair j = positions (2j, 2j + 1) in score order."""

    lo_a: jax.Array | None  # (H,) uint32: position 2j is a hit when lo <= word < hi
    hi_a: jax.Array  # (binary: lo is None, a hit is word < hi)
    lo_b: jax.Array | None  # (H,) the same for position 2j + 1
    hi_b: jax.Array
    onehot: jax.Array | None  # (H, M) int8: bin of position 2j (M <= DENSE_MAX_BINS)
    bounds: jax.Array | None  # (M + 1,) int32: bin m holds pairs [bounds_m, bounds_m+1)
    straddle: jax.Array  # (M - 1,) uint32: the pair across the edge before bin m (if any)
    straddle_lo: jax.Array | None  # (M - 1,) thresholds of its second position
    straddle_hi: jax.Array
    crossing: jax.Array  # (M - 1,) bool: a pair straddles the edge before bin m


#: Up to this many bins the pairs' hits are counted per bin by one int8 matrix product
#: with the (H, M) one-hot bins (fast for the usual 10-20 bins); beyond, by differences
#: of their cumulative sum at the bins' bounds, in O(N + M) memory per resample: the
#: matrix was O(N M) and the straddle moves O(M^2), 40 GB at 1e5 bins (D09).
DENSE_MAX_BINS = 64


def hit_plan(
    probs: jax.Array,
    scores: jax.Array,
    groups: jax.Array | None,
    counts: jax.Array,
    rows: jax.Array | None = None,
) -> HitPlan:
    """Pairs, thresholds and bins for counting hits (positives, or correct top labels).

    Args:
      probs: ``(N,)`` or ``(N, K)`` predictions.
      scores: ``(N,)`` the binned scores (``scores_and_targets()``).
      groups: ``(N,)`` predicted classes for 2-D ``probs`` (a hit is drawing that class),
        None for 1-D (a hit is a positive label).
      counts: ``(M,)`` int32 samples per bin.
      rows: padded inputs: the traced number of real rows, which come first (the rest
        weigh 0 and are not in ``counts``). They are sorted after every real row and
        never hit, so the pairs of the real rows, and their words, are the unpadded ones.
    """
    n, n_bins = probs.shape[0], counts.shape[0]
    real = None if rows is None else jnp.arange(n) < rows
    order = argsort(scores if real is None else jnp.where(real, scores, jnp.inf))
    if groups is None:  # a hit is a positive label: word < hi
        lo = None
        hi = threshold(probs)
    else:  # correct iff the drawn class is the predicted one: lo <= word < hi
        t = class_thresholds(probs)
        t = jnp.concatenate(
            [jnp.zeros((n, 1), jnp.uint32), t, jnp.full((n, 1), MAX_WORD, jnp.uint32)], axis=1
        )
        lo = jnp.take_along_axis(t, groups[:, None], axis=1)[:, 0]
        hi = jnp.take_along_axis(t, groups[:, None] + 1, axis=1)[:, 0]
    pad = n % 2  # a padding position: never a hit, in the same bin as its partner

    def arrange(x):
        x = x[order]
        return jnp.concatenate([x, jnp.zeros(1, x.dtype)]) if pad else x

    if real is not None:  # a padding row never hits (its threshold 0: never below it)
        hi = jnp.where(real, hi, jnp.zeros((), hi.dtype))
    lo = None if lo is None else arrange(lo)
    hi = arrange(hi)
    # Scores are sorted and bins are monotone in the score, so the positions of bin m are
    # [start_m, end_m) with end_m = #{bin <= m}: the bins of the pairs follow from the
    # counts. When pos_m = #{bin < m} is odd, pair (pos_m - 1) // 2 straddles the edge
    # before bin m and its second sample moves from bin m - 1 to bin m; a pair across
    # several edges moves once per edge, which adds up to its own bin.
    end = jnp.cumsum(counts, dtype=jnp.int32)
    if n_bins <= DENSE_MAX_BINS:
        first = 2 * jnp.arange(hi.shape[0] // 2, dtype=jnp.int32)[:, None]
        onehot = ((first >= (end - counts)[None, :]) & (first < end[None, :])).astype(jnp.int8)
        bounds = None
    else:  # pair j is in the bin of position 2j: bin m holds pairs ceil(start/2)..ceil(end/2)
        onehot = None
        bounds = (jnp.concatenate([jnp.zeros(1, jnp.int32), end]) + 1) // 2
    pos = end[:-1]
    crossing = (pos % 2) == 1
    pair = jnp.where(crossing, (pos - 1) // 2, 0)
    second_lo = None if lo is None else lo[1::2][pair]
    return HitPlan(
        None if lo is None else lo[0::2],
        hi[0::2],
        None if lo is None else lo[1::2],
        hi[1::2],
        onehot,
        bounds,
        pair.astype(jnp.uint32),
        second_lo,
        hi[1::2][pair],
        crossing,
    )


def _hit(w: jax.Array, lo: jax.Array | None, hi: jax.Array) -> jax.Array:
    """Whether word ``w`` draws a hit: ``lo <= w < hi`` (``lo`` None: ``w < hi``)."""
    below_hi = below(w, hi[None])
    return below_hi if lo is None else ~below(w, lo[None]) & below_hi


def hit_counts(seeds: jax.Array, plan: HitPlan) -> jax.Array:
    """int32 ``(b, M)`` per-bin hit counts of a batch of resamples ``seeds`` ``(b, 2)``."""
    half = plan.hi_a.shape[0]
    w0, w1 = blocks(seeds, jnp.arange(half, dtype=jnp.uint32))
    # Both words of a block are consumed by one fused expression (each block is computed
    # once); both samples of a pair are counted in the bin of the first ...
    pair = _hit(w0, plan.lo_a, plan.hi_a).astype(jnp.int8) + _hit(w1, plan.lo_b, plan.hi_b).astype(
        jnp.int8
    )
    if plan.onehot is not None:
        counts = jnp.dot(pair, plan.onehot, preferred_element_type=jnp.int32)
    else:
        cum = jnp.cumsum(pair, axis=1, dtype=jnp.int32)
        cum = jnp.concatenate([jnp.zeros((cum.shape[0], 1), jnp.int32), cum], axis=1)
        counts = cum[:, plan.bounds[1:]] - cum[:, plan.bounds[:-1]]
    # ... and the second sample of the few pairs across a bin edge is moved to its own bin:
    # + 1 in bin m, - 1 in bin m - 1 for a hit across the edge before bin m.
    _, s1 = blocks(seeds, plan.straddle)
    moved = jnp.where(plan.crossing, _hit(s1, plan.straddle_lo, plan.straddle_hi), False)
    moved = moved.astype(jnp.int32)
    zero = jnp.zeros((moved.shape[0], 1), jnp.int32)
    return counts + jnp.concatenate([zero, moved], axis=1) - jnp.concatenate([moved, zero], axis=1)


class BinnedResampling(NamedTuple):
    """The data binned once: edges ``(M + 1,)``, per-bin sums ``(1, M)`` and the hit plan."""

    edges: jax.Array
    stats: BinStats
    plan: HitPlan


def binned_resampling(
    probs: jax.Array,
    labels: jax.Array | None,
    n_bins: int,
    binning: str,
    closed: str,
    weights: jax.Array | None = None,
    rows: jax.Array | None = None,
) -> BinnedResampling:
    """Bins the scores of ``probs`` as :func:`jaxcal.ece` does and plans the hit counts.

    ``labels`` None (consistency bands: only drawn labels count) leaves the observed
    ``sum_target`` at 0. ``weights`` and ``rows``: padded inputs only (1 on the first
    ``rows`` rows, 0 after; see ``hit_plan``).
    """
    scores, targets, groups = scores_and_targets(probs, labels)
    edges, stats = binned_stats(scores, targets, weights, n_bins, binning, closed)
    plan = hit_plan(probs, scores, groups, stats.count[0], rows)
    return BinnedResampling(edges, stats, plan)


def ece_from_counts(
    stats: BinStats, hits: jax.Array, norm: str, debias: bool
) -> tuple[jax.Array, jax.Array]:
    """ece/mce of the observed per-bin sums ``stats`` ``(1, M)`` and of each hit count row.

    Returns ``(observed, null)``: 0-d and ``(R,)`` for ``hits`` ``(R, M)``, all from the
    same vmapped arithmetic, so that exact ties compare equal.
    """
    dtype = stats.weight.dtype
    rows = jnp.concatenate([stats.sum_target.reshape(1, -1), hits.astype(dtype)])

    def one(h):
        resampled = stats._replace(sum_target=h.reshape(stats.sum_target.shape))
        return gap_norm(resampled, jnp.ones(1, dtype), norm, debias)

    values = jax.vmap(one)(rows)
    return values[0], values[1:]

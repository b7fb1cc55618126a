"""Consistency resampling of any metric, vmapped and batched, and what the bootstrap shares.

Every resample r gets its own key ``jax.random.split(key, n_resamples)[r]``; everything
drawn for it (labels, indices) is a function of that key alone, so the draws do not
depend on ``batch_size``. The results are then bitwise identical for any batch size
for ece/mce (integer per-bin counts, see below) and up to last-bit float differences
for other metrics (XLA may vectorise a metric's float reductions differently at another
vmap width); p-values count values within 100 eps of the statistic as ties, as
``scipy.stats.permutation_test`` does, so they do not see such differences.

The draws are counter-based Threefry words (``jaxcal/_core/random.py``). A metric that
declares a binned form (:func:`jaxcal.ece`, :func:`jaxcal.mce`) is computed from per-bin
counts of the resampled labels (``jaxcal/stats/_resampling/binned_null.py``): a fast path that returns
what calling the metric on the resampled labels returns (the same labels, so the same
per-bin counts; the final float arithmetic may differ in the last bit). Any other metric
is vmapped over the resampled labels. This module also holds what the bootstrap
intervals (``jaxcal/stats/_resampling/bootstrap.py``) and the consistency bands share: key and option
checks, batching, and the metric as a static argument.
"""

from __future__ import annotations

import functools
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.checks import check_option, check_positive_int, check_probs_labels
from jaxcal._core.confidence import scores_and_targets
from jaxcal._core.random import (
    draw,
    indices,
    label_plan,
    label_thresholds,
    resample_seeds,
    resampled_labels,
    split_seeds,
    words,
)
from jaxcal.stats._resampling.binned_null import (
    AUTO_BATCH_LABELS_FAST,
    binned_resampling,
    binned_spec,
    ece_from_counts,
    hit_counts,
)
from jaxcal.stats._result import summary_repr

#: With ``batch_size=None`` a batch holds about this many labels (resamples x N): 2**20
#: int32 labels are 4 MiB, a metric's temporaries a few times that. Small batches keep
#: a metric's scatters in cache (ece at N = 1e5: 0.24 CPU-s per 1000 resamples in
#: batches of 8, 0.45 in batches of 200).
AUTO_BATCH_LABELS = 2**20


# --------------------------------------------------------------------------------------
# Keys, batches, metrics.


def check_key(key: Any, *, seeds: bool = False) -> jax.Array:
    """A single typed PRNG key; raw ``uint32`` key data is wrapped (default impl).

    The statistical functions take keys only (``seeds=False``): randomness is explicit,
    and an int there is more likely a mistake (a seed meant for NumPy, a count). The plots
    (``seeds=True``) also take an int seed in [0, 2**63), their documented default 0
    giving the same figure on every call; one function checks both, so ``None``, a string
    or an out-of-range seed get the same message naming ``key`` everywhere (D18).
    """
    if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
        if not seeds:
            raise ValueError(
                f"`key` must be a JAX PRNG key; got the int {key}. Pass "
                f"jax.random.key({key}) to use it as a seed."
            )
        if not 0 <= int(key) < 2**63:
            raise ValueError(f"`key` as an int seed must lie in [0, 2**63); got {key}.")
        return jax.random.key(int(key))
    expected = "a JAX PRNG key (jax.random.key(seed))" + (" or an int seed" if seeds else "")
    if key is None or isinstance(key, (str, bytes, bool, float)):
        raise ValueError(f"`key` must be {expected}; got {key!r}.")
    try:
        arr = key if isinstance(key, jax.Array) else jnp.asarray(key)
    except (TypeError, ValueError, OverflowError) as err:
        raise ValueError(f"`key` must be {expected}; got {type(key).__name__}.") from err
    if jnp.issubdtype(arr.dtype, jax.dtypes.prng_key):
        if arr.shape != ():
            raise ValueError(f"`key` must be a single PRNG key; got key array shape {arr.shape}.")
        return arr
    if arr.dtype != jnp.uint32:
        raise ValueError(
            "`key` must be a JAX PRNG key (jax.random.key(seed) or jax.random.PRNGKey(seed)); "
            f"got an array of dtype {arr.dtype}."
        )
    try:
        return jax.random.wrap_key_data(arr)
    except (TypeError, ValueError) as err:
        raise ValueError(f"`key` is not valid PRNG key data: shape {arr.shape}.") from err


def check_n_resamples(n_resamples: Any) -> int:
    """``n_resamples``: an int >= 2 (D27).

    One resample gives a p-value of exactly 1 (``(1 + 1) / (1 + 1)`` whatever the data)
    and an interval of zero width: a procedure that cannot answer, so it is refused.
    """
    n_resamples = check_positive_int("n_resamples", n_resamples)
    if n_resamples < 2:
        raise ValueError(
            "`n_resamples` must be at least 2 (one resample gives p = 1 and an interval of "
            f"zero width whatever the data); got {n_resamples}. Use 1000 or more for real."
        )
    return n_resamples


def check_batch_size(batch_size: Any) -> int | None:
    """``batch_size``: None (automatic) or an int >= 1."""
    return None if batch_size is None else check_positive_int("batch_size", batch_size)


def batch_plan(
    n_resamples: int, batch_size: int | None, n: int, auto: int = AUTO_BATCH_LABELS
) -> tuple[int, int]:
    """(number of batches, batch) with batch <= batch_size, balanced to waste < n_batches."""
    if batch_size is None:
        batch_size = max(1, auto // max(n, 1))
    batch = min(batch_size, n_resamples)
    n_batches = -(-n_resamples // batch)
    return n_batches, -(-n_resamples // n_batches)


def map_batches(fn, xs: jax.Array, n_batches: int, batch: int, draw=None):
    """``fn`` over ``xs`` ``(R, ...)`` in ``n_batches`` sequential batches of ``batch``.

    With ``draw``, computes ``fn(draw(x))`` for each batch ``x``, where the draws (the
    random labels or indices) of batch i + 1 are made in loop iteration i and carried:
    a loop-carried value is a buffer, so XLA cannot fuse the (vectorised) Threefry of
    the draws into the metric's scatters and gathers, where it would run one scalar
    element at a time (3-4x slower). The last iteration's draw is wasted.
    """
    r = xs.shape[0]
    pad = n_batches * batch - r
    if pad:  # the padding resamples are computed and dropped
        xs = jnp.concatenate([xs, jnp.zeros((pad, *xs.shape[1:]), xs.dtype)])
    xs = xs.reshape(n_batches, batch, *xs.shape[1:])
    if draw is None:
        out = jax.lax.map(fn, xs)
    else:

        def step(drawn, x_next):
            return draw(x_next), fn(drawn)

        nexts = jnp.concatenate([xs[1:], xs[:1]])
        _, out = jax.lax.scan(step, draw(xs[0]), nexts)
    return jax.tree.map(lambda x: x.reshape(n_batches * batch, *x.shape[2:])[:r], out)


def vmap_batch(fn):
    """``jax.vmap(fn)`` over the leading axis; for a batch of one, ``fn`` on its element.

    Large inputs run one resample per batch (``AUTO_BATCH_LABELS``), where ``vmap`` would
    only add a batch axis of size 1: a vmapped scatter then indexes with (batch, segment)
    pairs, twice its index buffer (80 MB of the classwise ECE's scratch at N K = 1e7),
    and XLA keeps the batched copies of its gathers.
    """

    def batched(*xs):
        if jax.tree.leaves(xs)[0].shape[0] != 1:
            return jax.vmap(fn)(*xs)
        out = fn(*jax.tree.map(lambda x: x[0], xs))
        return jax.tree.map(lambda x: x[None], out)

    return batched


class _Static:
    """A callable as a hashable static argument; equal partials share compiled code."""

    def __init__(self, fn):
        self.fn = fn
        self.key = _fn_key(fn)

    def __hash__(self):
        return hash(self.key)

    def __eq__(self, other):
        return isinstance(other, _Static) and self.key == other.key


def _fn_key(fn):
    """Equal partials of equal functions get equal keys (their bound values hashed)."""
    if isinstance(fn, functools.partial):
        key = ("partial", _fn_key(fn.func), fn.args, tuple(sorted(fn.keywords.items())))
        try:
            hash(key)
        except TypeError:  # e.g. an array among the partial's arguments
            # Keyed by id: safe only because jit's cache keeps this _Static, hence fn,
            # alive while the entry exists, so no other object can take the id meanwhile.
            return ("object", id(fn))
        return key
    return ("object", fn)


def check_metric(metric: Any) -> _Static:
    """The callable ``metric`` wrapped as a hashable static argument of the kernels."""
    if not callable(metric):
        raise ValueError(
            "`metric` must be a callable (probs, labels, *, weights=None) -> 0-d array, "
            f"e.g. jaxcal.ece or functools.partial(jaxcal.ece, n_bins=10); got {metric!r}."
        )
    return _Static(metric)


def evaluate(metric, probs, labels, weights):
    """``metric(probs, labels[, weights=])`` as a 0-d float array (ValueError otherwise)."""
    if weights is None:
        out = metric(probs, labels)
    else:
        try:
            out = metric(probs, labels, weights=weights)
        except TypeError as err:
            if "weights" not in str(err):
                raise
            raise ValueError(
                "`metric` must accept a `weights=` keyword when `weights` are given."
            ) from err
    out = jnp.asarray(out)
    if out.shape != () or not jnp.issubdtype(out.dtype, jnp.floating):
        raise ValueError(
            f"`metric` must return a 0-d float array; got shape {out.shape} and dtype {out.dtype}."
        )
    return out


def check_confidence(confidence: Any) -> float:
    """``confidence``: a real number strictly between 0 and 1 (booleans refused)."""
    if isinstance(confidence, bool) or not isinstance(
        confidence, (int, float, np.integer, np.floating)
    ):
        raise ValueError(f"`confidence` must be a number in (0, 1); got {confidence!r}.")
    if not 0 < confidence < 1:
        raise ValueError(f"`confidence` must lie strictly between 0 and 1; got {confidence}.")
    return float(confidence)


def check_data(probs, labels, weights, probs_name="probs"):
    """``check_probs_labels()``, and N < 2**31 - 1 (int32 indices and counters)."""
    probs, labels, weights = check_probs_labels(probs, labels, weights, probs_name=probs_name)
    if probs.shape[0] >= 2**31 - 1:
        raise ValueError(
            f"`{probs_name}` may hold at most 2**31 - 2 samples; got {probs.shape[0]}."
        )
    return probs, labels, weights


# --------------------------------------------------------------------------------------
# Consistency test.


#: Null values within this many machine epsilons (relative) of the observed statistic
#: count as ties, as in scipy.stats.permutation_test: the same value computed in two
#: compiled contexts (vmapped or not, fused differently) may differ in the last bits.
TIE_EPS = 100


def tail_p_value(null: jax.Array, statistic: jax.Array) -> jax.Array:
    """(1 + #{null >= statistic, ties within TIE_EPS eps}) / (1 + R): in (0, 1]."""
    tol = TIE_EPS * jnp.finfo(statistic.dtype).eps * jnp.abs(statistic)
    exceed = jnp.sum(null >= statistic - tol, dtype=jnp.int32)
    return (1 + exceed).astype(statistic.dtype) / (1 + null.shape[0])


class ConsistencyTestResult(NamedTuple):
    """Result of :func:`~jaxcal.stats.consistency_test`.

    Attributes:
      statistic: 0-d, the metric on the data.
      p_value: 0-d, (1 + #{null >= statistic}) / (1 + n_resamples), in (0, 1]; values
        within 100 eps (relative) of the statistic count as ties.
      null: ``(n_resamples,)`` the metric on each consistency resample.
    """

    statistic: jax.Array
    p_value: jax.Array
    null: jax.Array

    def __repr__(self) -> str:  # the null draws summarised, not printed one by one
        return summary_repr(self)


@partial(
    jax.jit,
    static_argnames=("metric", "n_resamples", "n_batches", "batch", "resample_predictions", "spec"),
)
def _consistency_kernel(
    metric,
    probs,
    labels,
    weights,
    key,
    n_resamples,
    n_batches,
    batch,
    resample_predictions,
    spec,
    rows=None,
):
    fn = metric.fn
    statistic = evaluate(fn, probs, labels, weights)
    seeds = resample_seeds(key, n_resamples)
    n = probs.shape[0]
    if resample_predictions:
        seeds = split_seeds(seeds)  # (R, 2, 2): indices, then labels

        def draw_batch(s):  # s: (b, 2, 2) -> indices and labels (b, N)
            idx = indices(s[:, 0], n)

            def labels_of(p_r, words_r):  # position k of the resample draws from word k
                return draw(words_r[None], label_thresholds(p_r))[0]

            return idx, jax.vmap(labels_of)(probs[idx], words(s[:, 1], n))

        def batch_fn(drawn):
            idx, y = drawn
            if weights is None:
                return vmap_batch(lambda i, y_: evaluate(fn, probs[i], y_, None))(idx, y)
            return vmap_batch(lambda i, y_: evaluate(fn, probs[i], y_, weights[i]))(idx, y)

        null = map_batches(batch_fn, seeds, n_batches, batch, draw_batch)
    elif spec is not None:  # compare like with like: the fast path's observed value
        binning = (spec.n_bins, spec.binning, spec.closed)
        binned = binned_resampling(probs, labels, *binning, weights, rows)
        hits = map_batches(lambda s: hit_counts(s, binned.plan), seeds, n_batches, batch)
        observed, null = ece_from_counts(binned.stats, hits, spec.norm, spec.debias)
        null = null.astype(statistic.dtype)
        return ConsistencyTestResult(statistic, tail_p_value(null, observed), null)
    else:
        plan = label_plan(probs, scores_and_targets(probs, labels).scores)

        def batch_fn(y):  # y: (b, N) resampled labels
            return vmap_batch(lambda y_: evaluate(fn, probs, y_, weights))(y)

        draw_batch = partial(resampled_labels, plan=plan)
        null = map_batches(batch_fn, seeds, n_batches, batch, draw_batch)
    null = null.astype(statistic.dtype)
    return ConsistencyTestResult(statistic, tail_p_value(null, statistic), null)


def consistency_test(
    metric: Any,
    probs: Any,
    labels: Any,
    *,
    key: Any,
    n_resamples: int = 1000,
    batch_size: int | None = None,
    resample_predictions: bool = False,
    weights: Any = None,
) -> ConsistencyTestResult:
    """Consistency-resampling test of calibration for any metric.

    Under the null hypothesis that the model is calibrated, a label drawn from the
    model's own predicted distribution is exchangeable with the observed one. The test
    draws ``n_resamples`` label sets y*_r ~ probs (Bernoulli(p) for 1-D ``probs``,
    Categorical(row) for 2-D), recomputes ``metric(probs, y*_r)`` and reports where the
    observed value falls:

    .. math:: p = \\frac{1 + \\#\\{r: T(\\hat p, y^*_r) \\ge T(\\hat p, y)\\}}{1 + R}

    (ties count against the null, and p is never 0). With ``resample_predictions=True``
    the predictions are first drawn with replacement (Bröcker & Smith 2007), so that the
    null also carries the sampling variability of the predictions; by default they are
    held fixed (Vaicenavicius et al. 2019, the ECML-PKDD tutorial's test).

    All resamples run as one vmapped computation, ``batch_size`` resamples at a time
    (``jax.lax.map`` over batches). Resample r uses only
    ``jax.random.split(key, n_resamples)[r]``, so its labels do not depend on
    ``batch_size`` (nor does the p-value; see the module notes on last-bit float
    differences). For :func:`jaxcal.ece` and :func:`jaxcal.mce` (also bound by
    ``functools.partial`` or wrapped by ``jax.jit``: they declare their binned form,
    see ``jaxcal/stats/_resampling/binned_null.py``) with fixed predictions and no weights, the null is
    computed from per-bin counts of the resampled labels: the same numbers to the last
    bit or two (the observed value is recomputed the same way for the comparison, so
    exact ties stay ties), 3-6x faster (0.13 CPU-seconds for 1000 resamples at
    N = 10^5 on a 2-core CPU). Any other metric (a lambda around ``ece`` included) is
    called on each resample.

    Args:
      metric: a callable ``metric(probs, labels, *, weights=None) -> 0-d array``: any
        jaxcal metric, with options bound by ``functools.partial`` (``partial(ece,
        n_bins=10)``), or your own function. Define it once and reuse it: a new
        function object (e.g. a lambda written in the call) recompiles.
      probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows on the simplex.
      labels: ``(N,)`` integer labels (0/1, or in [0, K)).
      key: a JAX PRNG key (``jax.random.key(0)``; any implementation).
      n_resamples: R >= 1.
      batch_size: resamples per batch; memory is about ``batch_size * N`` labels plus the
        metric's temporaries for as many. ``None``: about 2**20 labels per batch
        (2**23 for the ece/mce fast path).
      resample_predictions: also resample the (prediction, weight) pairs with
        replacement before drawing the labels.
      weights: optional ``(N,)`` sample weights, passed to ``metric`` as ``weights=``
        (kept with their samples).

    Returns:
      ``ConsistencyTestResult(statistic, p_value, null)``: 0-d, 0-d, ``(R,)``.

    Validation runs on concrete inputs only (see ``jaxcal/_core/checks.py``); the function
    works under ``jit`` and ``vmap`` (e.g. over many data sets and keys).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from functools import partial
      >>> import jaxcal
      >>> p = jnp.array([0.1, 0.3, 0.5, 0.7, 0.9, 0.2, 0.6, 0.8])
      >>> y = jnp.array([0, 0, 1, 1, 1, 0, 0, 1])
      >>> res = consistency_test(partial(jaxcal.ece, n_bins=4), p, y,
      ...                        key=jax.random.key(0), n_resamples=99)
      >>> res.null.shape, bool(0 < res.p_value <= 1)
      ((99,), True)

    References:
      Bröcker & Smith (2007), "Increasing the reliability of reliability diagrams";
      Vaicenavicius, Widmann, Andersson, Lindsten, Roll & Schön (2019), "Evaluating
      model calibration in classification"; Silva Filho et al. (2023), the ECML-PKDD
      calibration tutorial.
    """
    static = check_metric(metric)
    n_resamples = check_n_resamples(n_resamples)
    batch_size = check_batch_size(batch_size)
    check_option("resample_predictions", resample_predictions, (False, True))
    probs, labels, weights = check_data(probs, labels, weights)
    key = check_key(key)
    spec = None if resample_predictions or weights is not None else binned_spec(metric)
    auto = AUTO_BATCH_LABELS if spec is None else AUTO_BATCH_LABELS_FAST
    n_batches, batch = batch_plan(n_resamples, batch_size, probs.shape[0], auto)
    return _consistency_kernel(
        static,
        probs,
        labels,
        weights,
        key,
        n_resamples,
        n_batches,
        batch,
        bool(resample_predictions),
        spec,
    )


def consistency_test_padded(
    metric: Any,
    probs: jax.Array,
    labels: jax.Array,
    weights: jax.Array,
    rows: jax.Array,
    *,
    key: jax.Array,
    n_resamples: int,
) -> ConsistencyTestResult:
    """:func:`consistency_test` of a binned metric (``ece``, ``mce``: its fast path) on
    inputs padded past their first ``rows`` rows (weights 1 on them, 0 after; ``rows``
    traced), for a jitted caller that compiles one program per size class (``jaxcal
    report``). The padding rows sort after the real ones and never draw a hit, so the
    labels drawn are those of the unpadded call and the p-value is its p-value."""
    spec = binned_spec(metric)
    if spec is None:
        raise ValueError(
            f"consistency_test_padded is for binned metrics (ece, mce); got {metric!r}."
        )
    n_batches, batch = batch_plan(n_resamples, None, probs.shape[0], AUTO_BATCH_LABELS_FAST)
    static = check_metric(metric)
    args = (static, probs, labels, weights, key, n_resamples, n_batches, batch, False, spec)
    return _consistency_kernel(*args, rows)

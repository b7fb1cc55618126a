"""Streaming and many devices: a mergeable calibration state of per-bin sums.

Every binned calibration metric and the proper scoring rules are functions of a few sums
over the data (DESIGN.md, "sufficient statistics first"). :class:`CalibrationState` keeps
exactly those sums, so an evaluation set can be fed batch by batch (:func:`update`, also
inside ``jax.lax.scan``), spread over devices and hosts, and reduced at the end:

* :func:`merge` is elementwise addition of the two states' arrays, hence
  ``jax.lax.psum(state, axis_name)`` inside ``shard_map`` *is* the multi-device merge,
  and ``jax.jit`` over inputs sharded with ``NamedSharding`` gives the same numbers (XLA
  inserts the cross-device sum). Nothing is gathered: the state is O(n_bins x K) numbers
  whatever the number of samples, where torchmetrics and torch-uncertainty keep every
  prediction and all-gather them.
  Two JAX details: inside ``shard_map``, a ``lax.scan`` carry started from :func:`init`
  must be typed as varying across the mesh axis
  (``jax.lax.pcast(init(...), axis_name, to="varying")``), since each device's sums
  differ; and a sharded ``jit`` needs ``Auto`` mesh axes (GSPMD propagation). With
  ``Explicit`` axes (the default of ``jax.make_mesh`` in recent JAX) every scatter and
  gather would need an explicit output sharding: use ``shard_map`` + ``psum`` there.
* :func:`compute` turns the sums into the metrics, through the same code as the one-shot
  functions (``jaxcal._ece.gap_norm`` on ``BinStats``), so that streamed and one-shot
  values agree to float round-off on the concatenated data.

What the state holds, for M bins and K classes (C the accumulation dtype, float32 by
default, float64 under ``jax_enable_x64``):

* ``top_count`` int32 ``(K, M)`` and ``top_sums`` C ``(3, K, M)``: per (predicted class,
  bin of the top-label confidence) the number of samples, their weight, summed confidence
  and summed correctness. Summed over the predicted class they are the confidence-ECE bins.
* ``class_count`` int32 ``(K, M)`` and ``class_sums`` C ``(6, K, M)``: per (class k, bin of
  ``p_k``) the count, weight, sum of ``p_k``, sum of ``1[y = k]``, and the three moments of
  ``d = p_k - c_b`` (``c_b`` the bin's centre) that make the Brier decomposition's
  within-bin terms exact: sum of ``d``, ``d^2`` and ``d * 1[y = k]`` (all weighted).
* ``totals`` C ``(3,)``: total weight, summed Brier score, summed log loss.
* ``compensation``: the low-order parts of the three float arrays (compensated, i.e.
  Kahan/Knuth TwoSum, accumulation across updates).

Numerics:

* Counts are int32, exact up to 2**31 - 1 samples per cell (far past float32's 2**24).
* Within a batch, sums are blocked then added pairwise (``jaxcal._binning.segment_stats``);
  across batches each sum is accumulated with an error-free transformation (TwoSum) into a
  (high, low) pair. A stream of a million batches is therefore as accurate as one batch:
  the float32 result is within a few ulps of the float64 value, not ``n_batches`` ulps.
  ``merge`` and ``psum`` add the pairs elementwise (one rounding per merge, not per batch).
* The within-bin variance and covariance need ``sum (f - mean_b)^2``, which one pass can
  only get as a difference of sums. The textbook ``sum f^2 - (sum f)^2 / n`` cancels
  catastrophically (both terms ~ n f^2, the result ~ n / (12 M^2)); shifting every ``f`` by
  its bin's centre first (``|d| <= 1 / (2M)``) keeps both terms within a factor ~3 of the
  result, so WBV and WBC keep about float32's relative precision (absolute error of order
  ``eps / M^2``, ~1e-10 in float32 at M = 15). Tests check them against a float64 oracle.

Why quantile (equal-mass) bins cannot stream: their edges are empirical quantiles of the
*whole* data set, unknown until the stream ends, and a sample's bin (hence every per-bin
sum) depends on samples not seen yet. Exact one-pass quantiles need memory linear in N
(Munro & Paterson 1980), which is what streaming avoids; approximate sketches (t-digest,
KLL) would give approximate edges, and per-bin sums accumulated with provisional edges
cannot be re-binned. Equal-mass bins need two passes (a first to fix the edges, a second
to stream with them fixed); only uniform bins, whose edges are known up front, stream.

References:
  Guo et al. (2017); Kull et al. (2019); Gupta & Ramdas (2021); Murphy (1973); Stephenson,
  Coelho & Jolliffe (2008); Knuth, TAOCP vol. 2, 4.2.2 (TwoSum); Munro & Paterson (1980),
  "Selection and sorting with limited storage".
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._binning import (
    _BLOCK,
    CLOSED,
    BinStats,
    _radix_tree_sum,
    bin_centres,
    segment_stats,
    segment_sums,
    uniform_bin_index,
    uniform_edges,
)
from jaxcal._checks import (
    check_option,
    check_positive_int,
    check_probs_labels,
    compute_dtype,
)
from jaxcal._confidence import top_label
from jaxcal._ece import AVERAGES, ReliabilityCurve, _safe_divide, check_norm, gap_norm

__all__ = [
    "CalibrationMetric",
    "CalibrationState",
    "clu_metric",
    "compute",
    "init",
    "merge",
    "reliability_curve",
    "update",
]

#: Keys of the dict returned by :func:`compute`, in order.
OUTPUTS = (
    "ece",
    "mce",
    "classwise_ece",
    "top_label_ece",
    "brier",
    "log_loss",
    "reliability",
    "resolution",
    "uncertainty",
    "within_bin_variance",
    "within_bin_covariance",
    "count",
    "weight",
)

_FLOAT_FIELDS = ("top_sums", "class_sums", "totals")


@partial(
    jax.tree_util.register_dataclass,
    data_fields=["top_count", "top_sums", "class_count", "class_sums", "totals", "compensation"],
    meta_fields=["closed", "binary"],
)
@dataclasses.dataclass(frozen=True)
class CalibrationState:
    """Per-bin and per-class sums of a stream of predictions: a pytree, O(M K) memory.

    Build it with :func:`init`, feed it with :func:`update`, combine with :func:`merge` (or
    ``jax.lax.psum``), read it with :func:`compute`. The array fields are pytree leaves
    (they are summed by ``merge``/``psum``, carried by ``scan``, sharded, checkpointed);
    ``closed`` and ``binary`` are static metadata (part of the tree structure).

    Attributes:
      top_count: int32 ``(K, M)`` samples per (predicted class, confidence bin).
      top_sums: ``(3, K, M)`` weight, sum of confidence, sum of correctness per cell.
      class_count: int32 ``(K, M)`` samples per (class k, bin of ``p_k``).
      class_sums: ``(6, K, M)`` weight, sum of ``p_k``, sum of ``1[y = k]``, and the sums
        of ``d``, ``d^2``, ``d 1[y = k]`` with ``d = p_k - (b + 1/2) / M`` (all weighted).
      totals: ``(3,)`` total weight, sum of per-sample Brier scores, sum of log losses.
      compensation: low-order parts ``(top_sums, class_sums, totals)`` of the compensated
        sums; the value of a sum is ``high + low``.
      closed: ``"right"`` or ``"left"``, the bin-edge convention (as in :func:`jaxcal.ece`).
      binary: whether the stream is 1-D positive-class probabilities (K = 2 internally).
    """

    top_count: jax.Array
    top_sums: jax.Array
    class_count: jax.Array
    class_sums: jax.Array
    totals: jax.Array
    compensation: tuple[jax.Array, jax.Array, jax.Array]
    closed: str = "right"
    binary: bool = False

    @property
    def n_bins(self) -> int:
        """M, the number of uniform bins."""
        return self.top_count.shape[-1]

    @property
    def num_classes(self) -> int:
        """K (2 for a binary state)."""
        return self.top_count.shape[-2]

    @property
    def dtype(self) -> jnp.dtype:
        """The accumulation dtype of the float sums."""
        return self.totals.dtype


def init(
    n_bins: int,
    num_classes: int,
    *,
    closed: str = "right",
    binary: bool = False,
    dtype: Any = None,
) -> CalibrationState:
    """An empty state: zero sums for ``n_bins`` uniform bins and ``num_classes`` classes.

    Args:
      n_bins: M >= 1 equal-width bins (uniform binning only: see the module docstring for
        why equal-mass bins cannot stream).
      num_classes: K >= 2, the number of columns of the ``probs`` that :func:`update` takes.
      closed: ``"right"`` (default; [0, 1/M], (1/M, 2/M], ...) or ``"left"`` ([0, 1/M), ...,
        [(M-1)/M, 1]), as in :func:`jaxcal.ece`.
      binary: ``True`` for a stream of 1-D ``(N,)`` positive-class probabilities (then
        ``num_classes`` must be 2): :func:`compute` then gives the 1-D meanings of
        :func:`jaxcal.ece`, :func:`jaxcal.brier_score` and
        :func:`jaxcal.brier_decomposition` (positive class only).
      dtype: accumulation dtype of the sums; default JAX's default float (float32, or
        float64 under ``jax_enable_x64``).

    Returns:
      :class:`CalibrationState`; :func:`compute` of it is all zeros (documented, finite).

    Example:
      >>> s = init(15, 10)
      >>> s.n_bins, s.num_classes, s.class_sums.shape
      (15, 10, (6, 10, 15))
    """
    n_bins = check_positive_int("n_bins", n_bins)
    num_classes = check_positive_int("num_classes", num_classes, minimum=2)
    check_option("closed", closed, CLOSED)
    check_option("binary", binary, (False, True))
    if binary and num_classes != 2:
        raise ValueError(f"`num_classes` must be 2 with `binary=True`; got {num_classes}.")
    dtype = jnp.dtype(jax.dtypes.canonicalize_dtype(jnp.float64 if dtype is None else dtype))
    if not jnp.issubdtype(dtype, jnp.floating) or dtype.itemsize < 4:
        raise ValueError(f"`dtype` must be float32 or float64; got {dtype}.")
    k, m = num_classes, n_bins
    sums = (jnp.zeros((3, k, m), dtype), jnp.zeros((6, k, m), dtype), jnp.zeros(3, dtype))
    return CalibrationState(
        top_count=jnp.zeros((k, m), jnp.int32),
        top_sums=sums[0],
        class_count=jnp.zeros((k, m), jnp.int32),
        class_sums=sums[1],
        totals=sums[2],
        compensation=tuple(jnp.zeros_like(s) for s in sums),
        closed=closed,
        binary=binary,
    )


def _check_state(state: Any, name: str = "state") -> CalibrationState:
    if not isinstance(state, CalibrationState):
        raise ValueError(
            f"`{name}` must be a CalibrationState (see jaxcal.streaming.init); "
            f"got {type(state).__name__}."
        )
    return state


def _two_sum(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Knuth's TwoSum: ``s = fl(a + b)`` and the exact rounding error ``a + b - s``."""
    s = a + b
    b_virtual = s - a
    a_virtual = s - b_virtual
    return s, (a - a_virtual) + (b - b_virtual)


def _accurate_sum(x: jax.Array) -> jax.Array:
    """Column sums of ``x`` ``(N, C)``: blocks of ``_BLOCK`` rows, then a radix-32 tree."""
    n = x.shape[0]
    pad = -n % _BLOCK
    x = jnp.concatenate([x, jnp.zeros((pad, x.shape[1]), x.dtype)]) if pad else x
    return _radix_tree_sum(x.reshape(-1, _BLOCK, x.shape[1]).sum(axis=1))


def _batch_sums(probs, labels, weights, n_bins, closed, binary):
    """Counts and float sums of one batch (the state's layout, in the input's compute dtype)."""
    if binary:
        p1 = probs
        probs = jnp.stack([1 - probs, probs], axis=1)
    n, k = probs.shape
    n_cells = k * n_bins
    dtype = compute_dtype(probs.dtype)
    w = None if weights is None else weights.astype(dtype)
    # Scores are summed as deviations from their bin's centre, as the one-shot metrics do.
    centres = bin_centres(uniform_edges(n_bins, probs.dtype))
    cell_centres = jnp.tile(centres, k)

    # Top-label: (predicted class, confidence bin) cells; summed over the predicted class
    # they are the confidence-ECE bins.
    conf, pred = top_label(probs)
    cells = pred * n_bins + uniform_bin_index(conf, n_bins, closed)
    top = segment_stats(cells, conf, pred == labels, n_cells, w, cell_centres)

    # Classwise: column k binned on its own, against 1[y = k], in cells k * M + bin. The
    # target is one-hot, so its sums need only each row's true-class cell.
    bins = uniform_bin_index(probs, n_bins, closed)  # (N, K)
    cells = jnp.arange(k, dtype=jnp.int32)[None, :] * n_bins + bins
    d = probs.astype(dtype) - centres[bins]
    true_cell = jnp.take_along_axis(cells, labels[:, None], axis=1)[:, 0]
    d_true = jnp.take_along_axis(d, labels[:, None], axis=1)[:, 0]
    if w is None:
        count = jnp.bincount(cells.reshape(-1), length=n_cells)
        weight = count.astype(dtype)
        s_d, s_dd = segment_sums([d, d * d], cells, n_cells)
        s_o = jnp.bincount(true_cell, length=n_cells).astype(dtype)
        (s_do,) = segment_sums([d_true], true_cell, n_cells)
    else:
        wk = jnp.broadcast_to(w[:, None], (n, k))
        present = (wk > 0).astype(jnp.int32).reshape(-1)
        count = jnp.bincount(cells.reshape(-1), weights=present, length=n_cells)
        weight, s_d, s_dd = segment_sums([wk, wk * d, wk * d * d], cells, n_cells)
        s_o, s_do = segment_sums([w, w * d_true], true_cell, n_cells)
    s_f = s_d + cell_centres * weight

    # Running totals: weight, Brier score, log loss (as jaxcal.brier_score / log_loss).
    eps = jnp.finfo(dtype).eps
    if binary:
        q = p1.astype(dtype)
        brier = (q - (labels == 1).astype(dtype)) ** 2
        p_true = jnp.where(labels == 1, q, 1 - q)
    else:
        p = probs.astype(dtype)
        onehot = (labels[:, None] == jnp.arange(k, dtype=labels.dtype)[None, :]).astype(dtype)
        brier = jnp.sum((p - onehot) ** 2, axis=1)
        p_true = jnp.take_along_axis(p, labels[:, None], axis=1)[:, 0]
    nll = -jnp.log(jnp.clip(p_true, eps, 1 - eps))
    per_sample = jnp.stack([jnp.ones(n, dtype), brier, nll], axis=1)
    if w is not None:
        per_sample = per_sample * w[:, None]

    shape = (k, n_bins)
    top_sums = jnp.stack([top.weight, top.sum_score, top.sum_target]).reshape(3, *shape)
    class_sums = jnp.stack([weight, s_f, s_o, s_d, s_dd, s_do]).reshape(6, *shape)
    return (  # int32 counts (bincount gives int64 under x64)
        top.count.astype(jnp.int32).reshape(shape),
        top_sums,
        count.astype(jnp.int32).reshape(shape),
        class_sums,
        _accurate_sum(per_sample),
    )


@jax.jit
def _update_kernel(state, probs, labels, weights):
    if weights is not None:
        # Zero-weight rows (padding) never touch the state, whatever they hold (even NaN).
        keep = weights > 0
        weights = jnp.where(keep, weights, 0)
        fill = jnp.asarray(0.5 if state.binary else 1 / state.num_classes, probs.dtype)
        mask = keep if probs.ndim == 1 else keep[:, None]
        probs = jnp.where(mask, probs, fill)
        labels = jnp.where(keep, labels, 0)
    top_count, top_sums, class_count, class_sums, totals = _batch_sums(
        probs, labels, weights, state.n_bins, state.closed, state.binary
    )
    new_sums, new_comp = [], []
    for name, batch, low in zip(
        _FLOAT_FIELDS, (top_sums, class_sums, totals), state.compensation, strict=True
    ):
        high, err = _two_sum(getattr(state, name), batch.astype(state.dtype))
        new_sums.append(high)
        new_comp.append(low + err)
    return dataclasses.replace(
        state,
        top_count=state.top_count + top_count,
        class_count=state.class_count + class_count,
        top_sums=new_sums[0],
        class_sums=new_sums[1],
        totals=new_sums[2],
        compensation=tuple(new_comp),
    )


def update(
    state: CalibrationState, probs: Any, labels: Any, weights: Any = None
) -> CalibrationState:
    """Add a batch of predictions to the state; returns the new state (pure).

    Args:
      state: from :func:`init` (or a previous ``update`` / ``merge``).
      probs: ``(N, K)`` rows on the simplex, K = ``state.num_classes``; or ``(N,)``
        positive-class probabilities for a ``binary`` state. bf16/f16 are binned in their
        own precision (edges k/M rounded to the input dtype) and summed in float32.
      labels: ``(N,)`` ints in ``[0, K)`` (0/1 or bool for binary).
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding in
        fixed-shape batches. A zero-weight row changes nothing, whatever its values: under
        ``jit``/``scan`` padding may hold anything, NaN included (eagerly every row is
        validated, padding too).

    Returns:
      The updated :class:`CalibrationState`. Under ``jit`` (or ``lax.scan``) the value
      checks on ``probs``/``labels``/``weights`` are skipped, as everywhere in jaxcal; the
      shape checks still run at trace time. Batches of one shape compile once.

    Example:
      >>> import jax.numpy as jnp
      >>> s = update(init(2, 2), jnp.array([[0.9, 0.1], [0.2, 0.8]]), jnp.array([0, 0]))
      >>> # one bin (0.5, 1]: mean confidence 0.85, accuracy 0.5
      >>> int(s.top_count.sum()), round(float(compute(s)["ece"]), 4)
      (2, 0.35)
    """
    state = _check_state(state)
    shape = np.shape(probs)  # static check first: it needs no values
    if state.binary and len(shape) != 1:
        raise ValueError(
            "`probs` must be 1-D (N,) positive-class probabilities for a binary state; "
            f"got shape {shape}."
        )
    if not state.binary and (len(shape) != 2 or shape[1] != state.num_classes):
        raise ValueError(
            f"`probs` must have shape (N, {state.num_classes}) for this state; got shape "
            f"{shape} (use init(..., binary=True) for 1-D probabilities)."
        )
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    return _update_kernel(state, probs, labels, weights)


def merge(a: CalibrationState, b: CalibrationState) -> CalibrationState:
    """The state of the concatenated streams: elementwise addition of every array.

    Associative and commutative (up to float round-off in the sums; counts exactly), with
    :func:`init` as the identity. Because it is a plain sum, ``jax.lax.psum(state,
    axis_name)`` is the same merge across the devices of a mesh axis.

    Example:
      >>> import jax.numpy as jnp
      >>> a = update(init(2, 2), jnp.array([[0.9, 0.1]]), jnp.array([0]))
      >>> b = update(init(2, 2), jnp.array([[0.2, 0.8]]), jnp.array([0]))
      >>> round(float(compute(merge(a, b))["ece"]), 4)  # as one batch of both rows
      0.35
    """
    a, b = _check_state(a, "a"), _check_state(b, "b")
    if (a.closed, a.binary) != (b.closed, b.binary) or a.top_count.shape != b.top_count.shape:
        raise ValueError(
            "`a` and `b` must come from init with the same n_bins, num_classes, closed and "
            f"binary; got {(a.n_bins, a.num_classes, a.closed, a.binary)} and "
            f"{(b.n_bins, b.num_classes, b.closed, b.binary)}."
        )
    if a.dtype != b.dtype:
        raise ValueError(f"`a` and `b` must have the same dtype; got {a.dtype} and {b.dtype}.")
    return jax.tree_util.tree_map(jnp.add, a, b)


def _value(state: CalibrationState):
    """The compensated sums ``high + low``."""
    return tuple(
        getattr(state, n) + c for n, c in zip(_FLOAT_FIELDS, state.compensation, strict=True)
    )


def _decomposition(sums, total):
    """Brier decomposition terms per class from the classwise sums ``(6, K, M)``."""
    weight, s_f, s_o, s_d, s_dd, s_do = sums
    f_bin = _safe_divide(s_f, weight)
    o_bin = _safe_divide(s_o, weight)
    o_bar = _safe_divide(s_o.sum(axis=1), total)
    share = _safe_divide(weight, total)
    rel = jnp.sum(share * (f_bin - o_bin) ** 2, axis=1)
    res = jnp.sum(share * (o_bin - o_bar[:, None]) ** 2, axis=1)
    unc = o_bar * (1 - o_bar)
    # Within-bin (co)variances from the centre-shifted moments (module docstring).
    wbv = jnp.maximum(s_dd - _safe_divide(s_d * s_d, weight), 0)
    wbc = s_do - _safe_divide(s_d * s_o, weight)
    wbv = _safe_divide(wbv.sum(axis=1), total)
    wbc = 2 * _safe_divide(wbc.sum(axis=1), total)
    return rel, res, unc, wbv, wbc


@partial(jax.jit, static_argnames=("norm", "debias", "average"))
def _compute_kernel(state, norm, debias, average):
    top_sums, class_sums, totals = _value(state)
    k = state.num_classes
    top = BinStats(state.top_count, *top_sums)
    cls = BinStats(state.class_count, *class_sums[:3])
    one = jnp.ones(1, state.dtype)
    if state.binary:  # the positive class's column: jaxcal.ece of 1-D probabilities
        main = BinStats(*(f[1:2] for f in cls))
    else:  # confidence bins: top-label cells summed over the predicted class
        main = BinStats(*(f.sum(axis=0, keepdims=True) for f in top))
    class_weight = top.weight.sum(axis=1)
    if average == "sample":
        group = _safe_divide(class_weight, class_weight.sum())
    else:
        present = (class_weight > 0).astype(class_weight.dtype)
        group = _safe_divide(present, present.sum())
    total = totals[0]
    rel, res, unc, wbv, wbc = _decomposition(class_sums, total)
    if state.binary:
        rel, res, unc, wbv, wbc = rel[1], res[1], unc[1], wbv[1], wbc[1]
    else:
        rel, res, unc, wbv, wbc = rel.sum(), res.sum(), unc.sum(), wbv.sum(), wbc.sum()
    return {
        "ece": gap_norm(main, one, norm, debias),
        "mce": gap_norm(main, one, "max", False),
        "classwise_ece": gap_norm(cls, jnp.full(k, 1 / k, state.dtype), norm, debias),
        "top_label_ece": gap_norm(top, group, norm, debias),
        "brier": _safe_divide(totals[1], total),
        "log_loss": _safe_divide(totals[2], total),
        "reliability": rel,
        "resolution": res,
        "uncertainty": unc,
        "within_bin_variance": wbv,
        "within_bin_covariance": wbc,
        "count": state.top_count.sum(),
        "weight": total,
    }


def compute(
    state: CalibrationState, *, norm: str = "l1", debias: bool = False, average: str = "label"
) -> dict[str, jax.Array]:
    """Every metric of the stream so far, each equal to the one-shot jaxcal function.

    With the state's ``n_bins`` and ``closed``, uniform binning, on the concatenation of
    every batch given to :func:`update` (with its weights):

    ============================  =======================================================
    ``ece``                       :func:`jaxcal.ece` (``norm``, ``debias``): confidence
                                  ECE, or binary ECE of the positive class (binary state)
    ``mce``                       :func:`jaxcal.mce`
    ``classwise_ece``             :func:`jaxcal.classwise_ece` (``norm``, ``debias``)
    ``top_label_ece``             :func:`jaxcal.top_label_ece` (``norm``, ``debias``,
                                  ``average``)
    ``brier``, ``log_loss``       :func:`jaxcal.brier_score`, :func:`jaxcal.log_loss`
    ``reliability`` ...           the fields of :func:`jaxcal.brier_decomposition`:
    ``within_bin_covariance``     ``reliability``, ``resolution``, ``uncertainty``,
                                  ``within_bin_variance``, ``within_bin_covariance``
                                  (``brier`` is the Brier score above)
    ``count``                     int32 number of samples with positive weight
    ``weight``                    total sample weight
    ============================  =======================================================

    The identity ``brier = reliability - resolution + uncertainty + within_bin_variance -
    within_bin_covariance`` holds to round-off. An empty state (nothing added, or only
    zero weights) gives 0 for every entry: no NaN.

    Args:
      state: a :class:`CalibrationState`.
      norm: ``"l1"``, ``"l2"`` or ``"max"`` for ``ece``, ``classwise_ece`` and
        ``top_label_ece`` (``mce`` is always the max norm).
      debias: Kumar, Liang & Ma (2019) debiased l2 estimator (needs ``norm="l2"``).
      average: ``"label"`` or ``"sample"``, as in :func:`jaxcal.top_label_ece`.

    Returns:
      dict of 0-d arrays with the keys above (``OUTPUTS``).

    Example:
      >>> import jax.numpy as jnp
      >>> s = update(init(2, 2, binary=True), jnp.array([0.1, 0.4, 0.8, 0.9]),
      ...            jnp.array([0, 1, 1, 1]))
      >>> out = compute(s)
      >>> round(float(out["ece"]), 4), round(float(out["brier"]), 4)
      (0.2, 0.105)

    References:
      As the one-shot functions: Guo et al. (2017); Kull et al. (2019); Gupta & Ramdas
      (2021); Murphy (1973); Stephenson, Coelho & Jolliffe (2008).
    """
    state = _check_state(state)
    check_norm(norm, debias)
    check_option("average", average, AVERAGES)
    # The sums do not depend on ``closed`` any more: one compile serves both conventions.
    return _compute_kernel(dataclasses.replace(state, closed="right"), norm, debias, average)


@jax.jit
def _curve_kernel(state):
    top_sums, class_sums, _ = _value(state)
    if state.binary:
        count, weight, s, t = state.class_count[1], *(f[1] for f in class_sums[:3])
    else:
        count, weight, s, t = state.top_count.sum(0), *(f.sum(0) for f in top_sums)
    return ReliabilityCurve(
        edges=uniform_edges(state.n_bins, state.dtype),
        counts=count,
        weights=weight,
        mean_confidence=_safe_divide(s, weight),
        mean_accuracy=_safe_divide(t, weight),
    )


def reliability_curve(state: CalibrationState) -> ReliabilityCurve:
    """The streamed reliability diagram: as :func:`jaxcal.reliability_curve` (uniform bins).

    Confidence bins for a multiclass state, positive-class bins for a binary one.

    Example:
      >>> import jax.numpy as jnp
      >>> s = update(init(2, 2, binary=True), jnp.array([0.1, 0.4, 0.8, 0.9]),
      ...            jnp.array([0, 1, 1, 1]))
      >>> c = reliability_curve(s)
      >>> c.counts.tolist(), c.mean_accuracy.tolist()
      ([2, 2], [0.5, 1.0])
    """
    return _curve_kernel(dataclasses.replace(_check_state(state), closed="right"))


# ----------------------------------------------------------------------------------------
# clu.metrics.Metric protocol adapter (duck-typed: neither clu nor flax is imported).


@dataclasses.dataclass(frozen=True)
class CalibrationMetric:
    """A ``clu.metrics.Metric``-style wrapper of :class:`CalibrationState`.

    Make a configured class with :func:`clu_metric`; instances hold one ``state`` field and
    are pytrees. They follow clu's protocol without importing clu or flax:
    ``empty()``, ``from_model_output(**model_output)``, ``merge(other)``, ``reduce()``
    (sums a leading device axis, as after ``jax.lax.all_gather``) and ``compute()``, so
    they go into a ``clu.metrics.Collection`` (``Collection.create(calib=clu_metric(...))``)
    and through ``gather_from_model_output`` in Flax evaluation loops.
    """

    state: CalibrationState

    # Configuration, set on the subclasses made by clu_metric.
    n_bins = 15
    num_classes = 2
    closed = "right"
    binary = False
    output = None  # or a key of OUTPUTS
    norm = "l1"

    @classmethod
    def empty(cls) -> CalibrationMetric:
        """The metric of no data (``merge`` identity)."""
        return cls(init(cls.n_bins, cls.num_classes, closed=cls.closed, binary=cls.binary))

    @classmethod
    def from_model_output(
        cls,
        *,
        labels: Any,
        probs: Any = None,
        logits: Any = None,
        mask: Any = None,
        weights: Any = None,
        **_: Any,
    ) -> CalibrationMetric:
        """The metric of one batch of model outputs (other keyword outputs are ignored).

        Args:
          labels: ``(N,)`` int labels.
          probs: ``(N, K)`` probabilities (``(N,)`` for binary), or else
          logits: ``(N, K)`` logits (softmax) or ``(N,)`` binary logits (sigmoid).
          mask: optional ``(N,)`` bool, clu's padding mask (False rows are ignored).
          weights: optional ``(N,)`` sample weights (multiplied by ``mask``).
        """
        if (probs is None) == (logits is None):
            raise ValueError("Pass exactly one of `probs` and `logits` to from_model_output.")
        if probs is None:
            logits = jnp.asarray(logits)
            probs = jax.nn.sigmoid(logits) if cls.binary else jax.nn.softmax(logits, axis=-1)
        if mask is not None:
            mask = jnp.asarray(mask)
            m = mask.astype(compute_dtype(jnp.asarray(probs).dtype))
            weights = m if weights is None else jnp.asarray(weights) * m
        return cls(update(cls.empty().state, probs, labels, weights))

    def merge(self, other: CalibrationMetric) -> CalibrationMetric:
        """The metric of both streams (``jaxcal.streaming.merge``)."""
        return type(self)(merge(self.state, other.state))

    def reduce(self) -> CalibrationMetric:
        """Merge along the leading (device) axis, e.g. after ``jax.lax.all_gather``."""
        return type(self)(jax.tree_util.tree_map(lambda x: x.sum(axis=0), self.state))

    def compute(self) -> Any:
        """``compute(state)``'s dict, or its entry ``output`` when the class names one."""
        out = compute(self.state, norm=self.norm)
        return out if self.output is None else out[self.output]

    def compute_value(self) -> Any:
        """clu's ``compute_value``: ``clu.values.Scalar(compute())`` (needs ``output``)."""
        from clu import values  # only reached from clu's own Collection.compute_values

        return values.Scalar(self.compute())


def clu_metric(
    n_bins: int = 15,
    num_classes: int = 2,
    *,
    closed: str = "right",
    binary: bool = False,
    output: str | None = None,
    norm: str = "l1",
) -> type[CalibrationMetric]:
    """A :class:`CalibrationMetric` class configured for ``n_bins`` bins and K classes.

    Args:
      n_bins, num_classes, closed, binary: as :func:`init`.
      output: ``None`` (``compute()`` returns the whole dict of :func:`compute`) or one of
        its keys (``compute()`` returns that 0-d array, which clu's ``compute_value`` and
        ``Collection.compute_values`` need).
      norm: passed to :func:`compute`.

    Returns:
      A subclass of :class:`CalibrationMetric`, registered as a pytree.

    Example:
      >>> import jax.numpy as jnp
      >>> ECE = clu_metric(n_bins=2, num_classes=2, output="ece")
      >>> m = ECE.empty().merge(ECE.from_model_output(
      ...     probs=jnp.array([[0.9, 0.1], [0.2, 0.8]]), labels=jnp.array([0, 0])))
      >>> round(float(m.compute()), 4)
      0.35
    """
    init(n_bins, num_classes, closed=closed, binary=binary)  # validates the options
    if output is not None:
        check_option("output", output, OUTPUTS)
    check_norm(norm, False)
    name = f"CalibrationMetric_{n_bins}x{num_classes}"
    config = dict(
        n_bins=n_bins, num_classes=num_classes, closed=closed, binary=binary, output=output
    )
    cls = dataclasses.dataclass(frozen=True)(
        type(name, (CalibrationMetric,), {**config, "norm": norm, "__module__": __name__})
    )
    return jax.tree_util.register_dataclass(cls, data_fields=["state"], meta_fields=[])


jax.tree_util.register_dataclass(CalibrationMetric, data_fields=["state"], meta_fields=[])

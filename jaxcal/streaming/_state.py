"""The calibration state: :func:`~jaxcal.streaming.init`, :func:`~jaxcal.streaming.update`, :func:`~jaxcal.streaming.merge`, :func:`~jaxcal.streaming.compute`.

The package docstring (:mod:`jaxcal.streaming`) explains what the state holds and why.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.binning import CLOSED, BinMoments, BinStats
from jaxcal._core.checks import check_option, check_positive_int, check_probs_labels
from jaxcal._core.confidence import scores_and_targets
from jaxcal._core.eager import call_stored
from jaxcal._core.numerics import compensated_add, compute_dtype, rows_per_block, safe_divide
from jaxcal._core.validity import run_validated, summarize
from jaxcal.metrics._ece import (
    AVERAGES,
    binned_stats,
    check_norm,
    classwise_stats,
    gap_norm,
    top_label_group_weights,
)
from jaxcal.metrics._scoring import brier_per_sample, decomposition_terms, log_loss_per_sample
from jaxcal.streaming._buckets import coarsen, coarsen_moments
from jaxcal.streaming._scale import (
    common,
    effective,
    rescaled,
    state_exponent,
    times_pow2,
    unscaled,
    weight_exponent,
)

#: Keys of the dict returned by :func:`~jaxcal.streaming.compute`, in order.
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
    data_fields=[
        "top_count",
        "top_sums",
        "class_count",
        "class_sums",
        "totals",
        "compensation",
        "exponent",
    ],
    meta_fields=["closed", "binary", "n_bins"],
)
@dataclasses.dataclass(frozen=True)
class CalibrationState:
    """Per-bin and per-class sums of a stream of predictions: a pytree, O(R K) memory.

    Build it with :func:`~jaxcal.streaming.init`, feed it with :func:`~jaxcal.streaming.update`, combine with :func:`~jaxcal.streaming.merge` (or
    ``jax.lax.psum``), read it with :func:`~jaxcal.streaming.compute`. The array fields are pytree leaves
    (they are summed by ``merge``/``psum``, carried by ``scan``, sharded, checkpointed);
    ``closed``, ``binary`` and ``n_bins`` are static metadata (part of the tree structure).
    The sums are kept at R uniform buckets (``resolution``, R = M unless ``init`` was given
    a finer one); :func:`~jaxcal.streaming.compute` re-bins them exactly to ``n_bins``.

    Attributes:
      top_count: int32 ``(K, R)`` samples per (predicted class, confidence bucket).
      top_sums: ``(3, K, R)`` weight, sum of confidence, sum of correctness per cell.
      class_count: int32 ``(K, R)`` samples per (class k, bucket of ``p_k``).
      class_sums: ``(6, K, R)`` weight, sum of ``p_k``, sum of ``1[y = k]``, and the sums
        of ``d``, ``d^2``, ``d 1[y = k]`` with ``d = p_k - (j + 1/2) / R`` (all weighted).
      totals: ``(3,)`` total weight, sum of per-sample Brier scores, sum of log losses.
      compensation: low-order parts ``(top_sums, class_sums, totals)`` of the compensated
        sums; the value of a sum is ``(high + low) * 2**exponent``.
      exponent: int32 scalar, the power of two the float sums are kept in units of: 0
        unless a weight lies outside ``[2**-65, 2**64)``, so that weights near 1e37 or
        1e-37 neither overflow nor underflow the sums (``jaxcal/streaming/_scale.py``).
        Optional when constructing a state by hand (default 0: sums in plain units).
      closed: ``"right"`` or ``"left"``, the bin-edge convention (as in :func:`jaxcal.ece`).
      binary: whether the stream is 1-D positive-class probabilities (K = 2 internally).
      n_bins: M, the uniform bins :func:`~jaxcal.streaming.compute` reports (a divisor of R).
    """

    top_count: jax.Array
    top_sums: jax.Array
    class_count: jax.Array
    class_sums: jax.Array
    totals: jax.Array
    compensation: tuple[jax.Array, jax.Array, jax.Array]
    closed: str = "right"
    binary: bool = False
    n_bins: int = 0
    exponent: jax.Array | int = 0

    @property
    def resolution(self) -> int:
        """R, the number of uniform buckets the sums are kept at (a multiple of M)."""
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
    resolution: int | None = None,
) -> CalibrationState:
    """An empty state: zero sums for ``n_bins`` uniform bins and ``num_classes`` classes.

    Args:
      n_bins: M >= 1 equal-width bins (uniform binning only: see the module docstring for
        why equal-mass bins cannot stream).
      num_classes: K >= 2, the number of columns of the ``probs`` that :func:`~jaxcal.streaming.update` takes.
      closed: ``"right"`` (default; [0, 1/M], (1/M, 2/M], ...) or ``"left"`` ([0, 1/M), ...,
        [(M-1)/M, 1]), as in :func:`jaxcal.ece`.
      binary: ``True`` for a stream of 1-D ``(N,)`` positive-class probabilities (then
        ``num_classes`` must be 2): :func:`~jaxcal.streaming.compute` then gives the 1-D meanings of
        :func:`jaxcal.ece`, :func:`jaxcal.brier_score` and
        :func:`jaxcal.brier_decomposition` (positive class only).
      dtype: accumulation dtype of the sums; default JAX's default float (float32, or
        float64 under ``jax_enable_x64``).
      resolution: R, a multiple of ``n_bins`` (default ``n_bins``): keep the sums at R
        uniform buckets, a fine histogram. :func:`~jaxcal.streaming.compute` and :func:`~jaxcal.streaming.rebin` then give
        every metric at any M dividing R exactly (the edges k/M are bucket edges), and
        :func:`~jaxcal.streaming.equal_mass_ece`, :func:`~jaxcal.streaming.corp_curve`, :func:`~jaxcal.streaming.corp_decomposition` and
        :func:`~jaxcal.streaming.isotonic_params` work from the buckets. A power of two (e.g. 4096) lets
        any engine compute a sample's bucket exactly (``p * R`` is exact in floating
        point; see :func:`~jaxcal.streaming.from_arrow`). Memory and update time grow like R K.

    Returns:
      :class:`~jaxcal.streaming.CalibrationState`; :func:`~jaxcal.streaming.compute` of it is all zeros (documented, finite).

    Example:
      >>> s = init(15, 10)
      >>> s.n_bins, s.num_classes, s.class_sums.shape
      (15, 10, (6, 10, 15))
      >>> fine = init(16, 2, binary=True, resolution=4096)
      >>> fine.n_bins, fine.resolution
      (16, 4096)
    """
    n_bins = check_positive_int("n_bins", n_bins)
    num_classes = check_positive_int("num_classes", num_classes, minimum=2)
    check_option("closed", closed, CLOSED)
    check_option("binary", binary, (False, True))
    if binary and num_classes != 2:
        raise ValueError(f"`num_classes` must be 2 with `binary=True`; got {num_classes}.")
    resolution = n_bins if resolution is None else check_positive_int("resolution", resolution)
    if resolution % n_bins:
        raise ValueError(
            f"`resolution` must be a multiple of `n_bins` ({n_bins}) so that the bins' edges "
            f"are bucket edges; got {resolution}."
        )
    dtype = jnp.dtype(jax.dtypes.canonicalize_dtype(jnp.float64 if dtype is None else dtype))
    if not jnp.issubdtype(dtype, jnp.floating) or dtype.itemsize < 4:
        raise ValueError(f"`dtype` must be float32 or float64; got {dtype}.")
    k, m = num_classes, resolution

    def zeros(shape, dtype):  # made on the host: ``jnp.zeros`` compiles a program per shape
        return jax.device_put(np.zeros(shape, dtype))

    sums = ((3, k, m), (6, k, m), (3,))
    return CalibrationState(
        top_count=zeros((k, m), jnp.int32),
        top_sums=zeros(sums[0], dtype),
        class_count=zeros((k, m), jnp.int32),
        class_sums=zeros(sums[1], dtype),
        totals=zeros(sums[2], dtype),
        compensation=tuple(zeros(shape, dtype) for shape in sums),
        exponent=zeros((), jnp.int32),
        closed=closed,
        binary=binary,
        n_bins=n_bins,
    )


def check_state(state: Any, name: str = "state") -> CalibrationState:
    if not isinstance(state, CalibrationState):
        raise ValueError(
            f"`{name}` must be a CalibrationState (see jaxcal.streaming.init); "
            f"got {type(state).__name__}."
        )
    return state


def _batch_sums(probs, labels, weights, n_bins, closed, binary):
    """Counts and float sums of one batch (the state's layout, in the input's compute dtype).

    The same per-bin sums as the one-shot metrics (``bin_sums()``):
    top-label cells (predicted class, confidence bin), whose sum over the predicted class
    is the confidence-ECE bins, and classwise cells (class k, bin of ``p_k``) with the
    moments of the Brier decomposition.
    """
    dtype = compute_dtype(probs.dtype)
    w = None if weights is None else weights.astype(dtype)
    per_sample = (
        jnp.ones(probs.shape[0], dtype),
        brier_per_sample(probs, labels),
        log_loss_per_sample(probs, labels),
    )
    if w is not None:
        per_sample = tuple(v * w for v in per_sample)
    # One sum per column, not ``sum(stack(...) * w[:, None], axis=0)``: XLA:CPU reduces a
    # weighted (N, 3) column by column sequentially, 2e-5 to 7e-5 relative error in
    # float32 at 2e3-6e4 rows, against ~1e-8 for a 1-D sum.
    totals = jnp.stack([jnp.sum(v) for v in per_sample])
    if binary:
        probs = jnp.stack([1 - probs, probs], axis=1)
    k = probs.shape[1]
    block = rows_per_block(k * n_bins)
    conf, correct, pred = scores_and_targets(probs, labels, "confidence")
    _, top = binned_stats(conf, correct, w, n_bins, "uniform", closed, pred, k, block=block)
    cls, moments = classwise_stats(probs, labels, w, n_bins, "uniform", closed, True, block)
    return (
        top.count,
        jnp.stack([top.weight, top.sum_score, top.sum_target]),
        cls.count,
        jnp.stack([cls.weight, cls.sum_score, cls.sum_target, *moments]),
        totals,
    )


def mask_padding(state, probs, labels, weights):
    """Zero-weight rows (padding) never touch the state, whatever they hold (even NaN):
    their probabilities become uniform, their labels 0 and their weights exactly 0."""
    if weights is None:
        return probs, labels, weights
    keep = weights > 0
    fill = jnp.asarray(0.5 if state.binary else 1 / state.num_classes, probs.dtype)
    mask = keep if probs.ndim == 1 else keep[:, None]
    return jnp.where(mask, probs, fill), jnp.where(keep, labels, 0), jnp.where(keep, weights, 0)


def accumulate(state, probs, labels, weights):
    """The state plus one batch's sums (compensated); inputs already masked.

    The batch is summed with its weights divided by ``2**e`` (``weight_exponent()``),
    then the state and the batch sums are brought to the larger exponent (exact powers of
    two), so that no weight scale overflows or underflows the float sums.
    """
    e_batch = jnp.zeros((), jnp.int32)
    if weights is not None:
        weights = weights.astype(compute_dtype(probs.dtype))
        e_batch = weight_exponent(weights)
        weights = times_pow2(weights, -e_batch)
    sums = _batch_sums(probs, labels, weights, state.resolution, state.closed, state.binary)
    e = common(state_exponent(state), effective(e_batch, sums[4][0]))
    scaled = [times_pow2(x, e_batch - e) if x.dtype != jnp.int32 else x for x in sums]
    return add_batch(rescaled(state, e), scaled)


def add_batch(state, sums):
    """The state plus one batch's ``(top_count, top_sums, class_count, class_sums,
    totals)`` in the state's layout (TwoSum-compensated)."""
    top_count, top_sums, class_count, class_sums, totals = sums
    highs = [getattr(state, name) for name in _FLOAT_FIELDS]
    new_sums, new_comp = compensated_add(highs, state.compensation, (top_sums, class_sums, totals))
    return dataclasses.replace(
        state,
        top_count=state.top_count + top_count,
        class_count=state.class_count + class_count,
        top_sums=new_sums[0],
        class_sums=new_sums[1],
        totals=new_sums[2],
        compensation=new_comp,
    )


@jax.jit
def _update_kernel(state, probs, labels, weights):
    # Eagerly every row is validated, padding too (the summary reads the raw inputs).
    summary = summarize(probs, labels, weights)
    return accumulate(state, *mask_padding(state, probs, labels, weights)), summary


def update(
    state: CalibrationState, probs: Any, labels: Any, weights: Any = None
) -> CalibrationState:
    """Add a batch of predictions to the state; returns the new state (pure).

    Args:
      state: from :func:`~jaxcal.streaming.init` (or a previous ``update`` / ``merge``).
      probs: ``(N, K)`` rows on the simplex, K = ``state.num_classes``; or ``(N,)``
        positive-class probabilities for a ``binary`` state. bf16/f16 are binned in their
        own precision (edges k/M rounded to the input dtype) and summed in float32.
      labels: ``(N,)`` ints in ``[0, K)`` (0/1 or bool for binary).
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding in
        fixed-shape batches. A zero-weight row changes nothing, whatever its values: under
        ``jit``/``scan`` padding may hold anything, NaN included (eagerly every row is
        validated, padding too).

    Returns:
      The updated :class:`~jaxcal.streaming.CalibrationState`. Under ``jit`` (or ``lax.scan``) the value
      checks on ``probs``/``labels``/``weights`` are skipped, as everywhere in jaxcal; the
      shape checks still run at trace time. Batches of one shape compile once.

    Example:
      >>> import jax.numpy as jnp
      >>> s = update(init(2, 2), jnp.array([[0.9, 0.1], [0.2, 0.8]]), jnp.array([0, 0]))
      >>> # one bin (0.5, 1]: mean confidence 0.85, accuracy 0.5
      >>> int(s.top_count.sum()), round(float(compute(s)["ece"]), 4)
      (2, 0.35)
    """
    state = check_state(state)
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
    probs, labels, weights = check_probs_labels(probs, labels, weights, values=False)
    # The state passes unpadded; the batch is padded to its size class (zero-weight rows
    # never touch the state), so a new batch size in a class compiles nothing.
    return run_validated(_update_kernel, probs, labels, weights, carry=state)


def coarsened(state: CalibrationState, n_bins: int) -> CalibrationState:
    """The state re-binned from its R buckets to M = ``n_bins`` dividing R (exact sums)."""
    if n_bins == state.resolution:
        return dataclasses.replace(state, n_bins=n_bins)
    top_low, class_low, totals_low = state.compensation
    return dataclasses.replace(
        state,
        top_count=coarsen(state.top_count, n_bins),
        top_sums=coarsen(state.top_sums, n_bins),
        class_count=coarsen(state.class_count, n_bins),
        class_sums=coarsen_moments(state.class_sums, n_bins),
        compensation=(
            coarsen(top_low, n_bins),
            coarsen_moments(class_low, n_bins),
            totals_low,
        ),
        n_bins=n_bins,
    )


def check_bins(state: CalibrationState, n_bins: int | None) -> int:
    """``n_bins`` (default the state's) checked to divide the state's resolution."""
    n_bins = state.n_bins if n_bins is None else check_positive_int("n_bins", n_bins)
    if state.resolution % n_bins:
        raise ValueError(
            f"`n_bins` must divide the state's resolution {state.resolution} (bin edges on "
            f"bucket edges); got {n_bins}."
        )
    return n_bins


def value_of(state: CalibrationState):
    """The compensated sums ``high + low``."""
    return tuple(
        getattr(state, n) + c for n, c in zip(_FLOAT_FIELDS, state.compensation, strict=True)
    )


@partial(jax.jit, static_argnames=("norm", "debias", "average"))
def _compute_kernel(state, norm, debias, average):
    state = coarsened(state, state.n_bins)
    top_sums, class_sums, totals = value_of(state)
    k = state.num_classes
    top = BinStats(state.top_count, *top_sums)
    cls = BinStats(state.class_count, *class_sums[:3])
    one = jnp.ones(1, state.dtype)
    if state.binary:  # the positive class's column: jaxcal.ece of 1-D probabilities
        main = BinStats(*(f[1:2] for f in cls))
    else:  # confidence bins: top-label cells summed over the predicted class
        main = BinStats(*(f.sum(axis=0, keepdims=True) for f in top))
    group = top_label_group_weights(top, average)
    total = totals[0]
    rel, res, unc, wbv, wbc = decomposition_terms(cls, BinMoments(*class_sums[3:]), total)
    if state.binary:
        rel, res, unc, wbv, wbc = rel[1], res[1], unc[1], wbv[1], wbc[1]
    else:
        rel, res, unc, wbv, wbc = rel.sum(), res.sum(), unc.sum(), wbv.sum(), wbc.sum()
    return {
        "ece": gap_norm(main, one, norm, debias),
        "mce": gap_norm(main, one, "max", False),
        "classwise_ece": gap_norm(cls, jnp.full(k, 1 / k, state.dtype), norm, debias),
        "top_label_ece": gap_norm(top, group, norm, debias),
        "brier": safe_divide(totals[1], total),
        "log_loss": safe_divide(totals[2], total),
        "reliability": rel,
        "resolution": res,
        "uncertainty": unc,
        "within_bin_variance": wbv,
        "within_bin_covariance": wbc,
        "count": state.top_count.sum(),
        "weight": unscaled(total, state),
    }


def compute(
    state: CalibrationState,
    *,
    norm: str = "l1",
    debias: bool = False,
    average: str = "label",
    n_bins: int | None = None,
) -> dict[str, jax.Array]:
    """Every metric of the stream so far, each equal to the one-shot jaxcal function.

    With ``n_bins`` (default the state's) and the state's ``closed``, uniform binning, on
    the concatenation of every batch given to :func:`~jaxcal.streaming.update` (with its weights):

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
    ``weight``                    total sample weight (``inf`` if it exceeds the dtype)
    ============================  =======================================================

    The identity ``brier = reliability - resolution + uncertainty + within_bin_variance -
    within_bin_covariance`` holds to round-off. An empty state (nothing added, or only
    zero weights) gives 0 for every entry: no NaN.

    Args:
      state: a :class:`~jaxcal.streaming.CalibrationState`.
      norm: ``"l1"``, ``"l2"`` or ``"max"`` for ``ece``, ``classwise_ece`` and
        ``top_label_ece`` (``mce`` is always the max norm).
      debias: Kumar, Liang & Ma (2019) debiased l2 estimator (needs ``norm="l2"``).
      average: ``"label"`` or ``"sample"``, as in :func:`jaxcal.top_label_ece`.
      n_bins: M, any divisor of the state's resolution (default the state's ``n_bins``):
        the buckets are re-binned exactly (:func:`~jaxcal.streaming.rebin`).

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
    state = check_state(state)
    n_bins = check_bins(state, n_bins)
    check_norm(norm, debias)
    check_option("average", average, AVERAGES)
    # The sums do not depend on ``closed`` any more: one compile serves both conventions.
    state = dataclasses.replace(state, closed="right", n_bins=n_bins)
    return call_stored(_compute_kernel, state, norm=norm, debias=debias, average=average)

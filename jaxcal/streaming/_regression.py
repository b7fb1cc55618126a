"""The streaming state of regression predictions: PIT counts, binned variances, scores.

Every average-calibration and variance-calibration measure of :mod:`jaxcal.regression`
that a stream can give exactly is a function of sums over the rows, kept by
:class:`~jaxcal.streaming.RegressionState`, fed batch by batch with
:func:`~jaxcal.streaming.regression_update`, merged by addition
(:func:`~jaxcal.streaming.merge`, ``jax.lax.psum``) and read with
:func:`~jaxcal.streaming.regression_compute`. For M = ``n_bins`` and the levels
``p_k = k / M`` (``k = 0..M``):

* ``pit_sums[0, k]``: the weight of the rows with exactly ``k`` thresholds below their
  PIT ``u`` (for a Gaussian: below ``z = (y - mean) / std`` on the thresholds
  ``Phi^-1(p_k)``), so that its cumulative sum at ``k`` is the weight of ``u <= p_k``: the
  lower-quantile calibration curve at ``p_k``, and cells 1..M the PIT histogram of M equal
  bins ``(p_{k-1}, p_k]`` (cell 0 holds ``u <= 0``, which no Gaussian row reaches);
* ``pit_sums[1, k]``: the same cells of ``|u - 1/2|`` on the thresholds ``p_k / 2``
  (Gaussian: ``|z|`` on ``Phi^-1(1/2 + p_k / 2)``): the central-interval calibration curve.

These are the very comparisons :func:`jaxcal.regression.calibration_curve` makes, in the
input's dtype, so the streamed curve, miscalibration area, MACE and RMSCE equal the batch
functions called with ``n_levels = n_bins + 1`` (the same levels ``linspace(0, 1, M + 1)``)
on the concatenated data, to the round-off of a sum of weights. One caveat: a PIT value
that is mathematically *on* a level (an ensemble's ``(r + 1/2) / (S + 1)``, a target on a
predicted quantile) is counted on the side its float rounding puts it, and XLA may round
such a quotient differently in two programs (a division by a constant can become a
multiplication by its reciprocal); atoms exact in floating point (``S + 1`` a power of
two, continuous predictions) are counted alike. ``n_bins=99`` (the default) gives
uncertainty-toolbox's 100 levels, the batch functions' default. Other levels cannot be
read from the counts.

Variance calibration (Gaussian rows only) needs per-bin sums of ``std^2`` and
``(y - mean)^2`` over bins of the predicted std. The batch :func:`jaxcal.regression.ence`
bins by netcal's equal-width bins over ``[min, max]`` of the whole data's std: edges a
stream knows only at its end (the reason equal-mass bins cannot stream, package
docstring). The stream therefore takes fixed ``std_edges`` up front (same convention:
``[e_j, e_{j+1})``, the last closed, values beyond the ends in the end bins) and equals
``ence``, ``variance_curve`` when those edges are the batch's; its UCE bins by the same
std edges (the batch ``uce`` bins the variance: equal when its variance edges are
``std_edges ** 2``, up to rows on an edge). The default is one bin ``[0, inf)``: the
whole stream's ``|RMV - RMSE| / RMV``.

Scores: the weighted sums of the CRPS (Gaussian: closed form; quantiles: twice the mean
pinball loss; samples: the fair ensemble estimator, as the batch functions), and for
Gaussian rows the log score and the squared error of the mean.

Numerics: sums are accumulated across batches with TwoSum compensation
(``compensation``), as :class:`~jaxcal.streaming.CalibrationState`; ``count`` is int32.
Unlike that state there is no power-of-two rescaling: weights must keep the sums within
the dtype's range (float32: total weight below ~1e38).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.checks import check_option, check_positive_int
from jaxcal._core.numerics import compensated_add, safe_divide, safe_sqrt
from jaxcal.regression._calibration import PROP_TYPES, _statistic, _thresholds, trapezoid_gap_area
from jaxcal.regression._inputs import Gaussian, Quantiles, check_prediction, sanitize
from jaxcal.regression._scores import (
    _crps_ensemble_kernel,
    _crps_gaussian_kernel,
    _log_score_kernel,
    _quantile_score_kernel,
)

_FLOAT_FIELDS = ("pit_sums", "std_sums", "totals")


@partial(
    jax.tree_util.register_dataclass,
    data_fields=["count", "pit_sums", "std_sums", "totals", "compensation"],
    meta_fields=["std_edges"],
)
@dataclasses.dataclass(frozen=True)
class RegressionState:
    """Sums of a stream of regression predictions: a pytree, O(M + E) memory.

    Build it with :func:`~jaxcal.streaming.regression_init`, feed it with
    :func:`~jaxcal.streaming.regression_update`, combine with
    :func:`~jaxcal.streaming.merge` (or ``jax.lax.psum``: every array leaf is a sum),
    read it with :func:`~jaxcal.streaming.regression_compute`. A registered dataclass, not
    a NamedTuple, so that the bin edges are static metadata that a sum never adds.

    Attributes:
      count: int32 scalar, rows with positive weight.
      pit_sums: ``(2, M + 1)`` weight per cell of the PIT (row 0, lower quantiles) and of
        ``|PIT - 1/2|`` (row 1, central intervals): cell k holds the rows with exactly
        k of the curve's thresholds (levels ``k / M``; for a Gaussian ``Phi^-1`` of them
        on the scale of ``(y - mean) / std``) strictly below their statistic, so the
        cumulative sum at k is the weight the batch curve counts at ``k / M``.
      std_sums: ``(3, E)`` per bin of the predicted std (Gaussian rows): weight, weighted
        sum of ``std^2``, weighted sum of ``(y - mean)^2``.
      totals: ``(5,)`` total weight, weighted CRPS sum, Gaussian rows' weight, their
        weighted log-score sum and squared-error sum.
      compensation: low-order parts ``(pit_sums, std_sums, totals)`` of the compensated
        sums; a sum's value is ``high + low``.
      std_edges: static ``(E + 1,)`` increasing edges of the std bins (Python floats).
    """

    count: jax.Array
    pit_sums: jax.Array
    std_sums: jax.Array
    totals: jax.Array
    compensation: tuple[jax.Array, jax.Array, jax.Array]
    std_edges: tuple[float, ...] = (0.0, math.inf)

    @property
    def n_bins(self) -> int:
        """M, the number of PIT bins (levels ``k / M``)."""
        return self.pit_sums.shape[-1] - 1

    @property
    def dtype(self) -> jnp.dtype:
        """The accumulation dtype of the float sums."""
        return self.totals.dtype


class RegressionSummary(NamedTuple):
    """Every measure of a :class:`~jaxcal.streaming.RegressionState` (0-d unless shaped).

    Attributes:
      levels: ``(M + 1,)`` the levels ``k / M``.
      observed: ``(M + 1,)`` observed coverage at the levels (``prop_type``).
      pit_histogram: ``(M,)`` share of the weight with PIT in ``(k/M, (k+1)/M]`` (the
        first bin closed); sums to 1 (0 when empty).
      miscalibration_area, mean_absolute_calibration_error,
        root_mean_squared_calibration_error: of the curve ``(levels, observed)``.
      std_edges: ``(E + 1,)`` the std bins' edges.
      bin_weights: ``(E,)`` share of the Gaussian rows' weight per std bin.
      rmv, rmse: ``(E,)`` root mean variance and root mean squared error per std bin.
      ence, uce: over the std bins (netcal's formulas).
      crps: weighted mean CRPS of every row.
      log_score, squared_error: weighted means over the Gaussian rows.
      count: int32 rows with positive weight. weight: their total weight.
    """

    levels: jax.Array
    observed: jax.Array
    pit_histogram: jax.Array
    miscalibration_area: jax.Array
    mean_absolute_calibration_error: jax.Array
    root_mean_squared_calibration_error: jax.Array
    std_edges: jax.Array
    bin_weights: jax.Array
    rmv: jax.Array
    rmse: jax.Array
    ence: jax.Array
    uce: jax.Array
    crps: jax.Array
    log_score: jax.Array
    squared_error: jax.Array
    count: jax.Array
    weight: jax.Array


def _check_edges(std_edges: Any) -> tuple[float, ...]:
    if std_edges is None:
        return (0.0, math.inf)
    if isinstance(std_edges, jax.core.Tracer) or not isinstance(std_edges, (Sequence, np.ndarray)):
        raise ValueError(
            "`std_edges` must be a Python sequence of floats (static bin edges of the "
            f"predicted std, fixed before the stream); got {type(std_edges).__name__}."
        )
    edges = tuple(float(e) for e in np.asarray(std_edges, np.float64).reshape(-1))
    if len(edges) < 2 or any(math.isnan(e) for e in edges):
        raise ValueError(f"`std_edges` must hold at least two numbers, no NaN; got {edges}.")
    if (np.diff(np.asarray(edges)) <= 0).any():
        raise ValueError(f"`std_edges` must be strictly increasing; got {list(edges)}.")
    return edges


def regression_init(
    n_bins: int = 99, *, std_edges: Sequence[float] | None = None, dtype: Any = None
) -> RegressionState:
    """An empty regression state: M = ``n_bins`` PIT bins and the std bins ``std_edges``.

    Args:
      n_bins: M >= 1: the calibration curve is kept at the levels ``k / M``, k = 0..M
        (default 99: uncertainty-toolbox's 100 levels, the batch functions' default).
      std_edges: static increasing edges of the bins of the predicted std for ENCE, UCE
        and the RMV/RMSE curve, fixed before the stream (the batch functions take them
        from the data's range); default one bin ``[0, inf)``.
      dtype: accumulation dtype; default JAX's default float (float32, or float64 under
        ``jax_enable_x64``).

    Returns:
      :class:`~jaxcal.streaming.RegressionState`; its
      :func:`~jaxcal.streaming.regression_compute` is all zeros (documented, finite).

    Example:
      >>> from jaxcal import streaming
      >>> s = streaming.regression_init(10, std_edges=(0.5, 1.0, 2.0))
      >>> s.pit_sums.shape, s.std_sums.shape
      ((2, 11), (3, 2))
    """
    n_bins = check_positive_int("n_bins", n_bins)
    edges = _check_edges(std_edges)
    dtype = jnp.dtype(jax.dtypes.canonicalize_dtype(jnp.float64 if dtype is None else dtype))
    if not jnp.issubdtype(dtype, jnp.floating) or dtype.itemsize < 4:
        raise ValueError(f"`dtype` must be float32 or float64; got {dtype}.")
    sums = (
        jnp.zeros((2, n_bins + 1), dtype),
        jnp.zeros((3, len(edges) - 1), dtype),
        jnp.zeros((5,), dtype),
    )
    return RegressionState(
        count=jnp.zeros((), jnp.int32),
        pit_sums=sums[0],
        std_sums=sums[1],
        totals=sums[2],
        compensation=tuple(jnp.zeros_like(s) for s in sums),
        std_edges=edges,
    )


def check_regression_state(state: Any, name: str = "state") -> RegressionState:
    if not isinstance(state, RegressionState):
        raise ValueError(
            f"`{name}` must be a RegressionState (see jaxcal.streaming.regression_init); got "
            f"{type(state).__name__}."
        )
    return state


def _levels(n_bins: int) -> tuple[float, ...]:
    return tuple(float(v) for v in np.linspace(0.0, 1.0, n_bins + 1))


def _cells(pred: Any, y: jax.Array, n_bins: int, prop_type: str) -> jax.Array:
    """Per row, the number of the curve's thresholds strictly below its statistic: the
    row is counted at level k exactly when the batch curve counts it (``stat <= t_k``)."""
    stat, scale = _statistic(pred, y, prop_type)
    p = jnp.asarray(_levels(n_bins), y.dtype)
    t = _thresholds(p, prop_type, scale).astype(y.dtype)
    return jnp.searchsorted(t, stat, side="left")


def _crps_per_row(pred: Any, y: jax.Array) -> jax.Array:
    if isinstance(pred, Gaussian):
        return _crps_gaussian_kernel(pred.mean, pred.std, y, None, "none")
    if isinstance(pred, Quantiles):
        return _quantile_score_kernel(pred.values, pred.levels, y, None, "crps", "none")
    return _crps_ensemble_kernel(pred.values, y, None, "fair", "none")


def _batch_sums(state, pred, y, weights):
    dtype = y.dtype
    n, m, edges = y.shape[0], state.n_bins, state.std_edges
    w = jnp.ones((n,), dtype) if weights is None else weights.astype(dtype)
    live = w > 0
    w = jnp.where(live, w, 0)
    pred, y = sanitize(pred, y, live)  # padding rows hold anything: never met again

    def wsum_by(cells, size, values=None):
        v = w if values is None else jnp.where(live, w * values, 0)
        return jax.ops.segment_sum(v, cells, size)

    pit = jnp.stack([wsum_by(_cells(pred, y, m, kind), m + 1) for kind in ("quantile", "interval")])
    crps = jnp.sum(jnp.where(live, w * _crps_per_row(pred, y), 0))
    zero_e = jnp.zeros((3, len(edges) - 1), dtype)
    if isinstance(pred, Gaussian):
        var, err = pred.std * pred.std, (y - pred.mean) ** 2
        e = jnp.asarray(edges, dtype)
        idx = jnp.clip(jnp.searchsorted(e, pred.std, side="right") - 1, 0, len(edges) - 2)
        std = jnp.stack([wsum_by(idx, len(edges) - 1, v) for v in (None, var, err)])
        log_s = _log_score_kernel(pred.mean, pred.std, y, None, "none")
        gauss = [jnp.sum(w), jnp.sum(jnp.where(live, w * log_s, 0)), jnp.sum(w * err)]
    else:
        std, gauss = zero_e, [jnp.zeros((), dtype)] * 3
    totals = jnp.stack([jnp.sum(w), crps, *gauss])
    return jnp.sum(live).astype(jnp.int32), (pit, std, totals)


def _add(state: RegressionState, count, sums) -> RegressionState:
    highs = [getattr(state, name) for name in _FLOAT_FIELDS]
    high, low = compensated_add(highs, state.compensation, sums)
    return dataclasses.replace(
        state,
        count=state.count + count,
        pit_sums=high[0],
        std_sums=high[1],
        totals=high[2],
        compensation=low,
    )


@jax.jit
def _update_kernel(state, pred, y, weights):
    return _add(state, *_batch_sums(state, pred, y, weights))


def regression_update(
    state: RegressionState, pred: Any, y: Any, weights: Any = None
) -> RegressionState:
    """Add a batch of regression predictions to the state; returns the new state (pure).

    Args:
      state: from :func:`~jaxcal.streaming.regression_init` (or a previous update/merge).
      pred: a :class:`~jaxcal.regression.Gaussian`, :class:`~jaxcal.regression.Quantiles`
        or :class:`~jaxcal.regression.Samples` of N rows (their PIT as
        :func:`jaxcal.regression.pit`). Only Gaussian rows add to the std bins, the log
        score and the squared error; every row adds to the PIT counts and the CRPS.
      y: ``(N,)`` targets.
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding in
        fixed-shape batches (a zero-weight row changes nothing, whatever it holds).

    Returns:
      The updated :class:`~jaxcal.streaming.RegressionState`. Under ``jit``/``vmap``/
      ``scan`` the value checks are skipped, as everywhere in jaxcal; shapes are checked
      at trace time.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal import streaming
      >>> from jaxcal.regression import Gaussian
      >>> g = Gaussian(jnp.zeros(4), jnp.ones(4))
      >>> s = streaming.regression_update(streaming.regression_init(4), g,
      ...                                 jnp.array([-1.0, -0.2, 0.3, 2.0]))
      >>> s.pit_sums[0].tolist()  # PIT 0.16, 0.42, 0.62, 0.98 in the bins of width 1/4
      [0.0, 1.0, 1.0, 1.0, 1.0]
    """
    state = check_regression_state(state)
    pred, y, weights = check_prediction(pred, y, weights)
    return _update_kernel(state, pred, y, weights)


def _layout(state: RegressionState) -> tuple:
    return (state.n_bins, state.std_edges)


def regression_merge(a: RegressionState, b: RegressionState) -> RegressionState:
    """:func:`~jaxcal.streaming.merge` of two regression states (checked layouts)."""
    a, b = check_regression_state(a, "a"), check_regression_state(b, "b")
    if _layout(a) != _layout(b):
        raise ValueError(
            "`a` and `b` must come from regression_init with the same n_bins and std_edges; "
            f"got {_layout(a)} and {_layout(b)}."
        )
    if a.dtype != b.dtype:
        raise ValueError(f"`a` and `b` must have the same dtype; got {a.dtype} and {b.dtype}.")
    return _merge_kernel(a, b)


@jax.jit
def _merge_kernel(a, b):
    return jax.tree_util.tree_map(jnp.add, a, b)


@partial(jax.jit, static_argnames=("prop_type",))
def _compute_kernel(state, prop_type):
    pit, std, totals = (
        getattr(state, n) + c for n, c in zip(_FLOAT_FIELDS, state.compensation, strict=True)
    )
    dtype, m = state.dtype, state.n_bins
    total, gauss = totals[0], totals[2]
    levels = jnp.asarray(_levels(m), dtype)
    row = pit[1 if prop_type == "interval" else 0]
    observed = jnp.clip(safe_divide(jnp.cumsum(row), total), 0, 1)
    d = observed - levels
    hist = pit[0, 1:].at[0].add(pit[0, 0])
    share = safe_divide(std[0], gauss)
    mv, mse = safe_divide(std[1], std[0]), safe_divide(std[2], std[0])
    rmv, rmse = safe_sqrt(mv), safe_sqrt(mse)
    used = (std[0] > 0) & (rmv > 0)
    terms = jnp.where(used, safe_divide(jnp.abs(rmv - rmse), rmv), 0)
    return RegressionSummary(
        levels=levels,
        observed=observed,
        pit_histogram=safe_divide(hist, total),
        miscalibration_area=trapezoid_gap_area(levels, d),
        mean_absolute_calibration_error=jnp.mean(jnp.abs(d)),
        root_mean_squared_calibration_error=safe_sqrt(jnp.mean(d * d)),
        std_edges=jnp.asarray(state.std_edges, dtype),
        bin_weights=share,
        rmv=rmv,
        rmse=rmse,
        ence=safe_divide(jnp.sum(terms), jnp.sum(used).astype(dtype)),
        uce=jnp.sum(share * jnp.abs(mse - mv)),
        crps=safe_divide(totals[1], total),
        log_score=safe_divide(totals[3], gauss),
        squared_error=safe_divide(totals[4], gauss),
        count=state.count,
        weight=total,
    )


def regression_compute(state: RegressionState, *, prop_type: str = "interval") -> RegressionSummary:
    """Every measure of the stream so far (:class:`~jaxcal.streaming.RegressionSummary`).

    Equal to the batch functions on the concatenated data (to the round-off of a sum of
    weights), with ``n_levels = state.n_bins + 1``:

    * ``observed``, ``miscalibration_area``, ``mean_absolute_calibration_error``,
      ``root_mean_squared_calibration_error``: :func:`jaxcal.regression.calibration_curve`
      and the three summaries with ``prop_type``;
    * ``bin_weights``, ``rmv``, ``rmse``, ``ence``: :func:`jaxcal.regression.variance_curve`
      and :func:`jaxcal.regression.ence` when ``std_edges`` are the batch's edges (which
      it takes from the data's range: see the module docstring); ``uce`` =
      ``sum_b share_b |MSE_b - MV_b|`` over the same std bins;
    * ``crps``: :func:`jaxcal.regression.crps_gaussian`, ``crps_quantile`` or
      ``crps_ensemble`` (fair); ``log_score``: :func:`jaxcal.regression.log_score_gaussian`;
      ``squared_error``: the mean of ``(y - mean)^2`` of the Gaussian rows.

    An empty state (or one with zero total weight) gives 0 everywhere except the gaps to
    the diagonal, which are those of the curve ``observed = 0`` (area 1/2); no NaN.

    Args:
      state: a :class:`~jaxcal.streaming.RegressionState`.
      prop_type: ``"interval"`` (central intervals, uncertainty-toolbox's default) or
        ``"quantile"`` (lower quantiles), as in the batch functions.

    Returns:
      :class:`~jaxcal.streaming.RegressionSummary`.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal import streaming
      >>> from jaxcal.regression import Gaussian, miscalibration_area
      >>> g, y = Gaussian(jnp.zeros(5), jnp.ones(5)), jnp.array([-1.5, -0.3, 0.2, 0.9, 2.5])
      >>> s = streaming.regression_update(streaming.regression_init(2), g, y)
      >>> out = streaming.regression_compute(s)
      >>> round(float(out.miscalibration_area), 4), round(float(
      ...     miscalibration_area(g, y, n_levels=3)), 4)
      (0.05, 0.05)

    References:
      Chung et al. (2021), uncertainty-toolbox; Levi et al. (2022), Sensors 22 (ENCE);
      Laves et al. (2020), MIDL (UCE); Gneiting et al. (2005) (CRPS).
    """
    state = check_regression_state(state)
    check_option("prop_type", prop_type, PROP_TYPES)
    return _compute_kernel(state, prop_type)

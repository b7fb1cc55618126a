"""CORP curve, score decomposition and isotonic fit from a state's buckets.

Pool-adjacent-violators sees only the order of the forecasts and the sums of each group,
so PAV over a state's R buckets (``bucket_pav()``) is exactly
the CORP fit (Dimitriadis, Gneiting & Jordan 2021) of the forecasts rounded to their
bucket. It equals CORP on the raw forecasts when no bucket holds two distinct forecasts
(e.g. forecasts on a grid of R); otherwise the pooling within buckets can only raise the
recalibrated score (the fit is constrained to be flat within buckets): the bucket MCB and
DSC are both at most the exact ones, short by the same amount, the discrimination left
inside the buckets, which vanishes as R grows.

``corp_from_sums()`` takes plain bucket sums, so any producer of per-bucket weights and
outcome sums (an engine's ``GROUP BY``) can share it; the decomposition's terms are
``jaxcal/metrics/_corp_decomposition.py``'s (those of :func:`jaxcal.score_decomposition`).
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.checks import check_option
from jaxcal._core.isotonic import IsotonicParams
from jaxcal._core.numerics import safe_divide
from jaxcal.metrics._corp_decomposition import SCORES, ScoreDecomposition, assemble, group_terms
from jaxcal.streaming._buckets import bucket_pav
from jaxcal.streaming._scale import unscaled
from jaxcal.streaming._state import CalibrationState, check_state, value_of
from jaxcal.streaming._views import main_cells


class BucketCorp(NamedTuple):
    """The CORP curve of a state's buckets (:func:`~jaxcal.streaming.corp_curve`), ``(R,)`` buffers.

    Attributes:
      forecasts: mean forecast of each non-empty bucket, increasing; entries from
        ``size`` on repeat the last one.
      calibrated: the PAV-calibrated value (recalibrated probability) of each.
      counts: int32 samples of each (0 past ``size``).
      weight: total sample weight of each (0 past ``size``).
      size: int32 number of non-empty buckets.
    """

    forecasts: jax.Array
    calibrated: jax.Array
    counts: jax.Array
    weight: jax.Array
    size: jax.Array


def corp_from_sums(
    counts: jax.Array, weight: jax.Array, sum_score: jax.Array, sum_target: jax.Array
) -> BucketCorp:
    """CORP curve from per-bucket sums ``(R,)`` in increasing order of forecast.

    The knots are the non-empty buckets, at their mean forecast; the calibrated values
    are ``pava()`` of the bucket means weighted by the bucket weights.
    """
    order, calibrated = bucket_pav(weight, sum_target)
    size = jnp.sum(weight > 0, dtype=jnp.int32)
    live = jnp.arange(weight.shape[0], dtype=jnp.int32) < size
    forecasts = safe_divide(sum_score, weight)[order]
    last = jnp.maximum(size - 1, 0)
    return BucketCorp(
        jnp.where(live, forecasts, forecasts[last]),
        calibrated,
        jnp.where(live, counts[order], 0),
        jnp.where(live, weight[order], 0),
        size,
    )


@jax.jit
def _curve_kernel(state):
    curve = corp_from_sums(*main_cells(state))
    return curve._replace(weight=unscaled(curve.weight, state))  # in the caller's units


def corp_curve(state: CalibrationState) -> BucketCorp:
    """The CORP reliability curve from a state's buckets (PAV over the buckets).

    The view is :func:`jaxcal.ece`'s: the positive class (binary state) or the top-label
    confidence against correctness (multiclass, as ``jaxcal.corp_curve``'s default
    ``reduction="top_label"``). Exactly the CORP curve of the forecasts rounded to their
    bucket (module docstring): use a fine ``resolution`` (e.g. 4096).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.streaming import init, update
      >>> p = jnp.array([0.1, 0.3, 0.3, 0.6, 0.8, 0.9])
      >>> y = jnp.array([0, 1, 0, 0, 1, 1])
      >>> c = corp_curve(update(init(1, 2, binary=True, resolution=1024), p, y))
      >>> int(c.size), [round(v, 4) for v in c.calibrated[:5].tolist()]
      (5, [0.0, 0.3333, 0.3333, 1.0, 1.0])

    References:
      Dimitriadis, Gneiting & Jordan (2021), "Stable reliability diagrams for
      probabilistic classifiers", PNAS 118(8).
    """
    return _curve_kernel(check_state(state))


@partial(jax.jit, static_argnames=("score",))
def _decomposition_kernel(state, score):
    return decomposition_of_cells(main_cells(state), value_of(state)[2], score)


def decomposition_of_cells(cells, totals, score: str) -> ScoreDecomposition:
    """:func:`~jaxcal.streaming.corp_decomposition` of the view's R buckets ``cells`` (fields ``(R,)``) and
    a state's compensated ``totals`` ``(3,)`` (weight, Brier sum, log-loss sum)."""
    curve = corp_from_sums(*cells)
    total = totals[0]
    terms = group_terms(score, curve.weight, curve.calibrated, cells.sum_target.sum(), total)
    return assemble(safe_divide(totals[1] if score == "brier" else totals[2], total), *terms)


def corp_decomposition(state: CalibrationState, *, score: str = "brier") -> ScoreDecomposition:
    """CORP score decomposition S = MCB - DSC + UNC of a binary state, from its buckets.

    S is the mean Brier score or log loss of the forecasts (exact, from the state's
    per-sample sums: :func:`jaxcal.brier_score`, :func:`jaxcal.log_loss`); the
    recalibrated score is that of :func:`~jaxcal.streaming.corp_curve`'s values, sum_j (W_j / W) e(c_j)
    with e(c) = c(1 - c) (Brier) or the binary entropy (log); UNC = e(base rate); the
    terms are those of :func:`jaxcal.score_decomposition` (``method="corp"``). Exact
    CORP for forecasts that a bucket never mixes; otherwise MCB and DSC are both at most
    the exact CORP values, short by the same amount (module docstring).

    Args:
      state: a binary :class:`~jaxcal.streaming.CalibrationState` (``init(..., binary=True)``).
      score: ``"brier"`` or ``"log"``.

    Returns:
      :class:`jaxcal.ScoreDecomposition` ``(score, miscalibration, discrimination,
      uncertainty)``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.streaming import init, update
      >>> p = jnp.array([0.1, 0.3, 0.3, 0.6, 0.8, 0.9])
      >>> y = jnp.array([0, 1, 0, 0, 1, 1])
      >>> d = corp_decomposition(update(init(1, 2, binary=True, resolution=1024), p, y))
      >>> [round(float(v), 4) for v in d]
      [0.1667, 0.0556, 0.1389, 0.25]

    References:
      Dimitriadis, Gneiting & Jordan (2021), eq. 2.
    """
    state = check_state(state)
    check_option("score", score, SCORES)
    if not state.binary:
        raise ValueError(
            "`state` must be binary (init(..., binary=True)) for corp_decomposition: a "
            "multiclass state keeps no per-sample score of the top-label view."
        )
    return _decomposition_kernel(state, score)


@jax.jit
def _isotonic_kernel(state):
    curve = _curve_kernel(state)
    return IsotonicParams(curve.forecasts, curve.calibrated, curve.size)


def isotonic_params(state: CalibrationState) -> IsotonicParams:
    """An isotonic calibrator fitted on the stream, from the state's buckets.

    The parameters of :func:`jaxcal.calibrators.isotonic` (``apply`` interpolates
    linearly between the points and clips to the end ones, as scikit-learn's
    ``IsotonicRegression``), fitted on (bucket mean forecast, bucket mean outcome) with
    the bucket weights: the :func:`~jaxcal.streaming.corp_curve` points. Binary states calibrate the
    positive class; multiclass ones the top-label confidence (for
    :func:`jaxcal.calibrators.top_label`-style use).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.calibrators import isotonic
      >>> from jaxcal.streaming import init, update
      >>> p = jnp.array([0.1, 0.3, 0.3, 0.6, 0.8, 0.9])
      >>> y = jnp.array([0, 1, 0, 0, 1, 1])
      >>> params = isotonic_params(update(init(1, 2, binary=True, resolution=1024), p, y))
      >>> [round(v, 4) for v in isotonic().apply(params, jnp.array([0.2, 0.85])).tolist()]
      [0.1667, 1.0]
    """
    return _isotonic_kernel(check_state(state))

"""Non-parametric binary calibrators: histogram binning, isotonic regression, scaling-binning.

All binning goes through ``jaxcal/_core/binning.py`` (the metrics' edge conventions). Fitted
parameters live in fixed-size arrays (M bins, or N training points for isotonic
regression), so ``fit`` jits and vmaps.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.binning import (
    bin_edges_and_index,
    bin_sums,
    check_binning,
    edges_bin_index,
    quantile_edges,
    uniform_bin_index,
)
from jaxcal._core.cache import cached_factory
from jaxcal._core.checks import check_option, check_positive_int
from jaxcal._core.isotonic import IsotonicParams, isotonic_apply, isotonic_fit
from jaxcal._core.numerics import compute_dtype, safe_divide
from jaxcal._core.sort import sort
from jaxcal.calibrators._base import Calibrator, from_kernels
from jaxcal.calibrators._binary import PlattParams, platt_scaling
from jaxcal.calibrators._implicit import not_differentiable
from jaxcal.calibrators._inputs import BINARY_INPUTS, probs_of
from jaxcal.calibrators._params import ParamsSpec


class HistogramParams(NamedTuple):
    """Parameters of histogram binning.

    Attributes:
      edges: ``(M + 1,)`` bin edges (uniform, or quantiles of the training scores).
      values: ``(M,)`` weighted fraction of positives in each bin (0 where empty).
      filled: ``(M,)`` bool, the bin held training weight; empty bins map a score to itself.
    """

    edges: jax.Array
    values: jax.Array
    filled: jax.Array


class ScalingBinningParams(NamedTuple):
    """Parameters of the scaling-binning calibrator.

    Attributes:
      platt: :class:`~jaxcal.calibrators.PlattParams` of the scaling step.
      edges: ``(M + 1,)`` equal-mass edges of the scaled training scores (each inner
        edge half way between the quantile and the next larger training score).
      values: ``(M,)`` weighted mean scaled score in each bin (0 where empty).
      filled: ``(M,)`` bool, the bin held training weight (else the scaled score is kept).
    """

    platt: PlattParams
    edges: jax.Array
    values: jax.Array
    filled: jax.Array


def _between_scores(edges: jax.Array, scores: jax.Array) -> jax.Array:
    """Inner edges moved from a training score to half way to the next larger one.

    A quantile edge is itself a training score g_(k), and ``apply`` recomputes g for a
    test score: an evaluation that rounds one ulp differently (XLA folds a jitted closure
    over concrete data with its own exp) moved a training score across its edge and
    changed its output by 0.54. Any edge in [g_(k), g_(k+1)) bins the training data the
    same way (right-closed); the mid-point keeps scores at or near the training scores
    in their bins. An edge with no larger training score stays where it is.
    """
    ordered = sort(scores)
    inner = edges[1:-1]
    pos = jnp.searchsorted(ordered, inner, side="right")
    above = ordered[jnp.minimum(pos, scores.shape[0] - 1)]
    moved = jnp.where(pos < scores.shape[0], inner + (above - inner) / 2, inner)
    return edges.at[1:-1].set(moved)


def _bin_means(idx, scores, labels, n_bins, weights, of_scores):
    stats = bin_sums(idx, scores, labels, n_bins, weights)
    num = stats.sum_score if of_scores else stats.sum_target
    return safe_divide(num, stats.weight), stats.weight > 0


def _bin_shapes(n_bins: int):
    """The shapes of the per-bin fields of M-bin parameters."""
    return lambda x_shape: {"edges": (n_bins + 1,), "values": (n_bins,), "filled": (n_bins,)}


@cached_factory
def histogram_binning(
    n_bins: int = 15,
    binning: str = "uniform",
    *,
    closed: str = "right",
    inputs: str = "probs",
) -> Calibrator:
    """Histogram binning (Zadrozny & Elkan 2001): each bin predicts its fraction of positives.

    The scores (probabilities; ``inputs="logits"`` go through a sigmoid first) are cut
    into ``n_bins`` bins by ``jaxcal/_core/binning.py``: equal width (``"uniform"``) or equal
    mass (``"quantile"``: weighted empirical quantiles of the training scores), with the
    edge convention ``closed`` of the metrics (``"right"``: [0, 1/M], (1/M, 2/M], ...).
    A new score gets the weighted mean label of its training bin. A bin without training
    weight maps a score to itself (the identity), so zero total weight is the identity.

    Args:
      n_bins: M >= 1.
      binning: ``"uniform"`` or ``"quantile"``.
      closed: ``"right"`` or ``"left"``.
      inputs: ``"probs"`` or ``"logits"``.

    Returns:
      ``Calibrator``: ``fit(scores (N,), labels (N,) 0/1, *, weights=None) ->
      HistogramParams``; ``apply(params, scores (N,)) -> probs (N,)``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.calibrators import histogram_binning
      >>> cal = histogram_binning(2)
      >>> s = jnp.array([0.1, 0.2, 0.3, 0.6, 0.9, 0.95])
      >>> params = cal.fit(s, jnp.array([0, 0, 1, 1, 1, 0]))
      >>> [round(float(v), 4) for v in cal.apply(params, jnp.array([0.05, 0.7]))]
      [0.3333, 0.6667]

    References:
      Zadrozny & Elkan (2001), "Obtaining calibrated probability estimates from decision
      trees and naive Bayesian classifiers", ICML.
    """
    n_bins = check_binning(n_bins, binning, closed)
    check_option("inputs", inputs, BINARY_INPUTS)

    @jax.jit
    def _fit(x, labels, weights):
        p = probs_of(x, inputs)
        edges, idx = bin_edges_and_index(p, n_bins, binning, closed, weights)
        values, filled = _bin_means(idx, p, labels, n_bins, weights, of_scores=False)
        return HistogramParams(edges, values, filled)

    @jax.jit
    def _apply(params, x):
        p = probs_of(x, inputs)
        if binning == "uniform":
            idx = uniform_bin_index(p, n_bins, closed)
        else:
            idx = edges_bin_index(p, params.edges.astype(p.dtype), closed)
        return jnp.where(params.filled[idx], params.values[idx].astype(p.dtype), p)

    name = f"histogram_binning({n_bins})"
    spec = ParamsSpec(HistogramParams, _bin_shapes(n_bins), name)
    return from_kernels(not_differentiable(_fit, name), _apply, inputs, binary=True, params=spec)


@cached_factory
def isotonic(*, inputs: str = "probs") -> Calibrator:
    """Isotonic regression (pool-adjacent-violators), matching scikit-learn.

    Fits the non-decreasing step function of the scores that minimises the weighted
    squared error to the 0/1 labels, exactly as ``sklearn.isotonic.IsotonicRegression(
    out_of_bounds="clip")``: zero-weight samples are dropped; sorted scores closer than
    ``np.finfo(dtype).resolution`` to the first score of their group are merged into one
    point (weighted mean label); PAV pools the groups; a new score is clipped to the
    range of the training points and linearly interpolated between them. The scores are
    used as given (``inputs`` only selects the validation: [0, 1] for ``"probs"``, finite
    for ``"logits"``); the output is a probability. PAV runs in a ``lax.while_loop`` over
    fixed (N,) buffers (at most 2N steps, O(N) after the O(N log N) sort; see
    ``jaxcal/_core/isotonic.py``), so ``fit`` jits and vmaps. Zero total weight
    gives the identity (``sigmoid`` of ``"logits"``).

    Returns:
      ``Calibrator``: ``fit(scores (N,), labels (N,) 0/1, *, weights=None) ->
      IsotonicParams``; ``apply(params, scores (M,)) -> probs (M,)``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.calibrators import isotonic
      >>> cal = isotonic()
      >>> s = jnp.array([0.1, 0.3, 0.5, 0.7])
      >>> params = cal.fit(s, jnp.array([0, 1, 0, 1]))
      >>> [round(float(v), 4) for v in cal.apply(params, jnp.array([0.1, 0.4, 0.6, 0.9]))]
      [0.0, 0.5, 0.75, 1.0]

    References:
      Ayer, Brunk, Ewing, Reid & Silverman (1955); Zadrozny & Elkan (2002), "Transforming
      classifier scores into accurate multiclass probability estimates", KDD;
      scikit-learn's ``IsotonicRegression`` (the tie grouping and the interpolation).
    """
    return interpolating_calibrator(isotonic_fit, inputs)


def interpolating_calibrator(fit_kernel, inputs: str, name: str = "isotonic()") -> Calibrator:
    """A binary calibrator whose fit returns IsotonicParams knots, applied by
    ``isotonic_apply()`` (clipped linear interpolation); ``name`` is the factory call the
    messages name (``"centred_isotonic()"``)."""
    check_option("inputs", inputs, BINARY_INPUTS)

    @jax.jit
    def _fit(x, labels, weights):
        return fit_kernel(x.astype(compute_dtype(x.dtype)), labels, weights)

    @jax.jit
    def _apply(params, x):
        return isotonic_apply(params, x.astype(compute_dtype(x.dtype)), probs_of(x, inputs))

    spec = ParamsSpec(IsotonicParams, lambda shape: {"size": ()}, name)
    fit = not_differentiable(_fit, name)
    return from_kernels(fit, _apply, inputs, binary=True, params=spec)


@cached_factory
def scaling_binning(n_bins: int = 10, *, inputs: str = "probs") -> Calibrator:
    """Scaling-binning calibrator (Kumar, Liang & Ma 2019): Platt scaling, then binning.

    1. Fit Platt scaling g (:func:`~jaxcal.calibrators.platt_scaling`, 0/1 targets) on the scores.
    2. Cut the scaled training scores g(s) into ``n_bins`` equal-mass bins (weighted
       quantile edges, ``closed="right"``, from ``jaxcal/_core/binning.py``), each inner edge
       moved half way to the next larger training score: the bins of the training data are
       the same, and a score recomputed with other rounding stays in its bin.
    3. Each bin outputs the weighted mean of g(s) over its training samples - the mean of
       the *scaled scores*, not of the labels: this is what makes the calibration error of
       the output measurable with few bins (their Theorem 4.1).

    As in the authors' ``PlattBinnerCalibrator`` all three steps use the same data (the
    paper's variant splits the data in three). A bin without training weight keeps g(s).

    Args:
      n_bins: M >= 1.
      inputs: ``"probs"`` or ``"logits"`` (of the Platt step).

    Returns:
      ``Calibrator``: ``fit(scores (N,), labels (N,) 0/1, *, weights=None) ->
      ScalingBinningParams``; ``apply(params, scores (N,)) -> probs (N,)``, at most M
      distinct values.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.calibrators import scaling_binning
      >>> cal = scaling_binning(2)
      >>> s = jnp.array([0.1, 0.2, 0.3, 0.6, 0.9, 0.95])
      >>> params = cal.fit(s, jnp.array([0, 0, 1, 1, 1, 0]))
      >>> len(set(cal.apply(params, s).tolist()))
      2

    References:
      Kumar, Liang & Ma (2019), "Verified Uncertainty Calibration", NeurIPS.
    """
    n_bins = check_positive_int("n_bins", n_bins)
    check_option("inputs", inputs, BINARY_INPUTS)
    platt = platt_scaling(inputs=inputs)

    @jax.jit
    def _fit(x, labels, weights):
        pp = platt.fit(x, labels, weights=weights)
        g = platt.apply(pp, x)
        edges = _between_scores(quantile_edges(g, n_bins, "right", weights), g)
        idx = edges_bin_index(g, edges, "right")
        values, filled = _bin_means(idx, g, labels, n_bins, weights, of_scores=True)
        return ScalingBinningParams(pp, edges, values, filled)

    @jax.jit
    def _apply(params, x):
        g = platt.apply(params.platt, x)
        idx = edges_bin_index(g, params.edges.astype(g.dtype), "right")
        return jnp.where(params.filled[idx], params.values[idx].astype(g.dtype), g)

    name = f"scaling_binning({n_bins})"
    spec = ParamsSpec(ScalingBinningParams, _bin_shapes(n_bins), name)
    return from_kernels(not_differentiable(_fit, name), _apply, inputs, binary=True, params=spec)

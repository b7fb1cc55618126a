"""Uncertainty of CORP: consistency and confidence bands, bootstrap intervals of MCB/DSC.

All resamples reuse the one sort of the data. A consistency resample draws new labels
from the forecasts (Bernoulli(x_i): the hypothesis of calibration) at the same
forecasts, so the knots stay; a bootstrap resample of the N samples is the data with
multiplicities m_i (how often sample i was drawn) as weights, in the same order, so the
knots stay too (a knot drawn zero times has weight 0). Each resample is then a
segment sum per knot and a PAV fit, vmapped over resamples in batches
(``map_batches()``); labels and indices come from the counter-based
draws of ``jaxcal/_core/random.py`` (resample r from ``jax.random.split(key, R)[r]``, so the
draws do not depend on the batch size).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.checks import check_option
from jaxcal._core.numerics import compute_dtype, scale_free, weighted_mean
from jaxcal._core.random import (
    indices,
    label_plan,
    multiplicities,
    real_positions,
    resample_seeds,
    resampled_labels,
)
from jaxcal.metrics._corp import (
    REDUCTIONS,
    binary_problems,
    calibrate,
    calibrated_blocks,
    fill_gaps,
    float_keys,
    key_values,
    knot_sums,
    knots_of,
    pad_last,
)
from jaxcal.metrics._corp_decomposition import (
    ScoreDecomposition,
    assemble,
    check_decomposition_options,
    decompose,
    group_terms,
    score_per_sample,
)
from jaxcal.stats._resampling.consistency import (
    batch_plan,
    check_batch_size,
    check_confidence,
    check_data,
    check_key,
    check_n_resamples,
    map_batches,
    vmap_batch,
)

BAND_KINDS = ("consistency", "confidence")


def column_quantiles(samples: jax.Array, levels: tuple[float, ...]) -> jax.Array:
    """Quantiles over axis 0 of ``samples`` ``(R, ...)`` by linear interpolation (as
    ``numpy.quantile``), from a sort of integer keys (5x faster than sorting floats)."""
    r = samples.shape[0]
    ordered = key_values(jnp.sort(float_keys(samples), axis=0), samples.dtype)
    out = []
    for q in levels:
        h = (r - 1) * q
        lo = int(h // 1)
        hi = min(lo + 1, r - 1)
        frac = jnp.asarray(h - lo, samples.dtype)
        out.append(ordered[lo] + frac * (ordered[hi] - ordered[lo]))
    return jnp.stack(out)


def _levels(confidence: float) -> tuple[float, float]:
    alpha = (1 - confidence) / 2
    return alpha, 1 - alpha


def _checked(probs, labels, weights, key, n_resamples, confidence, batch_size):
    """The validated data, key and resampling options, with the batch plan."""
    n_resamples = check_n_resamples(n_resamples)
    confidence = check_confidence(confidence)
    batch_size = check_batch_size(batch_size)
    probs, labels, weights = check_data(probs, labels, weights)
    n_batches, batch = batch_plan(n_resamples, batch_size, probs.shape[0])
    return probs, labels, weights, check_key(key), n_resamples, confidence, n_batches, batch


class CorpBands(NamedTuple):
    """Pointwise bands around the CORP curve (:func:`~jaxcal.stats.corp_bands`), at its knots.

    Attributes:
      forecasts: ``(N,)`` the knots, as :attr:`~jaxcal.metrics.CorpCurve.forecasts` (padded with the last).
      calibrated: ``(N,)`` the CORP curve at the knots.
      low, high: ``(N,)`` the band's bounds at each knot (padded like ``forecasts``).
      size: int32 number of knots.
    """

    forecasts: jax.Array
    calibrated: jax.Array
    low: jax.Array
    high: jax.Array
    size: jax.Array


def bands_of(scores, targets, weights, seeds, kind, n_batches, batch, confidence):
    """Bands of one binary problem (scores in the compute dtype)."""
    n = scores.shape[0]
    weights = None if weights is None else scale_free(weights.astype(scores.dtype))
    knots = knots_of(scores, weights)
    observed = calibrate(knot_sums(knots, targets, weights))
    # Past the knots the keys are padding (NaN as floats): 0, as corp_curve's forecasts,
    # so that zero total weight (no knot) gives a band of zeros, never NaN.
    x = jnp.where(
        jnp.arange(n, dtype=jnp.int32) < knots.size, key_values(knots.keys, scores.dtype), 0
    )
    if kind == "consistency":
        plan = label_plan(scores, scores)

        def fit(y):
            return calibrate(knot_sums(knots, y == 1, weights))

        draw = partial(resampled_labels, plan=plan)
    else:

        def fit(idx):
            m = multiplicities(idx, n, scores.dtype)
            resampled = knot_sums(knots, targets, m if weights is None else m * weights)
            return fill_gaps(x, calibrate(resampled), resampled.weight > 0)

        draw = partial(indices, n=n)
    samples = map_batches(vmap_batch(fit), seeds, n_batches, batch, draw)
    low, high = column_quantiles(samples, _levels(confidence))
    size = knots.size
    return CorpBands(*(pad_last(v, size) for v in (x, observed, low, high)), size)


@partial(
    jax.jit,
    static_argnames=("kind", "n_resamples", "confidence", "reduction", "n_batches", "batch"),
)
def _bands_kernel(
    probs, labels, weights, key, kind, n_resamples, confidence, reduction, n_batches, batch
):
    scores, targets = binary_problems(probs, labels, reduction)
    scores = scores.astype(compute_dtype(scores.dtype))
    seeds = resample_seeds(key, n_resamples)
    one = partial(bands_of, kind=kind, n_batches=n_batches, batch=batch, confidence=confidence)
    if scores.shape[0] == 1:
        return one(scores[0], targets[0], weights, seeds)
    return jax.vmap(one, in_axes=(0, 0, None, None))(scores, targets, weights, seeds)


def corp_bands(
    probs: Any,
    labels: Any,
    *,
    key: Any,
    kind: str = "consistency",
    n_resamples: int = 1000,
    confidence: float = 0.9,
    reduction: str = "top_label",
    weights: Any = None,
    batch_size: int | None = None,
) -> CorpBands:
    """Consistency or confidence bands for the CORP reliability curve, at its knots.

    * ``kind="consistency"``: where the curve of a *calibrated* model with these
      forecasts would lie. Labels are redrawn from the forecasts (y*_i ~ Bernoulli(x_i);
      top label: correct with probability the confidence), the CORP curve refitted at
      the same knots, and the band at knot x_j is the α/2 and 1 - α/2 quantiles of
      ĉ*_j. Centred near the diagonal; a curve that leaves it is evidence of
      miscalibration there (Dimitriadis et al. 2021, sec. "Uncertainty quantification").
    * ``kind="confidence"``: how precisely the curve is estimated. The N samples are
      resampled with replacement, the curve refitted and evaluated at every knot (knots
      not drawn by linear interpolation between the drawn ones, flat beyond them), and
      the band is the percentile interval at each knot.

    Both use one sort of the data for all resamples (see the module notes) and the
    quantiles of linear interpolation (``numpy.quantile``). Memory: ``n_resamples x N``
    floats for the resampled curves.

    Args:
      probs, labels: as :func:`~jaxcal.metrics.corp_curve`.
      key: a JAX PRNG key. An int is refused on purpose, as by every statistical
        function: randomness is explicit, and an int there is more often a NumPy seed or a
        count passed by mistake (pass ``jax.random.key(seed)``). The plots, e.g.
        :func:`jaxcal.plot.corp_diagram`, take an int seed (default 0) so that a figure
        is the same on every call.
      kind: ``"consistency"`` or ``"confidence"``.
      n_resamples: R >= 2 (a quantile of one resample is no interval).
      confidence: level in (0, 1) (``reliabilitydiag``'s default 0.9).
      reduction: ``"top_label"`` or ``"classwise"`` (2-D ``probs``), as :func:`~jaxcal.metrics.corp_curve`.
      weights: optional ``(N,)`` sample weights (kept with their samples).
      batch_size: resamples per batch (``None``: about 2**20 samples per batch).

    Returns:
      :class:`~jaxcal.stats.CorpBands` ``(forecasts, calibrated, low, high, size)`` (classwise: a
      leading class axis).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> p = jnp.linspace(0.05, 0.95, 60)
      >>> y = (jnp.arange(60) % 3 == 0).astype(jnp.int32)
      >>> b = corp_bands(p, y, key=jax.random.key(0), n_resamples=100)
      >>> n = int(b.size)
      >>> bool(jnp.all(b.low[:n] <= b.high[:n])), n
      (True, 60)

    References:
      Dimitriadis, Gneiting & Jordan (2021), "Stable reliability diagrams for
      probabilistic classifiers", PNAS 118(8); Bröcker & Smith (2007), "Increasing the
      reliability of reliability diagrams"; Efron & Tibshirani (1993).
    """
    check_option("kind", kind, BAND_KINDS)
    check_option("reduction", reduction, REDUCTIONS)
    checked = _checked(probs, labels, weights, key, n_resamples, confidence, batch_size)
    probs, labels, weights, key, n_resamples, confidence, n_batches, batch = checked
    return _bands_kernel(
        probs, labels, weights, key, kind, n_resamples, confidence, reduction, n_batches, batch
    )


class DecompositionIntervals(NamedTuple):
    """Result of :func:`~jaxcal.stats.score_decomposition_ci`: each a :class:`~jaxcal.metrics.ScoreDecomposition`.

    Attributes:
      estimate: the decomposition of the data (0-d terms).
      low, high: the percentile interval of each term (0-d terms).
      samples: each term on every bootstrap resample (``(n_resamples,)`` terms).
    """

    estimate: ScoreDecomposition
    low: ScoreDecomposition
    high: ScoreDecomposition
    samples: ScoreDecomposition


def _resampled_decompositions(scores, method, problems, knots, weights, m, binned_args):
    """The decomposition of one bootstrap resample (multiplicities ``m``) for each of
    ``scores`` (a tuple of score names): their CORP fits are one fit, shared."""
    targets, per_samples = problems
    w = m if weights is None else m * weights
    values = [jnp.sum(jax.vmap(lambda v: weighted_mean(v, w))(ps)) for ps in per_samples]
    if method == "binned":
        probs, labels, *options = binned_args
        out = []
        for score, value in zip(scores, values, strict=True):
            d = decompose(score, method, probs, labels, w, *options)
            out.append(ScoreDecomposition(value, *d[1:]))
        return tuple(out)

    def one(k, t):
        k = knot_sums(k, t, w)
        weight, c = calibrated_blocks(k)
        positives, total = jnp.sum(k.positives), jnp.sum(k.weight)
        return tuple(group_terms(score, weight, c, positives, total) for score in scores)

    terms = jax.vmap(one)(knots, targets)
    return tuple(
        assemble(value, *(jnp.sum(t) for t in term))
        for value, term in zip(values, terms, strict=True)
    )


@partial(jax.jit, static_argnames=("options", "n_resamples", "confidence", "n_batches", "batch"))
def _ci_kernel(
    probs, labels, weights, key, options, n_resamples, confidence, n_batches, batch, rows=None
):
    """A tuple of ``DecompositionIntervals``, one per score of ``options[0]`` (a tuple),
    all on the same resamples."""
    scores_named, method, n_bins, binning, closed, reduction = options
    binned_args = (probs, labels, n_bins, binning, closed, reduction)
    estimates = [
        decompose(score, method, probs, labels, weights, *binned_args[2:]) for score in scores_named
    ]
    scores, targets = binary_problems(probs, labels, reduction)
    scores = scores.astype(compute_dtype(scores.dtype))
    per_samples = [
        jax.vmap(partial(score_per_sample, score))(scores, targets) for score in scores_named
    ]
    knots = None if method == "binned" else jax.vmap(knots_of, in_axes=(0, None))(scores, weights)
    n = probs.shape[0]
    problems = (targets, per_samples)

    # Padded inputs (``rows``: the real rows): positions past ``rows`` draw nothing.
    real = None if rows is None else real_positions(n, rows, scores.dtype)

    def fit(idx):
        m = multiplicities(idx, n, scores.dtype, real)
        return _resampled_decompositions(
            scores_named, method, problems, knots, weights, m, binned_args
        )

    seeds = resample_seeds(key, n_resamples)
    draw = partial(indices, n=n, rows=rows)
    all_samples = map_batches(vmap_batch(fit), seeds, n_batches, batch, draw)
    out = []
    for estimate, samples in zip(estimates, all_samples, strict=True):
        bounds = column_quantiles(jnp.stack(samples, axis=1), _levels(confidence))
        low, high = (ScoreDecomposition(*b) for b in bounds)
        out.append(DecompositionIntervals(estimate, low, high, ScoreDecomposition(*samples)))
    return tuple(out)


def score_decomposition_ci_padded(
    probs: jax.Array,
    labels: jax.Array,
    weights: jax.Array,
    rows: jax.Array,
    *,
    key: jax.Array,
    scores: tuple[str, ...],
    reduction: str,
    n_resamples: int,
    confidence: float,
) -> tuple[DecompositionIntervals, ...]:
    """:func:`score_decomposition_ci` (CORP) of each of ``scores`` on inputs padded past
    their first ``rows`` rows (weights 1 on them, 0 after; ``rows`` traced), for a jitted
    caller that compiles one program per size class (``jaxcal report``): the resamples
    of the unpadded call, and one CORP fit per resample for all the scores (the fit does
    not depend on the score)."""
    n_batches, batch = batch_plan(n_resamples, None, probs.shape[0])
    defaults = ("corp", 15, "uniform", "right")  # score_decomposition_ci's
    for score in scores:
        n_bins = check_decomposition_options(score, *defaults, reduction, probs)
    options = (tuple(scores), "corp", n_bins, "uniform", "right", reduction)
    return _ci_kernel(
        probs, labels, weights, key, options, n_resamples, confidence, n_batches, batch, rows
    )


def score_decomposition_ci(
    probs: Any,
    labels: Any,
    *,
    key: Any,
    score: str = "brier",
    method: str = "corp",
    n_bins: int = 15,
    binning: str = "uniform",
    closed: str = "right",
    reduction: str = "classwise",
    n_resamples: int = 1000,
    confidence: float = 0.95,
    weights: Any = None,
    batch_size: int | None = None,
) -> DecompositionIntervals:
    """Bootstrap percentile intervals of the score decomposition's terms (MCB, DSC, ...).

    Resamples the N samples with replacement ``n_resamples`` times and recomputes
    :func:`~jaxcal.metrics.score_decomposition` (same options) on each, as one vmapped computation: a
    resample is the data weighted by the multiplicities of its samples, so the CORP
    knots (one sort) serve every resample. The interval of each term is
    [q(α/2), q(1 - α/2)] of its bootstrap distribution, α = 1 - confidence (quantiles
    as ``numpy.quantile``); resample r draws its indices from ``jax.random.split(key,
    n_resamples)[r]`` as :func:`jaxcal.stats.bootstrap_ci` does.

    MCB is biased upwards on resamples (a resample repeats samples, and the isotonic fit
    of fewer distinct points follows the outcomes more closely), so for a
    well-calibrated model its percentile interval can lie above the estimate, as the
    binned ECE's does; the interval says how far the estimate can move, not where a
    bias-corrected value lies.

    Args:
      probs, labels, score, method, n_bins, binning, closed, reduction, weights: as
        :func:`~jaxcal.metrics.score_decomposition`.
      key: a JAX PRNG key. An int is refused on purpose, as by every statistical
        function: randomness is explicit, and an int there is more often a NumPy seed or a
        count passed by mistake (pass ``jax.random.key(seed)``). The plots, e.g.
        :func:`jaxcal.plot.corp_diagram`, take an int seed (default 0) so that a figure
        is the same on every call.
      n_resamples: R >= 2 (a quantile of one resample is no interval).
      confidence: level in (0, 1).
      batch_size: resamples per batch (``None``: about 2**20 samples per batch).

    Returns:
      :class:`~jaxcal.stats.DecompositionIntervals` ``(estimate, low, high, samples)``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> p = jnp.linspace(0.05, 0.95, 200)
      >>> y = (jnp.sin(jnp.arange(200.0)) + 1 < 2 * p).astype(jnp.int32)
      >>> ci = score_decomposition_ci(p, y, key=jax.random.key(0), n_resamples=200)
      >>> bool(ci.low.discrimination <= ci.estimate.discrimination <= ci.high.discrimination)
      True
      >>> ci.samples.discrimination.shape
      (200,)

    References:
      Dimitriadis, Gneiting & Jordan (2021), PNAS 118(8); Efron & Tibshirani (1993),
      "An Introduction to the Bootstrap", ch. 13.
    """
    n_bins = check_decomposition_options(score, method, n_bins, binning, closed, reduction, probs)
    checked = _checked(probs, labels, weights, key, n_resamples, confidence, batch_size)
    probs, labels, weights, key, n_resamples, confidence, n_batches, batch = checked
    options = ((score,), method, n_bins, binning, closed, reduction)
    return _ci_kernel(
        probs, labels, weights, key, options, n_resamples, confidence, n_batches, batch
    )[0]

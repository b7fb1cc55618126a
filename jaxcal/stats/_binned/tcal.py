"""T-Cal (Lee, Huang, Hassani & Dobriban 2023): the adaptive test of calibration by the
debiased plug-in estimate of the squared l2 ECE over dyadic bin counts.

The null is consistency resampling with the predictions resampled too, drawn exactly as
:func:`~jaxcal.stats.consistency_test` draws them with ``resample_predictions=True``
(``jaxcal/stats/_resampling/consistency.py``): the same key gives the same resamples, so
each scale's p-value is the one ``consistency_test`` gives for that scale's estimate.
Each resample is kept as counts and label sums per original sample, and the per-bin
sums of every scale are segment sums over the scores sorted once.
"""

from __future__ import annotations

import warnings
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.checks import check_probs_labels
from jaxcal._core.confidence import scores_and_targets
from jaxcal._core.numerics import pow2, safe_divide, upcast
from jaxcal._core.random import draw, indices, label_thresholds, resample_seeds, split_seeds, words
from jaxcal._core.sort import argsort
from jaxcal._core.validity import kernel_inputs, run_validated
from jaxcal.stats._resampling.consistency import (
    batch_plan,
    check_batch_size,
    check_key,
    check_n_resamples,
    map_batches,
    tail_p_value,
)

#: Resamples per batch: about this many (resample, sample) pairs at once.
_AUTO_PAIRS = 2**20


def n_scales(n: int) -> int:
    """B = int(2 log2(n / sqrt(log n))), the reference's number of dyadic scales."""
    return int(2 * np.log2(n / np.sqrt(np.log(n))))


#: The reference's ``MC_trials``: the default R's floor.
REFERENCE_RESAMPLES = 3000

#: The default R puts the Bonferroni floor ``B / (R + 1)`` at ``alpha / FLOOR_MARGIN`` or
#: below, so that a scale's p-value has room under ``alpha / B`` (a floor at alpha itself
#: would need every one of the R resamples of some scale below the statistic).
FLOOR_MARGIN = 10


def check_alpha(alpha: Any) -> float:
    """``alpha``: a real number strictly between 0 and 1 (booleans refused)."""
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise ValueError(f"`alpha` must be a number in (0, 1), e.g. 0.05; got {alpha!r}.")
    if not 0 < alpha < 1:
        raise ValueError(f"`alpha` must lie strictly between 0 and 1, e.g. 0.05; got {alpha}.")
    return float(alpha)


def default_resamples(n_scales_: int, alpha: float) -> int:
    """The default R: ``max(3000, ceil(10 B / alpha) - 1)``, so ``B / (R + 1) <= alpha / 10``."""
    return max(REFERENCE_RESAMPLES, int(np.ceil(FLOOR_MARGIN * n_scales_ / alpha)) - 1)


class TCalResult(NamedTuple):
    """Result of :func:`~jaxcal.stats.tcal_test`.

    Attributes:
      statistic: ``(B,)`` the debiased plug-in estimate at ``2**b`` bins, b = 1..B.
      p_value: 0-d, ``min(1, B min_b p_b)`` (Bonferroni over the scales).
      p_values: ``(B,)`` each scale's consistency-resampling p-value
        ``(1 + #{null_b >= statistic_b}) / (1 + R)``.
      scales: ``(B,)`` int32 b: scale b has ``2**b`` bins.
      p_floor: 0-d, ``min(1, B / (R + 1))``: the smallest p-value the test can return
        (Bonferroni over B scales of R resamples each).
      reaches_alpha: 0-d bool, ``p_floor <= alpha``: False is the warning that the test
        cannot reject at the ``alpha`` asked for, whatever the data (raise
        ``n_resamples`` to at least ``B / alpha``, or leave it None).
    """

    statistic: jax.Array
    p_value: jax.Array
    p_values: jax.Array
    scales: jax.Array
    p_floor: jax.Array
    reaches_alpha: jax.Array


def _dpe(zs, c, su, su2, scales):
    """DPE at each scale from per-sample sums in score order: ``(B,)``.

    ``zs`` ``(N,)`` sorted scores; ``c``, ``su``, ``su2`` ``(N,)`` the weight, sum of U and of
    U^2 each sample contributes. Bin of a score: ``floor(2**b z)`` (the reference's, a
    score of 1 alone in bin ``2**b``); bins are consecutive in score order, so their sums
    are segment sums over the runs of equal bin index.
    """
    n = zs.shape[0]
    total = jnp.sum(c)

    def one(b):  # one compiled body for every scale (an unrolled loop compiled 4x longer)
        ids = jnp.floor(zs * pow2(b, zs.dtype))  # exact 2**b (exp2 is not)
        new = jnp.concatenate([jnp.ones((1,), bool), ids[1:] != ids[:-1]])
        seg = jnp.cumsum(new.astype(jnp.int32)) - 1
        nb = jax.ops.segment_sum(c, seg, n)
        sb = jax.ops.segment_sum(su, seg, n)
        s2 = jax.ops.segment_sum(su2, seg, n)
        return safe_divide(jnp.sum(safe_divide(sb * sb - s2, nb)), total)

    return jax.lax.map(one, jnp.asarray(scales, jnp.int32))


def tcal_dpe(probs: Any, labels: Any, *, n_bins: int, weights: Any = None) -> jax.Array:
    """The debiased plug-in estimate at ``n_bins`` bins (one scale of T-Cal), as a metric.

    ``sum_b ((sum_{i in b} U_i)^2 - sum_{i in b} U_i^2) / n_b / n`` with ``U = Z - Y``
    and bins ``floor(n_bins Z)`` (T-Cal's ``plugin_ece(p=2, debias=True)``). Private:
    used by the tests to check :func:`~jaxcal.stats.tcal_test` scale by scale through
    :func:`~jaxcal.stats.consistency_test`.
    """
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    scores, targets, _ = scores_and_targets(probs, labels)
    z = upcast(scores)
    u = z - targets.astype(z.dtype)
    w = jnp.ones_like(z) if weights is None else weights.astype(z.dtype)
    order = argsort(z)
    b = int(np.log2(n_bins))
    return _dpe(z[order], w[order], (w * u)[order], (w * u * u)[order], (b,))[0]


@partial(
    jax.jit,
    static_argnames=("n_resamples", "n_batches", "batch", "scales", "multiclass", "alpha"),
)
def _tcal_kernel(
    probs, labels, weights, key, n_resamples, n_batches, batch, scales, multiclass, alpha
):
    probs, labels, rows, summary = kernel_inputs(probs, labels, weights)
    scores, targets, pred = scores_and_targets(probs, labels, rows=rows)
    z = upcast(scores)
    n = z.shape[0]
    w = jnp.ones_like(z) if weights is None else weights.astype(z.dtype)
    order = argsort(z)
    zs = z[order]
    u = z - targets.astype(z.dtype)
    statistic = _dpe(zs, w[order], (w * u)[order], (w * u * u)[order], scales)

    def batch_fn(s):  # s: (b, 2, 2), as consistency_test with resample_predictions=True
        idx = indices(s[:, 0], n)

        def labels_of(p_r, words_r):
            return draw(words_r[None], label_thresholds(p_r))[0]

        drawn = jax.vmap(labels_of)(probs[idx], words(s[:, 1], n))
        hit = (drawn == pred[idx]) if multiclass else (drawn == 1)

        def one(i, h):  # counts and label sums per original sample, in score order
            cnt = jax.ops.segment_sum(jnp.ones((n,), z.dtype), i, n)[order]
            hits = jax.ops.segment_sum(h.astype(z.dtype), i, n)[order]
            ws = w[order]
            return _dpe(
                zs,
                ws * cnt,
                ws * (cnt * zs - hits),
                ws * (cnt * zs * zs - 2 * zs * hits + hits),
                scales,
            )

        return jax.vmap(one)(idx, hit)

    seeds = split_seeds(resample_seeds(key, n_resamples))
    null = map_batches(batch_fn, seeds, n_batches, batch)  # (R, B)
    p_values = jax.vmap(tail_p_value, in_axes=(1, 0))(null, statistic)
    combined = jnp.minimum(len(scales) * jnp.min(p_values), 1)
    floor = jnp.asarray(min(1.0, len(scales) / (n_resamples + 1)), combined.dtype)
    result = TCalResult(
        statistic,
        combined,
        p_values,
        jnp.asarray(scales, jnp.int32),
        floor,
        jnp.asarray(len(scales) / (n_resamples + 1) <= alpha),
    )
    return result, summary


def tcal_test(
    probs: Any,
    labels: Any,
    *,
    key: Any,
    n_resamples: int | None = None,
    alpha: float = 0.05,
    batch_size: int | None = None,
    weights: Any = None,
) -> TCalResult:
    """Adaptive T-Cal: a test of calibration over dyadic binnings (Lee et al. 2023).

    For each scale b = 1..B, ``B = int(2 log2(n / sqrt(log n)))``, the debiased plug-in
    estimate (DPE) of the squared l2 ECE with ``m = 2**b`` equal-width bins,

    .. math:: \\mathrm{DPE}_m = \\frac{1}{n} \\sum_{\\text{bins } j}
              \\frac{(\\sum_{i \\in j} U_i)^2 - \\sum_{i \\in j} U_i^2}{n_j},
              \\qquad U_i = Z_i - Y_i,

    is compared with its law under consistency resampling (predictions drawn with
    replacement, labels ``Y* ~ Bernoulli(Z*)``): as
    ``consistency_test(dpe_m, ..., resample_predictions=True)``, whose p-value
    ``p_b = (1 + #{null >= DPE}) / (1 + R)`` each scale gets (the same key gives the
    same resamples, for every scale at once). The scales are combined by Bonferroni:
    ``p = min(1, B min_b p_b)``; the reference's ``adaptive_T_Cal`` rejects at level
    alpha when some scale exceeds its null's ``1 - alpha/B`` quantile, which is
    ``p <= alpha`` up to the quantile's interpolation (it draws fresh resamples per
    scale; here one set serves all, which Bonferroni allows). Z is the positive-class
    probability (1-D) or the top-label confidence with Y the correctness (2-D); bins
    ``floor(m Z)`` as the reference's ``plugin_ece`` (a score of exactly 1 alone in bin
    m). Valid at any n for the resampling null (it is exact for calibrated scores up to
    Monte-Carlo error); powerful against Hölder-smooth miscalibration (minimax optimal,
    the paper's Theorem). O(R B N) after one sort; the R resamples run vmapped in
    batches.

    **The number of resamples.** Bonferroni floors the p-value at ``B / (R + 1)``: with
    R = 200 and n = 200 (B = 12) every p-value is at least 12/201 = 0.0597, and the test
    cannot reject at alpha = 0.05 however miscalibrated the model (its power against
    ``Y ~ Bernoulli(Z^2)`` was 0 there, 1 with R = 1000). So the default R is chosen from
    B and the ``alpha`` you name: ``max(3000, ceil(10 B / alpha) - 1)`` (the reference's
    3000, or more so that the floor is at most alpha / 10). An R you pass is used as
    given; when its floor exceeds ``alpha`` the result says so (``reaches_alpha`` False,
    ``p_floor`` the floor) and an eager call warns (``UserWarning``).

    Args:
      probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows, N >= 2.
      labels: ``(N,)`` int labels.
      key: a JAX PRNG key.
      n_resamples: R >= 2; None (default): ``max(3000, ceil(10 B / alpha) - 1)``
        (the reference's ``MC_trials = 3000`` at least).
      alpha: the level the test is meant for, in (0, 1): it sets the default R and
        ``reaches_alpha``; the p-value itself does not depend on it.
      batch_size: resamples per batch (default about 2**20 / N).
      weights: optional ``(N,)`` frequency weights, kept with their samples when the
        predictions are resampled (as ``consistency_test``).

    Returns:
      ``TCalResult(statistic, p_value, p_values, scales, p_floor, reaches_alpha)``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> p = jnp.linspace(0.05, 0.95, 40)
      >>> y = (jnp.arange(40) % 2).astype(jnp.int32)
      >>> res = tcal_test(p, y, key=jax.random.key(0), n_resamples=200)
      >>> res.scales.tolist(), bool(0 < res.p_value <= 1)
      ([1, 2, 3, 4, 5, 6, 7, 8], True)
      >>> round(float(res.p_floor), 4), bool(res.reaches_alpha)  # 8 / 201 <= 0.05
      (0.0398, True)
      >>> tcal_test(p, y, key=jax.random.key(0)).p_floor.item() <= 0.005  # default R
      True

    References:
      Lee, Huang, Hassani & Dobriban (2023), "T-Cal: An optimal test for the calibration
      of predictive models", JMLR; code ``dh7401/T-Cal`` (``utils.py``: ``plugin_ece``,
      ``adaptive_T_Cal``).
    """
    alpha = check_alpha(alpha)
    if n_resamples is not None:
        n_resamples = check_n_resamples(n_resamples)
    batch_size = check_batch_size(batch_size)
    probs, labels, weights = check_probs_labels(probs, labels, weights, values=False)
    key = check_key(key)
    n = probs.shape[0]
    if n < 2:
        raise ValueError(f"`probs` must hold at least 2 samples for T-Cal; got {n}.")
    scales = tuple(range(1, max(1, n_scales(n)) + 1))
    b = len(scales)
    if n_resamples is None:
        n_resamples = default_resamples(b, alpha)
    elif b / (n_resamples + 1) > alpha:
        warnings.warn(
            f"tcal_test cannot reject at alpha = {alpha}: with B = {b} scales and "
            f"n_resamples = {n_resamples} every p-value is at least B / (R + 1) = "
            f"{b / (n_resamples + 1):.4g}. Use n_resamples >= {int(np.ceil(b / alpha))} "
            "(or None for the default).",
            stacklevel=2,
        )
    n_batches, batch = batch_plan(n_resamples, batch_size, n, _AUTO_PAIRS)
    kernel = partial(
        _tcal_kernel,
        key=key,
        n_resamples=n_resamples,
        n_batches=n_batches,
        batch=batch,
        scales=scales,
        multiclass=probs.ndim == 2,
        alpha=alpha,
    )
    signature = (_tcal_kernel, (n_resamples, n_batches, batch, scales, alpha))
    return run_validated(kernel, probs, labels, weights, signature=signature)

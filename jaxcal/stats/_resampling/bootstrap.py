"""Bootstrap confidence intervals of any metric, and the paired comparison of two models.

Both resample the N samples with replacement, ``n_resamples`` times, each resample from
its own key ``jax.random.split(key, n_resamples)[r]`` (indices by Lemire's
multiply-shift map of the resample's Threefry words, ``jaxcal/_core/random.py``), so the
resamples do not depend on ``batch_size``; all resamples run as one vmapped computation
in batches (``jaxcal/stats/_resampling/consistency.py``). The interval is then formed from the bootstrap
distribution: percentile, basic, or Efron's BCa.
"""

from __future__ import annotations

import statistics
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.checks import check_option, check_probs
from jaxcal._core.numerics import compute_dtype
from jaxcal._core.random import indices, multiplicities, real_positions, resample_seeds
from jaxcal.stats._resampling.consistency import (
    batch_plan,
    check_batch_size,
    check_confidence,
    check_data,
    check_key,
    check_metric,
    check_n_resamples,
    evaluate,
    map_batches,
    tail_p_value,
    vmap_batch,
)
from jaxcal.stats._result import summary_repr

METHODS = ("percentile", "basic", "bca")


class BootstrapResult(NamedTuple):
    """Result of :func:`~jaxcal.stats.bootstrap_ci`.

    Attributes:
      estimate: 0-d, the metric on the data.
      low, high: 0-d, the interval's bounds.
      samples: ``(n_resamples,)`` the metric on each bootstrap resample.
    """

    estimate: jax.Array
    low: jax.Array
    high: jax.Array
    samples: jax.Array

    def __repr__(self) -> str:  # the resamples summarised, not printed one by one
        return summary_repr(self)


class PairedBootstrapResult(NamedTuple):
    """Result of :func:`~jaxcal.stats.paired_bootstrap`.

    Attributes:
      difference: 0-d, metric(probs_a) - metric(probs_b) on the data.
      low, high: 0-d, the interval's bounds for the difference.
      p_value: 0-d, two-sided bootstrap p-value of "no difference", in (0, 1].
      samples: ``(n_resamples,)`` the difference on each bootstrap resample.
    """

    difference: jax.Array
    low: jax.Array
    high: jax.Array
    p_value: jax.Array
    samples: jax.Array

    def __repr__(self) -> str:  # the resamples summarised, not printed one by one
        return summary_repr(self)


def _check_options(metric, n_resamples, confidence, method, batch_size):
    """The checked options both procedures share: (static metric, R, level, batch)."""
    static = check_metric(metric)
    n_resamples = check_n_resamples(n_resamples)
    confidence = check_confidence(confidence)
    check_option("method", method, METHODS)
    return static, n_resamples, confidence, check_batch_size(batch_size)


def _normal_cdf(x):
    return jax.scipy.special.ndtr(x)


def _interval(estimate, samples, confidence, method, influence):
    """Percentile, basic or BCa interval from the bootstrap ``samples``."""
    dtype = samples.dtype
    alpha = (1 - confidence) / 2
    if method == "bca":
        r = samples.shape[0]
        # Efron's bias correction, with ties counted half (as scipy.stats.bootstrap).
        below = jnp.sum(samples < estimate) + jnp.sum(samples <= estimate)
        share = below.astype(dtype) / (2 * r)
        share = jnp.clip(share, 0.5 / r, 1 - 0.5 / r)  # finite z0 when all fall on one side
        z0 = jax.scipy.special.ndtri(share)
        u = influence - jnp.mean(influence)
        ss = jnp.sum(u**2)
        a = jnp.where(ss > 0, jnp.sum(u**3) / (6 * jnp.where(ss > 0, ss, 1) ** 1.5), 0)
        z_alpha = jnp.asarray(statistics.NormalDist().inv_cdf(alpha), dtype)

        def level(z):
            num = z0 + z
            den = 1 - a * num
            safe = jnp.where(den > 0, den, 1)
            return jnp.where(den > 0, _normal_cdf(z0 + num / safe), jnp.where(num > 0, 1.0, 0.0))

        q = jnp.stack([level(z_alpha), level(-z_alpha)]).astype(dtype)
    else:
        q = jnp.asarray([alpha, 1 - alpha], dtype)
    low, high = jnp.quantile(samples, q)
    if method == "basic":
        low, high = 2 * estimate - high, 2 * estimate - low
    return low.astype(dtype), high.astype(dtype)


def _influence(fn, probs, labels, weights):
    """Empirical influence of each sample: w_i * d metric / d w_i (infinitesimal jackknife)."""
    w = jnp.ones(probs.shape[0], compute_dtype(probs.dtype)) if weights is None else weights
    w = w.astype(compute_dtype(w.dtype))
    try:
        grad = jax.grad(lambda w_: fn(probs, labels, weights=w_).astype(w_.dtype))(w)
    except TypeError as err:
        if "weights" in str(err):
            raise ValueError(
                "method='bca' needs a `metric` that accepts `weights=` (its acceleration "
                "uses the metric's derivative with respect to the sample weights)."
            ) from err
        raise
    return w * grad


@partial(
    jax.jit, static_argnames=("metric", "n_resamples", "n_batches", "batch", "confidence", "method")
)
def _bootstrap_kernel(
    metric, probs, labels, weights, key, n_resamples, n_batches, batch, confidence, method
):
    fn = metric.fn
    estimate = evaluate(fn, probs, labels, weights)
    n = probs.shape[0]
    seeds = resample_seeds(key, n_resamples)

    def batch_fn(idx):  # idx: (b, N) resampled indices
        if weights is None:
            return vmap_batch(lambda i: evaluate(fn, probs[i], labels[i], None))(idx)
        return vmap_batch(lambda i: evaluate(fn, probs[i], labels[i], weights[i]))(idx)

    draw = partial(indices, n=n)
    samples = map_batches(batch_fn, seeds, n_batches, batch, draw).astype(estimate.dtype)
    influence = _influence(fn, probs, labels, weights) if method == "bca" else None
    low, high = _interval(estimate, samples, confidence, method, influence)
    return BootstrapResult(estimate, low, high, samples)


def bootstrap_ci(
    metric: Any,
    probs: Any,
    labels: Any,
    *,
    key: Any,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    method: str = "percentile",
    batch_size: int | None = None,
    weights: Any = None,
) -> BootstrapResult:
    """Bootstrap confidence interval of any metric, all resamples in one vmapped call.

    Resamples the N (prediction, label[, weight]) triples with replacement
    ``n_resamples`` times, recomputes the metric on each, and forms the interval at
    level ``confidence`` from the bootstrap distribution θ*_1..θ*_R (quantiles by
    linear interpolation, as ``numpy.quantile``):

    * ``"percentile"``: [q(α/2), q(1 - α/2)] with α = 1 - confidence;
    * ``"basic"``: [2θ̂ - q(1 - α/2), 2θ̂ - q(α/2)] (the reverse percentile interval);
    * ``"bca"``: Efron's bias-corrected and accelerated interval, [q(α1), q(α2)] with
      α1,2 = Φ(z0 + (z0 + z)/(1 - a(z0 + z))) for z = ±z_{α/2}, z0 = Φ⁻¹(share of
      θ* below θ̂, ties counted half) as scipy.stats.bootstrap, and the acceleration
      a = Σ U_i³ / (6 (Σ U_i²)^{3/2}) from the empirical influence values
      U_i = w_i ∂θ/∂w_i (the infinitesimal jackknife: one gradient, O(N), where the
      delete-one jackknife scipy uses needs N metric calls; for smooth statistics
      they agree to O(1/N), for the mean exactly). It needs a metric that accepts
      ``weights=``; z0 is kept finite (share clipped to [1/2R, 1 - 1/2R]).

    A biased statistic can give an interval that excludes its own estimate: the binned
    ECE is biased upwards (binning noise adds ``|gap| > 0`` even for a calibrated model),
    and a resample, holding ties (duplicates), is noisier still, so the percentile
    interval of ``ece`` sits above θ̂ (estimate 0.1327, interval [0.1342, 0.2677] at
    N = 30, D28). The interval describes the estimator's sampling spread, not a range
    for the true calibration error; ``method="bca"`` corrects for the median bias
    (z0), ``ece(..., norm="l2", debias=True)`` is the debiased estimator, and
    :func:`~jaxcal.stats.consistency_test` answers "is this model calibrated?".

    Indices are drawn from the Threefry stream of ``jax.random.split(key,
    n_resamples)[r]`` by Lemire's multiply-shift map (see ``jaxcal/_core/random.py``), so the
    resamples do not depend on ``batch_size``.

    Args:
      metric: ``metric(probs, labels, *, weights=None) -> 0-d array`` (see
        :func:`~jaxcal.stats.consistency_test`).
      probs: ``(N,)`` or ``(N, K)`` predictions.
      labels: ``(N,)`` integer labels.
      key: a JAX PRNG key.
      n_resamples: R >= 1.
      confidence: level in (0, 1).
      method: ``"percentile"``, ``"basic"`` or ``"bca"``.
      batch_size: resamples per batch (memory ~ ``batch_size * N`` samples); ``None``:
        about 2**20 samples per batch.
      weights: optional ``(N,)`` sample weights, resampled with their samples.

    Returns:
      ``BootstrapResult(estimate, low, high, samples)``. Degenerate bootstrap
      distributions (all θ* equal) give low = high = that value.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> import jaxcal
      >>> p = jnp.linspace(0.05, 0.95, 40)
      >>> y = (jnp.arange(40) % 3 == 0).astype(jnp.int32)
      >>> res = bootstrap_ci(jaxcal.brier_score, p, y, key=jax.random.key(0), n_resamples=200)
      >>> bool(res.low <= res.estimate <= res.high)
      True

    References:
      Efron & Tibshirani (1993), "An Introduction to the Bootstrap", ch. 13-14 and 22;
      DiCiccio & Efron (1996), "Bootstrap confidence intervals", eq. (6.6) for the
      acceleration from influence values; Efron (1987), "Better bootstrap confidence
      intervals".
    """
    static, n_resamples, confidence, batch_size = _check_options(
        metric, n_resamples, confidence, method, batch_size
    )
    probs, labels, weights = check_data(probs, labels, weights)
    key = check_key(key)
    n_batches, batch = batch_plan(n_resamples, batch_size, probs.shape[0])
    return _bootstrap_kernel(
        static, probs, labels, weights, key, n_resamples, n_batches, batch, confidence, method
    )


def bootstrap_padded(
    metrics: tuple,
    probs: jax.Array,
    labels: jax.Array,
    weights: jax.Array,
    rows: jax.Array,
    *,
    key: jax.Array,
    n_resamples: int,
    confidence: float,
    repetition: tuple[bool, ...] | None = None,
) -> list[BootstrapResult]:
    """:func:`bootstrap_ci` (percentile) of each of ``metrics`` on the same resamples of
    inputs padded past their first ``rows`` rows, for a jitted caller that compiles one
    program per size class (``jaxcal report``).

    ``weights`` ``(M,)``: 1 on the real rows, 0 on the padding; ``rows``: traced int32.
    Each result equals ``bootstrap_ci`` of that metric on the first ``rows`` rows with
    the same key (the same resamples: ``jaxcal/_core/random.indices``; positions past
    ``rows`` weigh 0), to round-off where a metric sums in another order. The metrics
    share each resample's gather, and XLA computes once what they share of it (the
    selective measures' sort by confidence: 7 sorts per resample become 1).
    ``repetition[j]`` True: metric j reads integer weights as repeated rows (the binned
    ECEs without ``debias``, Brier, log loss, accuracy: ``tests/metrics/test_ece.py``),
    so it is given the resample as its multiplicities on the rows as they are (no gather);
    what of its work depends only on the rows (uniform bins' indices) then runs once, not
    once per resample. Equal-mass edges still sort per resample: their weighted quantiles
    order equal scores by weight. Traced inputs are not checked.
    """
    n = probs.shape[0]
    fns = tuple(check_metric(m).fn for m in metrics)
    repetition = (False,) * len(fns) if repetition is None else tuple(repetition)
    gathered = [j for j, r in enumerate(repetition) if not r]
    counted = [j for j, r in enumerate(repetition) if r]
    real = real_positions(n, rows, weights.dtype)

    def values(js, p, y, w):
        return [evaluate(fns[j], p, y, w) for j in js]

    estimate = jnp.stack(values(range(len(fns)), probs, labels, weights))

    def one(i):  # the resample of indices i (M,), past ``rows`` weighted 0
        out = values(gathered, probs[i], labels[i], weights[i] * real)
        if counted:
            w = multiplicities(i, n, weights.dtype, real) * weights
            out += values(counted, probs, labels, w)
        return jnp.stack(out)

    n_batches, batch = batch_plan(n_resamples, None, n * len(fns))
    seeds = resample_seeds(key, n_resamples)
    draw = partial(indices, n=n, rows=rows)
    samples = map_batches(vmap_batch(one), seeds, n_batches, batch, draw)
    samples = samples[:, np.argsort(gathered + counted)].astype(estimate.dtype)
    results = []
    for j in range(len(fns)):
        low, high = _interval(estimate[j], samples[:, j], confidence, "percentile", None)
        results.append(BootstrapResult(estimate[j], low, high, samples[:, j]))
    return results


@partial(
    jax.jit, static_argnames=("metric", "n_resamples", "n_batches", "batch", "confidence", "method")
)
def _paired_kernel(
    metric,
    probs_a,
    probs_b,
    labels,
    weights,
    key,
    n_resamples,
    n_batches,
    batch,
    confidence,
    method,
):
    fn = metric.fn

    def diff(pa, pb, y, w):
        return evaluate(fn, pa, y, w) - evaluate(fn, pb, y, w)

    difference = diff(probs_a, probs_b, labels, weights)
    n = labels.shape[0]
    seeds = resample_seeds(key, n_resamples)

    def batch_fn(idx):  # idx: (b, N) resampled indices
        return vmap_batch(
            lambda i: diff(
                probs_a[i], probs_b[i], labels[i], None if weights is None else weights[i]
            )
        )(idx)

    draw = partial(indices, n=n)
    samples = map_batches(batch_fn, seeds, n_batches, batch, draw).astype(difference.dtype)
    influence = None
    if method == "bca":
        influence = _influence(
            lambda _, y, weights: fn(probs_a, y, weights=weights) - fn(probs_b, y, weights=weights),
            probs_a,
            labels,
            weights,
        )
    low, high = _interval(difference, samples, confidence, method, influence)
    # Two-sided p-value of "no difference" from the bootstrap distribution centred on the
    # estimate (Hall & Wilson 1991): how often |θ* - θ̂| reaches |θ̂|.
    p_value = tail_p_value(jnp.abs(samples - difference), jnp.abs(difference))
    return PairedBootstrapResult(difference, low, high, p_value, samples)


def paired_bootstrap(
    metric: Any,
    probs_a: Any,
    probs_b: Any,
    labels: Any,
    *,
    key: Any,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    method: str = "percentile",
    batch_size: int | None = None,
    weights: Any = None,
) -> PairedBootstrapResult:
    """Compare two models on the same data: interval and p-value for a metric's difference.

    Resamples the N samples with replacement (the same indices for both models, so the
    comparison is paired) and recomputes δ = metric(probs_a) - metric(probs_b) on each
    resample. The interval is formed as in :func:`~jaxcal.stats.bootstrap_ci` (``method``); the
    two-sided p-value of H0: δ = 0 is ``(1 + #{|δ*_r - δ̂| >= |δ̂|}) / (1 + R)``, the
    bootstrap distribution shifted to the null (Hall & Wilson 1991), never 0.

    Args:
      metric: ``metric(probs, labels, *, weights=None) -> 0-d array``.
      probs_a, probs_b: the two models' predictions on the same N samples, each ``(N,)``
        or ``(N, K)``.
      labels: ``(N,)`` integer labels.
      key, n_resamples, confidence, method, batch_size, weights: as :func:`~jaxcal.stats.bootstrap_ci`.

    Returns:
      ``PairedBootstrapResult(difference, low, high, p_value, samples)``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> import jaxcal
      >>> y = (jnp.arange(60) % 2).astype(jnp.int32)
      >>> good = jnp.where(y == 1, 0.8, 0.2)
      >>> bad = jnp.full(60, 0.5)
      >>> res = paired_bootstrap(jaxcal.brier_score, good, bad, y, key=jax.random.key(0),
      ...                        n_resamples=200)
      >>> bool(res.high < 0), float(res.p_value) < 0.05
      (True, True)

    References:
      Efron & Tibshirani (1993), "An Introduction to the Bootstrap", ch. 16; Hall &
      Wilson (1991), "Two guidelines for bootstrap hypothesis testing".
    """
    static, n_resamples, confidence, batch_size = _check_options(
        metric, n_resamples, confidence, method, batch_size
    )
    probs_a, labels, weights = check_data(probs_a, labels, weights, probs_name="probs_a")
    probs_b = check_probs(probs_b, "probs_b")
    if probs_b.shape != probs_a.shape:
        raise ValueError(
            f"`probs_b` must have the shape of `probs_a` {probs_a.shape}; got {probs_b.shape}."
        )
    probs_b, _, _ = check_data(probs_b, labels, None, probs_name="probs_b")
    key = check_key(key)
    n_batches, batch = batch_plan(n_resamples, batch_size, probs_a.shape[0])
    return _paired_kernel(
        static,
        probs_a,
        probs_b,
        labels,
        weights,
        key,
        n_resamples,
        n_batches,
        batch,
        confidence,
        method,
    )

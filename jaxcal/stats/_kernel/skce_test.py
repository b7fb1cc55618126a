"""Tests of calibration by the SKCE: asymptotic (bootstrap of the null), block z-test and
distribution-free bounds, as CalibrationTests.jl (``src/skce/*.jl``) defines them.

The bootstrap's resamples are columns of one matrix product: with C the ``(N, R)`` counts
of R resamples, every resample's statistic is a quadratic form in its column of C, and
``H C`` is formed tile by tile (``jaxcal/metrics/_kernels.py``), never H itself.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtr

from jaxcal._core.checks import check_option, check_probs_labels
from jaxcal._core.numerics import safe_divide
from jaxcal._core.random import indices, resample_seeds, words
from jaxcal._core.validity import kernel_inputs, run_validated
from jaxcal.metrics._kernels import centred, kernel_matvec, resolve_bandwidth
from jaxcal.metrics._skce import (
    block_sums,
    check_skce_options,
    skce_features,
    skce_value,
)
from jaxcal.stats._resampling.consistency import (
    batch_plan,
    check_batch_size,
    check_key,
    check_n_resamples,
    map_batches,
    tail_p_value,
)

SKCE_TESTS = ("asymptotic", "block", "distribution_free")

#: The distribution-free bounds' B: |h_ij| <= 2 for kernels bounded by 1 (the white
#: kernel's inner product <e_y - p, e_y' - p'> lies in [-2, 2]); CalibrationTests.jl's
#: ``uniformbound(SKCE) = 2 * uniformbound(kernel)``.
_BOUND = 2.0

#: Resamples per batch of the asymptotic test: about this many counts (R x N) at once.
_AUTO_COUNTS = 2**21


class SKCETestResult(NamedTuple):
    """Result of :func:`~jaxcal.stats.skce_test`.

    Attributes:
      statistic: 0-d. Asymptotic: ``n/(n - 1) SKCE_u - SKCE_b``; block: the z-statistic;
        distribution-free: the SKCE estimate.
      p_value: 0-d in (0, 1] (asymptotic) or [0, 1].
      estimate: 0-d, the SKCE estimate the test is built on (unbiased, block, or the
        estimator asked for).
      bandwidth: 0-d, the kernel bandwidth used (the median heuristic's when None was
        given).
    """

    __test__ = False

    statistic: jax.Array
    p_value: jax.Array
    estimate: jax.Array
    bandwidth: jax.Array


def _draw_counts(seeds, p, n_pos, weighted):
    """Counts ``(b, N)`` of n_pos draws with replacement from p (uniform when unweighted)."""
    b, n = seeds.shape[0], p.shape[0]
    if weighted:
        u = (words(seeds, n) >> 8).astype(p.dtype) * (2.0**-24)
        cdf = jnp.cumsum(p)
        idx = jnp.minimum(jnp.searchsorted(cdf, u * cdf[-1], side="right"), n - 1)
        take = (jnp.arange(n, dtype=p.dtype) < n_pos).astype(p.dtype)
    else:
        idx = indices(seeds, n)
        take = jnp.ones((n,), p.dtype)
    rows = jnp.broadcast_to(jnp.arange(b)[:, None], idx.shape)
    return jnp.zeros((b, n), p.dtype).at[rows, idx].add(take[None, :])


def bootstrap_null(x, e, scale, h, kernel, h_pi, h_diag, n, counts):
    """The bootstrap statistics ``(b,)`` of the resamples with counts ``(b, N)``:

    ``T* = (C^T H C - sum_i C_i H_ii) / (n (n - 1)) - 2 C^T H pi / n`` (CalibrationTests.jl's
    ``bootstrap_ccdf``, its pi = 1/n), ``H C^T`` formed tile by tile; ``h_pi`` = H pi,
    ``h_diag`` = diag H.
    """
    hc = scale * kernel_matvec(x, e, h, kernel, counts.T)  # (N, b)
    quad = jnp.sum(counts.T * hc, axis=0) - counts @ h_diag
    return safe_divide(quad, n * (n - 1)) - 2 * (counts @ h_pi) / jnp.maximum(n, 1)


@partial(
    jax.jit,
    static_argnames=("kernel", "kind", "n_resamples", "n_batches", "batch", "weighted"),
)
def _asymptotic_kernel(
    probs, labels, weights, bandwidth, key, kernel, kind, n_resamples, n_batches, batch, weighted
):
    probs, labels, rows, summary = kernel_inputs(probs, labels, weights, rows=kind == "top_label")
    f = skce_features(probs, labels, weights, kind, rows)
    h = resolve_bandwidth(bandwidth, f.x, f.w)
    x = centred(f.x, f.w)
    dtype = x.dtype
    pi = safe_divide(f.w, jnp.sum(f.w))
    n = jnp.sum(f.w > 0).astype(dtype)
    h_pi = f.scale * kernel_matvec(x, f.e, h, kernel, pi[:, None])[:, 0]
    h_diag = f.scale * jnp.sum(f.e * f.e, axis=1)
    v = jnp.dot(pi, h_pi)
    pp = jnp.sum(pi * pi)
    u = safe_divide(v - jnp.sum(pi * pi * h_diag), 1 - pp)
    statistic = safe_divide(n, n - 1) * u - v

    def null_batch(seeds):
        c = _draw_counts(seeds, pi, n, weighted)  # (b, N)
        return bootstrap_null(x, f.e, f.scale, h, kernel, h_pi, h_diag, n, c)

    null = map_batches(null_batch, resample_seeds(key, n_resamples), n_batches, batch)
    result = SKCETestResult(statistic, tail_p_value(null, statistic), u, h)
    return result, summary


@partial(jax.jit, static_argnames=("kernel", "kind", "block_size"))
def _block_kernel(probs, labels, weights, bandwidth, kernel, kind, block_size):
    probs, labels, rows, summary = kernel_inputs(probs, labels, weights, rows=kind == "top_label")
    f = skce_features(probs, labels, weights, kind, rows)
    h = resolve_bandwidth(bandwidth, f.x, f.w)
    off, pairs = block_sums(f, h, kernel, block_size)
    x = f.scale * safe_divide(off, pairs)
    total = jnp.sum(pairs)
    mean = f.scale * safe_divide(jnp.sum(off), total)
    live = jnp.sum(pairs > 0).astype(mean.dtype)
    share = safe_divide(pairs, total)
    var = safe_divide(live, live - 1) * jnp.sum(
        jnp.where(pairs > 0, share * share, 0) * (x - mean) ** 2
    )
    se = jnp.sqrt(jnp.maximum(var, 0))
    z = jnp.where(se > 0, mean / jnp.where(se > 0, se, 1), jnp.sign(mean) * jnp.inf)
    z = jnp.where((se > 0) | (mean != 0), z, 0)
    return SKCETestResult(z, ndtr(-z), mean, h), summary


@partial(jax.jit, static_argnames=("kernel", "kind", "estimator", "block_size"))
def _bound_kernel(probs, labels, weights, bandwidth, kernel, kind, estimator, block_size):
    probs, labels, rows, summary = kernel_inputs(probs, labels, weights, rows=kind == "top_label")
    f = skce_features(probs, labels, weights, kind, rows)
    h = resolve_bandwidth(bandwidth, f.x, f.w)
    est = skce_value(f, h, kernel, estimator, block_size)
    n = safe_divide(jnp.sum(f.w) ** 2, jnp.sum(f.w * f.w))  # Kish: N for equal weights
    pos = jnp.maximum(est, 0)
    if estimator == "biased":
        s = jnp.maximum(jnp.sqrt(n * pos / _BOUND) - 1, 0)
        p = jnp.exp(-(s * s) / 2)
    else:
        p = jnp.exp(-jnp.floor(n / 2) * (pos / _BOUND) ** 2 / 2)
    return SKCETestResult(est, p, est, h), summary


def skce_test(
    probs: Any,
    labels: Any,
    *,
    method: str = "asymptotic",
    kernel: str = "laplacian",
    bandwidth: Any = None,
    key: Any = None,
    n_resamples: int = 1000,
    batch_size: int | None = None,
    estimator: str = "unbiased",
    block_size: int = 2,
    kind: str = "canonical",
    weights: Any = None,
) -> SKCETestResult:
    """Test of (canonical) calibration with the squared kernel calibration error.

    The null hypothesis is that the model is calibrated, SKCE = 0; the alternative
    SKCE > 0. Three tests (``method=``), as CalibrationTests.jl implements them, on the
    SKCE of :func:`~jaxcal.metrics.skce` (same ``kernel``, ``bandwidth``, ``kind``):

    * ``"asymptotic"`` (``AsymptoticSKCETest``): statistic ``T = n/(n-1) SKCE_u -
      SKCE_b``, compared with the bootstrap of the null of Widmann et al. (2019, Thm. C.1):
      with ``C_i`` the number of times sample i is drawn in a resample of size n,

      .. math:: T^* = \\frac{1}{n^2} \\sum_{i, j} C_i \\Big(\\frac{n}{n-1}(C_j -
                \\delta_{ij}) - 2\\Big) h_{ij},

      p = (1 + #{T* >= T}) / (1 + R) (the reference counts #{T* >= T} / R). Valid
      asymptotically (n -> inf); O(N^2 (K + R)) work, all R resamples as the columns of
      tiled matrix products (``batch_size`` resamples at a time). Practical up to
      N ~ 1e4; beyond, use the block test.
    * ``"block"`` (``AsymptoticBlockSKCETest``): the unbiased SKCE of each block of
      ``block_size`` consecutive samples; z = mean / standard error of the block means,
      p = Phi(-z). Valid as the number of blocks grows (at least 2 needed; the blocks
      should be many: N / block_size >= 30 or so); O(N m K).
    * ``"distribution_free"`` (``DistributionFreeSKCETest``): bounds that hold at any n,
      conservative. For ``estimator="unbiased"`` or ``"block"``: p = exp(-floor(n/2)
      (max(SKCE, 0) / B)^2 / 2) (Hoeffding's bound for U-statistics); ``"biased"``:
      p = exp(-max(sqrt(n SKCE_b / B) - 1, 0)^2 / 2); B = 2 bounds ``|h_ij|`` for the kernels
      here. The reference squares a negative unbiased estimate too (a small p-value for
      SKCE < 0); here a negative estimate gives p = 1.

    Weights: the data's empirical distribution puts mass ``w_i / W`` on sample i; the
    asymptotic test resamples from it (n = the number of samples of positive weight
    draws), the bounds use Kish's effective size ``W^2 / sum w^2``, the block test weights
    each block by its pair weight. Zero weights drop samples exactly (padding); other
    weights are an extension of the references (their theory is for unweighted samples).

    Args:
      probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows on the simplex.
      labels: ``(N,)`` int labels.
      method: ``"asymptotic"``, ``"block"`` or ``"distribution_free"``.
      kernel, bandwidth, kind: as :func:`~jaxcal.metrics.skce`.
      key: a JAX PRNG key (``"asymptotic"`` only, required there).
      n_resamples: R >= 2 bootstrap resamples (``"asymptotic"``).
      batch_size: resamples per batch (``"asymptotic"``; default about 2**21 / N).
      estimator: the estimator the distribution-free bound is for: ``"unbiased"``,
        ``"biased"`` or ``"block"``.
      block_size: samples per block (``"block"``, and ``estimator="block"``).
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      ``SKCETestResult(statistic, p_value, estimate, bandwidth)``, 0-d arrays. Degenerate
      blocks (every block estimate equal): z = 0 (p = 1/2) when they are all 0, else
      +-inf.

    Validation runs on concrete inputs only; the tests work under ``jit`` and ``vmap``.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> p = jnp.array([0.1, 0.3, 0.5, 0.7, 0.9, 0.2, 0.6, 0.8])
      >>> y = jnp.array([0, 0, 1, 1, 1, 0, 0, 1])
      >>> res = skce_test(p, y, key=jax.random.key(0), n_resamples=99)
      >>> bool(0 < res.p_value <= 1)
      True
      >>> round(float(skce_test(p, y, method="block").statistic), 4)
      0.253

    References:
      Widmann, Lindsten & Zachariah (2019), "Calibration tests in multi-class
      classification: A unifying framework", NeurIPS (Section 4 and Appendix C);
      CalibrationTests.jl (``src/skce/asymptotic.jl``, ``asymptotic_block.jl``,
      ``distribution_free.jl``).
    """
    check_option("method", method, SKCE_TESTS)
    # Values checked on every call, before the kernel: its work is O(N^2) (or a
    # resampled O(N^2)), so the O(N) check costs nothing beside it, and bad input never
    # waits for the computation it would spoil (the in-kernel summary stays as a guard).
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    est = estimator if method == "distribution_free" else "unbiased"
    bandwidth, block_size = check_skce_options(probs, kernel, bandwidth, est, block_size, kind)
    kind = "canonical" if probs.ndim == 1 else kind
    n = probs.shape[0]
    if method == "asymptotic":
        if key is None:
            raise ValueError("`key` is required for method='asymptotic' (jax.random.key(0)).")
        key = check_key(key)
        n_resamples = check_n_resamples(n_resamples)
        batch_size = check_batch_size(batch_size)
        if n < 2:
            raise ValueError(f"method='asymptotic' needs at least 2 samples; got {n}.")
        n_batches, batch = batch_plan(n_resamples, batch_size, n, _AUTO_COUNTS)
        kernel_fn = partial(
            _asymptotic_kernel,
            key=key,
            kernel=kernel,
            kind=kind,
            n_resamples=n_resamples,
            n_batches=n_batches,
            batch=batch,
            weighted=weights is not None,
        )
        signature = (_asymptotic_kernel, (kernel, kind, n_resamples, n_batches, batch))
        return run_validated(
            lambda p, y, w, b: kernel_fn(p, y, w, b),
            probs,
            labels,
            weights,
            bandwidth,
            signature=signature,
        )
    if method == "block":
        if n // block_size < 2:
            raise ValueError(
                f"method='block' needs at least 2 blocks: N // block_size = {n} // "
                f"{block_size} = {n // block_size}. Use a smaller block_size."
            )
        return run_validated(
            _block_kernel, probs, labels, weights, bandwidth, kernel, kind, block_size, pad=False
        )
    return run_validated(
        _bound_kernel,
        probs,
        labels,
        weights,
        bandwidth,
        kernel,
        kind,
        estimator,
        block_size,
        pad=False,  # blocks of rows and O(N^2) sums: see run_validated
    )

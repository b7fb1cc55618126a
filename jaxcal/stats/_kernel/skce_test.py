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
from jax.scipy.special import log_ndtr, ndtr

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
from jaxcal.stats._kernel.nulls import (
    NULLS,
    SKCE_MIN_ERRORS,
    consistency_labels,
    expected_errors,
    reliable_flag,
    resampled_p_value,
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
      log_p_value: 0-d, log of the p-value, finite where the p-value underflows (block
        test: ``log_ndtr(-z)``).
      expected_errors: 0-d, E, the expected number of labels other than the most probable
        one under the model (``sum min(p, 1 - p)`` for scores; Kish's n with weights).
      reliable: 0-d bool, the test holds its size here: always for
        ``null="consistency"`` and the distribution-free bounds; for the asymptotic nulls
        ``E >= 10`` (``jaxcal/stats/_kernel/nulls.py``). False: do not read the p-value
        as evidence of miscalibration; rerun with ``null="consistency"``.
    """

    __test__ = False

    statistic: jax.Array
    p_value: jax.Array
    estimate: jax.Array
    bandwidth: jax.Array
    log_p_value: jax.Array
    expected_errors: jax.Array
    reliable: jax.Array


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
    p = tail_p_value(null, statistic)
    errors = expected_errors(probs, weights)
    reliable = reliable_flag("asymptotic", errors, n, SKCE_MIN_ERRORS, 0)
    return SKCETestResult(statistic, p, u, h, jnp.log(p), errors, reliable), summary


@partial(
    jax.jit,
    static_argnames=("kernel", "kind", "n_resamples", "n_batches", "batch", "block_size"),
)
def _consistency_kernel(
    probs, labels, weights, bandwidth, key, kernel, kind, n_resamples, n_batches, batch, block_size
):
    """The consistency null: the SKCE estimate (unbiased; block for ``block_size``) of
    labels drawn from the predictions, compared with the observed one."""
    probs, labels, rows, summary = kernel_inputs(probs, labels, weights, rows=kind == "top_label")
    f = skce_features(probs, labels, weights, kind, rows)
    h = resolve_bandwidth(bandwidth, f.x, f.w)
    estimator = "unbiased" if block_size is None else "block"
    size = 2 if block_size is None else block_size

    def value(y):
        e = skce_features(probs, y, weights, kind, rows).e
        return skce_value(f._replace(e=e), h, kernel, estimator, size)

    statistic = value(labels)
    null = consistency_labels(probs, key, n_resamples, n_batches, batch, jax.vmap(value))
    p, log_p = resampled_p_value(null, statistic)
    errors = expected_errors(probs, weights)
    result = SKCETestResult(statistic, p, statistic, h, log_p, errors, jnp.ones((), bool))
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
    errors = expected_errors(probs, weights)
    reliable = reliable_flag("asymptotic", errors, total, SKCE_MIN_ERRORS, 0)
    return SKCETestResult(z, ndtr(-z), mean, h, log_ndtr(-z), errors, reliable), summary


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
        log_p = -(s * s) / 2
    else:
        log_p = -jnp.floor(n / 2) * (pos / _BOUND) ** 2 / 2
    errors = expected_errors(probs, weights)
    result = SKCETestResult(est, jnp.exp(log_p), est, h, log_p, errors, jnp.ones((), bool))
    return result, summary


def skce_test(
    probs: Any,
    labels: Any,
    *,
    method: str = "asymptotic",
    null: str = "asymptotic",
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

    **Validity at the extremes.** The bootstrap and the block z-test are limits as the
    data grow, and near 0 or 1 the data hold few surprises: at n = 100 with calibrated
    p in {1e-3, 1 - 1e-3} they rejected 90 % and 84 % of data sets at alpha = 0.05
    (``scripts/kernel_test_size.py``; the table, rare events and LLM-like confidences
    near 1 included, is in the validity guide). Both held their size in the measured
    regimes with at least 10 expected errors ``E = sum_i (1 - max_k p_ik)``
    (``min(p, 1 - p)`` for scores; the result's ``expected_errors``): the result says
    ``reliable``, False below, and its p-value is then not evidence of miscalibration.
    ``null="consistency"`` compares the SKCE estimate (unbiased, or the block estimate
    for ``"block"``) with its law under labels drawn from the predictions (R resamples
    with ``key``, drawn as :func:`~jaxcal.stats.consistency_test` draws them,
    predictions fixed): ``p = (1 + #{SKCE* >= SKCE}) / (1 + R)``, valid at any n, the
    extremes included (O(R N^2 K) work for ``"asymptotic"``, O(R N log N) for scores
    with the Laplacian kernel, O(R N K) for ``"block"``).

    Weights: the data's empirical distribution puts mass ``w_i / W`` on sample i; the
    asymptotic test resamples from it (n = the number of samples of positive weight
    draws), the bounds use Kish's effective size ``W^2 / sum w^2``, the block test weights
    each block by its pair weight. Zero weights drop samples exactly (padding); other
    weights are an extension of the references (their theory is for unweighted samples).

    Args:
      probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows on the simplex.
      labels: ``(N,)`` int labels.
      method: ``"asymptotic"``, ``"block"`` or ``"distribution_free"``.
      null: ``"asymptotic"`` (the method's own null: bootstrap, normal, or bound) or
        ``"consistency"`` (labels redrawn from the predictions; ``"asymptotic"`` and
        ``"block"`` only, needs ``key``).
      kernel, bandwidth, kind: as :func:`~jaxcal.metrics.skce`.
      key: a JAX PRNG key (``"asymptotic"`` or ``null="consistency"``, required there).
      n_resamples: R >= 2 bootstrap resamples, or label sets of the consistency null.
      batch_size: resamples per batch (``"asymptotic"``; default about 2**21 / N).
      estimator: the estimator the distribution-free bound is for: ``"unbiased"``,
        ``"biased"`` or ``"block"``.
      block_size: samples per block (``"block"``, and ``estimator="block"``).
      weights: optional ``(N,)`` non-negative sample weights.

    Returns:
      ``SKCETestResult(statistic, p_value, estimate, bandwidth, log_p_value,
      expected_errors, reliable)``, 0-d arrays (the statistic is the SKCE estimate for
      ``null="consistency"``). Degenerate
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
      >>> res = skce_test(p, y, key=jax.random.key(0), n_resamples=99, null="consistency")
      >>> bool(0 < res.p_value <= 1), bool(res.reliable), round(float(res.expected_errors), 2)
      (True, True, 2.1)

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
    check_option("null", null, NULLS)
    if null == "consistency" and method == "distribution_free":
        raise ValueError(
            "null='consistency' is for method='asymptotic' or 'block'; the distribution-free "
            "bounds hold at any n already. Use null='asymptotic' with them."
        )
    if method == "block" and n // block_size < 2:
        raise ValueError(
            f"method='block' needs at least 2 blocks: N // block_size = {n} // "
            f"{block_size} = {n // block_size}. Use a smaller block_size."
        )
    if method == "asymptotic" or null == "consistency":
        if key is None:
            raise ValueError(
                f"`key` is required for method={method!r} with null={null!r} (jax.random.key(0))."
            )
        key = check_key(key)
        n_resamples = check_n_resamples(n_resamples)
        batch_size = check_batch_size(batch_size)
        if n < 2:
            raise ValueError(f"method={method!r} needs at least 2 samples; got {n}.")
    if null == "consistency":
        size = None if method == "asymptotic" else block_size
        c = probs.shape[1] if probs.ndim == 2 and kind == "canonical" else 1
        n_batches, batch = batch_plan(n_resamples, batch_size, n * c, _AUTO_COUNTS)
        static = (kernel, kind, n_resamples, n_batches, batch, size)
        kernel_fn = partial(
            _consistency_kernel,
            key=key,
            kernel=kernel,
            kind=kind,
            n_resamples=n_resamples,
            n_batches=n_batches,
            batch=batch,
            block_size=size,
        )
        return run_validated(
            lambda p, y, w, b: kernel_fn(p, y, w, b),
            probs,
            labels,
            weights,
            bandwidth,
            signature=(_consistency_kernel, static),
        )
    if method == "asymptotic":
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

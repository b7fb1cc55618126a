"""TCE (Matsubara, Tax, Mudd & Guy 2023): the share of predictions rejected by exact
binomial tests within bins of size-limited isotonic pooling or equal counts."""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaln

from jaxcal._core.checks import check_option, check_positive_int, check_probs_labels
from jaxcal._core.confidence import scores_and_targets
from jaxcal._core.isotonic import limited_pava_stack
from jaxcal._core.numerics import safe_divide, upcast
from jaxcal._core.sort import argsort
from jaxcal._core.validity import kernel_inputs, run_validated
from jaxcal.metrics._ece_sweep import check_mask
from jaxcal.stats._resampling.betainc import betainc

STRATEGIES = ("pavabc", "quantile")

#: scipy.stats.binomtest's relative tolerance on "as likely as the observed count".
_RERR = 1e-7


def _log_pmf(i, n, p):
    """log P(X = i), X ~ Binomial(n, p), for float ``i`` in [0, n] (0 log 0 = 0)."""
    lp = jnp.where(i > 0, i * jnp.log(jnp.where(p > 0, p, 1)), 0)
    lp = jnp.where((i > 0) & (p <= 0), -jnp.inf, lp)
    lq = jnp.where(n - i > 0, (n - i) * jnp.log1p(-jnp.where(p < 1, p, 0)), 0)
    lq = jnp.where((n - i > 0) & (p >= 1), -jnp.inf, lq)
    return gammaln(n + 1) - gammaln(i + 1) - gammaln(n - i + 1) + lp + lq


def _tails(j, m, n, p):
    """``P(X <= j) + P(X >= m)``, X ~ Binomial(n, p), with one incomplete-beta call:
    ``P(X <= j) = I_{1-p}(n - j, j + 1)`` and ``P(X >= m) = I_p(m, n - m + 1)``."""
    a = jnp.concatenate([jnp.maximum(n - j, 1), jnp.maximum(m, 1)])
    b = jnp.concatenate([jnp.maximum(j + 1, 1), jnp.maximum(n - m + 1, 1)])
    x = jnp.clip(jnp.concatenate([1 - p, p]), 0, 1)
    cdf, sf = jnp.split(betainc(a, b, x), 2)
    cdf = jnp.where(p <= 0, 1, jnp.where(p >= 1, 0, cdf))
    cdf = jnp.where(j < 0, 0, jnp.where(j >= n, 1, cdf))
    sf = jnp.where(p <= 0, 0, jnp.where(p >= 1, 1, sf))
    sf = jnp.where(m <= 0, 1, jnp.where(m > n, 0, sf))
    return cdf + sf


def _count_prefix(pred, lo, hi, steps):
    """The number of i in [lo, hi] from lo on where the monotone ``pred(i)`` holds
    (true on a prefix), by bisection: elementwise, ``steps`` halvings."""

    def halve(_, bounds):
        a, b = bounds  # the answer lies in [a, b]
        mid = jnp.floor((a + b + 1) / 2)
        ok = pred(lo + mid - 1)
        return jnp.where(ok, mid, a), jnp.where(ok, b, mid - 1)

    a, _ = jax.lax.fori_loop(0, steps, halve, (jnp.zeros_like(lo), jnp.maximum(hi - lo + 1, 0)))
    return a


def binom_two_sided(k, n, p, steps):
    """``scipy.stats.binomtest(k, n, p).pvalue`` (two-sided, "as likely or less"),
    elementwise for float counts: the tails beyond the outcomes as likely as k (within
    the relative 1e-7 of scipy), found by bisection on the other side of the mode.

    For k < pn the other side is ``[ceil(pn), n]`` (pmf non-increasing): with ``ix`` the
    last outcome there as likely as k, ``p = P(X <= k) + P(X > ix)``; for k > pn it is
    ``[0, floor(pn)]`` (pmf non-decreasing): ``p = P(X <= ix) + P(X >= k)``; k = pn gives 1.
    """
    dtype = p.dtype
    thr = _log_pmf(k, n, p) + jnp.log1p(jnp.asarray(_RERR, dtype))
    pn = p * n
    left = k > pn
    lo = jnp.where(left, 0, jnp.ceil(pn))
    hi = jnp.where(left, jnp.floor(pn), n)

    def as_likely(i):  # on a prefix of [lo, hi]
        lp = _log_pmf(i, n, p)
        return jnp.where(left, lp <= thr, lp >= thr)

    count = _count_prefix(as_likely, lo, hi, steps)
    ix = lo - 1 + count
    cdf_at = jnp.where(left, ix, k)
    sf_from = jnp.where(left, k, ix + 1)
    pval = _tails(cdf_at, sf_from, n, p)
    return jnp.minimum(jnp.where(k == pn, 1, pval), 1)


def _pavabc_blocks(ys, m, n_min, n_max):
    """Block of each sorted position (int32 ``(N,)``; N + 1 past the m live samples)."""
    n = ys.shape[0]
    live_groups = m - n_min
    ones = jnp.ones((n,), ys.dtype)
    _, starts, top = limited_pava_stack(ones, ys, jnp.maximum(live_groups, 0), n_min, n_max)
    slots = jnp.arange(1, n + 1, dtype=jnp.int32)
    live = slots <= top
    flags = jnp.zeros((n,), jnp.int32).at[jnp.where(live, starts[1:-1], n)].set(1, mode="drop")
    block = jnp.cumsum(flags)
    j = jnp.arange(n, dtype=jnp.int32)
    if n_min > 0:  # the last n_min samples: one block, merged into the previous one
        tail = top if 2 * n_min <= n_max else top + 1  # (the reference tests 2 n_min <= n_max)
        block = jnp.where(j >= live_groups, tail, block)
    return jnp.where(j < m, block, n + 1)


def _quantile_blocks(n, m, n_bin, static_n):
    """Bin of each sorted position for ``n_bin`` equal-count bins (the reference's
    ``(linspace(0, 1, n_bin + 1) * N).astype(int)`` partition)."""
    if static_n:
        cuts = jnp.asarray((np.linspace(0, 1, n_bin + 1) * n).astype(np.int64), jnp.int32)
    else:  # a mask: floor(i m / n_bin), exact in int32
        i = jnp.arange(n_bin + 1, dtype=jnp.int32)
        cuts = i * (m // n_bin) + (i * (m % n_bin)) // n_bin
    j = jnp.arange(n, dtype=jnp.int32)
    block = jnp.clip(jnp.searchsorted(cuts, j, side="right") - 1, 0, n_bin - 1)
    return jnp.where(j < m, block, n + 1)


@partial(jax.jit, static_argnames=("siglevel", "strategy", "n_min", "n_max", "n_bin"))
def _tce_kernel(probs, labels, weights, siglevel, strategy, n_min, n_max, n_bin):
    probs, labels, rows, summary = kernel_inputs(probs, labels, weights)
    scores, targets, _ = scores_and_targets(probs, labels, rows=rows)
    z = upcast(jax.lax.stop_gradient(scores))
    n = z.shape[0]
    valid = jnp.ones((n,), bool) if weights is None else weights > 0
    order = argsort(jnp.where(valid, z, jnp.inf))
    zs, ys = z[order], targets[order].astype(z.dtype)
    m = jnp.sum(valid, dtype=jnp.int32)
    if strategy == "pavabc":
        block = _pavabc_blocks(ys, m, n_min, n_max)
    else:
        block = _quantile_blocks(n, m, n_bin, weights is None)
    live = (block <= n).astype(z.dtype)
    k_b = jax.ops.segment_sum(ys * live, block, n + 2)
    n_b = jax.ops.segment_sum(live, block, n + 2)
    steps = int(np.ceil(np.log2(n + 2))) + 1
    idx = jnp.minimum(block, n + 1)
    pval = binom_two_sided(k_b[idx], n_b[idx], zs, steps)
    rejected = jnp.sum(jnp.where(live > 0, pval <= siglevel, False), dtype=jnp.int32)
    return 100 * safe_divide(rejected.astype(z.dtype), m.astype(z.dtype)), summary


def tce(
    probs: Any,
    labels: Any,
    *,
    siglevel: float = 0.05,
    strategy: str = "pavabc",
    n_min: int = 10,
    n_max: int = 1000,
    n_bin: int = 10,
    weights: Any = None,
) -> jax.Array:
    """Test-based calibration error (TCE), in percent.

    Matsubara, Tax, Mudd & Guy (2023), facebookresearch/tce ``calibration_metric.tce``:
    bin the predictions, then test each prediction p against its bin's outcomes with the
    exact two-sided binomial test (``scipy.stats.binomtest(k_b, n_b, p)``: the summed
    probability of the counts no more likely than ``k_b``) and report

    .. math:: \\mathrm{TCE} = 100 \\cdot \\frac{\\#\\{i : \\text{p-value}_i \\le
              \\text{siglevel}\\}}{N}.

    Bins (``strategy=``): ``"pavabc"``, the reference's size-limited pool-adjacent-
    violators on the scores sorted ascending (the shared isotonic stack with its merge
    rule: two adjacent blocks merge when together they hold at most ``n_min`` samples, or
    at most ``n_max`` and the lower one's positive rate is >= the upper one's; the last
    ``n_min`` samples form one block, merged into the one before when ``2 n_min <=
    n_max``, as the reference's code does); or ``"quantile"``, ``n_bin`` equal-count
    bins of the sorted scores (cut at ``(linspace(0, 1, n_bin + 1) N).astype(int)``).
    The score is the positive-class probability (1-D) or the top-label confidence
    against correctness (2-D; the reference is binary). Ties are ordered stably (input
    order; the reference's ``np.argsort`` leaves them unspecified). The binomial tails
    come from the regularized incomplete beta function; the "as likely" comparison is
    in log space (scipy's relative tolerance 1e-7): float64 reproduces scipy, float32
    can move a p-value that sits on the threshold.

    Args:
      probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows on the simplex.
      labels: ``(N,)`` int labels.
      siglevel: the tests' level (static).
      strategy: ``"pavabc"`` or ``"quantile"``.
      n_min, n_max: the block-size limits of ``"pavabc"`` (0 <= n_min < N, n_max >= 1).
      n_bin: the number of bins of ``"quantile"``.
      weights: optional ``(N,)`` 0/1 mask (the reference has no weights): rows of weight
        0 are dropped; other weights must be 1 (checked on concrete inputs; under tracing
        any positive weight counts as 1).

    Returns:
      0-d array in [0, 100]. Not differentiable (counts of rejections).

    Example:
      >>> import jax.numpy as jnp
      >>> p = jnp.linspace(0.02, 0.98, 60)
      >>> y = (jnp.arange(60) % 3 == 0).astype(jnp.int32)  # a third positive, whatever p
      >>> round(float(tce(p, y, n_min=5, n_max=20)), 2)
      56.67

    References:
      Matsubara, Tax, Mudd & Guy (2023), "TCE: A Test-Based Approach to Measuring
      Calibration Error", UAI; code ``facebookresearch/tce`` (``calibration_metric.py``:
      ``tce``, ``_pavabc``, ``_calibration_process``).
    """
    check_option("strategy", strategy, STRATEGIES)
    if isinstance(siglevel, bool) or not isinstance(siglevel, (int, float, np.floating)):
        raise ValueError(f"`siglevel` must be a number in (0, 1); got {siglevel!r}.")
    if not 0 < siglevel < 1:
        raise ValueError(f"`siglevel` must lie strictly between 0 and 1; got {siglevel}.")
    n_min = check_positive_int("n_min", n_min, minimum=0)
    n_max = check_positive_int("n_max", n_max)
    n_bin = check_positive_int("n_bin", n_bin)
    probs, labels, weights = check_probs_labels(probs, labels, weights, values=False)
    check_mask(weights)
    n = probs.shape[0]
    if strategy == "pavabc" and n <= n_min:
        raise ValueError(
            f"`n_min` must be below the number of samples for strategy='pavabc' (the "
            f"reference asserts it); got n_min={n_min} with {n} samples. Lower n_min."
        )
    return run_validated(
        _tce_kernel, probs, labels, weights, float(siglevel), strategy, n_min, n_max, n_bin
    )

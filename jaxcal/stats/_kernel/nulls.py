"""What the kernel tests share beyond their statistics: the consistency-resampling null,
the validity condition of the asymptotic nulls, and the log p-value of a resampling test.

**Where the asymptotic nulls fail.** The SKCE bootstrap, the block z-test and the CME's
chi-square are limits as the data grow, and the data that carry information about
calibration are the *surprises*: labels other than the one the model is sure of. Near
0 or 1 (LLM confidences near 1, rare events) a data set of hundreds of predictions holds
a handful of them, or none, and the statistic is a sum of a few large or many
deterministic terms whose law is nothing like its limit: at n = 100 with p in
{1e-3, 1 - 1e-3} the three tests rejected calibrated data 90 %, 84 % and 31 % of the time
at alpha = 0.05 (``scripts/kernel_test_size.py``; table in ``docs/guides/validity.md``).
The condition is stated on the **expected number of errors** under the model,

.. math:: E = n_{\\mathrm{eff}} \\cdot \\frac{\\sum_i w_i (1 - \\max_k p_{ik})}{\\sum_i w_i}

(``sum_i min(p_i, 1 - p_i)`` for scores, unweighted), and for the CME test on n as well
(its chi-square needs n in the thousands even away from the extremes). The thresholds are
those of the measured table.

**The consistency null** (``null="consistency"``) draws R label sets from the model's own
predictions (``y* ~ p``: exactly :func:`~jaxcal.stats.consistency_test`'s draws, the same
key giving the same labels) and recomputes the statistic on each, the predictions held
fixed: under the null of calibration the observed labels are one more such draw, so
``p = (1 + #{T* >= T}) / (1 + R)`` is valid at any n (up to the Monte-Carlo error of R),
at the extremes included.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxcal._core.confidence import scores_and_targets
from jaxcal._core.numerics import safe_divide, upcast
from jaxcal._core.random import label_plan, resample_seeds, resampled_labels
from jaxcal.stats._resampling.consistency import map_batches, tail_p_value

NULLS = ("asymptotic", "consistency")

#: The SKCE tests (bootstrap and block) held their size (rejection at alpha = 0.05 within
#: the binomial band of 0.05) in every regime of the table with at least this many
#: expected errors.
SKCE_MIN_ERRORS = 10.0

#: The CME test's chi-square held its size with at least this many expected errors *and*
#: ``CME_MIN_SAMPLES`` samples (it is 0.29 for K = 2 at n = 100 away from the extremes).
CME_MIN_ERRORS = 10.0
CME_MIN_SAMPLES = 1000


def expected_errors(probs: jax.Array, weights: jax.Array | None) -> jax.Array:
    """E = Kish's n times the weighted mean of ``1 - max_k p_k`` (``min(p, 1 - p)`` for
    scores): the expected number of labels other than the most probable one, 0-d."""
    p = upcast(probs)
    miss = jnp.minimum(p, 1 - p) if p.ndim == 1 else 1 - jnp.max(p, axis=1)
    miss = jnp.clip(miss, 0, 1)
    if weights is None:
        return jnp.sum(miss)
    w = weights.astype(p.dtype)
    total = jnp.sum(w)
    n_eff = safe_divide(total * total, jnp.sum(w * w))
    return n_eff * safe_divide(jnp.sum(w * miss), total)


def consistency_labels(probs: jax.Array, key: jax.Array, n_resamples, n_batches, batch, fn):
    """``fn`` over R consistency-resampled label sets ``(b, N)``, in batches: ``(R, ...)``.

    Resample r draws its labels from ``resample_seeds(key, R)[r]`` as
    :func:`~jaxcal.stats.consistency_test` does (fixed predictions).
    """
    dummy = jnp.zeros(probs.shape[0], jnp.int32)
    plan = label_plan(probs, scores_and_targets(probs, dummy).scores)
    seeds = resample_seeds(key, n_resamples)
    return map_batches(fn, seeds, n_batches, batch, lambda s: resampled_labels(s, plan))


def resampled_p_value(null: jax.Array, statistic: jax.Array):
    """(p, log p) of a resampling null: ``(1 + #{null >= T}) / (1 + R)`` and its log."""
    p = tail_p_value(null.astype(statistic.dtype), statistic)
    return p, jnp.log(p)


def reliable_flag(null: str, errors: jax.Array, n: jax.Array, min_errors: float, min_n: float):
    """True for the consistency null; else ``errors >= min_errors`` and ``n >= min_n``."""
    if null == "consistency":
        return jnp.ones((), bool)
    return (errors >= min_errors) & (n >= min_n)

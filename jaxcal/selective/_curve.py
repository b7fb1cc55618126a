"""The risk-coverage curve: one sort by confidence, then cumulative sums, ties averaged.

Every selective measure reads the same sufficient statistics: the samples sorted by
descending confidence, and the cumulative weight ``W_i`` (accepted mass) and cumulative
weighted risk ``E_i`` (accepted errors) after each of them. Coverage is ``W_i / W``,
the selective risk ``E_i / W_i`` and the generalized risk (Traub et al. 2024)
``E_i / W``.

**Ties.** A threshold on the confidence cannot split samples of equal confidence, and
the references break such ties by the order their sort leaves (torch-uncertainty's
``torch.argsort(descending=True)``, LM-Polygraph's ``np.argsort``: neither stable, so
the answer depends on the input order). Here, within a run of tied confidences, the
cumulative risk is interpolated linearly in the cumulative weight between the run's
ends: with unit weights, the expectation over every order of the tied samples (a
hypergeometric mean), which a randomised threshold achieves. It is deterministic and
invariant to permutations of the input; without ties it is the references' value; and
for the generalized risk, whose trapezoid over a linear run equals the trapezoid over
its ends, it is exactly fd-shifts' computation over the distinct thresholds.

Cost: one sort (NumPy's on CPU, ``jaxcal/_core/sort.py``), then O(N) scans. ``groups``:
the same sort, then O(N) per segment (each segment's weights masked).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from jax import lax

from jaxcal._core.numerics import safe_divide
from jaxcal._core.sort import argsort, monotone_bits
from jaxcal.selective._inputs import check_inputs, scores_and_risks


class Sorted(NamedTuple):
    """Samples sorted by descending score (arrays ``(N,)``)."""

    score: jax.Array  # the scores, descending
    risk: jax.Array
    weight: jax.Array
    starts: jax.Array  # bool: the first sample of a run of equal scores
    order: jax.Array  # int32 positions in the input


def sort_by_confidence(score: jax.Array, risk: jax.Array, weight: jax.Array) -> Sorted:
    """The one sort: descending score (-0.0 ties 0.0), runs of equal scores marked."""
    bits = monotone_bits(-score)
    order = argsort(bits)
    ranked = bits[order]
    starts = jnp.concatenate([jnp.ones((1,), bool), ranked[1:] != ranked[:-1]])
    return Sorted(score[order], risk[order], weight[order], starts, order)


class Sums(NamedTuple):
    """Cumulative sums along the sorted samples of one segment.

    Attributes:
      weight: ``(N,)`` the samples' weights (0 outside the segment).
      accepted: ``(N,)`` W_i, the weight accepted up to and including sample i.
      errors: ``(N,)`` E_i, the accepted weighted risk, interpolated within tie runs.
      total: 0-d W, the total weight.
      total_errors: 0-d, the total weighted risk.
    """

    weight: jax.Array
    accepted: jax.Array
    errors: jax.Array
    total: jax.Array
    total_errors: jax.Array


def tie_averaged_sums(weight: jax.Array, risk: jax.Array, starts: jax.Array) -> Sums:
    """``Sums`` with the cumulative risk linear in the weight within each tie run."""
    n = weight.shape[0]
    accepted = jnp.cumsum(weight)
    errors = jnp.cumsum(weight * risk)
    iota = jnp.arange(n, dtype=jnp.int32)
    ends = jnp.concatenate([starts[1:], jnp.ones((1,), bool)])
    first = lax.cummax(jnp.where(starts, iota, 0))
    last = lax.cummin(jnp.where(ends, iota, n - 1), reverse=True)
    before = jnp.maximum(first - 1, 0)
    has_before = first > 0
    w_before = jnp.where(has_before, accepted[before], 0)
    e_before = jnp.where(has_before, errors[before], 0)
    frac = safe_divide(accepted - w_before, accepted[last] - w_before)
    inside = e_before + frac * (errors[last] - e_before)
    # Singletons and run ends keep the exact cumulative sum (no interpolation round-off).
    errors = jnp.where(iota == last, errors, inside)
    return Sums(weight, accepted, errors, accepted[-1], errors[-1])


def plain_sums(weight: jax.Array, risk: jax.Array) -> Sums:
    """``Sums`` of an order without ties (the oracle's)."""
    accepted = jnp.cumsum(weight)
    errors = jnp.cumsum(weight * risk)
    return Sums(weight, accepted, errors, accepted[-1], errors[-1])


def oracle_permutation(s: Sorted, kind: str) -> jax.Array:
    """Gather indices that reorder the sorted samples by ascending risk, stably.

    The best possible ranking of the same samples (Geifman et al. 2019's κ*), ties in
    risk kept in confidence order. 0/1 risks need no second sort: a stable partition
    (correct first) from two cumulative counts, inverted by one scatter. A float quality
    is sorted (a second sort).
    """
    if kind == "quality":
        return argsort(s.risk)
    wrong = s.risk > 0
    n_right = jnp.sum(~wrong, dtype=jnp.int32)
    position = (
        jnp.where(
            wrong, n_right + jnp.cumsum(wrong, dtype=jnp.int32), jnp.cumsum(~wrong, dtype=jnp.int32)
        )
        - 1
    )
    iota = jnp.arange(s.risk.shape[0], dtype=jnp.int32)
    return jnp.zeros_like(iota).at[position].set(iota, unique_indices=True)


def per_segment(fn, s: Sorted, masks: jax.Array | None, *extra: jax.Array):
    """``fn(weight, *extra)`` of the whole sample, or of each column of ``masks`` (G first)."""
    if masks is None:
        return fn(s.weight, *extra)
    member = masks[s.order].astype(s.weight.dtype)  # (N, G) in the sorted order
    return jax.vmap(lambda m: fn(s.weight * m, *extra))(member.T)


def prepare(confidence, labels, weights, kind) -> Sorted:
    """Scores and risks of the inputs (padding masked), sorted once."""
    score, risk, weight = scores_and_risks(confidence, labels, weights, kind)
    return sort_by_confidence(score, risk, weight)


class RiskCoverageCurve(NamedTuple):
    """The risk-coverage curve, one point per sample, by descending confidence.

    Point i accepts the i + 1 most confident samples. Within a run of tied confidences
    the accepted risk is interpolated linearly in the accepted weight (the average over
    the orders of the tied samples), so only the run's last point (``working_point``) is
    reachable by a deterministic threshold. With ``groups``, every field has a leading
    axis of G segments, each segment's curve over all N points (rows outside the
    segment add points of zero width).

    Attributes:
      coverage: ``(N,)`` accepted weight over total weight, non-decreasing to 1.
      risk: ``(N,)`` selective risk, accepted weighted risk over accepted weight (0 where
        nothing is accepted yet).
      generalized_risk: ``(N,)`` accepted weighted risk over the total weight (Traub et
        al. 2024), non-decreasing.
      threshold: ``(N,)`` the confidence of the sample accepted at the point (descending).
      working_point: bool ``(N,)``, True at the last sample of each run of equal
        confidences.
    """

    coverage: jax.Array
    risk: jax.Array
    generalized_risk: jax.Array
    threshold: jax.Array
    working_point: jax.Array


def curve_of(sums: Sums) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(coverage, selective risk, generalized risk) of one segment's sums."""
    return (
        safe_divide(sums.accepted, sums.total),
        safe_divide(sums.errors, sums.accepted),
        safe_divide(sums.errors, sums.total),
    )


@partial(jax.jit, static_argnames=("kind",))
def _curve_kernel(confidence, labels, weights, masks, kind):
    s = prepare(confidence, labels, weights, kind)
    ends = jnp.concatenate([s.starts[1:], jnp.ones((1,), bool)])

    def one(w):
        return curve_of(tie_averaged_sums(w, s.risk, s.starts))

    coverage, risk, general = per_segment(one, s, masks)
    threshold, working = s.score, ends
    if masks is not None:
        g = masks.shape[1]
        threshold = jnp.broadcast_to(threshold, (g, *threshold.shape))
        working = jnp.broadcast_to(working, (g, *working.shape))
    return RiskCoverageCurve(coverage, risk, general, threshold, working)


def risk_coverage_curve(
    probs: Any = None,
    labels: Any = None,
    *,
    confidence: Any = None,
    correct: Any = None,
    weights: Any = None,
    groups: Any = None,
    n_groups: int | None = None,
) -> RiskCoverageCurve:
    """The risk-coverage curve of selective prediction, one point per sample.

    Samples are accepted by descending confidence; after the i + 1 most confident,
    coverage is ``W_i / W`` and the selective risk ``E_i / W_i``, where ``W_i`` is the
    accepted weight and ``E_i`` the accepted weighted risk (error count with unit
    weights). Tied confidences: the accepted risk is interpolated linearly in the
    weight across the run (module ``jaxcal.selective``: the average over the orders of
    the ties). Without ties and weights this is torch-uncertainty's
    ``_aurc_rejection_rate_compute`` (the running error rates) against coverage k/N.

    Args:
      probs: ``(N, K)`` class probabilities (top-label confidence, correct when the
        argmax is the label) or ``(N,)`` a binary model's probability of the positive
        class (confidence max(p, 1 - p); see :func:`~jaxcal.selective.aurc`).
      labels: ``(N,)`` class labels in ``[0, K)`` (0/1 with ``(N,)`` probs).
      confidence: keyword only, instead of ``probs`` and ``labels``: ``(N,)``
        confidence scores, any real, higher = more confident, with ``correct``.
      correct: keyword only: ``(N,)`` correctness of each prediction, 0/1 (bool or
        int), or a float quality in [0, 1] (risk = 1 - quality).
      weights: optional ``(N,)`` non-negative sample weights.
      groups: optional segments: integer ids ``(N,)`` in ``[0, n_groups)`` or a bool
        membership matrix ``(N, G)``; one curve per segment.
      n_groups: G, static; required with integer ``groups``.

    Returns:
      ``RiskCoverageCurve`` of ``(N,)`` arrays (``(G, N)`` with groups).

    Values are validated when the arrays are concrete; under ``jit`` they are not, and
    rows of weight 0 may hold anything (they add points of zero width).

    Example:
      >>> import jax.numpy as jnp
      >>> probs = jnp.array([[0.7, 0.3], [0.6, 0.4], [0.8, 0.2]])
      >>> c = risk_coverage_curve(probs, jnp.array([0, 1, 0]))
      >>> [round(v, 4) for v in c.coverage.tolist()], [round(v, 4) for v in c.risk.tolist()]
      ([0.3333, 0.6667, 1.0], [0.0, 0.0, 0.3333])

    References:
      El-Yaniv & Wiener (2010), "On the foundations of noise-free selective
      classification"; Geifman & El-Yaniv (2017), "Selective classification for deep
      neural networks"; Traub et al. (2024), "Overcoming common flaws in the evaluation
      of selective classification systems".
    """
    c = check_inputs(
        probs, labels, weights, groups, n_groups, confidence=confidence, correct=correct
    )
    return _curve_kernel(c.confidence, c.labels, c.weights, c.masks, c.kind)

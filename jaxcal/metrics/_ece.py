"""Binned calibration errors from per-bin sufficient statistics.

All variants reduce to one computation: a norm of the per-bin gap
``acc_b - conf_b`` under the measure (group weight) x (share of the group's weight in bin
b), where a group is the whole data (``ece``), one class (``classwise_ece``) or one
predicted class (``top_label_ece``). Empty bins have zero measure: they never contribute
and never divide by zero.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from jaxcal._core.binning import (
    BinStats,
    bin_anchors,
    bin_edges_and_index,
    bin_sums,
    check_binning,
    uniform_anchors,
)
from jaxcal._core.checks import check_option, check_probs_labels
from jaxcal._core.confidence import scores_and_targets
from jaxcal._core.docstrings import shared_doc
from jaxcal._core.numerics import BLOCK, rows_per_block, safe_divide, safe_sqrt, scale_free
from jaxcal._core.validity import kernel_inputs, run_validated
from jaxcal.metrics._segment_bins import check_binned_groups, segment_bin_stats

NORMS = ("l1", "l2", "max")
AVERAGES = ("label", "sample")


def check_norm(norm: str, debias: bool) -> None:
    """Static check of ``norm`` and ``debias`` (debiasing is defined for the l2 norm)."""
    check_option("norm", norm, NORMS)
    check_option("debias", debias, (False, True))
    if debias and norm != "l2":
        raise ValueError(f'`debias=True` requires `norm="l2"`; got norm={norm!r}.')


def gap_norm(stats: BinStats, group_weights: jax.Array, norm: str, debias: bool) -> jax.Array:
    """Norm of the per-bin gaps of G groups of M bins.

    Args:
      stats: ``BinStats`` with fields of shape ``(G, M)``.
      group_weights: ``(G,)`` non-negative weights of the groups (summing to 1, or 0 when
        there is no data).
      norm: ``"l1"``: sum_g a_g sum_b p_gb |gap_gb|; ``"l2"``: the square root of the same
        sum of squared gaps; ``"max"``: the largest |gap| over non-empty bins of groups with
        positive weight.
      debias: l2 only. Kumar, Liang & Ma (2019): each squared gap is reduced by
        acc_b (1 - acc_b) / (n_b - 1); bins with n_b < 2 contribute 0; the total is clipped
        at 0 before the square root.

    Returns:
      0-d array.
    """
    nonempty = stats.weight > 0
    conf = safe_divide(stats.sum_score, stats.weight)
    acc = safe_divide(stats.sum_target, stats.weight)
    gap = jnp.where(nonempty, acc - conf, 0)
    if norm == "max":
        live = nonempty & (group_weights > 0)[:, None]
        return jnp.max(jnp.where(live, jnp.abs(gap), 0))
    share = safe_divide(stats.weight, stats.weight.sum(axis=-1, keepdims=True))
    if norm == "l1":
        return jnp.sum(group_weights * jnp.sum(share * jnp.abs(gap), axis=-1))
    squared = gap**2
    if debias:
        n = stats.count.astype(gap.dtype)
        squared = jnp.where(stats.count >= 2, squared - acc * (1 - acc) / jnp.maximum(n - 1, 1), 0)
    return safe_sqrt(jnp.sum(group_weights * jnp.sum(share * squared, axis=-1)))


def binned_stats(
    scores,
    targets,
    weights,
    n_bins,
    binning,
    closed,
    groups=None,
    n_groups=1,
    moments=False,
    block=BLOCK,
):
    """Edges and per-(group, bin) sums ``(G, M)`` of scores against binary targets.

    ``groups`` ``(N,)`` or ``(N, K)`` (int32 in ``[0, n_groups)``) split each bin by group
    (the predicted class of the top-label ECE, the column of the classwise views).
    Quantile edges are those of all ``scores`` together. The metric kernels pass weights
    scaled by ``scale_free()``; the streaming state passes its
    batches' weights as they are (its sums add up across batches).
    """
    edges, bins = bin_edges_and_index(scores, n_bins, binning, closed, weights)
    segments = bins if groups is None else groups * n_bins + bins
    offsets = uniform_anchors(n_bins) if binning == "uniform" else bin_anchors(edges, n_groups)
    sums = bin_sums(segments, scores, targets, n_groups * n_bins, weights, offsets, moments, block)
    return edges, jax.tree_util.tree_map(lambda f: f.reshape(n_groups, n_bins), sums)


def classwise_stats(probs, labels, weights, n_bins, binning, closed, moments=False, block=BLOCK):
    """Per-(class, bin) sums ``(K, M)`` of every column ``p_k`` against ``labels == k``.

    Uniform bins: one pass over the ``(N, K)`` entries with segment ids
    ``class * M + bin``. Quantile bins: each column binned by its own quantiles.
    """
    k = probs.shape[1]
    if binning == "uniform":
        classes = jnp.broadcast_to(jnp.arange(k, dtype=jnp.int32), probs.shape)
        args = (classes, k, moments, block)
        return binned_stats(probs, labels, weights, n_bins, binning, closed, *args)[1]

    def one_class(column, c):
        target = labels == c
        return binned_stats(column, target, weights, n_bins, binning, closed, moments=moments)[1]

    per_class = jax.vmap(one_class, in_axes=(1, 0))(probs, jnp.arange(k, dtype=jnp.int32))
    return jax.tree_util.tree_map(lambda f: f.reshape(k, n_bins), per_class)


@partial(jax.jit, static_argnames=("n_bins", "binning", "norm", "closed", "debias", "n_groups"))
def _ece_kernel(probs, labels, weights, n_bins, binning, norm, closed, debias, groups, n_groups):
    probs, labels, rows, summary = kernel_inputs(probs, labels, weights)
    weights = scale_free(weights)  # any scale of the weights, one answer
    scores, targets, _ = scores_and_targets(probs, labels, rows=rows)
    if groups is None:
        _, stats = binned_stats(scores, targets, weights, n_bins, binning, closed)
        value = gap_norm(stats, jnp.ones(1, stats.weight.dtype), norm, debias)
        return value, summary
    _, stats = segment_bin_stats(
        scores, targets, weights, n_bins, binning, closed, groups, n_groups
    )

    def one_segment(segment: BinStats) -> jax.Array:  # (M,) fields: a group of one
        one = jax.tree_util.tree_map(lambda f: f[None], segment)
        return gap_norm(one, jnp.ones(1, segment.weight.dtype), norm, debias)

    return jax.vmap(one_segment)(stats), summary


@shared_doc
def ece(
    probs: Any,
    labels: Any,
    *,
    n_bins: int = 15,
    binning: str = "uniform",
    norm: str = "l1",
    closed: str = "right",
    debias: bool = False,
    weights: Any = None,
    renormalize: bool = False,
    groups: Any = None,
    n_groups: int | None = None,
) -> jax.Array:
    """Expected calibration error, binary (1-D ``probs``) or confidence (2-D ``probs``).

    1-D ``probs`` ``(N,)`` are probabilities of the positive class and the ECE is the
    binary-ECE of Naeini et al. (2015). 2-D ``probs`` ``(N, K)`` give the confidence ECE
    of Guo et al. (2017): the binary ECE of the top-label confidence ``max_k p_k`` against
    correctness ``argmax_k p_k == y`` (first index among ties).

    .. math::
       \\mathrm{ECE}_{l1} = \\sum_b \\frac{W_b}{W} |\\bar y_b - \\bar p_b|,\\quad
       \\mathrm{ECE}_{l2} = \\Big(\\sum_b \\frac{W_b}{W} (\\bar y_b - \\bar p_b)^2\\Big)^{1/2},\\quad
       \\mathrm{MCE} = \\max_{b: W_b > 0} |\\bar y_b - \\bar p_b|

    with W_b the (weighted) number of samples in bin b and bars the weighted means in it.

    Args:
      {{probs_labels}}
      n_bins: number of bins M >= 1.
      binning: ``"uniform"`` (equal width) or ``"quantile"`` (equal mass; edges are
        weighted empirical quantiles of the scores, equal scores share a bin).
      norm: ``"l1"``, ``"l2"`` or ``"max"`` (the MCE).
      closed: ``"right"`` (default; bins [0, 1/M], (1/M, 2/M], ..., as scikit-learn's
        ``calibration_curve``) or ``"left"`` ([0, 1/M), ..., [(M-1)/M, 1], as
        torchmetrics). An input equal to an edge in its own dtype lands as the convention
        says.
      debias: with ``norm="l2"``, the debiased estimator of Kumar, Liang & Ma (2019) (see
        ``gap_norm()``), returned as sqrt(max(estimate, 0)).
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding.
      {{renormalize}}
      groups: optional segments, one ECE per segment in one call: integer ids ``(N,)``
        in ``[0, n_groups)`` (disjoint segments), or a boolean membership matrix
        ``(N, G)`` (overlapping segments). Segment g's ECE is the ECE of its rows alone
        (with their weights): with ``binning="uniform"`` on the bins shared by every
        segment; with ``binning="quantile"`` on the (weighted) quantiles of the
        segment's own scores, the edges ``ece(probs[m], labels[m], weights=w[m],
        binning="quantile")`` uses (see ``jaxcal/metrics/_segment_bins.py`` for the cost and
        memory: one sort for disjoint ids, one per column of a membership matrix).
      n_groups: the number of segments G, static; required with integer ``groups``.

    Returns:
      0-d array, or ``(G,)`` with ``groups``. Zero total weight (an empty segment) gives 0.

    Validation runs only on concrete inputs; under ``jit``/``vmap``/``grad`` the value
    checks (range, simplex, label range, ids in range) are skipped and the kernel trusts
    its input (there, ids outside ``[0, n_groups)`` belong to no segment).

    Example:
      >>> import jax.numpy as jnp
      >>> # bins [0, 0.5] and (0.5, 1]: |0.5 - 0.25| / 2 + |1.0 - 0.85| / 2
      >>> round(float(ece(jnp.array([0.1, 0.4, 0.8, 0.9]), jnp.array([0, 1, 1, 1]), n_bins=2)), 4)
      0.2
      >>> # per segment: {0.1, 0.8} -> (0.1 + 0.2) / 2, {0.4, 0.9} -> (0.6 + 0.1) / 2
      >>> e = ece(jnp.array([0.1, 0.4, 0.8, 0.9]), jnp.array([0, 1, 1, 1]), n_bins=2,
      ...         groups=jnp.array([0, 1, 0, 1]), n_groups=2)
      >>> [round(v, 4) for v in e.tolist()]
      [0.15, 0.35]
      >>> # each segment's own median: {0.1, 0.3 | 0.8} -> 0.2, {0.4, 0.6 | 0.9} -> 0.3667
      >>> e = ece(jnp.array([0.1, 0.4, 0.8, 0.9, 0.3, 0.6]), jnp.array([0, 1, 1, 1, 0, 1]),
      ...         n_bins=2, binning="quantile", groups=jnp.array([0, 1, 0, 1, 0, 1]), n_groups=2)
      >>> [round(v, 4) for v in e.tolist()]
      [0.2, 0.3667]

    References:
      Naeini, Cooper & Hauskrecht (2015); Guo et al. (2017); Kumar, Liang & Ma (2019),
      "Verified Uncertainty Calibration"; Silva Filho et al. (2023), "Classifier
      calibration: a survey on how to assess and improve predicted class probabilities"
      (the ECML-PKDD calibration tutorial and its worked example).
    """
    n_bins = check_binning(n_bins, binning, closed, probs)
    check_norm(norm, debias)
    probs, labels, weights = check_probs_labels(
        probs, labels, weights, values=False, renormalize=renormalize
    )
    groups, n_groups = check_binned_groups(groups, probs.shape[0], n_groups)
    static = (n_bins, binning, norm, closed, debias, groups, n_groups)
    return run_validated(_ece_kernel, probs, labels, weights, *static)


def mce(
    probs: Any,
    labels: Any,
    *,
    n_bins: int = 15,
    binning: str = "uniform",
    closed: str = "right",
    weights: Any = None,
    renormalize: bool = False,
    **unexpected: Any,
) -> jax.Array:
    """Maximum calibration error: ``ece(probs, labels, norm="max", ...)``.

    The largest ``|accuracy - confidence|`` gap over non-empty bins, binned exactly as
    :func:`~jaxcal.metrics.ece` bins (binary for 1-D ``probs``, top-label confidence for 2-D):

    .. math::
       \\mathrm{MCE} = \\max_{b: W_b > 0} |\\bar y_b - \\bar p_b|

    Args: as :func:`~jaxcal.metrics.ece` (there is no ``norm``: it is always the max).

    Returns:
      0-d array; 0 for zero total weight.

    Example:
      >>> import jax.numpy as jnp
      >>> round(float(mce(jnp.array([0.1, 0.4, 0.8, 0.9]), jnp.array([0, 1, 1, 1]), n_bins=2)), 4)
      0.25

    References:
      Naeini, Cooper & Hauskrecht (2015), "Obtaining well calibrated probabilities using
      Bayesian binning".
    """
    if unexpected:  # a ValueError that says why, not Python's TypeError
        name = next(iter(unexpected))
        if name == "norm":
            raise ValueError("`norm` cannot be passed to mce: it is always 'max'.")
        raise ValueError(
            f"`{name}` is not an option of mce; it takes n_bins, binning, closed, weights, "
            f"renormalize."
        )
    return ece(
        probs,
        labels,
        n_bins=n_bins,
        binning=binning,
        norm="max",
        closed=closed,
        weights=weights,
        renormalize=renormalize,
    )


# Binned forms (jaxcal.stats._resampling.binned_null): the options of ``ece`` each function fixes. The
# consistency test computes a metric that declares one from per-bin counts of its draws.
ece.binned_form = {}
mce.binned_form = {"norm": "max"}


@partial(jax.jit, static_argnames=("n_bins", "binning", "norm", "closed", "debias"))
def _classwise_kernel(probs, labels, weights, n_bins, binning, norm, closed, debias):
    k = probs.shape[1]
    probs, labels, _, summary = kernel_inputs(probs, labels, weights, rows=False)
    weights = scale_free(weights)  # any scale of the weights, one answer
    stats = classwise_stats(probs, labels, weights, n_bins, binning, closed)
    value = gap_norm(stats, jnp.full(k, 1 / k, stats.weight.dtype), norm, debias)
    return value, summary


def classwise_ece(
    probs: Any,
    labels: Any,
    *,
    n_bins: int = 15,
    binning: str = "uniform",
    norm: str = "l1",
    closed: str = "right",
    debias: bool = False,
    weights: Any = None,
    renormalize: bool = False,
) -> jax.Array:
    """Classwise ECE: the binary ECE of each column ``p_k`` against ``labels == k``, averaged.

    .. math::
       \\text{classwise-ECE} = \\frac1K \\sum_{k=1}^K \\sum_b \\frac{W_{bk}}{W} |\\bar y_{bk} - \\bar p_{bk}|

    ``norm="l2"`` is ``sqrt(mean_k ECE_k^2)`` (Kumar et al.'s "marginal" calibration
    error; with ``debias`` their debiased estimator); ``norm="max"`` is the largest gap over
    all classes and bins (the tutorial's classwise-MCE). All K classes count, present or
    not. With ``binning="quantile"`` each class is binned by the quantiles of its column.
    Options as in :func:`~jaxcal.metrics.ece`; 1-D ``probs`` are treated as two columns ``(1 - p, p)``.

    ``renormalize=True`` divides each row of ``(N, K)`` probabilities by its sum
    first, for probabilities rounded on export (default False).

    Example:
      >>> import jax.numpy as jnp
      >>> p = jnp.array([[0.9, 0.1], [0.3, 0.7], [0.6, 0.4]])
      >>> round(float(classwise_ece(p, jnp.array([0, 1, 1]), n_bins=2)), 4)
      0.2667

    References:
      Kull et al. (2019), "Beyond temperature scaling"; Kumar, Liang & Ma (2019);
      Silva Filho et al. (2023), the ECML-PKDD calibration tutorial.
    """
    n_bins = check_binning(n_bins, binning, closed, probs)
    check_norm(norm, debias)
    probs, labels, weights = check_probs_labels(
        probs, labels, weights, values=False, renormalize=renormalize
    )
    columns = jnp.stack([1 - probs, probs], axis=1) if probs.ndim == 1 else probs
    static = (n_bins, binning, norm, closed, debias)
    return run_validated(_classwise_kernel, columns, labels, weights, *static, diagnose=probs)


@partial(jax.jit, static_argnames=("n_bins", "binning", "norm", "closed", "debias", "average"))
def _top_label_kernel(probs, labels, weights, n_bins, binning, norm, closed, debias, average):
    k = probs.shape[1]
    probs, labels, rows, summary = kernel_inputs(probs, labels, weights)
    weights = scale_free(weights)  # any scale of the weights, one answer
    conf, correct, pred = scores_and_targets(probs, labels, "confidence", rows)
    if binning == "uniform":
        # K M segments: blocks of rows_per_block(K M) rows keep the table of partial sums
        # the size of the input (256-row blocks made it N K M / 256 entries: at K = 1000,
        # 15 bins and N = 2e4, 1.2e6 zeroed, scattered and summed for 2e4 samples).
        block = rows_per_block(k * n_bins)
        args = (binning, closed, pred, k)
        _, stats = binned_stats(conf, correct, weights, n_bins, *args, block=block)
    else:  # quantile edges of the confidences *within* each predicted class

        def one_class(c):
            w = (pred == c).astype(conf.dtype)
            w = w if weights is None else w * weights
            return binned_stats(conf, correct, w, n_bins, binning, closed)[1]

        per_class = jax.vmap(one_class)(jnp.arange(k, dtype=jnp.int32))
        stats = BinStats(*(f.reshape(k, n_bins) for f in per_class))
    value = gap_norm(stats, top_label_group_weights(stats, average), norm, debias)
    return value, summary


def top_label_group_weights(stats: BinStats, average: str) -> jax.Array:
    """Weights of the predicted classes ``(K,)`` from their ``(K, M)`` bin sums.

    ``average="label"``: uniform over the predicted classes present (MAPIE's mean);
    ``"sample"``: each class's share of the weight (Gupta & Ramdas 2021).
    """
    class_weight = stats.weight.sum(axis=1)
    if average == "sample":
        return safe_divide(class_weight, class_weight.sum())
    present = (class_weight > 0).astype(class_weight.dtype)
    return safe_divide(present, present.sum())


def top_label_ece(
    probs: Any,
    labels: Any,
    *,
    n_bins: int = 15,
    binning: str = "uniform",
    norm: str = "l1",
    closed: str = "right",
    debias: bool = False,
    average: str = "label",
    weights: Any = None,
    renormalize: bool = False,
) -> jax.Array:
    """Top-label ECE: the confidence ECE computed separately within each predicted class.

    For each predicted class l present, the ECE of the top confidence against correctness
    among the samples predicted l (bin shares normalised within l). ``average="label"``
    (the seeds' and MAPIE's definition) takes the plain mean over the predicted classes
    present; ``average="sample"`` (Gupta & Ramdas 2021) weights class l by its share of
    the samples. ``norm="l2"`` averages squared errors before the square root;
    ``norm="max"`` is the largest gap over predicted classes and bins. With
    ``binning="quantile"`` each predicted class has its own quantile edges.

    Args: as :func:`~jaxcal.metrics.ece`, plus ``average``. 1-D ``probs`` are treated as ``(1 - p, p)``.

    Returns:
      0-d array.

    ``renormalize=True`` divides each row of ``(N, K)`` probabilities by its sum
    first, for probabilities rounded on export (default False).

    Example:
      >>> import jax.numpy as jnp
      >>> p = jnp.array([[0.9, 0.1], [0.3, 0.7], [0.6, 0.4], [0.2, 0.8]])
      >>> # predicted 0: conf (0.9, 0.6), acc 1/2 -> 0.25; predicted 1: conf (0.7, 0.8), acc 1 -> 0.25
      >>> round(float(top_label_ece(p, jnp.array([0, 1, 1, 1]), n_bins=2)), 4)
      0.25

    References:
      Gupta & Ramdas (2021), "Top-label calibration and multiclass-to-binary reductions";
      MAPIE's ``top_label_ece``.
    """
    n_bins = check_binning(n_bins, binning, closed, probs)
    check_norm(norm, debias)
    check_option("average", average, AVERAGES)
    probs, labels, weights = check_probs_labels(
        probs, labels, weights, values=False, renormalize=renormalize
    )
    columns = jnp.stack([1 - probs, probs], axis=1) if probs.ndim == 1 else probs
    static = (n_bins, binning, norm, closed, debias, average)
    return run_validated(_top_label_kernel, columns, labels, weights, *static, diagnose=probs)

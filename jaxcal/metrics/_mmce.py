"""Maximum mean calibration error (Kumar, Sarawagi & Jain 2018), exact in O(N log N).

Inputs and hyperparameters follow ``jaxcal/metrics/_objectives.py``. The kernel double sum is
evaluated by sorted, segment-rescaled prefix sums (``laplace_quadratic_form()``)
instead of an (N, N) kernel matrix.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from jaxcal._core.checks import check_option, check_probs_labels
from jaxcal._core.docstrings import shared_doc
from jaxcal._core.numerics import safe_divide, safe_sqrt
from jaxcal._core.sort import argsort
from jaxcal._core.validity import kernel_inputs, run_validated
from jaxcal.metrics._objectives import check_hyperparameter, float_scores_targets, sample_weights

MMCE_VARIANTS = ("unweighted", "weighted")

#: MMCE: scores are split into this many equal-width segments of [0, 1] for the sorted
#: prefix sums (see ``laplace_quadratic_form()``), and the kernel width must be at least
#: MMCE_MIN_BANDWIDTH, so that no rescaling factor exceeds exp(1 / (128 * 1e-3)) ~ 2.4e3.
_LAPLACE_SEGMENTS = 128
MMCE_MIN_BANDWIDTH = 1e-3


def laplace_quadratic_form(x: jax.Array, a: jax.Array, bandwidth: jax.Array) -> jax.Array:
    """``sum_ij a_i a_j exp(-|x_i - x_j| / h)`` exactly, in O(N log N) time, O(N) memory.

    For x in [0, 1] (up to round-off) and h >= 1e-3. The Laplacian kernel factorises:
    over x sorted ascending, ``L_i = sum_{j <= i} a_j exp(-(x_i - x_j) / h)`` is a prefix
    sum of ``a_j exp(x_j / h)`` rescaled by ``exp(-x_i / h)``, and the double sum is
    ``sum_i a_i (2 L_i - a_i)``. So that no factor overflows, [0, 1] is cut into
    G = 128 segments: each prefix sum is rescaled at its segment's right edge (all
    factors in [exp(-1/(G h)), 1]), and the segments' totals are carried forward by an
    exact (G, G) lower-triangular kernel product. This replaces the (N, N) kernel matrix
    (or its blocks) of the reference implementation; it is exact up to round-off.
    """
    order = argsort(x)
    xs, as_ = x[order], a[order]
    dtype = xs.dtype
    g = _LAPLACE_SEGMENTS
    seg = jnp.clip(jnp.floor(xs * g).astype(jnp.int32), 0, g - 1)
    left = seg.astype(dtype) / g
    right = left + 1 / g
    terms = as_ * jnp.exp((xs - right) / bandwidth)
    totals = jax.ops.segment_sum(terms, seg, g)
    within = jnp.cumsum(terms) - (jnp.cumsum(totals) - totals)[seg]
    # carried_k = sum over segments <= k of their points, at the right edge of segment k
    lag = (jnp.arange(g)[:, None] - jnp.arange(g)[None, :]).astype(dtype)
    decay = jnp.where(lag >= 0, jnp.exp(-jnp.maximum(lag, 0) / (g * bandwidth)), 0)
    carried = decay.dot(totals)
    before = jnp.concatenate([jnp.zeros((1,), dtype), carried[:-1]])[seg]
    cum = jnp.exp((right - xs) / bandwidth) * within + jnp.exp((left - xs) / bandwidth) * before
    return jnp.sum(as_ * (2 * cum - as_))


def mmce_value(probs, labels, weights, bandwidth, variant, rows=None):
    """The MMCE of ``(probs, labels, weights)`` (traceable; shared with
    :func:`jaxcal.losses.mmce_loss`). ``rows``: the caller's ``input_row_stats``."""
    r, c = float_scores_targets(probs, labels, rows)
    dtype = r.dtype
    w = sample_weights(weights, r)
    h = jnp.asarray(bandwidth).astype(dtype)
    if variant == "unweighted":
        a = safe_divide(w * (c - r), w.sum())
        live = w.sum() > 0
    else:
        m_correct = jnp.sum(w * c)
        m_wrong = jnp.sum(w * (1 - c))
        a = w * (c * safe_divide(1 - r, m_correct) - (1 - c) * safe_divide(r, m_wrong))
        live = (m_correct > 0) & (m_wrong > 0)
    q = laplace_quadratic_form(r, a, h)
    return jnp.where(live, safe_sqrt(q), 0)


@partial(jax.jit, static_argnames=("variant",))
def _mmce_kernel(probs, labels, weights, bandwidth, variant):
    probs, labels, rows, summary = kernel_inputs(probs, labels, weights)
    return mmce_value(probs, labels, weights, bandwidth, variant, rows), summary


@shared_doc
def mmce(
    probs: Any,
    labels: Any,
    *,
    bandwidth: Any = 0.4,
    variant: str = "unweighted",
    weights: Any = None,
    renormalize: bool = False,
) -> jax.Array:
    """Maximum mean calibration error (MMCE), a kernel calibration error.

    Kumar, Sarawagi & Jain (2018): with confidences ``r_i`` (positive-class probability
    for 1-D ``probs``, top-label confidence for 2-D), correctness ``c_i`` (the 0/1 label,
    or ``argmax == y``) and the Laplacian kernel ``k(r, r') = exp(-|r - r'| / h)``,

    .. math::
       \\mathrm{MMCE} = \\Big(\\sum_{i,j} a_i a_j k(r_i, r_j)\\Big)^{1/2}, \\qquad
       a_i = \\frac{w_i (c_i - r_i)}{W}  \\quad (\\texttt{variant="unweighted"}),

    the paper's Eq. (2) (with sample weights ``w_i``, W their sum). ``variant="weighted"``
    is the paper's MMCE_w (Section 4), which gives correct and incorrect samples equal
    total weight so that the measure does not vanish as accuracy grows:

    .. math::
       a_i = w_i \\Big(c_i \\frac{1 - r_i}{m} - (1 - c_i) \\frac{r_i}{n - m}\\Big),\\qquad
       m = \\sum_i w_i c_i,\\ n - m = \\sum_i w_i (1 - c_i).

    MMCE_w is 0 when every sample is correct or every sample is wrong (as the reference
    code, whose kernel ``exp(-|r - r'| / (2 * 0.2))`` is the default ``bandwidth=0.4``).

    The double sum is computed exactly in O(N log N) time and O(N) memory (sorting and
    segment-rescaled prefix sums, see ``laplace_quadratic_form()``) instead of the
    reference implementation's O(N^2) kernel matrix, so N = 10**6 fits anywhere. The square root is
    taken of ``max(q, 0)`` with a zero gradient at 0 (the reference adds 1e-10 instead).

    Args:
      {{probs_labels}}
      bandwidth: the kernel width h >= 1e-3 (number or 0-d array; traced, not static).
      variant: ``"unweighted"`` (MMCE) or ``"weighted"`` (MMCE_w).
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding.
      {{renormalize}}

    Returns:
      0-d array. Zero total weight gives 0.

    {{traced_validation}}

    Example:
      >>> import jax.numpy as jnp
      >>> p, y = jnp.array([0.1, 0.4, 0.8, 0.9]), jnp.array([0, 1, 1, 1])
      >>> round(float(mmce(p, y)), 4)
      0.1781

    References:
      Kumar, Sarawagi & Jain (2018), "Trainable Calibration Measures for Neural Networks
      from Kernel Mean Embeddings", ICML, Eq. (2) and Section 4 (MMCE_w).
    """
    check_option("variant", variant, MMCE_VARIANTS)
    bandwidth = check_hyperparameter("bandwidth", bandwidth, minimum=MMCE_MIN_BANDWIDTH)
    probs, labels, weights = check_probs_labels(
        probs, labels, weights, values=False, renormalize=renormalize
    )
    return run_validated(_mmce_kernel, probs, labels, weights, bandwidth, variant, pad=False)

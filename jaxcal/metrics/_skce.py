"""Squared kernel calibration error (Widmann, Lindsten & Zachariah 2019), three estimators.

The kernel sums come from ``jaxcal/metrics/_kernels.py``: tiles of the kernel matrix
(O(N^2 K) work, O(TILE^2) memory) or, for scalar predictions with the Laplacian kernel,
the sorted-scores recurrence in O(N log N). ``skce_features()`` and ``skce_sums()`` are
shared with the tests of ``jaxcal/stats/_kernel/skce_test.py``.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.checks import check_option, check_positive_int, check_probs_labels
from jaxcal._core.numerics import safe_divide, upcast
from jaxcal._core.validity import kernel_inputs, run_validated
from jaxcal.metrics._kernels import (
    KERNELS,
    TILE,
    centred,
    laplace_pair_sum,
    pair_sum,
    resolve_bandwidth,
)
from jaxcal.metrics._objectives import check_hyperparameter, float_scores_targets, sample_weights

SKCE_ESTIMATORS = ("unbiased", "biased", "block")
SKCE_KINDS = ("canonical", "top_label")

#: Blocks of the block estimator are evaluated this many kernel entries at a time.
_BLOCK_ENTRIES = 2**20

#: From this block size on, the Laplacian blocks of scalar predictions take the sorted
#: recurrence (below it a direct tile costs less than a sort).
_SORTED_BLOCK_MIN = 256


class SKCEFeatures(NamedTuple):
    """What the kernel sees of each sample.

    Attributes:
      x: ``(N, D)`` the predictions the kernel compares (D = K, or 1 for a score).
      e: ``(N, C)`` the residuals ``e_y - p`` (one column ``y - p`` for a score).
      w: ``(N,)`` sample weights (scale-free), 0 on padding.
      scale: 2 for scores (``<e_y - p, e_y' - p'> = 2 (y - p)(y' - p')`` for two classes),
        else 1.
    """

    x: jax.Array
    e: jax.Array
    w: jax.Array
    scale: float


def skce_features(probs, labels, weights, kind, rows=None) -> SKCEFeatures:
    """``SKCEFeatures`` of 1-D scores, of (N, K) rows (canonical) or of the top label."""
    if probs.ndim == 1:
        p = upcast(probs)
        e = (labels == 1).astype(p.dtype) - p
        return SKCEFeatures(p[:, None], e[:, None], sample_weights(weights, p), 2.0)
    if kind == "top_label":
        r, c = float_scores_targets(probs, labels, rows)
        return SKCEFeatures(r[:, None], (c - r)[:, None], sample_weights(weights, r), 2.0)
    p = upcast(probs)
    e = jax.nn.one_hot(labels, p.shape[1], dtype=p.dtype) - p
    return SKCEFeatures(p, e, sample_weights(weights, p[:, 0]), 1.0)


class SKCESums(NamedTuple):
    """The double sums of an SKCE: ``off`` = sum over i != j of ``w_i w_j h_ij / scale``,
    ``diag`` = sum of ``w_i^2 h_ii / scale``, ``w2`` = (sum w)^2, ``ww`` = sum w^2."""

    off: jax.Array
    diag: jax.Array
    w2: jax.Array
    ww: jax.Array


def _off_diagonal(x, a, w, h, kernel, tile=TILE, sorted_min=1):
    if kernel == "laplacian" and x.shape[1] == 1 and x.shape[0] >= sorted_min:
        return laplace_pair_sum(x[:, 0], a[:, 0], h)
    return pair_sum(centred(x, w), a, h, kernel, diagonal=False, tile=tile)


def skce_sums(f: SKCEFeatures, h: jax.Array, kernel: str) -> SKCESums:
    """``SKCESums`` of all N samples (O(N log N) for scores with the Laplacian kernel)."""
    a = f.w[:, None] * f.e
    off = _off_diagonal(f.x, a, f.w, h, kernel)
    return SKCESums(off, jnp.sum(a * a), jnp.sum(f.w) ** 2, jnp.sum(f.w * f.w))


def block_sums(f: SKCEFeatures, h: jax.Array, kernel: str, block_size: int):
    """Per block of ``block_size`` consecutive samples (a last incomplete block dropped):
    ``(off, pairs)`` ``(B,)``, the off-diagonal sum and ``(sum w)^2 - sum w^2``."""
    m = block_size
    nb = f.x.shape[0] // m

    def blocks(v):
        return v[: nb * m].reshape(nb, m, *v.shape[1:])

    def one(args):
        x, e, w = args
        off = _off_diagonal(x, w[:, None] * e, w, h, kernel, min(TILE, m), _SORTED_BLOCK_MIN)
        return off, jnp.sum(w) ** 2 - jnp.sum(w * w)

    batch = max(1, _BLOCK_ENTRIES // (m * m))
    return jax.lax.map(one, (blocks(f.x), blocks(f.e), blocks(f.w)), batch_size=batch)


def skce_value(f: SKCEFeatures, h, kernel, estimator, block_size):
    """The SKCE estimate of ``f`` (traceable)."""
    if estimator == "block":
        off, pairs = block_sums(f, h, kernel, block_size)
        return f.scale * safe_divide(jnp.sum(off), jnp.sum(pairs))
    s = skce_sums(f, h, kernel)
    if estimator == "biased":
        return f.scale * safe_divide(s.off + s.diag, s.w2)
    return f.scale * safe_divide(s.off, s.w2 - s.ww)


@partial(jax.jit, static_argnames=("kernel", "estimator", "block_size", "kind"))
def _skce_kernel(probs, labels, weights, bandwidth, kernel, estimator, block_size, kind):
    probs, labels, rows, summary = kernel_inputs(probs, labels, weights, rows=kind == "top_label")
    f = skce_features(probs, labels, weights, kind, rows)
    h = resolve_bandwidth(bandwidth, f.x, f.w)
    return skce_value(f, h, kernel, estimator, block_size), summary


def check_skce_options(probs, kernel, bandwidth, estimator, block_size, kind):
    """Static checks shared by :func:`~jaxcal.metrics.skce` and its tests."""
    check_option("kernel", kernel, KERNELS)
    check_option("estimator", estimator, SKCE_ESTIMATORS)
    check_option("kind", kind, SKCE_KINDS)
    if bandwidth is not None:
        bandwidth = check_hyperparameter("bandwidth", bandwidth)
    block_size = check_positive_int("block_size", block_size, minimum=2)
    n = probs.shape[0]
    if estimator == "block" and block_size > n:
        raise ValueError(
            f"`block_size` must be at most the number of samples ({n}) for "
            f"estimator='block'; got {block_size}. Use a smaller block_size."
        )
    return bandwidth, block_size


def skce(
    probs: Any,
    labels: Any,
    *,
    kernel: str = "laplacian",
    bandwidth: Any = None,
    estimator: str = "unbiased",
    block_size: int = 2,
    kind: str = "canonical",
    weights: Any = None,
) -> jax.Array:
    """Squared kernel calibration error (SKCE) of the whole probability vector.

    Widmann, Lindsten & Zachariah (2019): with a kernel ``k`` on predictions and the white
    kernel on targets (``CalibrationErrors.jl``'s ``SKCE(k ⊗ WhiteKernel())``),

    .. math::
       h_{ij} = k(p_i, p_j)\\, \\langle e_{y_i} - p_i,\\; e_{y_j} - p_j \\rangle,

    and the SKCE is ``E[h(Z, Z')]`` for independent pairs, zero if and only if the model
    is canonically calibrated (for a characteristic kernel). Estimators
    (``estimator=``), with sample weights ``w`` (1 by default):

    * ``"unbiased"`` (the U-statistic, the reference's default):
      :math:`\\sum_{i \\ne j} w_i w_j h_{ij} / \\sum_{i \\ne j} w_i w_j`; it can be
      negative, and its mean is 0 under calibration.
    * ``"biased"`` (the V-statistic): :math:`\\sum_{i, j} w_i w_j h_{ij} / (\\sum w)^2
      \\ge 0`.
    * ``"block"``: the U-statistic of each block of ``block_size`` consecutive samples,
      averaged over the ``floor(N / block_size)`` blocks (a last incomplete block is
      dropped, as in the reference); with weights, each block counts by its pair weight.
      O(N m K) for blocks of m; ``block_size=2`` is the linear-time estimator.

    Kernels on the predictions (``kernel=``): ``"laplacian"`` ``exp(-||p - p'||_2 / h)``
    (KernelFunctions' ``ExponentialKernel() ∘ ScaleTransform(1/h)``), ``"gaussian"``
    ``exp(-||p - p'||_2^2 / (2 h^2))`` (``SqExponentialKernel() ∘ ScaleTransform(1/h)``).
    ``bandwidth=None`` takes the median heuristic: the **lower** median of the pairwise
    distances ``||p_i - p_j||_2`` (i < j, weighted ``w_i w_j``): the smallest distance
    with at least half the pair weight at or below it, so with an even number of pairs
    the lower of the two middle values, not their mean as ``numpy.median`` and Julia's
    ``median`` take (the SKCE then differs at small N). Among at most 1024 evenly
    strided rows beyond that many; the lower median of the positive distances when half
    the pairs or more are ties; computed without gradient.
    Pass ``bandwidth=`` explicitly to match a reference that uses the usual median.

    Which vector the kernel compares (``kind=``): for 1-D ``probs`` the scalar ``p`` (as
    the reference's binary methods, ``k(p, p')`` on probabilities, where the inner product
    is ``2 (y - p)(y' - p')``; so the 1-D SKCE with bandwidth h equals the SKCE of the
    rows ``(1 - p, p)`` with bandwidth ``sqrt(2) h``); for ``(N, K)`` the whole row
    (``"canonical"``), or with ``kind="top_label"`` the SKCE of the binary problem
    (top-label confidence, correctness).

    Cost: scalar predictions (1-D, or ``kind="top_label"``) with the Laplacian kernel
    take O(N log N): sorted ascending, ``L_i = sum_{j <= i} a_j exp(-(x_i - x_j)/h)``
    satisfies ``L_i = a_i + exp(-(x_i - x_{i-1})/h) L_{i-1}`` (an associative scan), and
    with ``a_i = w_i (y_i - p_i)``

    .. math:: \\sum_{i \\ne j} a_i a_j e^{-|x_i - x_j|/h}
              = 2 \\sum_i a_i\\, e^{-(x_i - x_{i-1})/h}\\, L_{i-1}.

    Everything else is an O(N^2 K) double sum in 1024 x 1024 tiles (never an (N, N)
    array: N = 1e5, K = 10 took 26 s on 2 loaded CPU cores, a blocked NumPy port 625 s;
    ``benchmarks/bench_kernel_ce.py``). In float32 the U-statistic
    of a large calibrated sample is a small difference of large sums: expect a relative
    error of order 1e-7 N; use ``jax_enable_x64`` for N beyond ~1e4 when the digits matter.

    Args:
      probs: ``(N,)`` positive-class probabilities or ``(N, K)`` rows on the simplex.
      labels: ``(N,)`` int labels: 0/1 for 1-D probs, in ``[0, K)`` for 2-D.
      kernel: ``"laplacian"`` or ``"gaussian"``.
      bandwidth: ``h > 0`` (number or 0-d array, traced), or None for the median heuristic
        (the lower median, above).
      estimator: ``"unbiased"``, ``"biased"`` or ``"block"``.
      block_size: m >= 2 samples per block (``estimator="block"`` only), at most N.
      kind: ``"canonical"`` or ``"top_label"`` (2-D ``probs`` only; ignored for 1-D).
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding.

    Returns:
      0-d array. Fewer than two samples of positive weight (one for ``"biased"``) give 0.

    Validation runs only on concrete inputs; under ``jit``/``vmap``/``grad`` the value
    checks are skipped and the kernel trusts its input. Gradients flow to ``probs`` (not
    through the median-heuristic bandwidth).

    Example (the reference's two-point example, CalibrationErrors.jl ``test/skce.jl``):
      >>> import jax.numpy as jnp
      >>> p, y = jnp.array([[1.0, 0.0], [0.0, 1.0]]), jnp.array([1, 0])
      >>> round(float(skce(p, y, kernel="gaussian", bandwidth=1.0)), 6)  # -2 exp(-1)
      -0.735759

    References:
      Widmann, Lindsten & Zachariah (2019), "Calibration tests in multi-class
      classification: A unifying framework", NeurIPS; Widmann, Lindsten & Zachariah
      (2021), "Calibration tests beyond classification", ICLR; CalibrationErrors.jl
      (``src/skce.jl``).
    """
    # Values checked on every call, before the kernel: its work is O(N^2) (or a
    # resampled O(N^2)), so the O(N) check costs nothing beside it, and bad input never
    # waits for the computation it would spoil (the in-kernel summary stays as a guard).
    probs, labels, weights = check_probs_labels(probs, labels, weights)
    bandwidth, block_size = check_skce_options(
        probs, kernel, bandwidth, estimator, block_size, kind
    )
    kind = "canonical" if probs.ndim == 1 else kind
    return run_validated(
        _skce_kernel,
        probs,
        labels,
        weights,
        bandwidth,
        kernel,
        estimator,
        block_size,
        kind,
        pad=False,  # O(N^2) and its median bandwidth reads every row: see run_validated
    )

"""Calibration regularisers on logits: soft-binned ECE, MMCE_w and DCA, each added to the
cross-entropy with a weight lambda.

Inputs follow ``jaxcal/losses/_inputs.py``. The soft-binned ECE and the MMCE are the
metrics of ``jaxcal/metrics/_soft_ece.py`` and ``jaxcal/metrics/_mmce.py`` (their kernels, their
closed-form or exact derivatives), evaluated on ``softmax(logits)`` with the variant and
hyperparameters their authors train with.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from jaxcal._core.checks import check_option, check_positive_int
from jaxcal._core.docstrings import shared_doc
from jaxcal._core.numerics import weighted_mean
from jaxcal.losses._inputs import check_logits_labels, mask_padding_logits, probabilities
from jaxcal.metrics._mmce import MMCE_MIN_BANDWIDTH, mmce_value
from jaxcal.metrics._objectives import check_hyperparameter, float_scores_targets
from jaxcal.metrics._soft_ece import SOFT_NORMS, soft_ece_value

#: Training temperature of :func:`~jaxcal.losses.soft_ece_loss` (see its docstring for the evidence).
SOFT_ECE_LOSS_TEMPERATURE = 0.002

#: Kernel width of :func:`~jaxcal.losses.mmce_loss` (see its docstring for the evidence; the reference
#: code's Laplacian is exp(-|r - r'| / 0.4)).
MMCE_LOSS_BANDWIDTH = 0.1


@partial(jax.jit, static_argnames=("n_bins", "norm"))
def _soft_ece_loss_kernel(logits, labels, weights, temperature, n_bins, norm):
    logits, labels = mask_padding_logits(logits, labels, weights)
    return soft_ece_value(probabilities(logits), labels, weights, temperature, n_bins, norm)


@shared_doc
def soft_ece_loss(
    logits: Any,
    labels: Any,
    *,
    n_bins: int = 15,
    temperature: Any = SOFT_ECE_LOSS_TEMPERATURE,
    norm: str = "l2",
    weights: Any = None,
) -> jax.Array:
    """Soft-binned ECE of ``softmax(logits)`` as a training loss (Karandikar et al. 2021).

    The metric :func:`jaxcal.soft_ece` (their Eq. (11): each score belongs to the bin
    centred at ``xi_j = (j + 1/2) / M`` with weight ``softmax_j(-(s - xi_j)**2 / T)``) of
    the probabilities of ``logits``: the top-label confidence of ``softmax(logits)``
    against correctness, or for 1-D binary log-odds ``sigmoid(logits)`` against the 0/1
    label. It is taken in the form the authors train with: the l2 norm

    .. math::
       \\mathrm{SB\\text{-}ECE} = \\Big(\\sum_j \\frac{S_j}{W}\\, (acc_j - conf_j)^2\\Big)^{1/2},

    as ``get_soft_binning_ece_tensor`` in their code (uncertainty-baselines,
    ``experimental/caltrain``) returns it, and T as a hyperparameter of the objective
    (the metric's default, 0.00205 at 15 bins, comes from a rule about adjacent bins). Use
    it beside the cross-entropy of the same minibatch::

      loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
      loss = loss + lam * jaxcal.losses.soft_ece_loss(logits, labels)

    The gradient reaches the logits through the confidence (correctness is piecewise
    constant), by the metric's closed-form derivative rule (about one more pass over the
    (M, N) memberships); it is finite for every finite input, saturated rows included.
    ``temperature`` is traced: annealing it inside a jitted loop does not recompile.

    Default ``T = 0.002``, kept: ``benchmarks/train_calibration.py`` (the guide "Training
    with a calibration objective"; ten paired seeds, grid lambda in {0.25, 1, 4} x T in
    {0.002, 0.01}, chosen on validation) picks ``T = 0.002`` with ``lambda = 1``. In the
    non-memorising regime (MNIST-1D, 20,000 labelled rows; test ECE of CE 0.068) that
    point lowers the test ECE by 0.027 [0.023, 0.030] (paired, 95 %) at a cost of 5.1
    points of accuracy; where the accuracy is kept (lambda = 0.25) it does nothing
    significant. After temperature scaling no grid point beats CE + temperature scaling
    (paired differences within ±0.004), which alone lowers the ECE by 0.054. On
    ``wa_churn`` (binary) it lowers the raw ECE by 0.024 (as much as temperature scaling)
    by regularising an over-fitted network, again with nothing left after temperature
    scaling.

    Args:
      {{logits_labels}}
      n_bins: number of soft bins M >= 1.
      temperature: T > 0 of the soft binning (number or 0-d array).
      norm: ``"l2"`` (the authors' training objective) or ``"l1"`` (the soft ECE).
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding rows.

    Returns:
      0-d array. Zero total weight gives 0.

    {{traced_validation}}

    Example:
      >>> import jax, jax.numpy as jnp
      >>> logits = jnp.array([[2.0, 0.0], [0.0, 3.0], [1.0, 0.5]])
      >>> y = jnp.array([0, 1, 1])
      >>> round(float(soft_ece_loss(logits, y)), 4)
      0.3665
      >>> g = jax.grad(soft_ece_loss)(logits, y)
      >>> bool(jnp.all(jnp.isfinite(g)))
      True

    References:
      Karandikar, Cain, Tran, Lakshminarayanan, Shlens, Mozer & Roelofs (2021), "Soft
      Calibration Objectives for Neural Networks", NeurIPS, Eq. (11) and Section 4.
    """
    n_bins = check_positive_int("n_bins", n_bins)
    check_option("norm", norm, SOFT_NORMS)
    temperature = check_hyperparameter("temperature", temperature)
    logits, labels, weights = check_logits_labels(logits, labels, weights)
    return _soft_ece_loss_kernel(logits, labels, weights, temperature, n_bins, norm)


@jax.jit
def _mmce_loss_kernel(logits, labels, weights, bandwidth):
    logits, labels = mask_padding_logits(logits, labels, weights)
    return mmce_value(probabilities(logits), labels, weights, bandwidth, "weighted")


@shared_doc
def mmce_loss(
    logits: Any,
    labels: Any,
    *,
    bandwidth: Any = MMCE_LOSS_BANDWIDTH,
    weights: Any = None,
) -> jax.Array:
    """Weighted MMCE (MMCE_w) of ``softmax(logits)`` as a training loss (Kumar et al. 2018).

    :func:`jaxcal.mmce` with ``variant="weighted"`` of the probabilities of ``logits``
    (top-label confidence r against correctness c; 1-D binary log-odds: ``sigmoid``
    against the 0/1 label). MMCE_w is the variant Kumar, Sarawagi & Jain recommend for
    training (Section 4): correct and incorrect samples get equal total weight, so the
    measure does not vanish as the training accuracy grows,

    .. math::
       \\mathrm{MMCE}_w^2 = \\Big\\| \\frac1m \\sum_{c_i = 1} (1 - r_i)\\, \\phi(r_i)
       - \\frac1{n - m} \\sum_{c_i = 0} r_i\\, \\phi(r_i) \\Big\\|^2

    with the Laplacian kernel ``<phi(r), phi(r')> = exp(-|r - r'| / h)`` (sample weights
    enter m, n - m and each term). It is 0 on a batch without a wrong (or without a right)
    prediction. Their training loss is ``NLL + lambda * MMCE_w``; the 1/m normalisation
    here is the paper's (their code divides each sum by m**2 instead, so its coefficients
    do not carry over). The double sum is exact in O(N log N) (sorted prefix sums), and
    its gradient is autodiff of that evaluation: finite everywhere, 0 at MMCE_w = 0.

    Default ``bandwidth = 0.1``, kept: ``benchmarks/train_calibration.py`` (the guide
    "Training with a calibration objective"; ten paired seeds, grid lambda in {0.25, 1, 4}
    x h in {0.1, 0.4}, chosen on validation) picks ``bandwidth = 0.1`` with
    ``lambda = 0.25`` on most non-memorising data sets. There it is the regulariser with
    the most reliable effect on the raw test ECE at no cost in accuracy: MNIST-1D (20,000
    labelled rows) -0.017 [-0.019, -0.015] (paired, 95 %; CE's ECE 0.068), ``hpc_data``
    -0.011 [-0.016, -0.006], each -0.5 points of accuracy or less; but +0.008 on the
    binary ``wa_churn`` and +0.020 on ``diamonds`` (networks that were not
    over-confident), and about a third of what temperature scaling alone does on
    MNIST-1D (-0.054). After temperature scaling it buys nothing (MNIST-1D: -0.0002
    [-0.004, +0.003]; ``wa_churn``: +0.015, worse). On a batch without a wrong prediction
    it is exactly 0: log :func:`~jaxcal.losses.saturation_stats` to see whether it acts.

    Args:
      {{logits_labels}}
      bandwidth: kernel width h >= 1e-3 (number or 0-d array; traced, not static).
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding rows.

    Returns:
      0-d array. Zero total weight gives 0.

    {{traced_validation}}

    Example:
      >>> import jax.numpy as jnp
      >>> logits = jnp.array([[2.0, 0.0], [0.0, 3.0], [1.0, 0.5]])
      >>> round(float(mmce_loss(logits, jnp.array([0, 1, 1]))), 4)
      0.6215

    References:
      Kumar, Sarawagi & Jain (2018), "Trainable Calibration Measures for Neural Networks
      from Kernel Mean Embeddings", ICML, Section 4 (MMCE_w).
    """
    bandwidth = check_hyperparameter("bandwidth", bandwidth, minimum=MMCE_MIN_BANDWIDTH)
    logits, labels, weights = check_logits_labels(logits, labels, weights)
    return _mmce_loss_kernel(logits, labels, weights, bandwidth)


@jax.jit
def _dca_loss_kernel(logits, labels, weights):
    logits, labels = mask_padding_logits(logits, labels, weights)
    scores, targets = float_scores_targets(probabilities(logits), labels)
    return jnp.abs(weighted_mean(scores, weights) - weighted_mean(targets, weights))


@shared_doc
def dca_loss(logits: Any, labels: Any, *, weights: Any = None) -> jax.Array:
    """Difference between confidence and accuracy (DCA) over the batch (Liang et al. 2020).

    .. math::
       \\mathrm{DCA} = \\Big| \\frac1W \\sum_i w_i r_i - \\frac1W \\sum_i w_i c_i \\Big|

    with r the top-label confidence of ``softmax(logits)`` and c the correctness (1-D
    binary log-odds: ``sigmoid(logits)`` and the 0/1 label, so DCA is the gap of the mean
    predicted and observed positive rates). Liang, Zhang, Wang & Jacobs train with
    ``CE + beta * DCA`` (their code's default beta = 5). DCA is a single number per batch:
    it penalises the batch's average over- or under-confidence, not a mismatch within
    it. The gradient flows through the confidence (correctness is piecewise constant);
    at DCA = 0 it is 0.

    Evidence, from ``benchmarks/train_calibration.py`` (the guide "Training with a
    calibration objective"; ten paired seeds, lambda in {0.25, 1, 4} chosen on
    validation): no significant effect on the test ECE of MNIST-1D at any lambda that
    keeps the accuracy; on the binary ``wa_churn`` it lowers the raw ECE by 0.018 (an
    over-fitted network, regularised), with nothing left after temperature scaling. A
    batch-level average, it cannot correct a mismatch within the batch.

    Args:
      {{logits_labels}}
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding rows.

    Returns:
      0-d array. Zero total weight gives 0.

    {{traced_validation}}

    Example:
      >>> import jax.numpy as jnp
      >>> logits = jnp.array([[2.0, 0.0], [0.0, 3.0], [1.0, 0.5]])
      >>> round(float(dca_loss(logits, jnp.array([0, 1, 1]))), 4)
      0.1519

    References:
      Liang, Zhang, Wang & Jacobs (2020), "Improved Trainable Calibration Method for
      Neural Networks on Medical Imaging Classification", BMVC.
    """
    logits, labels, weights = check_logits_labels(logits, labels, weights)
    return _dca_loss_kernel(logits, labels, weights)

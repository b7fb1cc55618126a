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

    Default ``T = 0.002``, from ``benchmarks/train_calibration.py`` (README, "Training
    with a calibration objective"): an MLP over-confident on held-out data, ten seeds
    (each its own split, initialisation and minibatches), grid lambda in {0.25, 1, 4} x T
    in {0.002, 0.01, 0.05}, chosen on the validation splits: ``T = 0.002`` with
    ``lambda = 0.25``. Test ECE, mean ± std over seeds:

    =============  ===============  ================  ========================
    data set       CE               CE + 0.25 * loss  CE + temperature scaling
    =============  ===============  ================  ========================
    digits         0.0274 ± 0.0065  0.0278 ± 0.0061   0.0165 ± 0.0055
    breast cancer  0.0330 ± 0.0071  0.0327 ± 0.0072   0.0293 ± 0.0074
    =============  ===============  ================  ========================

    No effect: at every lambda that keeps the accuracy, the grid points differ by less
    than the noise (an earlier run with other random draws chose T = 0.01, lambda = 1).
    The network fits its training split (training ECE 0.0003), where the loss has little
    left to correct; lambda = 4 lowered the held-out ECE only by keeping the network from
    fitting it (digits, T = 0.002: ECE 0.0169, 0.8 points of accuracy lost; breast
    cancer: 4.2 points lost, ECE higher).

    Args:
      logits: ``(N, K)`` logits (K >= 2), or ``(N,)`` binary log-odds.
      labels: ``(N,)`` int labels in ``[0, K)`` (0/1 for 1-D logits).
      n_bins: number of soft bins M >= 1.
      temperature: T > 0 of the soft binning (number or 0-d array).
      norm: ``"l2"`` (the authors' training objective) or ``"l1"`` (the soft ECE).
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding rows.

    Returns:
      0-d array. Zero total weight gives 0.

    Validation runs only on concrete inputs; under ``jit``/``vmap``/``grad`` the value
    checks are skipped and the kernel trusts its input.

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

    Default ``bandwidth = 0.1``, from ``benchmarks/train_calibration.py`` (README,
    "Training with a calibration objective"; ten seeds, grid lambda in {0.25, 1, 4} x h in
    {0.1, 0.4}, chosen on the validation splits): ``bandwidth = 0.1`` with ``lambda = 1``
    (the reference code's 0.4 did about as well). Test ECE, mean ± std over seeds, and
    the paired difference (seeds lower):

    =============  ===============  ===============  ========================
    data set       CE               CE + 1 * loss    paired difference
    =============  ===============  ===============  ========================
    digits         0.0274 ± 0.0065  0.0217 ± 0.0066  -0.0057 ± 0.0038 (9/10)
    breast cancer  0.0330 ± 0.0071  0.0340 ± 0.0079  +0.0010 ± 0.0035 (4/10)
    =============  ===============  ===============  ========================

    The only regulariser with a consistent effect there (digits, at no cost in accuracy),
    but smaller than the seed spread of the ECE; none on breast cancer, whose training
    batches are all correct (MMCE_w is 0 on them); lambda = 4 costs about 9 points
    of accuracy on digits.

    Args:
      logits: ``(N, K)`` logits (K >= 2), or ``(N,)`` binary log-odds.
      labels: ``(N,)`` int labels in ``[0, K)`` (0/1 for 1-D logits).
      bandwidth: kernel width h >= 1e-3 (number or 0-d array; traced, not static).
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding rows.

    Returns:
      0-d array. Zero total weight gives 0.

    Validation runs only on concrete inputs; under ``jit``/``vmap``/``grad`` the value
    checks are skipped and the kernel trusts its input.

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

    Evidence, from ``benchmarks/train_calibration.py`` (README, "Training with a
    calibration objective"; ten seeds, lambda in {0.25, 1, 4} chosen on the validation
    splits: ``lambda = 0.25``): test ECE 0.0277 ± 0.0059 against CE's 0.0274 ± 0.0065
    (digits), 0.0333 ± 0.0078 against 0.0330 ± 0.0071 (breast cancer). No measurable
    effect at any lambda: once the network fits its training split, the training
    minibatch's confidence and accuracy are both near 1 and DCA is near 0.

    Args:
      logits: ``(N, K)`` logits (K >= 2), or ``(N,)`` binary log-odds.
      labels: ``(N,)`` int labels in ``[0, K)`` (0/1 for 1-D logits).
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding rows.

    Returns:
      0-d array. Zero total weight gives 0.

    Validation runs only on concrete inputs; under ``jit``/``vmap``/``grad`` the value
    checks are skipped and the kernel trusts its input.

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

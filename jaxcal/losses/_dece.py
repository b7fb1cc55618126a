"""Differentiable ECE (DECE) of Bohdal, Yang & Hospedales (2023): soft binning of the
confidence and a soft-rank accuracy, so that both sides of the calibration gap carry a
gradient.

Inputs follow ``jaxcal/losses/_inputs.py``; 1-D binary log-odds ``z`` are the two-column
logits ``(0, z)``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from jaxcal._core.checks import check_positive_int
from jaxcal._core.docstrings import shared_doc
from jaxcal._core.numerics import safe_divide, upcast
from jaxcal.losses._inputs import check_logits_labels, mask_padding_logits
from jaxcal.metrics._objectives import check_hyperparameter

#: Bohdal et al.'s defaults (``train.py``: ``--num_bins 15 --t_a 100 --t_b 0.01``).
DECE_BINS = 15
DECE_RANK_TEMPERATURE = 100.0
DECE_BIN_TEMPERATURE = 0.01


def two_column_logits(logits: jax.Array) -> jax.Array:
    """``(N, K)`` logits as they are; 1-D binary log-odds ``z`` as ``(0, z)`` (softmax = sigmoid)."""
    z = upcast(logits)
    return jnp.stack([jnp.zeros_like(z), z], axis=-1) if z.ndim == 1 else z


def soft_bin_memberships(confidence: jax.Array, n_bins: int, temperature: Any) -> jax.Array:
    """``(N, M)`` soft memberships of Yang et al.'s (2018) differentiable binning.

    Bin ``m = 1..M`` gets the logit ``(m c - sum_{k < m} k / M) / T``: the cut points
    ``0, 1/M, ..., (M - 1)/M`` of M equal-width bins, whose softmax over m tends to the
    indicator of the bin holding ``c`` as ``T -> 0``.
    """
    dtype = confidence.dtype
    cuts = jnp.arange(n_bins, dtype=dtype) / n_bins
    slopes = jnp.arange(1, n_bins + 1, dtype=dtype)
    h = (confidence[:, None] * slopes[None, :] - jnp.cumsum(cuts)[None, :]) / temperature
    return jax.nn.softmax(h, axis=-1)


def soft_rank_accuracy(probs: jax.Array, labels: jax.Array, temperature: Any) -> jax.Array:
    """``(N,)`` soft correctness ``relu(2 - rank_y)``, ``rank_y = 1/2 + sum_j sigmoid(t (p_j - p_y))``.

    The pairwise soft rank of the true class among the K probabilities (the sum includes
    ``j = y``, whose ``sigmoid(0) = 1/2`` makes the ranks start at 1): 1 when the true class
    leads every other by much more than ``1/t``, 0 once a second class passes it.
    """
    p_y = jnp.take_along_axis(probs, labels[:, None].astype(jnp.int32), axis=-1)
    rank = 0.5 + jnp.sum(jax.nn.sigmoid(temperature * (probs - p_y)), axis=-1)
    return jax.nn.relu(2.0 - rank)


def dece_value(
    logits: jax.Array,
    labels: jax.Array,
    weights: jax.Array | None,
    n_bins: int,
    bin_temperature: Any,
    rank_temperature: Any,
) -> jax.Array:
    """Kernel: ``(1/W) sum_m |sum_i w_i b_im (a_i - c_i)|`` (see :func:`dece_loss`)."""
    z = two_column_logits(logits)
    probs = jax.nn.softmax(z, axis=-1)
    dtype = probs.dtype
    confidence = jnp.max(probs, axis=-1)
    accuracy = soft_rank_accuracy(probs, labels, jnp.asarray(rank_temperature).astype(dtype))
    members = soft_bin_memberships(confidence, n_bins, jnp.asarray(bin_temperature).astype(dtype))
    w = jnp.ones_like(confidence) if weights is None else upcast(weights).astype(dtype)
    gaps = jnp.sum(members * (w * (accuracy - confidence))[:, None], axis=0)
    return safe_divide(jnp.sum(jnp.abs(gaps)), jnp.sum(w))


@partial(jax.jit, static_argnames=("n_bins",))
def _dece_kernel(logits, labels, weights, bin_temperature, rank_temperature, n_bins):
    logits, labels = mask_padding_logits(logits, labels, weights)
    return dece_value(logits, labels, weights, n_bins, bin_temperature, rank_temperature)


@shared_doc
def dece_loss(
    logits: Any,
    labels: Any,
    *,
    n_bins: int = DECE_BINS,
    bin_temperature: Any = DECE_BIN_TEMPERATURE,
    rank_temperature: Any = DECE_RANK_TEMPERATURE,
    weights: Any = None,
) -> jax.Array:
    """Differentiable ECE (DECE) of ``softmax(logits)``, Bohdal, Yang & Hospedales (2023).

    The l1 ECE of M equal-width bins with both of its hard steps made smooth:

    .. math::
       \\mathrm{DECE} = \\sum_{m=1}^{M} \\frac{S_m}{W}\\, |acc_m - conf_m|
       = \\frac1W \\sum_m \\Big|\\sum_i w_i\\, b_{im}\\, (a_i - c_i)\\Big|,

    with ``c_i`` the top-label confidence of ``p_i = softmax(z_i)``, ``b_im`` the soft
    membership of Yang, Garcia Morillo & Hospedales' (2018) differentiable binning,
    ``softmax_m((m c_i - sum_{k<m} k/M) / T_b)`` (cut points ``0, 1/M, ..., (M-1)/M``),
    ``S_m = sum_i w_i b_im`` and ``acc_m``, ``conf_m`` the soft bins' weighted means of
    ``a_i`` and ``c_i``. Where :func:`~jaxcal.losses.soft_ece_loss` (Karandikar et al.
    2021) takes correctness as a hard argmax, as their code does, DECE's accuracy is
    differentiable too: the soft rank of the true class,
    ``a_i = relu(2 - r_i)``, ``r_i = 1/2 + sum_j sigmoid(T_a (p_ij - p_{i,y_i}))``
    (1 when the true class leads by much more than ``1/T_a``, 0 once another class passes
    it). So the gradient can also push a wrong prediction's true class up, not only the
    confidence down.

    Defaults are the authors' (``train.py`` of their code: 15 bins, ``t_b = 0.01``,
    ``t_a = 100``). Their code adds 1e-6 to every membership before normalising (a guard
    for empty bins); the form above has no division by a bin's mass and needs none, so it
    differs from theirs by at most about 1e-5 (tested). 1-D binary log-odds ``z`` are
    the logits ``(0, z)``: confidence ``max(sigmoid(z), 1 - sigmoid(z))``.

    Use it as the authors do, as the calibration half of a meta-objective on held-out
    data (:func:`~jaxcal.losses.meta_calibration`: cross-entropy + 0.5 · DECE), or
    like the other regularisers, ``ce + lam * dece_loss(logits, labels)``.

    Args:
      {{logits_labels}}
      n_bins: number of soft bins M >= 1.
      bin_temperature: ``T_b > 0`` of the soft binning (number or 0-d array, traced).
      rank_temperature: ``T_a > 0`` of the soft rank (number or 0-d array, traced).
      weights: optional ``(N,)`` non-negative sample weights; 0 masks padding rows.

    Returns:
      0-d array in ``[0, 1]``. Zero total weight gives 0.

    {{traced_validation}}

    Example:
      >>> import jax, jax.numpy as jnp
      >>> logits = jnp.array([[2.0, 0.0], [0.0, 3.0], [1.0, 0.5]])
      >>> y = jnp.array([0, 1, 1])
      >>> round(float(dece_loss(logits, y)), 4)
      0.263
      >>> g = jax.grad(dece_loss)(logits, y)
      >>> bool(jnp.all(jnp.isfinite(g)))
      True

    References:
      Bohdal, Yang & Hospedales (2023), "Meta-Calibration: Learning of Model Calibration
      Using Differentiable Expected Calibration Error", TMLR, Section 3.1 (their code:
      ``Losses/dece.py`` of github.com/ondrejbohdal/meta-calibration); Yang, Garcia
      Morillo & Hospedales (2018), "Deep Neural Decision Trees" (the soft binning).
    """
    n_bins = check_positive_int("n_bins", n_bins)
    bin_temperature = check_hyperparameter("bin_temperature", bin_temperature)
    rank_temperature = check_hyperparameter("rank_temperature", rank_temperature)
    logits, labels, weights = check_logits_labels(logits, labels, weights)
    return _dece_kernel(logits, labels, weights, bin_temperature, rank_temperature, n_bins)

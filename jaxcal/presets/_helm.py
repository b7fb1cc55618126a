"""HELM's calibration numbers, reproduced from its code and the library it calls.

HELM (``src/helm/benchmark/metrics/basic_metrics.py``, ``compute_calibration_metrics``)
takes each instance's ``max_prob`` and ``exact_match`` and calls Kumar et al.'s
``uncertainty-calibration`` package (``calibration/utils.py``): ``get_ece_em`` (equal-mass
bins), ``get_ece`` (one bin), ``get_selective_stats`` and ``get_platt_scaler``.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.checks import check_positive_int
from jaxcal._core.numerics import compute_dtype
from jaxcal._core.sort import argsort
from jaxcal.calibrators import platt_scaling
from jaxcal.presets._hle import check_confidence_correct
from jaxcal.selective._curve import curve_of, prepare, tie_averaged_sums

_PLATT = platt_scaling(inputs="logits")  # one calibrator object: its fit compiles once


class HelmCalibration(NamedTuple):
    """HELM's calibration statistics (0-d arrays), named as HELM names them.

    Attributes:
      ece_10_bin: equal-mass ECE with 10 bins (``get_ece_em``), the l1 gap.
      ece_1_bin: ``|mean confidence - accuracy|`` (``get_ece(num_bins=1)``).
      selective_cov_acc_area: the mean of the running accuracies by descending
        confidence, 1 - AURC in the "mean" convention.
      selective_acc_10: HELM's ``selective_acc@10``, the accuracy of the
        ``int(0.1 N) + 1`` most confident samples.
      platt_coef, platt_intercept: the Platt fit ``sigmoid(a logit(p) + b)`` (NaN when
        every answer is right or every answer wrong: HELM then fits nothing and omits
        both).
      platt_ece_10_bin, platt_ece_1_bin: the two ECEs after Platt scaling (0 when every
        answer is right or wrong, as HELM stores).
    """

    ece_10_bin: jax.Array
    ece_1_bin: jax.Array
    selective_cov_acc_area: jax.Array
    selective_acc_10: jax.Array
    platt_coef: jax.Array
    platt_intercept: jax.Array
    platt_ece_10_bin: jax.Array
    platt_ece_1_bin: jax.Array

    def helm_stats(self) -> dict[str, jax.Array]:
        """The statistics under HELM's metric names (``selective_acc@10`` included).

        Example:
          >>> import jax.numpy as jnp
          >>> p = jnp.linspace(0.3, 0.95, 40)
          >>> r = (jnp.arange(40) % 3 != 0).astype(jnp.int32)
          >>> sorted(helm_calibration(p, r).helm_stats())[:3]
          ['ece_10_bin', 'ece_1_bin', 'platt_coef']
        """
        stats = dict(self._asdict())
        stats["selective_acc@10"] = stats.pop("selective_acc_10")
        return stats


def equal_mass_parts(n: int, num_bins: int) -> np.ndarray:
    """Ends of ``np.array_split``'s parts of n sorted samples (the first n % m one longer)."""
    m = min(num_bins, n)
    sizes = np.full(m, n // m)
    sizes[: n % m] += 1
    return np.cumsum(sizes)


def equal_mass_ece(probs: jax.Array, correct: jax.Array, num_bins: int) -> jax.Array:
    """``get_ece_em`` of 1-D ``probs`` (kernel): edges at the midpoints between parts.

    Kumar et al.'s ``get_equal_bins``: the sorted probabilities split into ``num_bins``
    parts by ``np.array_split``; an edge halfway between the last value of a part and
    the first of the next; ``np.searchsorted(edges, p)`` (a value equal to an edge goes
    to the lower bin); then ``sum_b (n_b / N) |mean p_b - mean y_b|``.
    """
    dtype = compute_dtype(probs.dtype)
    p = probs.astype(dtype)
    ps = p[argsort(p)]
    ends = equal_mass_parts(p.shape[0], num_bins)
    cut = jnp.asarray(ends[:-1])
    edges = (ps[cut - 1] + ps[cut]) / 2.0
    ids = jnp.searchsorted(edges, p, side="left")
    gaps = jax.ops.segment_sum(p - correct.astype(dtype), ids, num_segments=len(ends))
    return jnp.sum(jnp.abs(gaps)) / p.shape[0]


def one_bin_ece(probs: jax.Array, correct: jax.Array) -> jax.Array:
    """``get_ece(num_bins=1)``: |mean p - mean y|."""
    dtype = compute_dtype(probs.dtype)
    return jnp.abs(jnp.mean(probs.astype(dtype)) - jnp.mean(correct.astype(dtype)))


@partial(jax.jit, static_argnames=("num_bins",))
def _helm_kernel(probs, correct, num_bins):
    dtype = compute_dtype(probs.dtype)
    p = probs.astype(dtype)
    n = p.shape[0]
    ece_10 = equal_mass_ece(p, correct, num_bins)
    ece_1 = one_bin_ece(p, correct)
    s = prepare(p, correct, None, "binary")
    _, risk, _ = curve_of(tie_averaged_sums(s.weight, s.risk, s.starts))
    area = 1 - jnp.mean(risk)
    acc_10 = 1 - risk[int(0.1 * n)]
    eps = max(1e-12, float(jnp.finfo(dtype).eps))  # 1 - 1e-12 is 1 in float32
    clipped = jnp.clip(p, eps, 1 - eps)
    x = jnp.log(clipped / (1 - clipped))
    params = _PLATT.fit(x, correct)
    calibrated = 1 / (1 + jnp.exp(-(x * params.a + params.b)))
    hits = jnp.sum(correct.astype(jnp.int32))
    degenerate = (hits == 0) | (hits == n)
    nan = jnp.asarray(jnp.nan, dtype)
    zero = jnp.zeros((), dtype)
    return HelmCalibration(
        ece_10_bin=ece_10,
        ece_1_bin=ece_1,
        selective_cov_acc_area=area,
        selective_acc_10=acc_10,
        platt_coef=jnp.where(degenerate, nan, params.a.astype(dtype)),
        platt_intercept=jnp.where(degenerate, nan, params.b.astype(dtype)),
        platt_ece_10_bin=jnp.where(degenerate, zero, equal_mass_ece(calibrated, correct, num_bins)),
        platt_ece_1_bin=jnp.where(degenerate, zero, one_bin_ece(calibrated, correct)),
    )


def helm_calibration(max_probs: Any, correct: Any, *, num_bins: int = 10) -> HelmCalibration:
    """HELM's calibration metrics of a classification scenario, as HELM computes them.

    From ``src/helm/benchmark/metrics/basic_metrics.py`` ``compute_calibration_metrics``
    and the ``calibration`` package it calls (Kumar et al., ``calibration/utils.py``):

    * ``ece_10_bin`` = ``get_ece_em(max_probs, correct, num_bins=10)``: the binary ECE of
      the confidence against correctness over **equal-mass** bins whose edges are the
      midpoints between ``np.array_split``'s consecutive parts of the sorted confidences
      (:func:`~jaxcal.metrics.ece` with ``binning="quantile"`` places its edges
      differently), l1 norm, a value equal to an edge in the lower bin;
    * ``ece_1_bin`` = ``get_ece(..., num_bins=1)``: ``|mean confidence − accuracy|``;
    * ``selective_cov_acc_area`` and ``selective_acc@10`` = ``get_selective_stats``: the
      mean running accuracy by descending confidence, and ``accs[int(0.1 N)]``;
    * ``platt_coef``, ``platt_intercept``: ``get_platt_scaler``'s logistic regression of
      correctness on ``logit(clip(p, 1e-12, 1 − 1e-12))`` (scikit-learn's
      ``LogisticRegression(C=1e10)``, i.e. unpenalised; here the exact maximum-likelihood
      fit of :func:`~jaxcal.calibrators.platt_scaling`, which scikit-learn's L-BFGS
      reaches within its tolerance, about 1e-4 relative, wherever it exists: see
      separable data below), then ``platt_ece_10_bin`` and
      ``platt_ece_1_bin`` of the recalibrated confidences. When every answer is right
      or every one wrong, HELM skips the fit: both Platt ECEs are 0, coefficient and
      intercept NaN (HELM omits them).

    **Separable data** (every right answer more confident than every wrong one,
    frequent at small N): no maximum-likelihood fit exists, the likelihood keeps
    rising as the coefficient grows, and the Platt fields are **not** HELM's. HELM's
    numbers there are wherever scikit-learn's L-BFGS stops on the nearly flat
    objective (its default tolerance 1e-4), neither the MLE nor the optimum of its
    ``C=1e10`` penalty: on confidences (0.3, 0.4, 0.5, 0.8, 0.9) with the last two
    right, HELM reports ``platt_coef`` 11.0 and intercept −7.2, the ``C=1e10`` optimum
    is about 28, and this preset, whose fit of
    :func:`~jaxcal.calibrators.platt_scaling` stops elsewhere on the same flat
    objective, about 17; the Platt ECEs (near 0 in both) differ accordingly. Read the
    Platt fields as "perfectly separable" there; the other fields are exact.

    Ties in ``max_probs``: the selective statistics average over the orders of tied
    confidences (HELM's ``np.argsort(-probs)`` leaves them in NumPy's unstable order);
    the equal-mass bins put tied values in one bin whatever the order, as the reference.
    In float32 the logit's clip is float32's epsilon (1 − 1e-12 rounds to 1).

    Args:
      max_probs: ``(N,)`` the probability of each instance's predicted answer, in [0, 1].
      correct: ``(N,)`` 0/1 (HELM's ``exact_match``).
      num_bins: the equal-mass bins (static; HELM's 10). More bins than samples: one
        per sample, as the reference.

    Returns:
      :class:`~jaxcal.presets.HelmCalibration`; ``.helm_stats()`` gives HELM's names.

    Example:
      >>> import jax.numpy as jnp
      >>> p = jnp.linspace(0.3, 0.95, 40)
      >>> right = (jnp.arange(40) % 3 != 0).astype(jnp.int32)
      >>> h = helm_calibration(p, right)
      >>> round(float(h.ece_1_bin), 4), round(float(h.selective_acc_10), 4)
      (0.025, 0.6)

    References:
      Liang et al. (2023), "Holistic evaluation of language models" (HELM);
      Kumar, Liang & Ma (2019), "Verified uncertainty calibration"
      (``uncertainty-calibration``).
    """
    num_bins = check_positive_int("num_bins", num_bins)
    probs, correct = check_confidence_correct(max_probs, correct)
    return _helm_kernel(probs, correct, num_bins)

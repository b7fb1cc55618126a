"""Humanity's Last Exam's calibration error, reproduced with its quirk.

HLE's ``hle_eval/run_judge_results.py`` ``calib_err`` (copied from Hendrycks et al.'s
outlier-exposure ``utils/calibration_tools.py``, also the "RMS calibration error" that
lm-eval issue 2189 asks for) sorts the samples by confidence, cuts them into bins of
``beta`` consecutive samples, merges the remainder into the last bin, and then loops
``for i in range(len(bins) - 1)``: the last bin, remainder included, never enters the
sum, although the weights still divide by all N samples.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.checks import (
    as_float,
    check_finite,
    check_labels,
    check_option,
    check_positive_int,
    check_unit_interval,
)
from jaxcal._core.numerics import compute_dtype
from jaxcal._core.sort import argsort


class HleCalibrationError(NamedTuple):
    """HLE's calibration error (:func:`~jaxcal.presets.hle_calibration_error`), 0-d arrays.

    Attributes:
      value: the RMS calibration error in [0, 1], as the reference computes it.
      last_bin_only: bool, ``N < 2 beta`` with the skipped last bin: only that bin
        exists, so ``value`` is 0 by the reference's quirk, not because the model is
        calibrated (150 items at ``beta = 100`` read "0 % calibration error"). Always
        False with ``skip_last_bin=False``.
    """

    value: jax.Array
    last_bin_only: jax.Array


def check_confidence_correct(confidence: Any, correct: Any) -> tuple[jax.Array, jax.Array]:
    """``(N,)`` confidences in [0, 1] and 0/1 correctness (values when concrete)."""
    confidence = as_float(confidence, "confidence")
    if confidence.ndim != 1 or confidence.shape[0] == 0:
        raise ValueError(
            "`confidence` must be a non-empty 1-D (N,) array of confidences in [0, 1] (the "
            f"harness's confidence / 100 for percentages); got shape {confidence.shape}."
        )
    check_finite("confidence", confidence)
    check_unit_interval("confidence", confidence)
    correct = check_labels(correct, confidence.shape[0], 2, "correct")
    return confidence, correct


@partial(jax.jit, static_argnames=("beta", "skip_last_bin"))
def _hle_kernel(confidence, correct, beta, skip_last_bin):
    dtype = compute_dtype(confidence.dtype)
    order = argsort(confidence)
    conf = confidence[order].astype(dtype)
    right = correct[order].astype(dtype)
    n = conf.shape[0]
    full = n // beta
    kept = (full - 1) * beta  # the bins of exactly beta samples before the last
    squares = jnp.zeros((), dtype)
    if kept:
        gaps = (conf[:kept].reshape(-1, beta).mean(1) - right[:kept].reshape(-1, beta).mean(1)) ** 2
        squares = jnp.sum(gaps) * (beta / n)
    if not skip_last_bin:
        last = jnp.mean(conf[kept:]) - jnp.mean(right[kept:])
        squares = squares + last**2 * ((n - kept) / n)
    return jnp.sqrt(squares)


def hle_calibration_error(
    confidence: Any, correct: Any, *, beta: int = 100, skip_last_bin: bool = True
) -> HleCalibrationError:
    """Humanity's Last Exam's ``calib_err``: RMS calibration error over bins of ``beta``.

    The samples are sorted by confidence (stably: tied confidences keep their input
    order) and cut into ``B = N // beta`` bins of ``beta`` consecutive samples, the
    remainder ``N - B beta`` merged into the last bin. The error is

        sqrt( Σ_{b < B - 1} (n_b / N) (mean confidence_b − accuracy_b)² ),

    **the last bin left out of the sum but its samples still counted in N** (the
    reference's ``for i in range(len(bins) - 1)``), as HLE's leaderboard numbers are
    computed. ``skip_last_bin=False`` includes it (the definition the code intended).
    With ``N < 2 beta`` only the skipped bin exists and the reference reports 0: the
    value is kept, and ``last_bin_only`` flags it (use ``skip_last_bin=False``, or more
    items, for a measurement).

    This is the unrounded value in [0, 1]; HLE prints ``100 * round(calib_err, 2)``.
    Ties: the reference sorts with ``np.argsort`` (quicksort, not stable), so when tied
    confidences straddle a bin boundary (verbalised confidences are whole percentages)
    its value depends on NumPy's tie order; here ties keep their input order, equal to
    the reference with ``np.argsort(..., kind="stable")``.

    Args:
      confidence: ``(N,)`` the model's stated confidences in [0, 1] (HLE divides the
        judge's extracted percentage by 100).
      correct: ``(N,)`` 0/1 (or bool): the judge's "yes".
      beta: the bin size (static), HLE's 100.
      skip_last_bin: reproduce the reference's skipped last bin (default True).

    Returns:
      :class:`~jaxcal.presets.HleCalibrationError`: ``value`` (0-d, in [0, 1]) and the
      ``last_bin_only`` flag.

    Raises:
      ValueError: ``N < beta`` (the reference fails with an IndexError there).

    Example:
      >>> import jax.numpy as jnp
      >>> conf = jnp.array([0.9] * 4 + [0.6] * 4 + [0.3] * 2)
      >>> right = jnp.array([1, 1, 1, 0, 1, 0, 1, 0, 0, 0])
      >>> res = hle_calibration_error(conf, right, beta=4)
      >>> round(float(res.value), 4), bool(res.last_bin_only)  # sqrt(0.4 * 0.2**2)
      (0.1265, False)
      >>> round(float(hle_calibration_error(conf, right, beta=4, skip_last_bin=False).value), 4)
      0.1633
      >>> res = hle_calibration_error(conf, right, beta=6)  # N = 10 < 2 beta: one bin, skipped
      >>> float(res.value), bool(res.last_bin_only)
      (0.0, True)

    References:
      Phan et al. (2025), "Humanity's Last Exam" (``hle_eval/run_judge_results.py``,
      ``calib_err``); Hendrycks, Mazeika & Dietterich (2019), "Deep anomaly detection
      with outlier exposure" (``utils/calibration_tools.py``, ``calib_err``).
    """
    beta = check_positive_int("beta", beta)
    check_option("skip_last_bin", skip_last_bin, (True, False))
    confidence, correct = check_confidence_correct(confidence, correct)
    if confidence.shape[0] < beta:
        raise ValueError(
            f"`confidence` must hold at least `beta` = {beta} samples for HLE's bins (the "
            f"reference fails below that); got {confidence.shape[0]}. Lower `beta`."
        )
    value = _hle_kernel(confidence, correct, beta, skip_last_bin)
    only = skip_last_bin and confidence.shape[0] < 2 * beta  # static: N is a shape
    return HleCalibrationError(value, jnp.asarray(only))

"""The interval of Sun et al. (2024) for the squared l2 ECE, from a streamed binary state."""

from __future__ import annotations

from functools import partial

import jax

from jaxcal.metrics._l2_interval import L2ECEInterval, check_level, interval_from_sums
from jaxcal.streaming._buckets import anchors
from jaxcal.streaming._scale import unscaled
from jaxcal.streaming._state import CalibrationState, check_bins, check_state, coarsened, value_of


@partial(jax.jit, static_argnames=("confidence",))
def _state_interval_kernel(state, confidence):
    _, class_sums, _ = value_of(state)
    w, _, s_y, s_d, s_dd, s_dy = (unscaled(f[1], state) for f in class_sums)
    c = anchors(state.n_bins, w.dtype)
    # U = (y - c) - d with d = p - c the deviation from the bin's anchor (exact sums):
    sum_u = (s_y - c * w) - s_d
    sum_yc2 = s_y * (1 - c) ** 2 + (w - s_y) * c * c  # sum (y - c)^2 for 0/1 labels
    sum_u2 = sum_yc2 - 2 * (s_dy - c * s_d) + s_dd
    return interval_from_sums(w, sum_u, sum_u2, confidence)


def l2_ece_interval(
    state: CalibrationState, *, n_bins: int | None = None, confidence: float = 0.9
) -> L2ECEInterval:
    """:func:`jaxcal.stats.l2_ece_interval` of a streamed binary state.

    The interval of Sun, Chaudhari, Barnett & Dobriban (2024) needs per bin ``n_b``,
    ``sum U`` and ``sum U^2`` (``U = Y - p``): a binary state keeps them exactly for the
    positive class (its weight, ``sum y`` and the moments of ``d = p - c_b`` about the
    bin's anchor, from which ``sum U^2 = sum (y - c)^2 - 2 sum (y - c) d + sum d^2``).
    Multiclass states keep no second moment of the top-label confidence: they are
    refused. The bins are the state's (its ``closed`` convention; ``n_bins`` any divisor
    of its resolution, default the state's); the weights count as frequency weights.

    Args:
      state: a :class:`~jaxcal.streaming.CalibrationState` built with ``binary=True``.
      n_bins: bins (a divisor of the state's resolution); default the state's.
      confidence: the interval's level, in (0, 1).

    Returns:
      ``L2ECEInterval(estimate, lower, upper, std_error)``, as the one-shot function on
      the concatenated stream (to float round-off, for the same bins).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.streaming import init, update
      >>> s = init(5, 2, binary=True, closed="left")
      >>> p = jnp.linspace(0.05, 0.95, 200)
      >>> y = (jnp.arange(200) % 10 < 7).astype(jnp.int32)
      >>> s = update(update(s, p[:100], y[:100]), p[100:], y[100:])
      >>> res = l2_ece_interval(s)
      >>> bool(res.lower > 0)
      True

    References:
      Sun, Chaudhari, Barnett & Dobriban (2024), "A Confidence Interval for the l2
      Expected Calibration Error"; code ``sylydya/CI-ECE``.
    """
    state = check_state(state)
    if not state.binary:
        raise ValueError(
            "`state` must be binary (init(..., binary=True)): a multiclass state keeps no "
            "second moments of the top-label confidence, which the interval needs."
        )
    n_bins = check_bins(state, n_bins)
    confidence = check_level(confidence)
    return _state_interval_kernel(coarsened(state, n_bins), confidence)

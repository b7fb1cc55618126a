"""Temperature-tuned metrics, as requested of lm-evaluation-harness (issue 2189).

"Temperature-tuned" Brier score and RMS calibration error: the temperature that
minimises the cross-entropy of ``softmax(logits / T)`` on the evaluated items themselves
is found by Hendrycks et al.'s bisection (``utils/calibration_tools.py``, ``tune_temp``:
the sign of d NLL / dT on [0.2, 5] until the interval is below 1e-4, then the best of
its ends and midpoint), and the metrics are computed on the rescaled probabilities.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.checks import as_float, check_finite, check_labels, check_positive_int
from jaxcal._core.numerics import compute_dtype, vary_like
from jaxcal.metrics import brier_score
from jaxcal.presets._hle import _hle_kernel


class TemperatureTuned(NamedTuple):
    """Metrics of ``softmax(logits / T)`` at the tuned temperature (0-d arrays).

    Attributes:
      temperature: T, in [lower, upper].
      brier: lm-eval's ``brier_score``: the mean over items of Σ_k (p_k − 1[k = y])².
      rms_calibration_error: Hendrycks et al.'s ``calib_err`` (HLE's, bins of ``beta``
        by rank, the last bin skipped; see
        :func:`~jaxcal.presets.hle_calibration_error`) of the top probability against
        correctness.
      log_loss: the mean cross-entropy at T (the minimised objective).
      at_bound: bool, the bisection never moved one end of its bracket: T is within
        ``eps`` of ``lower`` or ``upper`` and the minimiser may lie beyond it (the
        reference returns the bound silently); widen ``lower`` / ``upper``.
    """

    temperature: jax.Array
    brier: jax.Array
    rms_calibration_error: jax.Array
    log_loss: jax.Array
    at_bound: jax.Array


def _nll(z, labels, t):
    logp = jax.nn.log_softmax(z / t, axis=1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))


def _nll_slope_sign_positive(z, labels, t):
    """d NLL / dT > 0, from the closed form mean(z_y − E_p[z]) / T² (T > 0)."""
    p = jax.nn.softmax(z / t, axis=1)
    z_y = jnp.take_along_axis(z, labels[:, None], axis=1)[:, 0]
    return jnp.mean(z_y - jnp.sum(p * z, axis=1)) > 0


@partial(jax.jit, static_argnames=("beta", "lower", "upper", "eps"))
def _tuned_kernel(logits, labels, beta, lower, upper, eps):
    z = logits.astype(compute_dtype(logits.dtype))
    dtype = z.dtype

    def cond(bounds):
        lo, hi = bounds
        return hi - lo > eps

    def body(bounds):
        lo, hi = bounds
        mid = 0.5 * (lo + hi)
        up = _nll_slope_sign_positive(z, labels, mid)
        return jnp.where(up, lo, mid), jnp.where(up, mid, hi)

    # the carry varies across shard_map's devices as the data the body reads
    start = vary_like(
        (jnp.asarray(lower, dtype), jnp.asarray(upper, dtype)),
        jnp.sum(z[:1]) + labels[0].astype(dtype),
    )
    lo, hi = jax.lax.while_loop(cond, body, start)
    candidates = jnp.stack([lo, 0.5 * (lo + hi), hi])
    losses = jax.vmap(lambda t: _nll(z, labels, t))(candidates)
    t = candidates[jnp.argmin(losses)]  # first minimum, as Python's min()
    probs = jax.nn.softmax(z / t, axis=1)
    conf, pred = jnp.max(probs, axis=1), jnp.argmax(probs, axis=1).astype(labels.dtype)
    rms = _hle_kernel(conf, (pred == labels).astype(jnp.int32), beta, True)
    at_bound = (lo == lower) | (hi == upper)
    return TemperatureTuned(t, brier_score(probs, labels), rms, jnp.min(losses), at_bound)


def temperature_tuned(
    logits: Any,
    labels: Any,
    *,
    beta: int = 100,
    lower: float = 0.2,
    upper: float = 5.0,
    eps: float = 1e-4,
) -> TemperatureTuned:
    """Temperature-tuned Brier score and RMS calibration error (lm-eval issue 2189).

    The temperature minimising the mean cross-entropy of ``softmax(logits / T)`` on
    these same items is found by Hendrycks et al.'s ``tune_temp`` bisection: while
    ``upper − lower > eps``, the midpoint replaces ``upper`` when d NLL / dT > 0 there
    and ``lower`` otherwise; T is the best of the final ``lower``, midpoint and
    ``upper`` (16 halvings for the defaults). Then lm-eval's ``brier_score`` (the
    multiclass Brier score summed over the answer choices, on ``softmax`` of the
    choices' log-likelihoods) and the RMS calibration error (HLE's ``calib_err``, bins
    of ``beta``) of the rescaled probabilities.

    When the minimiser lies outside ``[lower, upper]`` (very over- or under-confident
    logits) the bisection ends on the bound, as the reference's does, without a word:
    ``at_bound`` says so.

    Tuning on the evaluated items is optimistic (the temperature has seen the labels);
    :func:`~jaxcal.stats.recalibrated` with
    :func:`~jaxcal.calibrators.temperature_scaling` gives the cross-fitted value.

    Args:
      logits: ``(N, K)`` per-choice log-likelihoods (lm-eval's ``lls``) or logits.
      labels: ``(N,)`` the gold choice in ``[0, K)``.
      beta: bin size of the RMS calibration error (static); N >= beta.
      lower, upper, eps: the bisection's interval and stopping width (static).

    Returns:
      :class:`~jaxcal.presets.TemperatureTuned`.

    Example:
      >>> import jax, jax.numpy as jnp
      >>> z = 3.0 * jax.random.normal(jax.random.key(0), (200, 4))
      >>> y = jnp.argmax(z + 2.5 * jax.random.normal(jax.random.key(1), (200, 4)), axis=1)
      >>> r = temperature_tuned(z, y)
      >>> bool(r.temperature > 1), bool(r.at_bound)  # overconfident logits are cooled
      (True, False)

    References:
      Hendrycks, Mazeika & Dietterich (2019), outlier-exposure
      ``utils/calibration_tools.py`` (``tune_temp``, ``calib_err``); Guo et al. (2017),
      "On calibration of modern neural networks"; EleutherAI lm-evaluation-harness
      issue 2189 and ``lm_eval/api/metrics.py`` (``brier_score``).
    """
    beta = check_positive_int("beta", beta)
    for name, value in (("lower", lower), ("upper", upper), ("eps", eps)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"`{name}` must be a positive number; got {value!r}.")
    if not lower < upper:
        raise ValueError(f"`lower` must be below `upper`; got lower={lower}, upper={upper}.")
    logits = as_float(logits, "logits")
    if logits.ndim != 2 or logits.shape[0] == 0 or logits.shape[1] < 2:
        raise ValueError(
            "`logits` must be (N, K) per-choice log-likelihoods with N >= 1 and K >= 2; got "
            f"shape {logits.shape}."
        )
    check_finite("logits", logits)
    labels = check_labels(labels, logits.shape[0], logits.shape[1])
    if logits.shape[0] < beta:
        raise ValueError(
            f"`logits` must hold at least `beta` = {beta} items for the RMS calibration "
            f"error's bins; got {logits.shape[0]}. Lower `beta`."
        )
    return _tuned_kernel(logits, labels, beta, float(lower), float(upper), float(eps))

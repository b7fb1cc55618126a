"""Input spaces of the calibrators, their validation and the conversions between them.

A calibrator never guesses what its input is from the range of the values (a row of
logits can look like probabilities, and probabilities are valid logits): the space is a
static option, ``inputs=``, fixed when the calibrator is built.

* Multiclass ``(N, K)``: ``"logits"`` (any finite reals, softmax gives the probabilities),
  ``"log_probs"`` (log of rows on the simplex; ``-inf`` allowed for a zero probability) or
  ``"probs"`` (rows on the simplex).
* Binary ``(N,)`` (the positive class): ``"probs"`` (in [0, 1]) or ``"logits"`` (the
  log-odds, any finite real).
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.checks import (
    RANGE_ATOL,
    SIMPLEX_ATOL,
    as_float,
    check_finite,
    check_labels,
    check_option,
    check_simplex_rows,
    check_weights,
    first_index,
    values_checkable,
)
from jaxcal._core.numerics import compute_dtype, mask_unweighted

MULTICLASS_INPUTS = ("logits", "log_probs", "probs")
BINARY_INPUTS = ("probs", "logits")


def _check_array(x: Any, name: str, ndim: int) -> jax.Array:
    arr = as_float(x, name)
    if arr.ndim != ndim:
        shape = "(N,)" if ndim == 1 else "(N, K)"
        raise ValueError(f"`{name}` must be {ndim}-D {shape}; got {arr.ndim}-D shape {arr.shape}.")
    if arr.shape[0] == 0:
        raise ValueError(f"`{name}` must not be empty; got shape {arr.shape}.")
    return arr


#: What to build instead when values do not fit the declared input space.
_OTHER_SPACES = {
    ("probs", 1): 'Build it with inputs="logits" for real-valued scores such as SVM margins '
    "or log-odds.",
    ("probs", 2): 'Build it with inputs="log_probs" for log-probabilities or inputs="logits" '
    "for unnormalised scores.",
}


def _check_probabilities(name: str, arr: jax.Array, inputs: str) -> None:
    """Probabilities of a calibrator built with ``inputs="probs"``: in [0, 1], rows on the
    simplex; the message names the option that changes the interpretation."""
    values = np.asarray(arr, dtype=np.float64)
    check_finite(name, arr)
    low, high = values.min(), values.max()
    if low < -RANGE_ATOL or high > 1 + RANGE_ATOL:
        bad = low if low < -RANGE_ATOL else high
        raise ValueError(
            f'`{name}` must lie in [0, 1] for a calibrator built with inputs="{inputs}"; '
            f"got {bad:.6g} at index {first_index(values == bad)}. "
            + _OTHER_SPACES[(inputs, arr.ndim)]
        )
    if arr.ndim == 2:
        check_simplex_rows(name, arr, float(np.max(np.abs(values.sum(axis=1) - 1))))


def check_multiclass_inputs(x: Any, inputs: str, name: str = "logits") -> jax.Array:
    """Validate ``(N, K)`` inputs (K >= 2) in the space ``inputs``; return a float array."""
    arr = _check_array(x, name, 2)
    if arr.shape[1] < 2:
        raise ValueError(f"`{name}` must have at least 2 class columns; got shape {arr.shape}.")
    if not values_checkable(arr):  # inside a transformation: shapes only
        return arr
    if inputs == "probs":
        _check_probabilities(name, arr, inputs)
        return arr
    if inputs == "logits":
        check_finite(name, arr)
        return arr
    values = np.asarray(arr, dtype=np.float64)  # log_probs: no NaN or +inf, rows sum to 1
    if np.isnan(values).any() or (values == np.inf).any():
        raise ValueError(f"`{name}` log-probabilities must not be NaN or +inf.")
    with np.errstate(divide="ignore"):
        sums = np.exp(values).sum(axis=1)
    worst = int(np.argmax(np.abs(sums - 1)))
    if abs(sums[worst] - 1) > SIMPLEX_ATOL:
        raise ValueError(
            f"`{name}` must hold log-probabilities (exp of each row sums to 1 within "
            f"{SIMPLEX_ATOL}); row {worst} sums to {sums[worst]:.6g}. "
            'Build the calibrator with inputs="logits" for unnormalised scores.'
        )
    return arr


def check_binary_inputs(x: Any, inputs: str, name: str = "scores") -> jax.Array:
    """Validate ``(N,)`` positive-class scores in the space ``inputs``."""
    arr = _check_array(x, name, 1)
    if not values_checkable(arr):  # inside a transformation: shapes only
        return arr
    if inputs == "probs":
        _check_probabilities(name, arr, inputs)
    else:
        check_finite(name, arr)
    return arr


def check_fit_args(
    x: Any, labels: Any, weights: Any, inputs: str, *, binary: bool
) -> tuple[jax.Array, jax.Array, jax.Array | None]:
    """Validate the ``(x, labels, weights)`` of a ``fit``: binary or multiclass."""
    if binary:
        arr = check_binary_inputs(x, inputs)
        num_classes = 2
    else:
        arr = check_multiclass_inputs(x, inputs)
        num_classes = arr.shape[1]
    n = arr.shape[0]
    return arr, check_labels(labels, n, num_classes), check_weights(weights, n)


def mask_fit_padding(
    x: jax.Array, labels: jax.Array, weights: jax.Array | None, inputs: str
) -> tuple[jax.Array, jax.Array, jax.Array | None]:
    """The ``(x, labels, weights)`` of a fit with its zero-weight rows made harmless.

    As the metrics do (``mask_padding()``): under ``jit`` padding rows
    may hold NaN or an ignore label; in rows without positive weight, non-finite inputs
    become the uniform prediction of the input space (logit 0, probability 1/K, log 1/K)
    and labels outside [0, K) become 0. Their weight 0 keeps them out of the fit.
    """
    k = 2 if x.ndim == 1 else x.shape[1]
    fill = {"logits": 0.0, "probs": 1 / k, "log_probs": -math.log(k)}[inputs]
    x = mask_unweighted(x, weights, fill)
    labels = mask_unweighted(labels, weights, 0, (labels < 0) | (labels >= k))
    return x, labels, weights


def _compute(x: jax.Array) -> jax.Array:
    return x.astype(compute_dtype(x.dtype))


def log_probs_of(x: jax.Array, inputs: str) -> jax.Array:
    """Kernel: ``(N, K)`` inputs to log-probabilities, finite (zero probabilities clip)."""
    x = _compute(x)
    floor = jnp.log(jnp.finfo(x.dtype).tiny)
    if inputs == "probs":
        return jnp.log(jnp.maximum(x, jnp.finfo(x.dtype).tiny))
    if inputs == "log_probs":
        x = jnp.maximum(x, floor)
    return jax.nn.log_softmax(x, axis=-1)


def probs_of(x: jax.Array, inputs: str) -> jax.Array:
    """Kernel: inputs (``(N,)`` binary or ``(N, K)``) to probabilities."""
    x = _compute(x)
    if inputs == "probs":
        return jnp.clip(x, 0, 1)
    if x.ndim == 1:
        return jax.nn.sigmoid(x)
    return jax.nn.softmax(x, axis=-1)


def log_odds_of(x: jax.Array, inputs: str) -> jax.Array:
    """Kernel: ``(N,)`` binary inputs to finite log-odds (probabilities clip to [eps, 1-eps])."""
    x = _compute(x)
    if inputs == "logits":
        return x
    eps = jnp.finfo(x.dtype).eps
    p = jnp.clip(x, eps, 1 - eps)
    return jnp.log(p) - jnp.log1p(-p)


def log_probs_pair_of(x: jax.Array, inputs: str) -> tuple[jax.Array, jax.Array]:
    """Kernel: ``(log p, log(1 - p))`` of binary inputs, finite (probabilities clip)."""
    x = _compute(x)
    if inputs == "logits":
        return jax.nn.log_sigmoid(x), jax.nn.log_sigmoid(-x)
    eps = jnp.finfo(x.dtype).eps
    p = jnp.clip(x, eps, 1 - eps)
    return jnp.log(p), jnp.log1p(-p)


def to_probs(x: Any, *, inputs: str) -> jax.Array:
    """Probabilities from calibrator inputs in the stated space.

    ``(N, K)``: ``"logits"`` and ``"log_probs"`` go through a softmax (so log-probabilities
    are renormalised), ``"probs"`` are returned as they are. ``(N,)`` (binary, the positive
    class): ``"logits"`` (log-odds) go through the logistic sigmoid.

    Args:
      x: ``(N,)`` or ``(N, K)`` array.
      inputs: the space of ``x``: ``"logits"``, ``"log_probs"`` (2-D only) or ``"probs"``.

    Returns:
      Array of the shape of ``x``, in at least float32.

    Example:
      >>> import jax.numpy as jnp
      >>> to_probs(jnp.array([[0.0, 0.0]]), inputs="logits").tolist()
      [[0.5, 0.5]]
      >>> to_probs(jnp.array([0.0]), inputs="logits").tolist()
      [0.5]

    References:
      Bridle (1990), the softmax; Platt (1999), log-odds of a binary score.
    """
    arr = as_float(x, "x")
    if arr.ndim == 1:
        check_option("inputs", inputs, BINARY_INPUTS)
        arr = check_binary_inputs(arr, inputs, "x")
    else:
        check_option("inputs", inputs, MULTICLASS_INPUTS)
        arr = check_multiclass_inputs(arr, inputs, "x")
    return probs_of(arr, inputs)


def to_logits(x: Any, *, inputs: str) -> jax.Array:
    """Logits from calibrator inputs in the stated space; the inverse of :func:`~jaxcal.calibrators.to_probs`.

    ``(N, K)``: the log-probabilities ``log_softmax(x)`` (valid logits: softmax recovers the
    probabilities); a zero probability maps to ``log(finfo.tiny)`` (about -87 in float32,
    -708 in float64) so results stay finite. ``(N,)`` binary: the log-odds
    ``log p - log(1 - p)``, with ``p`` clipped to ``[eps, 1 - eps]`` (machine epsilon of
    the dtype: about +-15.9 in float32, +-36 in float64), as in beta calibration's
    reference code.

    Args:
      x: ``(N,)`` or ``(N, K)`` array.
      inputs: the space of ``x``: ``"logits"``, ``"log_probs"`` (2-D only) or ``"probs"``.

    Returns:
      Finite array of the shape of ``x``, in at least float32.

    Example:
      >>> import jax.numpy as jnp
      >>> round(float(to_logits(jnp.array([0.75]), inputs="probs")[0]), 4)  # log 3
      1.0986

    References:
      Kull, Silva Filho & Flach (2017), beta calibration (clipping of probabilities).
    """
    arr = as_float(x, "x")
    if arr.ndim == 1:
        check_option("inputs", inputs, BINARY_INPUTS)
        return log_odds_of(check_binary_inputs(arr, inputs, "x"), inputs)
    check_option("inputs", inputs, MULTICLASS_INPUTS)
    return log_probs_of(check_multiclass_inputs(arr, inputs, "x"), inputs)

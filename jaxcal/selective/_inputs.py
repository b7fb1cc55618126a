"""The inputs of every selective-prediction measure: a confidence and a per-sample risk.

Two forms are accepted, told apart by the rank of the first argument:

* ``confidence`` ``(N, K)``: class probabilities (rows on the simplex) and ``labels``
  ``(N,)`` integers in ``[0, K)``. The confidence is the top probability and the risk of
  a sample is 1 when its predicted class (``argmax``, first index among ties) is wrong,
  else 0: the top-label view of torch-uncertainty's ``AURC`` and of Geifman & El-Yaniv.
* ``confidence`` ``(N,)``: any real confidence score (higher means more confident: a
  top probability, a verbalised confidence, a negative entropy, a log-likelihood) and
  ``labels`` ``(N,)`` the correctness of each prediction: 0/1 (bool or integer; risk
  ``1 - correct``) or, as floats, a quality in [0, 1] such as a ROUGE score (risk
  ``1 - quality``, LM-Polygraph's "target"). A binary classifier's probability of the
  positive class is *not* this form: pass ``jnp.stack([1 - p, p], axis=1)``.

Values are checked when the arrays are concrete (outside any transformation); under
``jit`` nothing is checked (DESIGN.md), and rows of weight 0 may hold anything (NaN, the
ignore label -100): they are masked before the sort.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal._core.checks import (
    as_float,
    check_finite,
    check_labels,
    check_probs_labels,
    check_unit_interval,
    check_weights,
    host_array,
    values_checkable,
)
from jaxcal._core.confidence import top_label
from jaxcal._core.groups import check_groups
from jaxcal._core.numerics import compute_dtype, mask_unweighted, scale_free

#: How a kernel reads ``labels``: class labels of ``(N, K)`` probabilities, 0/1
#: correctness, or a float quality in [0, 1].
KINDS = ("probs", "binary", "quality")


class Checked(NamedTuple):
    """Validated arguments of a selective measure (arrays; ``kind`` and G are static)."""

    confidence: jax.Array
    labels: jax.Array
    weights: jax.Array | None
    masks: jax.Array | None  # bool (N, G) membership, integer ids made one-hot
    kind: str


def check_inputs(
    confidence: Any,
    labels: Any,
    weights: Any = None,
    groups: Any = None,
    n_groups: int | None = None,
) -> Checked:
    """Validate ``(confidence, labels, weights, groups)`` (values only when concrete)."""
    confidence = as_float(confidence, "confidence")
    if confidence.ndim not in (1, 2):
        raise ValueError(
            "`confidence` must be (N, K) class probabilities or (N,) confidence scores; "
            f"got {confidence.ndim}-D shape {confidence.shape}."
        )
    if confidence.shape[0] == 0:
        raise ValueError(f"`confidence` must not be empty; got shape {confidence.shape}.")
    if confidence.shape[0] >= 2**31 - 1:
        raise ValueError(
            f"`confidence` may hold at most 2**31 - 2 rows; got {confidence.shape[0]}."
        )
    n = confidence.shape[0]
    if confidence.ndim == 2:
        probs, labels, weights = check_probs_labels(
            confidence, labels, weights, probs_name="confidence"
        )
        return Checked(probs, labels, weights, _masks(groups, n, n_groups), "probs")
    check_finite("confidence", confidence)
    raw = host_array(labels, "labels")
    if jnp.issubdtype(raw.dtype, jnp.floating):
        quality = as_float(raw, "labels")
        if quality.shape != (n,):
            raise ValueError(
                f"`labels` (the quality of each prediction) must have shape ({n},) to match "
                f"`confidence`; got {quality.shape}."
            )
        if values_checkable(quality) and n:
            try:
                check_unit_interval("labels", quality)
            except ValueError as err:
                raise ValueError(
                    f"{err} With (N,) confidence scores, float `labels` are a quality in "
                    "[0, 1] (1 = right); pass 0/1 integers or bools for correctness."
                ) from None
        kind, labels = "quality", quality
    else:
        try:
            labels = check_labels(labels, n, 2)
        except ValueError as err:
            raise ValueError(
                f"{err} With (N,) confidence scores, `labels` is the correctness of each "
                "prediction (0/1 or bool), or a float quality in [0, 1]; for class labels "
                "pass (N, K) probabilities as `confidence`."
            ) from None
        kind = "binary"
    weights = check_weights(weights, n)
    return Checked(confidence, labels, weights, _masks(groups, n, n_groups), kind)


def _masks(groups: Any, n: int, n_groups: int | None) -> jax.Array | None:
    """``groups`` as a bool ``(N, G)`` membership matrix (ids become one-hot columns)."""
    if groups is None:
        return None
    groups, n_groups = check_groups(groups, n, n_groups)
    if groups.ndim == 2:
        return groups
    return groups[:, None] == jnp.arange(n_groups, dtype=groups.dtype)[None, :]


def scores_and_risks(
    confidence: jax.Array, labels: jax.Array, weights: jax.Array | None, kind: str
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(score, risk, weight)`` per sample, padding masked (call inside a kernel).

    ``score`` ranks the samples (higher is accepted first) and is cut from the
    derivative: every selective measure depends on it through its order only. ``risk``
    and ``weight`` are in the compute dtype; weights scaled by a power of two
    (``normalize_weights()``), so their sums cannot overflow.
    """
    if kind == "probs":
        score, pred = top_label(jax.lax.stop_gradient(confidence))
        risk = (pred != labels).astype(compute_dtype(confidence.dtype))
    elif kind == "binary":
        score = jax.lax.stop_gradient(confidence)
        risk = (labels != 1).astype(compute_dtype(confidence.dtype))
    else:
        score = jax.lax.stop_gradient(confidence)
        dtype = jnp.promote_types(compute_dtype(confidence.dtype), compute_dtype(labels.dtype))
        risk = 1 - mask_unweighted(labels.astype(dtype), weights, 1)
    dtype = jnp.promote_types(compute_dtype(score.dtype), risk.dtype)
    risk = risk.astype(dtype)
    score = mask_unweighted(score, weights, 0)
    if weights is None:
        w = jnp.ones(score.shape, dtype)
    else:
        w = scale_free(weights.astype(dtype))
    return score, risk, w


def check_level(name: str, value: Any, *, low_open: bool = True) -> tuple[float, ...] | float:
    """A static level in (0, 1] (``low_open``) or [0, 1], or a sequence of them."""
    many = isinstance(value, (list, tuple, np.ndarray))
    values = list(np.asarray(value).reshape(-1)) if many else [value]
    if many and not values:
        raise ValueError(f"`{name}` must hold at least one level; got an empty sequence.")
    out = []
    for v in values:
        if isinstance(v, jax.core.Tracer):
            raise ValueError(
                f"`{name}` must be a Python number or a sequence of them (a static option), "
                "not a traced value; bind it with functools.partial before jitting."
            )
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.number)):
            raise ValueError(f"`{name}` must be a number in (0, 1]; got {v!r}.")
        v = float(v)
        ok = (0 < v <= 1) if low_open else (0 <= v <= 1)
        if not ok:
            interval = "(0, 1]" if low_open else "[0, 1]"
            raise ValueError(f"`{name}` must lie in {interval}; got {v}.")
        out.append(v)
    return tuple(out) if many else out[0]

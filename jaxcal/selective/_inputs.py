"""The inputs of every selective-prediction measure: a confidence and a per-sample risk.

Two forms are accepted, as in the rest of jaxcal, plus one named form:

* ``probs`` ``(N, K)``: class probabilities (rows on the simplex) and ``labels``
  ``(N,)`` integers in ``[0, K)``. The confidence is the top probability and the risk of
  a sample is 1 when its predicted class (``argmax``, first index among ties) is wrong,
  else 0: the top-label view of torch-uncertainty's ``AURC`` and of Geifman & El-Yaniv.
* ``probs`` ``(N,)``: a binary model's probability of the positive class, with 0/1
  ``labels``, as everywhere in jaxcal (and torch-uncertainty's ``AURC``): the rows
  ``(1 - p, p)``, so the confidence is max(p, 1 - p) and the prediction is wrong when
  the predicted class (1 when p > 1/2, 0 at p = 1/2) is not the label.
* ``confidence=`` ``(N,)`` with ``correct=`` ``(N,)`` (keywords only): any real
  confidence score (higher means more confident: a top probability, a verbalised
  confidence, a negative entropy, a log-likelihood) and the correctness of each
  prediction: 0/1 (bool or integer; risk ``1 - correct``) or, as floats, a quality in
  [0, 1] such as a ROUGE score (risk ``1 - quality``, LM-Polygraph's "target"), as LLM
  evaluations have them.

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

#: How a kernel reads its two arrays: ``(N, K)`` probabilities with class labels,
#: ``(N,)`` positive-class probabilities with 0/1 labels, confidence scores with 0/1
#: correctness, or confidence scores with a float quality in [0, 1].
KINDS = ("probs", "positive", "binary", "quality")

#: Appended to the errors of a 1-D ``probs``: the form meant for confidence scores.
_SCORES_HINT = (
    " A 1-D `probs` is a binary model's probability of the positive class, with 0/1 "
    "`labels`; for confidence scores (any scale) with the correctness of each "
    "prediction, pass them by name: confidence=..., correct=... ."
)


class Checked(NamedTuple):
    """Validated arguments of a selective measure (arrays; ``kind`` and G are static)."""

    confidence: jax.Array
    labels: jax.Array
    weights: jax.Array | None
    masks: jax.Array | None  # bool (N, G) membership, integer ids made one-hot
    kind: str


def check_inputs(
    probs: Any,
    labels: Any,
    weights: Any = None,
    groups: Any = None,
    n_groups: int | None = None,
    *,
    confidence: Any = None,
    correct: Any = None,
) -> Checked:
    """Validate ``(probs, labels)`` or ``(confidence=, correct=)``, weights and groups.

    Exactly one form: ``probs`` with ``labels`` (``(N, K)`` class probabilities or
    ``(N,)`` positive-class probabilities), or ``confidence`` with ``correct``
    (confidence scores with correctness or a quality). Values are checked only when
    concrete.
    """
    named = confidence is not None or correct is not None
    if named:
        if probs is not None or labels is not None:
            given = [n for n, v in (("probs", probs), ("labels", labels)) if v is not None]
            raise ValueError(
                "Pass either `probs` with `labels` (class or positive-class probabilities) "
                "or `confidence=` with `correct=` (confidence scores with correctness), "
                f"not both; got {' and '.join(given)} together with "
                f"{'confidence' if confidence is not None else 'correct'}."
            )
        if confidence is None or correct is None:
            missing = "confidence" if confidence is None else "correct"
            raise ValueError(
                f"`confidence=` and `correct=` go together; `{missing}` is missing. "
                "`confidence`: (N,) scores, higher = more confident; `correct`: (N,) 0/1 "
                "correctness or a float quality in [0, 1]."
            )
        return _check_scores(confidence, correct, weights, groups, n_groups)
    if probs is None or labels is None:
        raise ValueError(
            "Pass `probs` with `labels` ((N, K) class probabilities with class labels, or "
            "(N,) positive-class probabilities with 0/1 labels), or confidence scores "
            "with their correctness as `confidence=..., correct=...`; got "
            f"probs={'None' if probs is None else 'an array'}, "
            f"labels={'None' if labels is None else 'an array'}."
        )
    probs = as_float(probs, "probs")
    if probs.ndim not in (1, 2):
        raise ValueError(
            "`probs` must be (N, K) class probabilities or (N,) positive-class "
            f"probabilities; got {probs.ndim}-D shape {probs.shape}."
        )
    _check_rows("probs", probs)
    n = probs.shape[0]
    try:
        probs, labels, weights = check_probs_labels(probs, labels, weights)
    except ValueError as err:
        if probs.ndim == 2 or not ("`probs`" in str(err) or "`labels`" in str(err)):
            raise
        raise ValueError(f"{err}{_SCORES_HINT}") from None
    kind = "probs" if probs.ndim == 2 else "positive"
    return Checked(probs, labels, weights, _masks(groups, n, n_groups), kind)


def _check_rows(name: str, x: jax.Array) -> None:
    if x.shape[0] == 0:
        raise ValueError(f"`{name}` must not be empty; got shape {x.shape}.")
    if x.shape[0] >= 2**31 - 1:
        raise ValueError(f"`{name}` may hold at most 2**31 - 2 rows; got {x.shape[0]}.")


def _check_scores(
    confidence: Any, correct: Any, weights: Any, groups: Any, n_groups: int | None
) -> Checked:
    """The named form: ``(N,)`` confidence scores and 0/1 correctness or a quality."""
    confidence = as_float(confidence, "confidence")
    if confidence.ndim != 1:
        raise ValueError(
            f"`confidence` must be (N,) confidence scores; got {confidence.ndim}-D shape "
            f"{confidence.shape}. For (N, K) class probabilities pass them as `probs` "
            "with class `labels`."
        )
    _check_rows("confidence", confidence)
    n = confidence.shape[0]
    check_finite("confidence", confidence)
    raw = host_array(correct, "correct")
    if jnp.issubdtype(raw.dtype, jnp.floating):
        quality = as_float(raw, "correct")
        if quality.shape != (n,):
            raise ValueError(
                f"`correct` (the correctness or quality of each prediction) must have shape "
                f"({n},) to match `confidence`; got {quality.shape}."
            )
        if values_checkable(quality):
            try:
                check_unit_interval("correct", quality)
            except ValueError as err:
                raise ValueError(
                    f"{err} Float `correct` is a quality in [0, 1] (1 = right); pass 0/1 "
                    "integers or bools for plain correctness."
                ) from None
        kind, correct = "quality", quality
    else:
        try:
            correct = check_labels(correct, n, 2, name="correct")
        except ValueError as err:
            raise ValueError(
                f"{err} `correct` is the correctness of each prediction (0/1 or bool), or "
                "a float quality in [0, 1]; for class labels pass (N, K) probabilities as "
                "`probs` with `labels`."
            ) from None
        kind = "binary"
    weights = check_weights(weights, n)
    return Checked(confidence, correct, weights, _masks(groups, n, n_groups), kind)


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
    elif kind == "positive":
        # the rows (1 - p, p): 1 - p is exact for p >= 1/2, so p > 1/2 is their argmax
        p = jax.lax.stop_gradient(confidence)
        score = jnp.maximum(p, 1 - p)
        risk = ((p > 0.5).astype(labels.dtype) != labels).astype(compute_dtype(p.dtype))
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

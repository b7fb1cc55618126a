"""Value checks of a model read by ``jaxcal report``: on the host first, then the library's.

A malformed file must cost no computation: the library's checks run on the device
(summaries of a jitted pass), which compiles small kernels before it can raise. The
shapes, NaN, the [0, 1] range, the simplex and the label range are therefore checked
here on the host, in NumPy, in row chunks (memory: one chunk in float64, whatever N),
with the library's own messages (``jaxcal/_core/checks.py``, given a host summary). Input
that passes is converted by ``check_probs_labels()`` (its static
checks only; with ``--renormalize`` its value checks too, after dividing the rows).
"""

from __future__ import annotations

import numpy as np

from jaxcal._core.checks import (
    _check_int32_range,
    check_labels,
    check_probs_labels,
    check_simplex_rows,
    check_unit_interval,
)
from jaxcal.cli._io import InputError, Model
from jaxcal.streaming._batches import release_rows

#: Rows summarised at a time (a float64 chunk of CHUNK_ROWS x K).
CHUNK_ROWS = 1 << 16


def _summary(probs: np.ndarray) -> tuple[float, float, float, float]:
    """(total, min, max, largest |row sum - 1|) as ``_float_summary()``."""
    total, lo, hi, row_dev = 0.0, np.inf, -np.inf, 0.0
    for start in range(0, probs.shape[0], CHUNK_ROWS):
        chunk = np.asarray(probs[start : start + CHUNK_ROWS], dtype=np.float64)
        release_rows(probs, start + CHUNK_ROWS)  # a memmap's pages: one chunk resident
        total += float(chunk.sum())
        lo, hi = min(lo, float(chunk.min())), max(hi, float(chunk.max()))
        if chunk.ndim == 2:
            row_dev = max(row_dev, float(np.abs(chunk.sum(axis=1) - 1).max()))
    return total, lo, hi, row_dev


def _host_checks(probs: np.ndarray, labels: np.ndarray, renormalize: bool) -> None:
    """Raise ValueError (the library's message) for what the library would refuse."""
    if np.iscomplexobj(probs):
        raise ValueError(f"`probs` must hold real numbers; got dtype {probs.dtype}.")
    if probs.ndim not in (1, 2):
        raise ValueError(
            f"`probs` must be 1-D (N,) or 2-D (N, K); got {probs.ndim}-D shape {probs.shape}."
        )
    n = probs.shape[0]
    if n == 0:
        raise ValueError(f"`probs` must not be empty; got shape {probs.shape}.")
    if labels.ndim != 1 or labels.shape[0] != n:
        raise ValueError(
            f"`labels` must have shape ({n},) to match the predictions; got {labels.shape}."
        )
    num_classes = 2 if probs.ndim == 1 else probs.shape[1]
    if np.issubdtype(labels.dtype, np.floating):
        check_labels(labels, n, num_classes)  # float labels are checked on the host
    else:
        _check_int32_range(np.asarray(labels), "labels", num_classes)
    if renormalize:
        return  # the library divides the rows first, then checks
    summary = _summary(probs)
    check_unit_interval("probs", probs, summary)
    if probs.ndim == 2:
        check_simplex_rows("probs", probs, summary[3])


#: The library's advice, in the command line's words (C6).
_ADVICE = (
    ("pass renormalize=True to divide each row by its sum", "pass --renormalize to divide "
     "each row by its sum"),
    ("for logits apply jax.nn.softmax first", "for logits give --logits (.npz key or .csv "
     "columns) instead of --probs"),
    ("(renormalize=True)", "(--renormalize)"),
)  # fmt: skip


def for_the_command_line(message: str) -> str:
    """A library message with its Python advice (``renormalize=True``, ``jax.nn.softmax``)
    replaced by the options of ``jaxcal report``."""
    for python, flag in _ADVICE:
        message = message.replace(python, flag)
    return message


def validate(model: Model, *, renormalize: bool = False) -> Model:
    """Value checks (shapes, NaN, range, simplex, labels) as InputError; labels as int32.

    ``renormalize`` (``--renormalize``): rows divided by their sums first, as the metrics'
    ``renormalize=True`` does; the model then holds the renormalized rows.
    """
    try:
        _host_checks(model.probs, model.labels, renormalize)
        # The host checked every value (unless the rows are to be renormalized first).
        probs, labels, _ = check_probs_labels(
            model.probs, model.labels, values=renormalize, renormalize=renormalize
        )
    except ValueError as err:
        raise InputError(f"{model.source}: {for_the_command_line(str(err))}") from err
    if probs.ndim == 2 and probs.shape[1] < 2:
        raise InputError(
            f"{model.source}: `probs` needs at least 2 class columns; got {probs.shape}."
        )
    return model._replace(
        probs=np.asarray(probs, dtype=np.float32), labels=np.asarray(labels, dtype=np.int32)
    )

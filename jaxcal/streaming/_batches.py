"""Fixed-size batches through the state: the loop of :func:`~jaxcal.streaming.parquet_state` and
:func:`~jaxcal.streaming.array_state`.

``stream_state()`` adds batches of exactly ``batch_rows`` rows (one compiled shape; the
last batch padded with copies of its first row at weight 0) to a :class:`~jaxcal.streaming.CalibrationState`
and, optionally, to B Poisson-bootstrap replicates keyed by the row number, so the
replicates do not depend on where the batches were cut or where the rows came from
(whole states, or the summaries of ``jaxcal/streaming/_summary.py``: ``replicates=``).
:func:`~jaxcal.streaming.array_state` feeds it slices of in-memory or memory-mapped NumPy arrays (no
pyarrow needed); ``jaxcal/streaming/_parquet.py`` feeds it Parquet record batches.
Memory is one batch plus the states, whatever the number of rows.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

import jax
import numpy as np

from jaxcal._core.checks import check_option
from jaxcal.streaming._poisson import poisson_init, poisson_update
from jaxcal.streaming._state import CalibrationState, init, update
from jaxcal.streaming._summary import SummaryReplicates, summary_init, summary_update

#: Rows per batch of :func:`~jaxcal.streaming.parquet_state` and :func:`~jaxcal.streaming.array_state` (one compiled shape).
BATCH_ROWS = 1 << 16

#: What the replicates keep: ``replicates=`` of :func:`~jaxcal.streaming.array_state` and
#: :func:`~jaxcal.streaming.parquet_state`, and the (init, update) pair of each kind.
REPLICATE_KINDS = {
    "states": (poisson_init, poisson_update),
    "summary": (summary_init, summary_update),
}

#: One batch for ``stream_state()``: probabilities ``(R,)`` or ``(R, K)``, labels
#: ``(R,)``, weights ``(R,)`` or None, and the number of real rows (the rest is padding).
Batch = tuple[np.ndarray, np.ndarray, np.ndarray | None, int]


class ParquetStates(NamedTuple):
    """Result of :func:`~jaxcal.streaming.parquet_state`, :func:`~jaxcal.streaming.dask_state` and :func:`~jaxcal.streaming.array_state`.

    (Named for the first of them; :func:`~jaxcal.streaming.array_state` returns the same type, so that a
    report reads either alike.)

    Attributes:
      state: the :class:`~jaxcal.streaming.CalibrationState` of every row read.
      replicates: the Poisson-bootstrap replicate states (leading axis B), a
        :class:`~jaxcal.streaming.SummaryReplicates` with
        ``replicates="summary"``, or None.
      rows: the number of rows read (int).
    """

    state: CalibrationState
    replicates: CalibrationState | SummaryReplicates | None
    rows: int


def pad_rows(values: np.ndarray, rows: int) -> np.ndarray:
    """``values`` padded to ``rows`` rows with copies of its first row."""
    pad = rows - values.shape[0]
    return np.concatenate([values, np.repeat(values[:1], pad, axis=0)]) if pad else values


def stream_state(
    batches: Iterable[Batch],
    *,
    num_classes: int,
    binary: bool,
    n_bins: int,
    resolution: int | None,
    closed: str,
    n_replicates: int,
    key: jax.Array | None,
    first_id: int,
    batch_rows: int,
    progress: Callable[[int, int], None] | None,
    total: int,
    replicates: str = "states",
    probs_name: str = "`probs`",
    labels_name: str = "`labels`",
) -> ParquetStates:
    """Add every batch (each of exactly ``batch_rows`` rows) to a new state and replicates.

    ``probs_name``, ``labels_name``: how messages name the inputs (Parquet columns).
    """
    check_option("replicates", replicates, tuple(REPLICATE_KINDS))
    if n_replicates and key is None:
        raise ValueError("`key` is required with `n_replicates` (the bootstrap's key).")
    options = dict(closed=closed, binary=binary, resolution=resolution)
    state = init(n_bins, num_classes, **options)
    reps_init, reps_update = REPLICATE_KINDS[replicates]
    reps = reps_init(n_bins, num_classes, n_replicates, **options) if n_replicates else None
    rows = 0
    for p, y, weights, valid in batches:
        p = _numbers(p, probs_name, rows).astype(np.float32)
        y = integer_labels(y, labels_name, rows)
        # Weights always (ones, zero on the padding): every batch is one compiled variant,
        # where weights only on the padded last batch would compile a second one (~2 s).
        w = (np.arange(batch_rows) < valid).astype(np.float32)
        if weights is not None:
            w = w * _numbers(weights, "weights", rows).astype(np.float32)
        try:
            state = update(state, p, y, w)
        except ValueError as err:  # the index in the message is the batch's
            raise ValueError(
                f"{str(err).rstrip('.')} (in the batch of rows {rows:,} to "
                f"{rows + valid - 1:,} of the input, counted from 0; the index is within it)."
            ) from err
        if reps is not None:
            ids = np.arange(first_id + rows, first_id + rows + batch_rows, dtype=np.int64)
            reps = reps_update(reps, p, y, _id_words(ids), key=key, weights=w)
        rows += valid
        if progress:
            progress(rows, total)
    return ParquetStates(state, reps, rows)


def _numbers(values: np.ndarray, name: str, start: int) -> np.ndarray:
    """``values`` as a numeric array, or a ValueError naming ``name`` (text, lists)."""
    values = np.asarray(values)
    if values.dtype.kind in "biuf" or jax.numpy.issubdtype(values.dtype, jax.numpy.floating):
        return values  # ml_dtypes' bfloat16 is no NumPy float kind
    kind = {"U": "text", "S": "bytes", "O": "Python objects (lists, text or None)"}.get(
        values.dtype.kind, f"dtype {values.dtype}"
    )
    raise ValueError(
        f"{name} must hold numbers; got {kind} (first value {values.flat[0]!r}, rows from "
        f"{start:,}). Give one numeric column per class."
    )


def integer_labels(y: np.ndarray, name: str = "`labels`", start: int = 0) -> np.ndarray:
    """Labels as int32: integers and bools as they are; floats only when they hold whole
    numbers (a column of soft labels or of probabilities mistaken for labels is an error,
    never truncated to 0/1, the check ``jaxcal.ece`` makes); ``name`` is what the message
    names (a Parquet column), ``start`` the row number of ``y[0]`` in the input."""
    y = _numbers(y, name, start)
    if y.dtype.kind not in "biu":  # floats, bfloat16 included
        y = y.astype(np.float64)
        bad = ~np.isfinite(y) | (y != np.round(y))
        if bad.any():
            i = int(np.argmax(bad))
            raise ValueError(
                f"{name} must hold integer labels; got {float(y[i])!r} at row {start + i:,} (soft or "
                "fractional labels are not truncated: round them, or pick the label column)."
            )
    if y.dtype.kind != "b" and y.size and (y.min() < -(2**31) or y.max() >= 2**31):
        # int32 would wrap them into range (2**32 + 1 reads 1): out of [0, K) anyway.
        bad = y.min() if y.min() < 0 else y.max()
        raise ValueError(f"{name} must hold labels in [0, K); got {bad} (beyond int32).")
    return y.astype(np.int32)


def _id_words(ids: np.ndarray) -> np.ndarray:
    """``(N, 2)`` uint32 (high, low) words of int64 ids (no 64-bit JAX types needed)."""
    return np.stack([(ids >> 32).astype(np.uint32), (ids & 0xFFFFFFFF).astype(np.uint32)], 1)


def release_rows(array: np.ndarray, stop: int) -> None:
    """Unmap the pages of a read-only :class:`numpy.memmap`'s rows below ``stop``.

    Pages read from a mapped file stay in the process's resident memory until the system
    needs them back, so a pass over a 220 MB file would add 220 MB to the peak; a pass
    that will not read those rows again gives them back (the file is unchanged; a later
    read faults them in again, from the page cache). A no-op for any other array.
    """
    handle = getattr(array, "_mmap", None)
    if handle is None or getattr(array, "mode", None) != "r" or not hasattr(handle, "madvise"):
        return
    if not array.flags.c_contiguous or stop <= 0:
        return
    base = np.frombuffer(handle, np.uint8).ctypes.data
    start = array.ctypes.data - base
    end = start + min(stop, array.shape[0]) * (array.nbytes // max(array.shape[0], 1))
    end -= end % mmap.PAGESIZE  # whole pages only: the next row may share the last one
    if end > 0:
        handle.madvise(mmap.MADV_DONTNEED, 0, end)


def _array_batches(
    probs: np.ndarray, labels: np.ndarray, weights: np.ndarray | None, batch_rows: int
) -> Iterator[Batch]:
    """Slices of ``batch_rows`` rows, read when reached (a memmap's pages stay on disk)."""
    n = labels.shape[0]
    for start in range(0, n, batch_rows):
        stop = min(start + batch_rows, n)
        # np.array copies the slice only: a memmap is read one batch at a time.
        p, y = np.array(probs[start:stop]), np.array(labels[start:stop])
        w = None if weights is None else np.array(weights[start:stop])
        for array in (probs, labels, weights):
            release_rows(array, stop)
        p, y = pad_rows(p, batch_rows), pad_rows(y, batch_rows)
        yield p, y, None if w is None else pad_rows(w, batch_rows), stop - start


def array_state(
    probs: np.ndarray,
    labels: np.ndarray,
    *,
    weights: np.ndarray | None = None,
    n_bins: int = 15,
    resolution: int | None = None,
    closed: str = "right",
    n_replicates: int = 0,
    key: jax.Array | None = None,
    first_id: int = 0,
    batch_rows: int = BATCH_ROWS,
    progress: Callable[[int, int], None] | None = None,
    replicates: str = "states",
) -> ParquetStates:
    """Stream NumPy arrays (in memory or memory-mapped) into a state, batch by batch.

    The arrays are cut into batches of ``batch_rows`` rows, each read (copied from a
    :class:`numpy.memmap`, converted to float32 / int32) only when it is added, so memory
    is one batch plus the state whatever N: the whole array is never converted or copied.
    The batches, the padding and the Poisson-bootstrap replicates are those of
    :func:`~jaxcal.streaming.parquet_state`, so the same rows give the same states from either source.

    Args:
      probs: ``(N,)`` positive-class probabilities (a binary state) or ``(N, K)`` rows on
        the simplex; any float dtype (read as float32, as :func:`~jaxcal.streaming.parquet_state`).
      labels: ``(N,)`` labels (0/1, bool, or integers in ``[0, K)``).
      weights: optional ``(N,)`` non-negative sample weights.
      n_bins, resolution, closed: as :func:`~jaxcal.streaming.init`.
      n_replicates: B > 0 also carries B Poisson-bootstrap replicates
        (:func:`~jaxcal.streaming.poisson_update`), example ids ``first_id + row number``.
      key: the bootstrap's key (required with ``n_replicates``).
      first_id: the id of the first row (a shard of a larger data set starts at its offset).
      batch_rows: rows per batch (one compiled shape).
      progress: called as ``progress(rows_done, N)`` after each batch.
      replicates: ``"states"`` (default): each replicate a whole state at ``resolution``
        (:func:`~jaxcal.streaming.poisson_init`); ``"summary"``: only its state at ``n_bins`` and the
        buckets of :func:`jaxcal.ece`'s view
        (:class:`~jaxcal.streaming.SummaryReplicates`, what ``jaxcal report``'s intervals need: B x 127 KB
        instead of B x 3.3 MB at K = 10, R = 4110; ``poisson_interval(out.replicates.
        states)`` gives the intervals of every :func:`~jaxcal.streaming.compute` metric).

    Returns:
      :class:`~jaxcal.streaming.ParquetStates` ``(state, replicates, rows)``; ``rows`` is N.

    Raises:
      ValueError: mismatched or wrong shapes; float labels that are not whole numbers
        (never truncated: ``jaxcal.ece`` refuses them too); or, in any batch, first or
        later, what :func:`~jaxcal.streaming.update` refuses (NaN, values outside the
        valid range), with the rows of that batch.

    Example:
      >>> import numpy as np
      >>> from jaxcal import streaming
      >>> p, y = np.array([0.1, 0.4, 0.8, 0.9], np.float32), np.array([0, 1, 1, 1])
      >>> out = streaming.array_state(p, y, n_bins=2, batch_rows=3)
      >>> out.rows, round(float(streaming.compute(out.state)["ece"]), 4)
      (4, 0.2)
    """
    shape, n = np.shape(probs), np.shape(labels)[0] if np.ndim(labels) == 1 else None
    if len(shape) not in (1, 2) or n is None or shape[0] != n:
        raise ValueError(
            "`probs` must have shape (N,) or (N, K) and `labels` shape (N,); got "
            f"{shape} and {np.shape(labels)}."
        )
    if weights is not None and np.shape(weights) != (n,):
        raise ValueError(f"`weights` must have shape ({n},); got {np.shape(weights)}.")
    if n == 0:
        raise ValueError("`probs` and `labels` are empty; give at least one row.")
    binary = len(shape) == 1
    return stream_state(
        _array_batches(probs, labels, weights, batch_rows),
        num_classes=2 if binary else shape[1],
        binary=binary,
        n_bins=n_bins,
        resolution=resolution,
        closed=closed,
        n_replicates=n_replicates,
        key=key,
        first_id=first_id,
        batch_rows=batch_rows,
        progress=progress,
        total=n,
        replicates=replicates,
    )

"""The state as an Arrow table: :func:`~jaxcal.streaming.to_arrow`, :func:`~jaxcal.streaming.from_arrow` (needs pyarrow).

A state is a sum of per-cell numbers, which is what every data engine computes with a
``GROUP BY``: an engine that produces the table below produces a state jaxcal computes
from, and a state written as a table (Parquet, a database) merges by adding rows. pyarrow
is the optional extra ``jaxcal[parquet]``, imported when these functions are called.

Schema ``jaxcal.state/1``: one row per non-empty cell, columns

=================  =========  ============================================================
``cells``          string     ``"class"`` (class k, bucket of ``p_k``) or ``"top"``
                              (predicted class k, bucket of the top-label confidence)
``class``          int32      k in [0, K) (binary states: 0 for ``1 - p``, 1 for ``p``)
``bucket``         int32      j in [0, R): ``max(ceil(x * R) - 1, 0)`` for ``closed=
                              "right"``, ``min(floor(x * R), R - 1)`` for ``"left"``
                              (exact in any engine when R is a power of two)
``count``          int64      samples with positive weight
``weight``         float64    sum of weights w (the count without weights)
``sum_score``      float64    sum of w x
``sum_target``     float64    sum of w t (t = 1[y = k], or correctness for ``"top"``)
``sum_dev``        float64    sum of w d, d = x - a_j, a_j = (j + 1/2) / R except
                              a_0 = 0 and a_{R-1} = 1 (read on ``"class"`` rows)
``sum_dev_sq``     float64    sum of w d^2 (read on ``"class"`` rows)
``sum_dev_target`` float64    sum of w d t (read on ``"class"`` rows)
``sum_brier``      float64    any share of sum of w (p - y)^2 over the samples (binary;
                              multiclass: sum_k (p_k - 1[y = k])^2); rows add up
``sum_log_loss``   float64    likewise for -log p_y, clipped as :func:`jaxcal.log_loss`
=================  =========  ============================================================

Every sample contributes to K ``"class"`` rows and one ``"top"`` row; ``sum_brier`` and
``sum_log_loss`` are summed over all rows (jaxcal writes the totals on the first row, an
engine may write them per group). The schema metadata holds ``jaxcal.schema`` =
``jaxcal.state/1`` and the state's layout (``n_bins``, ``resolution``, ``num_classes``,
``closed``, ``binary``); :func:`~jaxcal.streaming.from_arrow` takes them from there or from its keywords.
The float sums go through float64, so a float32 state's compensated (high, low) pairs
survive the round trip; they are plain sums (a state's ``exponent`` is applied on
writing and chosen again, from the total weight, on reading).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from jaxcal.streaming._scale import BAND
from jaxcal.streaming._state import CalibrationState, check_state, init

#: The schema version written by :func:`~jaxcal.streaming.to_arrow` and read by :func:`~jaxcal.streaming.from_arrow`.
SCHEMA = "jaxcal.state/1"

_MOMENTS = ("sum_dev", "sum_dev_sq", "sum_dev_target")
_FLOATS = ("weight", "sum_score", "sum_target", *_MOMENTS, "sum_brier", "sum_log_loss")
_LAYOUT = ("n_bins", "resolution", "num_classes", "closed", "binary")


def _pyarrow():
    try:
        import pyarrow
    except ImportError as err:  # pragma: no cover - the extra is installed in CI
        raise ImportError(
            "jaxcal's Arrow tables need pyarrow: pip install 'jaxcal[parquet]'."
        ) from err
    return pyarrow


def _schema(pa):
    fields = [("cells", pa.string()), ("class", pa.int32()), ("bucket", pa.int32())]
    fields += [("count", pa.int64())] + [(name, pa.float64()) for name in _FLOATS]
    return pa.schema(fields)


def to_arrow(state: CalibrationState) -> Any:
    """The state as a ``pyarrow.Table`` of schema ``jaxcal.state/1`` (module docstring).

    One row per non-empty cell; the totals (Brier and log-loss sums) on the first row.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal import streaming
      >>> s = streaming.update(streaming.init(2, 2, binary=True),
      ...                      jnp.array([0.1, 0.4, 0.8]), jnp.array([0, 1, 1]))
      >>> t = streaming.to_arrow(s)
      >>> t.num_rows, t.schema.metadata[b"jaxcal.schema"]
      (6, b'jaxcal.state/1')
      >>> t.column("count").to_pylist()[:2], t.column("cells").to_pylist()[-1]
      ([1, 2], 'top')
    """
    pa = _pyarrow()
    state = check_state(state)
    highs = (state.top_sums, state.class_sums, state.totals)
    exponent = int(np.asarray(state.exponent))  # the table holds plain sums
    top_sums, class_sums, totals = (
        np.ldexp(np.asarray(h, np.float64) + np.asarray(lo, np.float64), exponent)
        for h, lo in zip(highs, state.compensation, strict=True)
    )
    k, r = state.num_classes, state.resolution
    kk, jj = np.meshgrid(np.arange(k), np.arange(r), indexing="ij")
    zeros = np.zeros((3, k, r))
    blocks = []
    for name, count, sums in (
        ("class", state.class_count, class_sums),
        ("top", state.top_count, np.concatenate([top_sums, zeros])),
    ):
        count = np.asarray(count, np.int64)
        keep = (count > 0) | np.any(sums != 0, axis=0)
        blocks.append((name, kk[keep], jj[keep], count[keep], sums[:, keep]))
    n = sum(b[1].size for b in blocks)
    extra = np.zeros((2, n))
    extra[:, :1] = totals[1:, None]
    columns = {
        "cells": [b[0] for b in blocks for _ in range(b[1].size)],
        "class": np.concatenate([b[1] for b in blocks]).astype(np.int32),
        "bucket": np.concatenate([b[2] for b in blocks]).astype(np.int32),
        "count": np.concatenate([b[3] for b in blocks]),
    }
    sums = np.concatenate([b[4] for b in blocks], axis=1)
    for i, name in enumerate(_FLOATS[:6]):
        columns[name] = sums[i]
    columns["sum_brier"], columns["sum_log_loss"] = extra
    layout = dict(zip(_LAYOUT, (state.n_bins, r, k, state.closed, state.binary), strict=True))
    metadata = {"jaxcal.schema": SCHEMA} | {key: str(v) for key, v in layout.items()}
    return pa.table(columns, schema=_schema(pa).with_metadata(metadata))


def _layout_of(table, overrides: dict) -> dict:
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    if "jaxcal.schema" in meta and meta["jaxcal.schema"] != SCHEMA:
        raise ValueError(
            f"`table` has schema {meta['jaxcal.schema']!r}; this jaxcal reads {SCHEMA!r}."
        )
    layout = {}
    for key in _LAYOUT:
        value = overrides.get(key)
        if value is None and key in meta:
            text = meta[key]
            value = text if key == "closed" else text == "True" if key == "binary" else int(text)
        layout[key] = value
    missing = [key for key in ("n_bins", "num_classes") if layout[key] is None]
    if missing:
        raise ValueError(
            f"`table` has no jaxcal metadata for {missing}: pass them as keywords of from_arrow."
        )
    layout["closed"] = layout["closed"] or "right"
    layout["binary"] = bool(layout["binary"])
    return layout


#: Slack of a bucket's range in ``_check_buckets()``: the edges k/R are rounded to the
#: input's dtype when the state is built (bfloat16: 2**-8 relative), plus round-off.
_EDGE_SLACK = 2.0**-8


def _check_buckets(weight, sum_score, bucket, cells, cls, layout, r) -> None:
    """Each row's mean score must lie in its bucket ``[j/R, (j+1)/R]`` of this layout.

    The layout lives only in the schema metadata, and ``pyarrow.concat_tables`` keeps the
    first table's: tables of different layouts concatenated would be read in the first
    one's, bucket j of 8 (scores in (j/8, (j+1)/8]) as bucket j of 4096 (finding A6). A
    row's mean score places it: a table mixing layouts has rows far outside their bucket.
    """
    live = weight > 0
    mean = np.where(live, sum_score / np.where(live, weight, 1), 0)
    low = bucket / r * (1 - _EDGE_SLACK) - 1e-6
    high = (bucket + 1) / r * (1 + _EDGE_SLACK) + 1e-6
    bad = live & ((mean < low) | (mean > high))
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(
            f"`table` row {i} ({cells[i]!r}, class {int(cls[i])}, bucket {int(bucket[i])}) has "
            f"mean score {mean[i]:.6g}, outside its bucket [{bucket[i] / r:.6g}, "
            f"{(bucket[i] + 1) / r:.6g}] of the layout read (n_bins={layout['n_bins']}, "
            f"resolution={r}): the table mixes states of different layouts (e.g. "
            "pyarrow.concat_tables of tables with other n_bins or resolution, whose metadata "
            "is the first table's), or the layout keywords are wrong. Convert each table with "
            "from_arrow and combine the states with streaming.merge (it says which layouts "
            "differ)."
        )


def from_arrow(
    table: Any,
    *,
    n_bins: int | None = None,
    num_classes: int | None = None,
    resolution: int | None = None,
    closed: str | None = None,
    binary: bool | None = None,
    dtype: Any = None,
) -> CalibrationState:
    """A state from a table of schema ``jaxcal.state/1`` (module docstring).

    Rows of the same cell add up (a table of partial sums, e.g. the concatenation of
    several engines' outputs, is their merge). Each row's mean score ``sum_score /
    weight`` must lie in its bucket of the layout (within the rounding of the edges), so a
    concatenation of tables of different layouts, which keeps the first table's metadata,
    is refused rather than read in the wrong layout. The layout comes from the table's schema
    metadata; the keywords supply it for a table an engine made (``n_bins`` and
    ``num_classes`` at least; ``resolution`` defaults to ``n_bins``, ``closed`` to
    ``"right"``, ``binary`` to False), or override it.

    Args:
      table: a ``pyarrow.Table`` (or anything ``pyarrow.table`` accepts).
      n_bins, num_classes, resolution, closed, binary, dtype: as :func:`~jaxcal.streaming.init`.

    Returns:
      :class:`~jaxcal.streaming.CalibrationState`. The float64 sums are split into the state's compensated
      (high, low) pairs, so a float32 state keeps its precision.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal import streaming
      >>> s = streaming.update(streaming.init(2, 2, binary=True),
      ...                      jnp.array([0.1, 0.4, 0.8]), jnp.array([0, 1, 1]))
      >>> back = streaming.from_arrow(streaming.to_arrow(s))
      >>> float(streaming.compute(back)["ece"]) == float(streaming.compute(s)["ece"])
      True
    """
    pa = _pyarrow()
    table = pa.table(table) if not isinstance(table, pa.Table) else table
    given = dict(
        n_bins=n_bins, num_classes=num_classes, resolution=resolution, closed=closed, binary=binary
    )
    layout = _layout_of(table, given)
    state = init(
        layout["n_bins"],
        layout["num_classes"],
        closed=layout["closed"],
        binary=layout["binary"],
        dtype=dtype,
        resolution=layout["resolution"],
    )
    k, r = state.num_classes, state.resolution
    names = set(table.column_names)
    need = {"cells", "class", "bucket", "count", "weight", "sum_score", "sum_target"}
    if need - names:
        raise ValueError(f"`table` lacks the columns {sorted(need - names)}; got {sorted(names)}.")

    def column(name):
        if name not in names:
            return np.zeros(table.num_rows)
        return table.column(name).to_numpy(zero_copy_only=False).astype(np.float64)

    cells = np.asarray(table.column("cells").to_pylist(), dtype=object)
    cls = table.column("class").to_numpy(zero_copy_only=False).astype(np.int64)
    bucket = table.column("bucket").to_numpy(zero_copy_only=False).astype(np.int64)
    bad = (cls < 0) | (cls >= k) | (bucket < 0) | (bucket >= r) | ~np.isin(cells, ["class", "top"])
    if np.any(bad):
        i = int(np.argmax(bad))
        raise ValueError(
            f"`table` row {i} is outside the layout (cells 'class'/'top', class in [0, {k}), "
            f"bucket in [0, {r})): got {(cells[i], int(cls[i]), int(bucket[i]))}."
        )
    _check_buckets(column("weight"), column("sum_score"), bucket, cells, cls, layout, r)
    counts = np.zeros((2, k, r), np.int64)
    sums = np.zeros((2, 6, k, r))
    which = (cells == "top").astype(np.int64)
    np.add.at(counts, (which, cls, bucket), column("count").astype(np.int64))
    for i, name in enumerate(_FLOATS[:6]):
        np.add.at(sums, (which, i, cls, bucket), column(name))
    if counts.max(initial=0) >= 2**31:
        raise ValueError("`table` has a cell of 2**31 samples or more: int32 counts overflow.")
    totals = np.array(
        [sums[0, 0, 0].sum(), column("sum_brier").sum(), column("sum_log_loss").sum()]
    )
    # The state's power-of-two scale (jaxcal.streaming._scale), from the total weight.
    exponent = int(np.frexp(totals[0])[1])
    exponent = 0 if abs(exponent) <= BAND else exponent
    highs, lows = [], []
    for value in (sums[1, :3], sums[0], totals):
        value = np.ldexp(value, -exponent)
        high = value.astype(state.dtype)
        highs.append(jnp.asarray(high))
        lows.append(jnp.asarray((value - high.astype(np.float64)).astype(state.dtype)))
    return CalibrationState(
        top_count=jnp.asarray(counts[1], jnp.int32),
        top_sums=highs[0],
        class_count=jnp.asarray(counts[0], jnp.int32),
        class_sums=highs[1],
        totals=highs[2],
        compensation=tuple(lows),
        exponent=jnp.asarray(exponent, jnp.int32),
        closed=state.closed,
        binary=state.binary,
        n_bins=state.n_bins,
    )

"""The state as a published long-form table: :func:`~jaxcal.streaming.to_table`, :func:`~jaxcal.streaming.from_table`.

Schema ``jaxcal.state-table/1`` (the JSON schema ``jaxcal/streaming/state_table.schema.json``
and the page "Calibration in the warehouse" specify it): the cell columns of
``jaxcal.state/1`` (:func:`~jaxcal.streaming.to_arrow`: ``cells``, ``class``, ``bucket``,
``count``, ``weight``, ``sum_score``, ``sum_target``, ``sum_dev``, ``sum_dev_sq``,
``sum_dev_target``, ``sum_brier``, ``sum_log_loss``) plus

* ``replicate`` int32: -1 on the rows of the state of every row, b in [0, B) on the rows
  of Poisson-bootstrap replicate b (kept at ``replicate_resolution`` buckets);
* the segment columns, if any, under their own names and types: the rows of each segment
  value (a tuple of values for several columns) are that segment's state.

The layout (``n_bins``, ``resolution``, ``num_classes``, ``closed``, ``binary``,
``replicates``, ``replicate_resolution``, ``segments``, ``seed``, ``generator``) is the
schema metadata of the Arrow table (kept by Parquet files), or keywords of
:func:`~jaxcal.streaming.from_table` for a table an engine made. Rows of the same key add
up: several partial tables of the same layout concatenated are their merge, in any row
order.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal.streaming._arrow import _pyarrow, from_arrow, to_arrow
from jaxcal.streaming._batches import ParquetStates
from jaxcal.streaming._state import CalibrationState
from jaxcal.streaming._summary import SummaryReplicates

#: The schema version of :func:`~jaxcal.streaming.to_table` and :func:`~jaxcal.streaming.from_table`.
TABLE_SCHEMA = "jaxcal.state-table/1"

_LAYOUT = ("n_bins", "resolution", "num_classes", "closed", "binary")
_INTS = ("n_bins", "resolution", "num_classes", "replicates", "replicate_resolution", "seed")


def _as_pair(value: Any) -> tuple[CalibrationState, CalibrationState | None]:
    """(state, replicate states or None) of a state, a ``ParquetStates`` or a pair."""
    if isinstance(value, CalibrationState):
        return value, None
    if isinstance(value, tuple) and len(value) >= 2 and isinstance(value[0], CalibrationState):
        reps = value[1]
        if isinstance(reps, SummaryReplicates):
            reps = reps.states
        if reps is not None and not isinstance(reps, CalibrationState):
            raise ValueError(f"replicates must be replicate states; got {type(reps).__name__}.")
        return value[0], reps
    raise ValueError(
        "`state` must be a CalibrationState, a (state, replicates) pair such as "
        f"ParquetStates, or a mapping of segment values to them; got {type(value).__name__}."
    )


def _unstack(reps: CalibrationState) -> list[CalibrationState]:
    b = reps.totals.shape[0]
    return [jax.tree_util.tree_map(lambda x, i=i: x[i], reps) for i in range(b)]


def to_table(
    state: Any,
    *,
    segments: str | tuple[str, ...] | list[str] = (),
    seed: int | None = None,
    generator: str | None = None,
) -> Any:
    """The state (and its replicates, per segment) as a ``pyarrow.Table`` of schema
    ``jaxcal.state-table/1`` (module docstring): one row per non-empty cell.

    Args:
      state: a :class:`~jaxcal.streaming.CalibrationState`; a ``(state, replicates)``
        pair (:class:`~jaxcal.streaming.ParquetStates`, replicates from
        :func:`~jaxcal.streaming.poisson_init` or summary replicates, whose states at M
        bins are written); or a mapping from segment values (tuples for several segment
        columns) to either, with ``segments`` naming the columns.
      segments: the segment column names (one per element of a mapping's keys).
      seed, generator: recorded in the metadata (the replicates' ``jax.random.key(seed)``
        and generator), for the reader's information.

    Returns:
      ``pyarrow.Table``; write it with ``pyarrow.parquet.write_table``. The float sums are
      float64 (a float32 state's compensated pairs survive the round trip).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal import streaming
      >>> s = streaming.update(streaming.init(2, 2, binary=True),
      ...                      jnp.array([0.1, 0.4, 0.8]), jnp.array([0, 1, 1]))
      >>> t = streaming.to_table(s)
      >>> t.num_rows, t.schema.metadata[b"jaxcal.schema"]
      (6, b'jaxcal.state-table/1')
      >>> set(t.column("replicate").to_pylist())
      {-1}
    """
    pa = _pyarrow()
    names = (segments,) if isinstance(segments, str) else tuple(segments)
    if isinstance(state, dict):
        if not names:
            raise ValueError("a mapping of segment states needs `segments`, the column names.")
        items = [(k if isinstance(k, tuple) else (k,), v) for k, v in state.items()]
        bad = [k for k, _ in items if len(k) != len(names)]
        if bad:
            raise ValueError(f"segment value {bad[0]} does not fit `segments` {list(names)}.")
    elif names:
        raise ValueError("`segments` names the keys of a mapping of states; got one state.")
    else:
        items = [((), state)]
    if not items:
        raise ValueError("`state` is an empty mapping: nothing to write.")
    parts, layout = [], None
    for key, value in items:
        main, reps = _as_pair(value)
        pieces = [(-1, to_arrow(main))]
        if reps is not None:
            pieces += [(b, to_arrow(r)) for b, r in enumerate(_unstack(reps))]
        this = {
            **{k.decode(): v.decode() for k, v in pieces[0][1].schema.metadata.items()},
            "replicates": str(0 if reps is None else reps.totals.shape[0]),
            "replicate_resolution": str(
                pieces[-1][1].schema.metadata[b"resolution"].decode() if reps is not None else "0"
            ),
        }
        if layout is not None and this != layout:
            raise ValueError(f"segment {key} has another layout than the first: {this} {layout}.")
        layout = this
        for b, t in pieces:
            t = t.replace_schema_metadata(None)
            t = t.add_column(0, "replicate", pa.array(np.full(t.num_rows, b, np.int32)))
            for i, (name, v) in enumerate(zip(names, key, strict=True)):
                t = t.add_column(i, name, pa.array([v] * t.num_rows))
            parts.append(t)
    table = pa.concat_tables(parts, promote_options="permissive")
    layout["jaxcal.schema"] = TABLE_SCHEMA
    layout["segments"] = json.dumps(list(names))
    layout["seed"] = "" if seed is None else str(int(seed))
    layout["generator"] = generator or ""
    return table.replace_schema_metadata(layout)


def _read(table: Any) -> Any:
    pa = _pyarrow()
    if isinstance(table, (str, Path)):
        import pyarrow.parquet as pq

        return pq.read_table(str(table))
    if isinstance(table, pa.Table):
        return table
    if hasattr(table, "to_arrow_table"):  # a DuckDB relation
        return table.to_arrow_table()
    try:
        return pa.Table.from_pandas(table, preserve_index=False)
    except (TypeError, AttributeError):
        return pa.table(table)


def table_layout(table: Any, **given: Any) -> dict:
    """The layout of a state table: its metadata, overridden by the ``given`` keywords."""
    meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
    schema = meta.get("jaxcal.schema")
    if schema is not None and schema != TABLE_SCHEMA:
        raise ValueError(f"`table` has schema {schema!r}; from_table reads {TABLE_SCHEMA!r}.")
    layout = {}
    for key in (*_LAYOUT, "replicates", "replicate_resolution", "segments", "seed", "generator"):
        value = given.get(key)
        if value is None and meta.get(key, "") != "":
            text = meta[key]
            if key == "binary":
                value = text == "True"
            elif key == "segments":
                value = tuple(json.loads(text))
            else:
                value = int(text) if key in _INTS else text
        layout[key] = value
    missing = [key for key in ("n_bins", "num_classes") if layout[key] is None]
    if missing:
        raise ValueError(
            f"`table` has no jaxcal metadata for {missing}: pass them as keywords of "
            "from_table (jaxcal.sql.state passes them for you)."
        )
    segs = layout["segments"]
    layout["segments"] = () if segs is None else (segs,) if isinstance(segs, str) else tuple(segs)
    return layout


def from_table(
    table: Any,
    *,
    n_bins: int | None = None,
    num_classes: int | None = None,
    resolution: int | None = None,
    closed: str | None = None,
    binary: bool | None = None,
    segments: str | tuple[str, ...] | None = None,
    replicate_resolution: int | None = None,
    dtype: Any = None,
) -> Any:
    """The state(s) of a table of schema ``jaxcal.state-table/1`` (module docstring).

    Rows of the same (segment, replicate, cells, class, bucket) add up, in any order: a
    concatenation of partial tables is their merge.

    Args:
      table: a ``pyarrow.Table``, a pandas DataFrame, a DuckDB relation, or the path of a
        Parquet file.
      n_bins, num_classes, resolution, closed, binary, dtype: as
        :func:`~jaxcal.streaming.init`; default from the table's metadata (required for a
        table without it).
      segments: the segment columns (default the metadata's; none).
      replicate_resolution: the replicate rows' buckets (default the metadata's, else
        ``n_bins``).

    Returns:
      A :class:`~jaxcal.streaming.CalibrationState`; a
      :class:`~jaxcal.streaming.ParquetStates` ``(state, replicates, rows)`` when the
      table has replicate rows (``replicates`` stacked on a leading axis B, ``rows`` the
      samples of positive weight); with segments, a dict from each segment's value (a
      tuple for several columns) to that.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal import streaming
      >>> s = streaming.update(streaming.init(2, 2, binary=True),
      ...                      jnp.array([0.1, 0.4, 0.8]), jnp.array([0, 1, 1]))
      >>> t = streaming.to_table(s)
      >>> back = streaming.from_table(t.take([5, 0, 3, 1, 4, 2]))  # any row order
      >>> float(streaming.compute(back)["ece"]) == float(streaming.compute(s)["ece"])
      True
    """
    pa = _pyarrow()
    table = _read(table)
    bare = table.replace_schema_metadata(None)
    layout = table_layout(
        table,
        n_bins=n_bins,
        num_classes=num_classes,
        resolution=resolution,
        closed=closed,
        binary=binary,
        segments=segments,
        replicate_resolution=replicate_resolution,
    )
    names = layout["segments"]
    missing = [n for n in names if n not in table.column_names]
    if missing:
        raise ValueError(f"`table` lacks the segment columns {missing}; got {table.column_names}.")
    if "replicate" in table.column_names:
        rep = table.column("replicate").to_numpy(zero_copy_only=False).astype(np.int64)
    else:
        rep = np.full(table.num_rows, -1, np.int64)
    keys = (
        list(zip(*(table.column(n).to_pylist() for n in names), strict=True))
        if names
        else [()] * table.num_rows
    )
    groups: dict[tuple, dict[int, list[int]]] = {}
    for i, (key, b) in enumerate(zip(keys, rep.tolist(), strict=True)):
        groups.setdefault(key, {}).setdefault(b, []).append(i)
    base = {k: layout[k] for k in _LAYOUT}
    rep_res = layout["replicate_resolution"] or layout["n_bins"]
    out = {}
    for key, by_rep in groups.items():
        if -1 not in by_rep:
            raise ValueError(
                f"`table` has no rows of replicate -1 (the state itself) for segment {key}."
            )
        state = from_arrow(bare.take(pa.array(by_rep[-1])), dtype=dtype, **base)
        n_reps = layout["replicates"] or (max(by_rep) + 1)
        reps = None
        if n_reps > 0:
            bad = [b for b in by_rep if b != -1 and not 0 <= b < n_reps]
            if bad:
                raise ValueError(f"`table` has replicate {bad[0]} outside [-1, {n_reps}).")
            opts = base | {"resolution": rep_res}
            reps = [
                from_arrow(bare.take(pa.array(by_rep.get(b, []), pa.int64())), dtype=dtype, **opts)
                for b in range(n_reps)
            ]
            reps = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *reps)
        if reps is not None:
            value = ParquetStates(state, reps, int(np.asarray(state.top_count).sum()))
        else:
            value = state
        out[key[0] if len(names) == 1 else key] = value
    if not names:
        return out[()] if () in out else from_arrow(bare.slice(0, 0), dtype=dtype, **base)
    return out

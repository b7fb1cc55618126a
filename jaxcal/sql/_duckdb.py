"""DuckDB, the embedded engine: :func:`~jaxcal.sql.state` runs the state query where the
rows are (a DuckDB file, or a DataFrame, Arrow table or Parquet file DuckDB reads) and
returns the state, never the rows: DuckDB sends back the table of sums (a few thousand
rows) and :func:`jaxcal.streaming.from_table` reads it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jaxcal.sql._query import (
    LOG_LOSS_EPS,
    check_query,
    layout_of,
    problems,
    state_query,
)
from jaxcal.streaming._table import TABLE_SCHEMA, from_table


def _duckdb():
    try:
        import duckdb
    except ImportError as err:  # pragma: no cover - the extra is installed in CI
        raise ImportError("jaxcal.sql.state needs duckdb: pip install 'jaxcal[sql]'.") from err
    return duckdb


def connect(con_or_path: Any):
    """A DuckDB connection: ``con_or_path`` itself, a file opened read-only, or an
    in-memory database for None."""
    duckdb = _duckdb()
    if con_or_path is None:
        return duckdb.connect()
    if isinstance(con_or_path, (str, Path)):
        if not Path(con_or_path).exists():
            raise ValueError(f"`con_or_path`: no DuckDB file {con_or_path}.")
        return duckdb.connect(str(con_or_path), read_only=True)
    if not hasattr(con_or_path, "execute"):
        raise ValueError(
            "`con_or_path` must be a DuckDB connection, the path of a DuckDB file or None; "
            f"got {type(con_or_path).__name__}."
        )
    return con_or_path


def state(
    con_or_path: Any,
    table: Any,
    *,
    probs: str | Sequence[str],
    labels: str,
    weights: str | None = None,
    segments: str | Sequence[str] = (),
    n_bins: int = 15,
    fine: int | None = None,
    replicates: int = 0,
    seed: int = 0,
    row_key: str | None = None,
    closed: str = "right",
    log_loss_eps: float = LOG_LOSS_EPS,
    as_table: bool = False,
) -> Any:
    """The calibration state of the predictions in ``table``, computed by DuckDB.

    Runs :func:`~jaxcal.sql.check_query` (the table is refused, naming each column and the
    count of bad rows: NULLs, probabilities outside [0, 1] or NaN, rows not summing to 1,
    labels outside [0, K), bad weights) and then :func:`~jaxcal.sql.state_query`; the
    arguments are those of :func:`~jaxcal.sql.state_query`.

    Args:
      con_or_path: a DuckDB connection, the path of a DuckDB file (opened read-only), or
        None (an in-memory database, for a ``table`` that is a DataFrame or Arrow table).
      table: a table or view name, any DuckDB ``FROM`` clause (``'preds.parquet'``,
        ``read_parquet('dir/*.parquet')``), or a pandas DataFrame / Arrow table.
      as_table: return the state table (a ``pyarrow.Table`` of schema
        ``jaxcal.state-table/1`` with its metadata, ready for
        ``pyarrow.parquet.write_table``) instead of the state.

    Returns:
      What :func:`jaxcal.streaming.from_table` returns for the table: a
      :class:`~jaxcal.streaming.CalibrationState`, a
      :class:`~jaxcal.streaming.ParquetStates` with ``replicates``, and with
      ``segments`` a dict from each segment's value (a tuple for several columns) to it.
      The state equals :func:`jaxcal.streaming.update` over the same rows (counts exactly,
      sums to round-off; the log loss clipped at ``log_loss_eps``).

    Example:
      >>> import numpy as np, pandas as pd
      >>> from jaxcal import sql, streaming
      >>> df = pd.DataFrame({"p": [0.1, 0.4, 0.8, 0.9], "y": [0, 1, 1, 1]})
      >>> s = sql.state(None, df, probs="p", labels="y", n_bins=2)
      >>> round(float(streaming.compute(s)["ece"]), 4)
      0.2
    """
    con = connect(con_or_path)
    name = table
    if not isinstance(table, str):
        con.register("_jc_input", table)
        name = "_jc_input"
    columns = dict(probs=probs, labels=labels, weights=weights, segments=segments)
    layout = layout_of(probs, n_bins, fine)
    duckdb = _duckdb()
    try:
        head = con.sql(f"SELECT * FROM {name} LIMIT 0")
        types = dict(zip(head.columns, (str(t) for t in head.types), strict=True))
    except duckdb.Error:
        types = {}
    prob_cols = [probs] if isinstance(probs, str) else list(probs)
    float32 = bool(prob_cols) and all(types.get(c) == "FLOAT" for c in prob_cols)
    query = state_query(
        name,
        **columns,
        n_bins=n_bins,
        fine=fine,
        replicates=replicates,
        seed=seed,
        row_key=row_key,
        closed=closed,
        log_loss_eps=log_loss_eps,
        float32=float32,
    )
    try:
        check = con.sql(check_query(name, **columns, row_key=row_key))
        counts = dict(zip(check.columns, check.fetchall()[0], strict=True))
        bad = problems(
            counts, str(table) if isinstance(table, str) else "table", layout["num_classes"]
        )
        if bad:
            raise ValueError(f"`table` {name}: " + "; ".join(bad) + ".")
        relation = con.sql(query)
        fetch = getattr(relation, "to_arrow_table", None) or relation.fetch_arrow_table
        result = fetch()
    except duckdb.Error as err:
        raise ValueError(f"DuckDB could not read `table` {name}: {err}") from err
    segs = (segments,) if isinstance(segments, str) else tuple(segments)
    meta = {key: str(value) for key, value in layout.items()}
    meta |= {
        "jaxcal.schema": TABLE_SCHEMA,
        "closed": closed,
        "replicates": str(replicates),
        "segments": json.dumps(list(segs)),
        "seed": str(seed) if replicates else "",
        "generator": "hash" if replicates else "",
    }
    result = result.replace_schema_metadata(meta)
    if as_table:
        return result
    return from_table(result)

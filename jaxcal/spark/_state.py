"""``jaxcal.spark.state``: partial state tables per partition (``mapInArrow``), merged by
``groupBy().sum()``; the input checks travel as rows ``cells = "check:<problem>"``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jaxcal.sql._query import LOG_LOSS_EPS, check_query, layout_of, problems, state_query
from jaxcal.streaming._table import from_table

_INTS = ("replicate", "class", "bucket")
_SUMS = (
    "weight",
    "sum_score",
    "sum_target",
    "sum_dev",
    "sum_dev_sq",
    "sum_dev_target",
    "sum_brier",
    "sum_log_loss",
)


def _out_schema(df, segs):
    from pyspark.sql import types as T

    fields = [T.StructField(s, df.schema[s].dataType, True) for s in segs]
    fields += [T.StructField("replicate", T.IntegerType()), T.StructField("cells", T.StringType())]
    fields += [T.StructField("class", T.IntegerType()), T.StructField("bucket", T.IntegerType())]
    fields += [T.StructField("count", T.LongType())]
    fields += [T.StructField(n, T.DoubleType()) for n in _SUMS]
    return T.StructType(fields)


def _partition_states(batches, *, query, checks, arrow_schema):
    """Runs on an executor: the partition's check rows and partial state table."""
    import duckdb
    import pyarrow as pa

    batches = list(batches)
    if not batches or sum(b.num_rows for b in batches) == 0:
        return
    con = duckdb.connect()
    con.register("_jc_part", pa.Table.from_batches(batches))
    check = con.sql(checks)
    counts = dict(zip(check.columns, check.fetchall()[0], strict=True))
    bad = {k: int(v or 0) for k, v in counts.items() if k != "rows" and int(v or 0)}
    if bad:
        n = len(bad)
        columns = {f.name: pa.nulls(n, f.type) for f in arrow_schema}
        columns["cells"] = pa.array([f"check:{k}" for k in bad])
        columns["count"] = pa.array(list(bad.values()), pa.int64())
        yield from pa.table(columns, schema=arrow_schema).to_batches()
        return
    relation = con.sql(query)
    fetch = getattr(relation, "to_arrow_table", None) or relation.fetch_arrow_table
    yield from fetch().cast(arrow_schema).to_batches()


def state(
    df: Any,
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
    as_dataframe: bool = False,
) -> Any:
    """The calibration state of the predictions in Spark DataFrame ``df``.

    Each partition becomes a partial state table (``mapInArrow``; DuckDB runs
    :func:`jaxcal.sql.state_query` on its Arrow batches), and Spark merges the partial
    tables with ``groupBy(keys).sum()``. The input checks of :func:`jaxcal.sql.check_query`
    run per partition and their counts are summed the same way: a bad table is refused
    naming each column and the total count. Arguments as :func:`jaxcal.sql.state_query`
    (``row_key`` is required with ``replicates``: Spark has no stable row number).

    Args:
      df: a ``pyspark.sql.DataFrame`` with the columns named.
      as_dataframe: return the merged state table as a Spark DataFrame (schema
        ``jaxcal.state-table/1``, to store with ``df.write``) instead of the state; the
        checks run first (one pass over ``df``), and the DataFrame is computed again when
        written (``cache()`` it to avoid that).

    Returns:
      As :func:`jaxcal.sql.state`: a state, ``ParquetStates`` with replicates, a dict per
      segment value; equal to :func:`jaxcal.sql.state` of the same rows (counts exactly,
      sums to round-off).

    Example:
      >>> from jaxcal import spark
      >>> callable(spark.state)  # needs a SparkSession: see the warehouse guide
      True
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_schema

    segs = [segments] if isinstance(segments, str) else list(segments)
    prob_cols = [probs] if isinstance(probs, str) else list(probs)
    missing = [
        c for c in [*prob_cols, labels, weights, row_key, *segs] if c and c not in df.columns
    ]
    if missing:
        raise ValueError(f"`df` has no columns {missing}; columns: {df.columns}.")
    float32 = all(isinstance(df.schema[c].dataType, T.FloatType) for c in prob_cols)
    columns = dict(probs=probs, labels=labels, weights=weights, segments=segs)
    query = state_query(
        "_jc_part",
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
    checks = check_query("_jc_part", **columns, row_key=row_key if replicates else None)
    schema = _out_schema(df, segs)
    arrow_schema = to_arrow_schema(schema)
    used = list(dict.fromkeys(c for c in [*prob_cols, labels, weights, row_key, *segs] if c))

    def partial_states(batches):
        return _partition_states(batches, query=query, checks=checks, arrow_schema=arrow_schema)

    parts = df.select(*used).mapInArrow(partial_states, schema)
    keys = [*segs, "replicate", "cells", "class", "bucket"]
    merged = parts.groupBy(*keys).agg(*(F.sum(c).alias(c) for c in ("count", *_SUMS)))
    layout = layout_of(probs, n_bins, fine)
    bad_rows = merged.filter(F.col("cells").startswith("check:")).select("cells", "count")
    if as_dataframe:
        _raise_on(dict(bad_rows.collect()), layout["num_classes"])
        return merged.filter(~F.col("cells").startswith("check:"))
    table = merged.toArrow() if hasattr(merged, "toArrow") else _arrow_of(merged)
    cells = table.column("cells").to_pylist()
    counts = table.column("count").to_pylist()
    _raise_on(
        {c: n for c, n in zip(cells, counts, strict=True) if c.startswith("check:")},
        layout["num_classes"],
    )
    keep = [i for i, c in enumerate(cells) if not c.startswith("check:")]
    table = table.take(keep)
    return from_table(
        table,
        n_bins=layout["n_bins"],
        num_classes=layout["num_classes"],
        resolution=layout["resolution"],
        closed=closed,
        binary=layout["binary"],
        segments=tuple(segs),
        replicate_resolution=n_bins,
    )


def _arrow_of(df):  # pragma: no cover - pyspark < 4 has no DataFrame.toArrow
    import pyarrow as pa

    return pa.Table.from_pandas(df.toPandas(), preserve_index=False)


def _raise_on(found: dict, k: int) -> None:
    counts = {c.removeprefix("check:"): n for c, n in found.items()}
    bad = problems(counts, "df", k)
    if bad:
        raise ValueError("`df`: " + "; ".join(bad) + ".")

"""The SQL that computes a state table (``jaxcal.state-table/1``) where the rows live.

:func:`~jaxcal.sql.state_query` writes one query in DuckDB's dialect and transpiles it with
sqlglot to Spark SQL, BigQuery, Snowflake and PostgreSQL. It uses only what every one of
them has: ``CASE``, ``GREATEST``/``LEAST``, ``CEIL``/``FLOOR``, ``LN``, integer ``%``,
xor and right shifts on 64-bit integers (for the replicate weights, never overflowing),
``CROSS JOIN`` of small ``UNION ALL`` tables, and one ``GROUP BY``. Each row of the input
becomes K ``"class"`` cells and one ``"top"`` cell (which also carries the row's Brier
score and log loss), per replicate; the buckets and the within-bucket moments are those
of ``jaxcal.streaming``'s state (``jaxcal/streaming/_arrow.py``), the replicate weights
those of ``poisson_update(..., generator="hash")`` (``jaxcal/streaming/_hash.py``).
:func:`~jaxcal.sql.check_query` counts the rows each check refuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxcal.streaming._hash import MULTIPLIERS, SHIFTS, replicate_word
from jaxcal.streaming._poisson import _THRESHOLDS

#: sqlglot's names of the dialects :func:`~jaxcal.sql.state_query` writes.
DIALECTS = ("duckdb", "spark", "bigquery", "snowflake", "postgres")

#: Output columns of the state query, after the segment columns.
COLUMNS = (
    "replicate",
    "cells",
    "class",
    "bucket",
    "count",
    "weight",
    "sum_score",
    "sum_target",
    "sum_dev",
    "sum_dev_sq",
    "sum_dev_target",
    "sum_brier",
    "sum_log_loss",
)

#: |row sum - 1| allowed for K probability columns (jaxcal's SIMPLEX_ATOL).
SIMPLEX_TOLERANCE = 1e-3
#: The log loss's clip: float32's eps, as jaxcal's default (float32) state computes it.
LOG_LOSS_EPS = float(np.finfo(np.float32).eps)
_M32 = 2**32


def _sqlglot():
    try:
        import sqlglot
    except ImportError as err:  # pragma: no cover - the extra is installed in CI
        raise ImportError("jaxcal.sql needs sqlglot: pip install 'jaxcal[sql]'.") from err
    return sqlglot


def _q(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"column names must be non-empty strings; got {name!r}.")
    return '"' + name.replace('"', '""') + '"'


def _names(value: str | Sequence[str] | None, what: str) -> list[str]:
    if value is None:
        return []
    names = [value] if isinstance(value, str) else list(value)
    for n in names:
        _q(n)
    if what and not names:
        raise ValueError(f"`{what}` names no column.")
    return names


def _layout(probs, n_bins, fine, replicates, seed, closed):
    prob_cols = _names(probs, "probs")
    if isinstance(n_bins, bool) or not isinstance(n_bins, int) or n_bins < 1:
        raise ValueError(f"`n_bins` must be an integer >= 1; got {n_bins!r}.")
    r = n_bins if fine is None else fine
    if isinstance(r, bool) or not isinstance(r, int) or r < 1 or r % n_bins:
        raise ValueError(
            f"`fine` must be a multiple of `n_bins` ({n_bins}), the buckets kept; got {fine!r}."
        )
    if isinstance(replicates, bool) or not isinstance(replicates, int) or replicates < 0:
        raise ValueError(f"`replicates` must be an integer >= 0; got {replicates!r}.")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(
            f"`seed` must be an integer in [0, 2**32) (jax.random.key(seed)); got {seed!r}."
        )
    if closed not in ("right", "left"):
        raise ValueError(f"`closed` must be 'right' or 'left'; got {closed!r}.")
    if len(prob_cols) == 2:
        raise ValueError(
            "`probs` names 2 columns: give the positive class's column alone for a binary "
            "model, or K >= 3 columns."
        )
    return prob_cols, r


def _bucket(x: str, r: int, closed: str, float32: bool = False) -> str:
    """The bucket j of score ``x`` at R buckets, corrected against the edges j/R (float64,
    or rounded to float32 with ``float32``) when R is not a power of two (``x * R`` is
    then rounded)."""
    if closed == "right":
        j = f"LEAST(GREATEST(CAST(CEIL({x} * {r}) AS BIGINT) - 1, 0), {r - 1})"
    else:
        j = f"LEAST(CAST(FLOOR({x} * {r}) AS BIGINT), {r - 1})"
    if r & (r - 1) == 0:
        return j
    low, high = f"(CAST(({j}) AS DOUBLE) / {r})", f"(CAST(({j}) + 1 AS DOUBLE) / {r})"
    if float32:
        low, high = f"CAST({low} AS REAL)", f"CAST({high} AS REAL)"
    below, above = ("<=", ">") if closed == "right" else ("<", ">=")
    return (
        f"(CASE WHEN ({j}) > 0 AND {x} {below} {low} THEN ({j}) - 1 "
        f"WHEN ({j}) < {r - 1} AND {x} {above} {high} THEN ({j}) + 1 ELSE ({j}) END)"
    )


def _hash_layers(rows: str, columns: str, h: str, key: str) -> tuple[list[tuple[str, str]], str]:
    """CTEs computing the Poisson multiplicity ``m`` of each row: (name, body) pairs."""
    ctes, prev, step = [], rows, 0

    def layer(expr):
        nonlocal prev, step
        name = f"_jc_h{step}"
        ctes.append((name, f"SELECT {columns}, _jc_key, {expr} AS _jc_x FROM {prev}"))
        prev, step = name, step + 1

    def mix():
        for i, shift in enumerate(SHIFTS):
            layer(f"XOR(_jc_x, (_jc_x >> {shift}))")
            if i < 2:
                layer(f"((_jc_x * {MULTIPLIERS[i]}) % {_M32})")

    layer(f"(({h} + ({key} % {_M32})) % {_M32})")
    mix()
    layer(f"((_jc_x + ({key} >> 32)) % {_M32})")
    mix()
    cases = " ".join(f"WHEN _jc_x < {int(t)} THEN {j}" for j, t in enumerate(_THRESHOLDS))
    ctes.append(
        (
            f"_jc_h{step}",
            f"SELECT {columns}, CASE {cases} ELSE {len(_THRESHOLDS)} END AS _jc_m FROM {prev}",
        )
    )
    return ctes, f"_jc_h{step}"


def state_query(
    table: str,
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
    float32: bool = False,
    dialect: str = "duckdb",
) -> str:
    """The SQL computing the state table of the predictions in ``table``.

    The result has the columns of schema ``jaxcal.state-table/1``
    (:func:`jaxcal.streaming.to_table`): the ``segments`` columns under their names, then
    ``replicate`` (-1: the state; b: replicate b), ``cells``, ``class``, ``bucket``,
    ``count``, the weight and the sums. :func:`jaxcal.streaming.from_table` reads it with
    ``n_bins``, ``num_classes``, ``resolution=fine``, ``binary`` and ``segments``
    (:func:`~jaxcal.sql.state` passes them).

    Args:
      table: the table (or view, or ``schema.table``) of predictions, one row each.
      probs: one column of positive-class probabilities (a binary model), or K >= 3
        columns of class probabilities in class order (rows summing to 1 within 1e-3).
      labels: the label column (integers: 0/1, or 0..K-1).
      weights: an optional column of non-negative sample weights (rows of weight 0 are
        left out, as the in-memory state leaves them).
      segments: columns whose values split the rows into segments, one state each.
      n_bins: M, the bins of the metrics.
      fine: R, the buckets kept (a multiple of M; default M). A power of two (e.g. 4096,
        with M = 16) makes every bucket exact in any engine; otherwise the bucket is
        corrected against the float64 edges j / R, as jaxcal bins float64 scores.
      replicates: B Poisson-bootstrap replicates (kept at M buckets), drawn by the
        ``"hash"`` generator of :func:`jaxcal.streaming.poisson_update` from ``row_key``
        and ``seed``: the same weights as ``poisson_update(..., key=jax.random.key(seed),
        generator="hash")`` with ``ids`` = the row keys.
      seed: the bootstrap's seed in [0, 2**32).
      row_key: the column of non-negative integer row ids below 2**63, unique per row
        (required with ``replicates``).
      closed: ``"right"`` or ``"left"``, the bin-edge convention.
      log_loss_eps: the log loss clips ``p_y`` to ``[eps, 1 - eps]`` (default float32's
        eps, as jaxcal's default state; 2**-52 for a float64 state).
      float32: the probability columns hold float32 (``REAL``) values: with R not a power
        of two, compare them with the edges rounded to float32, as jaxcal's default
        (float32) state does (a score equal to ``float32(j / R)`` then lands where jaxcal
        puts it). BigQuery and Snowflake have no float32 type (their ``REAL`` is float64).
      dialect: one of ``DIALECTS``: duckdb, spark, bigquery, snowflake, postgres.

    Returns:
      The query's text in ``dialect``. Run :func:`~jaxcal.sql.check_query` first: this
      query assumes rows that pass it.

    Example:
      >>> from jaxcal import sql
      >>> q = sql.state_query("preds", probs="p", labels="y", n_bins=10)
      >>> q.startswith("WITH") and "GROUP BY" in q
      True
      >>> "SHIFTRIGHT" in sql.state_query("preds", probs="p", labels="y", replicates=4,
      ...                                 row_key="id", dialect="spark")
      True
    """
    sqlglot = _sqlglot()
    if dialect not in DIALECTS:
        raise ValueError(f"`dialect` must be one of {DIALECTS}; got {dialect!r}.")
    prob_cols, r = _layout(probs, n_bins, fine, replicates, seed, closed)
    segs = _names(segments, "")
    clash = [s for s in segs if s in COLUMNS or s.startswith("_jc_")]
    if clash:
        raise ValueError(f"segment columns {clash} clash with the state table's columns.")
    if replicates and row_key is None:
        raise ValueError("`row_key` (a unique integer id column) is needed with `replicates`.")
    binary = len(prob_cols) == 1
    k = 2 if binary else len(prob_cols)
    seg_sel = "".join(f"{_q(s)}, " for s in segs)
    ps = [f"_jc_p{i}" for i in range(k)]
    if binary:
        p_sel = f"1 - {_q(prob_cols[0])} AS _jc_p0, {_q(prob_cols[0])} AS _jc_p1"
    else:
        p_sel = ", ".join(f"{_q(c)} AS {p}" for c, p in zip(prob_cols, ps, strict=True))
    w_sel = f"{_q(weights)}" if weights else "1"
    key_sel = f", CAST({_q(row_key)} AS BIGINT) AS _jc_key" if replicates else ""
    where = f" WHERE {_q(weights)} > 0" if weights else ""
    ctes = [
        (
            "_jc_base",
            f"SELECT {seg_sel}{_q(labels)} AS _jc_y, {w_sel} AS _jc_w, {p_sel}{key_sel} "
            f"FROM {table}{where}",
        )
    ]
    conf = f"GREATEST({', '.join(ps)})"
    pred = " ".join(
        f"WHEN {' AND '.join(f'{ps[i]} >= {ps[j]}' for j in range(k) if j != i)} THEN {i}"
        for i in range(k - 1)
    )
    pred = f"CASE {pred} ELSE {k - 1} END"
    if binary:
        brier = "(CASE WHEN _jc_y = 1 THEN _jc_p0 ELSE _jc_p1 END)"
        brier = f"{brier} * {brier}"
        p_true = "(CASE WHEN _jc_y = 1 THEN _jc_p1 ELSE _jc_p0 END)"
    else:
        brier = " + ".join(
            f"({p} - CASE WHEN _jc_y = {i} THEN 1 ELSE 0 END) * "
            f"({p} - CASE WHEN _jc_y = {i} THEN 1 ELSE 0 END)"
            for i, p in enumerate(ps)
        )
        p_true = "(CASE " + " ".join(f"WHEN _jc_y = {i} THEN {p}" for i, p in enumerate(ps))
        p_true += " END)"
    eps = repr(float(log_loss_eps))
    log_loss = f"-LN(LEAST(GREATEST({p_true}, {eps}), 1 - {eps}))"
    row_cols = f"{seg_sel}_jc_y, _jc_w, {', '.join(ps)}"
    ctes.append(
        (
            "_jc_rows",
            f"SELECT {row_cols}{', _jc_key' if replicates else ''}, {conf} AS _jc_conf, "
            f"{pred} AS _jc_pred, {brier} AS _jc_brier, {log_loss} AS _jc_ll FROM _jc_base",
        )
    )
    carried = f"{row_cols}, _jc_conf, _jc_pred, _jc_brier, _jc_ll"
    weighted = f"SELECT {carried}, -1 AS _jc_rep, _jc_w AS _jc_wm FROM _jc_rows"
    if replicates:
        words = " UNION ALL ".join(
            f"SELECT {b} AS _jc_rep, {replicate_word(seed, b)} AS _jc_h" for b in range(replicates)
        )
        ctes.append(
            (
                "_jc_rk",
                f"SELECT {carried}, _jc_key, _jc_r._jc_rep, _jc_r._jc_h AS _jc_x FROM _jc_rows "
                f"CROSS JOIN ({words}) AS _jc_r",
            )
        )
        layers, last = _hash_layers("_jc_rk", f"{carried}, _jc_rep", "_jc_x", "_jc_key")
        ctes += layers
        weighted += (
            f" UNION ALL SELECT {carried}, _jc_rep, _jc_w * _jc_m AS _jc_wm FROM {last} "
            "WHERE _jc_m > 0"
        )
    ctes.append(("_jc_weighted", weighted))
    cell_tab = " UNION ALL ".join(
        [f"SELECT 'class' AS cells, {i} AS _jc_c" for i in range(k)] + ["SELECT 'top', -1"]
    )
    pick = "CASE _jc_c " + " ".join(f"WHEN {i} THEN {p}" for i, p in enumerate(ps)) + " END"
    ctes.append(
        (
            "_jc_cells",
            f"SELECT {seg_sel}_jc_rep, _jc_t.cells, _jc_wm, "
            f"CASE WHEN _jc_c < 0 THEN _jc_pred ELSE _jc_c END AS _jc_class, "
            f"CASE WHEN _jc_c < 0 THEN _jc_conf ELSE {pick} END AS _jc_s, "
            f"CASE WHEN _jc_c < 0 THEN (CASE WHEN _jc_y = _jc_pred THEN 1 ELSE 0 END) "
            f"ELSE (CASE WHEN _jc_y = _jc_c THEN 1 ELSE 0 END) END AS _jc_tg, "
            f"CASE WHEN _jc_c < 0 THEN _jc_brier ELSE 0 END AS _jc_brier, "
            f"CASE WHEN _jc_c < 0 THEN _jc_ll ELSE 0 END AS _jc_ll "
            f"FROM _jc_weighted CROSS JOIN ({cell_tab}) AS _jc_t",
        )
    )
    fine_j = _bucket("_jc_s", r, closed, float32)
    if replicates and r != n_bins:
        coarse = _bucket("_jc_s", n_bins, closed, float32)
        j = f"CASE WHEN _jc_rep < 0 THEN {fine_j} ELSE {coarse} END"
    else:
        j = fine_j
    ctes.append(("_jc_binned", f"SELECT *, {j} AS _jc_j FROM _jc_cells"))
    res = f"(CASE WHEN _jc_rep < 0 THEN {r} ELSE {n_bins} END)" if replicates else str(r)
    anchor = (
        f"(CASE WHEN _jc_j = 0 THEN 0.0 WHEN _jc_j = {res} - 1 THEN 1.0 "
        f"ELSE (CAST(_jc_j AS DOUBLE) + 0.5) / {res} END)"
    )
    ctes.append(
        (
            "_jc_dev",
            f"SELECT *, CASE WHEN cells = 'top' THEN 0.0 ELSE _jc_s - {anchor} END AS _jc_d "
            "FROM _jc_binned",
        )
    )
    group = f"{seg_sel}_jc_rep, cells, _jc_class, _jc_j"
    sums = {
        "weight": "_jc_wm",
        "sum_score": "_jc_wm * _jc_s",
        "sum_target": "_jc_wm * _jc_tg",
        "sum_dev": "_jc_wm * _jc_d",
        "sum_dev_sq": "_jc_wm * _jc_d * _jc_d",
        "sum_dev_target": "_jc_wm * _jc_d * _jc_tg",
        "sum_brier": "_jc_wm * _jc_brier",
        "sum_log_loss": "_jc_wm * _jc_ll",
    }
    body = (  # fixed output types in every engine: int32 keys, int64 count, float64 sums
        f'SELECT {seg_sel}CAST(_jc_rep AS INTEGER) AS "replicate", cells, '
        'CAST(_jc_class AS INTEGER) AS "class", CAST(_jc_j AS INTEGER) AS "bucket", '
        'CAST(COUNT(*) AS BIGINT) AS "count", '
        + ", ".join(f'CAST(SUM({e}) AS DOUBLE) AS "{n}"' for n, e in sums.items())
        + f" FROM _jc_dev GROUP BY {group}"
    )
    text = "WITH " + ", ".join(f"{n} AS ({b})" for n, b in ctes) + " " + body
    return sqlglot.transpile(text, read="duckdb", write=dialect)[0]


def check_query(
    table: str,
    *,
    probs: str | Sequence[str],
    labels: str,
    weights: str | None = None,
    segments: str | Sequence[str] = (),
    row_key: str | None = None,
    dialect: str = "duckdb",
) -> str:
    """The SQL counting, in one row, the rows each input check refuses.

    Columns: ``rows``; ``null:<col>`` per column used (NULLs); ``range:<col>`` per
    probability column (outside [0, 1] or NaN); ``sum`` (K columns: rows whose sum is not
    1 within 1e-3); ``label`` (labels that are not integers in [0, K)); ``weight``
    (negative, NaN or infinite weights); ``key`` (negative row keys). :func:`~jaxcal.sql.state`
    runs it and refuses the table naming every non-zero count.

    Example:
      >>> from jaxcal import sql
      >>> "null:p" in sql.check_query("preds", probs="p", labels="y")
      True
    """
    sqlglot = _sqlglot()
    if dialect not in DIALECTS:
        raise ValueError(f"`dialect` must be one of {DIALECTS}; got {dialect!r}.")
    prob_cols = _names(probs, "probs")
    k = 2 if len(prob_cols) == 1 else len(prob_cols)
    used = [*prob_cols, labels, *_names(weights, ""), *_names(segments, ""), *_names(row_key, "")]

    def count(cond: str, name: str) -> str:
        return f"SUM(CASE WHEN {cond} THEN 1 ELSE 0 END) AS {_q(name)}"

    parts = ['COUNT(*) AS "rows"']
    parts += [count(f"{_q(c)} IS NULL", f"null:{c}") for c in dict.fromkeys(used)]
    parts += [count(f"NOT ({_q(c)} >= 0 AND {_q(c)} <= 1)", f"range:{c}") for c in prob_cols]
    if len(prob_cols) > 1:
        total = " + ".join(_q(c) for c in prob_cols)
        parts.append(count(f"NOT (ABS({total} - 1) <= {SIMPLEX_TOLERANCE})", "sum"))
    y = _q(labels)
    parts.append(count(f"NOT ({y} >= 0 AND {y} < {k} AND {y} = FLOOR({y}))", "label"))
    if weights:
        parts.append(count(f"NOT ({_q(weights)} >= 0 AND {_q(weights)} <= 1e308)", "weight"))
    if row_key:
        parts.append(count(f"{_q(row_key)} < 0", "key"))
    text = f"SELECT {', '.join(parts)} FROM {table}"
    return sqlglot.transpile(text, read="duckdb", write=dialect)[0]


def problems(counts: dict[str, Any], table: str, k: int) -> list[str]:
    """Messages for the non-zero counts of :func:`check_query`'s row."""
    out = []
    for name, value in counts.items():
        n = int(value or 0)
        if name == "rows" or n == 0:
            continue
        kind, _, col = name.partition(":")
        what = {
            "null": f"{n:,} NULL values in column {col!r} (drop or fill them)",
            "range": f"{n:,} values outside [0, 1] or NaN in probability column {col!r}",
            "sum": f"{n:,} rows whose probabilities do not sum to 1 within {SIMPLEX_TOLERANCE}",
            "label": f"{n:,} labels that are not integers in [0, {k})",
            "weight": f"{n:,} negative, NaN or infinite weights",
            "key": f"{n:,} negative row keys",
        }[kind]
        out.append(what)
    return out


def layout_of(probs, n_bins, fine) -> dict:
    """The ``from_table`` keywords of a query's result."""
    prob_cols = _names(probs, "probs")
    binary = len(prob_cols) == 1
    return {
        "n_bins": n_bins,
        "num_classes": 2 if binary else len(prob_cols),
        "resolution": n_bins if fine is None else fine,
        "binary": binary,
        "replicate_resolution": n_bins,
    }

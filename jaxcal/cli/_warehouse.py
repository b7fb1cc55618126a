"""``jaxcal report --sql DB --table T`` and ``jaxcal report --state FILE``: the streamed
report from a state table.

``--sql`` runs :func:`jaxcal.sql.state` in DuckDB (the engine reads the rows; jaxcal gets
the state table: fine buckets and, with ``--resamples B``, B Poisson-bootstrap replicates
drawn by the ``"hash"`` generator from ``--row-key``, default DuckDB's ``rowid``);
``--state OUT.parquet`` beside it stores that table. ``--state FILE`` alone reads a stored
table (:func:`jaxcal.streaming.from_table`). The numbers are those of the streamed report
(``jaxcal/cli/_parquet.py``: ``state_metrics()``, ``_print()``); the replicates are kept at
``--bins`` bins, so the equal-mass ECE and CORP rows, which read the fine buckets, have no
interval here. A table with segment columns reports each segment as a column.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from functools import partial
from pathlib import Path

import jax
import numpy as np

import jaxcal
from jaxcal import streaming
from jaxcal.cli._format import _json_safe, write_json
from jaxcal.cli._io import InputError
from jaxcal.cli._parquet import MIN_RESOLUTION, POINT_ONLY, _columns, _print, state_metrics
from jaxcal.cli._report import CONFIDENCE, ROW_ORDER

#: Rows read from the fine buckets: no interval from replicates kept at ``--bins`` bins.
BUCKET_ROWS = ("ece_quantile", "corp_brier", "corp_log")


@partial(jax.jit, static_argnums=1)
def _replicate_metrics(reps, n_bins):
    return jax.vmap(lambda rep: state_metrics(rep, n_bins))(reps)


def _table_from_sql(args: argparse.Namespace):
    from jaxcal import sql
    from jaxcal.sql._duckdb import connect

    try:
        con = connect(args.sql)
        names = con.sql(f"SELECT * FROM {args.table} LIMIT 0").columns
    except Exception as err:  # duckdb.Error, or a bad path: one line, exit code 2
        why = " ".join(str(err).split())  # one line
        raise InputError(f"{args.sql}: cannot read table {args.table!r} ({why}).") from err
    probs, labels = _columns(Path(f"{args.sql}:{args.table}"), list(names), args)
    row_key = args.row_key or "rowid"
    if args.resamples and row_key not in names:
        try:
            con.sql(f"SELECT rowid FROM {args.table} LIMIT 0")
        except Exception as err:
            raise InputError(
                f"{args.sql}: {args.table!r} has no rowid (a view or a file): name a unique "
                "integer column with --row-key, or use --resamples 0."
            ) from err
    resolution = args.bins * math.ceil(MIN_RESOLUTION / args.bins)
    try:
        return sql.state(
            con,
            args.table,
            probs=probs[0] if len(probs) == 1 else probs,
            labels=labels,
            n_bins=args.bins,
            fine=resolution,
            replicates=args.resamples,
            seed=args.seed,
            row_key=row_key if args.resamples else None,
            as_table=True,
        )
    except ValueError as err:
        raise InputError(f"{args.sql}: {' '.join(str(err).split())}") from err


def _states(table, source: str) -> list[tuple[str, object]]:
    try:
        out = streaming.from_table(table)
    except (ValueError, OSError) as err:
        raise InputError(f"{source}: not a jaxcal state table ({err}).") from err
    if isinstance(out, dict):
        return [(f"{v}", s) for v, s in sorted(out.items(), key=lambda kv: repr(kv[0]))]
    return [(Path(source).stem, out)]


def _model(name: str, value, source: str, n_bins: int) -> dict:
    state, reps = (value, None) if isinstance(value, streaming.CalibrationState) else value[:2]
    if state.resolution % n_bins:
        raise InputError(f"{source}: --bins {n_bins} must divide the table's {state.resolution}.")
    point = jax.device_get(state_metrics(state, n_bins))
    values = jax.device_get(_replicate_metrics(reps, n_bins)) if reps is not None else None
    metrics = {}
    for key in ROW_ORDER:
        if key not in point:
            continue
        low = high = None
        interval = key not in POINT_ONLY and not key.startswith(BUCKET_ROWS)
        if values is not None and interval:
            q = (1 - CONFIDENCE) / 2
            low, high = (float(v) for v in np.quantile(values[key], [q, 1 - q]))
        metrics[key] = {"value": float(point[key]), "low": low, "high": high}
    return {
        "name": name,
        "source": source,
        "n": int(np.asarray(state.top_count).sum()),
        "num_classes": state.num_classes,
        "binary": state.binary,
        "inputs": "state table",
        "metrics": metrics,
        "tests": {},
        "fit": None,
        "ece_quantile_bound": float(streaming.equal_mass_ece(state, n_bins).bound),
    }, (0 if reps is None else int(reps.totals.shape[0]), state.resolution)


def report_warehouse(args: argparse.Namespace) -> int:
    """``jaxcal report`` with ``--sql`` (and ``--table``) or ``--state``."""
    for option, given in (("--plot", args.plot), ("--by", args.by), ("--fit", args.fit)):
        if given:
            raise InputError(f"{option} needs the rows; it is not available with --sql/--state.")
    if args.files or args.demo:
        raise InputError("--sql and --state report a table: give no FILE and no --demo.")
    if args.sql is not None:
        if not args.table:
            raise InputError("--sql needs --table NAME (a table, view or DuckDB FROM clause).")
        table = _table_from_sql(args)
        source = f"{args.sql}:{args.table}"
        if args.state is not None:
            import pyarrow.parquet as pq

            pq.write_table(table, str(args.state))
    else:
        if args.table:
            raise InputError("--table goes with --sql.")
        source = str(args.state)
        if not Path(source).exists():
            raise InputError(f"--state {source}: no such file.")
        table = source
        try:
            import pyarrow.parquet as pq

            stored = (pq.read_schema(source).metadata or {}).get(b"seed", b"").decode()
        except (OSError, ValueError) as err:
            raise InputError(f"--state {source}: not a Parquet file ({err}).") from err
        if stored:  # the seed the replicates were drawn with, not --seed
            args.seed = int(stored)
    models, resamples, resolution = [], 0, 0
    for name, value in _states(table, source):
        model, (resamples, resolution) = _model(name, value, source, args.bins)
        models.append(model)
    settings = {
        "n_bins": args.bins,
        "resamples": resamples,
        "confidence": CONFIDENCE,
        "seed": args.seed,
        "interval": "Poisson bootstrap (hash generator, keyed by row key)" if resamples else None,
        "folds": None,
        "streamed": True,
        "resolution": resolution,
    }
    document = _json_safe(
        {
            "schema": "jaxcal.report/1",
            "jaxcal_version": jaxcal.__version__,
            "settings": settings,
            "models": models,
        }
    )
    if args.json == "-":
        json.dump(document, sys.stdout, indent=2)
        print()
    else:
        _print(models, settings, sys.stdout, "a state table", args.harness)
        print(
            "  Computed from the state table alone (sums per bucket): the rows never left "
            f"{'DuckDB' if args.sql else 'the engine'}.\n  Replicates are kept at --bins bins: "
            "the equal-mass ECE and CORP rows have no interval.",
            file=sys.stdout,
        )
    write_json(args.json, document)
    return 0

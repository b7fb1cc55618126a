"""Calibration where the data lives: the state computed by a SQL engine.

:func:`~jaxcal.sql.state_query` writes the SQL that turns a table of predictions into the
state table of :func:`jaxcal.streaming.to_table` (schema ``jaxcal.state-table/1``) in
DuckDB, Spark SQL, BigQuery, Snowflake or PostgreSQL, Poisson-bootstrap replicates
included (drawn by the ``"hash"`` generator of :func:`jaxcal.streaming.poisson_update`, so
every engine draws the weights jaxcal draws); :func:`~jaxcal.sql.check_query` counts the
rows the checks refuse; :func:`~jaxcal.sql.state` runs both in DuckDB and returns the
state. The engine reads every row; jaxcal receives a few thousand sums. Needs the ``sql``
extra (duckdb, sqlglot, pyarrow), imported when called.
"""

from jaxcal.sql._duckdb import state
from jaxcal.sql._query import DIALECTS as DIALECTS  # the dialects state_query writes
from jaxcal.sql._query import check_query, state_query

__all__ = ["check_query", "state", "state_query"]

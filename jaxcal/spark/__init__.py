"""Calibration on Spark: the state computed per partition and merged by Spark.

:func:`~jaxcal.spark.state` maps every partition of a DataFrame to its partial state table
with ``mapInArrow`` (DuckDB runs :func:`jaxcal.sql.state_query` on the partition's Arrow
batches inside the executor: the same SQL, hence the same numbers, as every other engine),
and merges the partial tables with Spark's own ``groupBy().sum()``: only a few thousand
sums per partition are shuffled, never the rows (a grouped pandas UDF would shuffle every
row). Needs the ``spark`` extra (pyspark, duckdb, sqlglot, pyarrow) and a Java runtime.
"""

from jaxcal.spark._state import state

__all__ = ["state"]

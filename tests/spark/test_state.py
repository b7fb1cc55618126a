"""``jaxcal.spark.state`` on a local Spark session (one per test run): partial states per
partition merged by ``groupBy().sum()`` equal DuckDB's state of the same rows and the
in-memory state; the checks' counts are summed over partitions. Slow: a local Spark
session starts in ~30-80 s on CI's 2 cores (measured 77 s under load)."""

import os
import pathlib
import shutil
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pyspark = pytest.importorskip("pyspark")
pd = pytest.importorskip("pandas")
pytest.importorskip("duckdb")

import jaxcal  # noqa: E402
from jaxcal import spark, sql, streaming  # noqa: E402
from jaxcal.streaming._state import value_of  # noqa: E402

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    # Spark starts its JVM with subprocess (fork, then exec of java at once): JAX's fork
    # hook warns that a fork in a multithreaded process may deadlock, which holds only
    # for a child that keeps running Python; in the full suite JAX is already running.
    pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]


@pytest.fixture(scope="session")
def session():
    from pyspark.sql import SparkSession

    if shutil.which("java") is None:
        pytest.skip("no Java runtime: .ci/run installs default-jre-headless")
    root = str(pathlib.Path(jaxcal.__file__).parent.parent)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    s = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .getOrCreate()
    )
    yield s
    s.stop()


def _same(a, b):
    for name in ("top_count", "class_count"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    for x, y in zip(value_of(a), value_of(b), strict=True):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        np.testing.assert_allclose(x, y, rtol=2e-5, atol=2e-5 * max(1.0, np.abs(y).max()))


def _frame(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.uniform(size=n).astype(np.float32)
    return pd.DataFrame(
        {
            "p": p,
            "y": (rng.uniform(size=n) < p).astype(np.int64),
            "w": rng.exponential(size=n),
            "g": np.array(["a", "b"])[rng.integers(0, 2, n)],
            "id": np.arange(n),
        }
    )


def test_spark_state_equals_duckdb_and_the_streaming_state(session):
    pdf = _frame()
    df = session.createDataFrame(pdf).repartition(3)
    opts = dict(probs="p", labels="y", weights="w", n_bins=4, fine=64)
    got = spark.state(df, **opts, segments="g", replicates=4, row_key="id", seed=5)
    want = sql.state(None, pdf, **opts, segments="g", replicates=4, row_key="id", seed=5)
    assert sorted(got) == ["a", "b"]
    for v in ("a", "b"):
        _same(got[v].state, want[v].state)
        _same(got[v].replicates, want[v].replicates)
        m = (pdf.g == v).to_numpy()
        ref = streaming.init(4, 2, binary=True, resolution=64)
        ref = streaming.update(ref, pdf.p[m].to_numpy(), pdf.y[m].to_numpy(), pdf.w[m].to_numpy())
        _same(got[v].state, ref)
        reps = streaming.poisson_update(
            streaming.poisson_init(4, 2, 4, binary=True),
            pdf.p[m].to_numpy(),
            pdf.y[m].to_numpy(),
            jnp.asarray(pdf.id[m].to_numpy()),
            key=jax.random.key(5),
            weights=pdf.w[m].to_numpy(),
            generator="hash",
        )
        _same(got[v].replicates, reps)
    table = spark.state(df, probs="p", labels="y", n_bins=4, as_dataframe=True)
    assert set(table.columns) >= {"replicate", "cells", "class", "bucket", "count", "weight"}


def test_bad_rows_are_counted_over_partitions(session):
    pdf = _frame(600, 1)
    pdf.loc[::100, "y"] = 3  # 6 rows, spread over the partitions
    df = session.createDataFrame(pdf).repartition(3)
    with pytest.raises(ValueError, match=r"6 labels that are not integers in \[0, 2\)"):
        spark.state(df, probs="p", labels="y")
    with pytest.raises(ValueError, match="no columns"):
        spark.state(df, probs="q", labels="y")

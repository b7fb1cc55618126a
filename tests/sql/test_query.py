"""``state_query`` and ``check_query``: every dialect's text parses in that dialect, and
the text transpiled back to DuckDB computes the same table as DuckDB's own."""

import numpy as np
import pytest

sqlglot = pytest.importorskip("sqlglot")
duckdb = pytest.importorskip("duckdb")

from jaxcal import sql  # noqa: E402

CASES = {
    "binary": dict(probs="p", labels="y"),
    "k3_weights_segments": dict(
        probs=["a", "b", "c"], labels="y3", weights="w", segments=("g", "h")
    ),
    "replicates": dict(probs="p", labels="y", replicates=3, row_key="id", seed=7, fine=60),
}


@pytest.fixture(scope="module")
def con():
    rng = np.random.default_rng(0)
    n = 300
    p = rng.uniform(size=n).astype(np.float32)
    abc = rng.dirichlet(np.ones(3), n)
    c = duckdb.connect()
    c.execute(
        "CREATE TABLE preds AS SELECT * FROM (SELECT unnest(?) AS p, unnest(?) AS y, "
        "unnest(?) AS a, unnest(?) AS b, unnest(?) AS c, unnest(?) AS y3, unnest(?) AS w, "
        "unnest(?) AS g, unnest(?) AS h, unnest(?) AS id)",
        [
            p.tolist(),
            (rng.uniform(size=n) < p).astype(int).tolist(),
            *abc.T.tolist(),
            rng.integers(0, 3, n).tolist(),
            rng.exponential(size=n).tolist(),
            rng.integers(0, 2, n).tolist(),
            [f"s{i % 3}" for i in range(n)],
            list(range(n)),
        ],
    )
    return c


def _rows(con, text):
    return sorted(con.execute(text).fetchall(), key=repr)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dialect", sql.DIALECTS)
def test_every_dialect_parses_and_means_the_same(con, case, dialect):
    options = dict(n_bins=5, **CASES[case])
    text = sql.state_query("preds", dialect=dialect, **options)
    tree = sqlglot.parse_one(text, read=dialect)  # the dialect's own parser accepts it
    assert tree.find(sqlglot.exp.Group) is not None
    if dialect == "duckdb":
        return
    back = sqlglot.transpile(text, read=dialect, write="duckdb")[0]
    want = _rows(con, sql.state_query("preds", **options))
    got = _rows(con, back)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(
            [float(x) for x in g if not isinstance(x, str)],
            [float(x) for x in w if not isinstance(x, str)],
            rtol=1e-12,
            atol=1e-12,
        )


@pytest.mark.parametrize("dialect", sql.DIALECTS)
def test_check_query_parses(dialect):
    text = sql.check_query(
        "t", probs=["a", "b", "c"], labels="y", weights="w", row_key="id", dialect=dialect
    )
    sqlglot.parse_one(text, read=dialect)


def test_hash_operations_keep_their_grouping():
    """xor and shifts share one precedence level in PostgreSQL: the parentheses stay."""
    text = sql.state_query(
        "t", probs="p", labels="y", replicates=2, row_key="id", dialect="postgres"
    )
    assert "# (_jc_x >> 16)" in text and "% 4294967296" in text


@pytest.mark.parametrize(
    "options, match",
    [
        (dict(probs="p", labels="y", fine=7, n_bins=2), "`fine` must be a multiple"),
        (dict(probs=["a", "b"], labels="y"), "names 2 columns"),
        (dict(probs="p", labels="y", replicates=2), "`row_key`"),
        (dict(probs="p", labels="y", seed=-1), "`seed`"),
        (dict(probs="p", labels="y", dialect="oracle"), "`dialect`"),
        (dict(probs="p", labels="y", segments="count"), "clash"),
        (dict(probs="p", labels="y", closed="both"), "`closed`"),
    ],
)
def test_bad_arguments(options, match):
    with pytest.raises(ValueError, match=match):
        sql.state_query("t", **options)

"""Dask: a LocalCluster of two worker processes maps the Parquet stream over a dataset's
files and merges; the numbers are those of one process reading everything."""

import os
from pathlib import Path

import jax
import numpy as np
import pytest

from jaxcal import streaming
from tests.helpers import assert_close

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
distributed = pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # two worker processes start and compile: ~30 s on a loaded machine
def test_local_cluster_of_two_processes_equals_one_process(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    n = 5000
    p = rng.random(n).astype(np.float32)
    y = (rng.random(n) < p**1.2).astype(np.int32)
    for i, part in enumerate(np.array_split(np.arange(n), 5)):  # files of unequal sizes
        part = part[: len(part) - 37 * i]
        pq.write_table(pa.table({"p": p[part], "y": y[part]}), tmp_path / f"part-{i}.parquet")
    key = jax.random.key(11)
    options = dict(probs="p", labels="y", n_bins=16, resolution=1024, n_replicates=8)
    one = streaming.parquet_state(tmp_path, key=key, batch_rows=512, **options)
    # The workers import this checkout's jaxcal.
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        assert len(client.scheduler_info()["workers"]) == 2
        out = streaming.dask_state(tmp_path, client=client, key=key, batch_rows=512, **options)
    assert out.rows == one.rows
    np.testing.assert_array_equal(out.state.top_count, one.state.top_count)
    np.testing.assert_array_equal(out.state.class_count, one.state.class_count)
    np.testing.assert_array_equal(out.replicates.class_count, one.replicates.class_count)
    got, want = streaming.compute(out.state), streaming.compute(one.state)
    for name in streaming.OUTPUTS:
        assert_close(got[name], want[name], err_msg=name)
    a = streaming.poisson_compute(out.replicates)["ece"]
    assert_close(a, streaming.poisson_compute(one.replicates)["ece"])


def test_dask_state_refuses_per_file_options(tmp_path):
    pytest.importorskip("dask")
    pq.write_table(pa.table({"p": np.array([0.2], np.float32), "y": [0]}), tmp_path / "a.parquet")
    with pytest.raises(ValueError, match="`first_id` is set per file"):
        streaming.dask_state(tmp_path, probs="p", labels="y", first_id=3)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no Parquet file"):
        streaming.dask_state(tmp_path / "empty", probs="p", labels="y")

"""Dask: the Parquet stream of each file of a dataset on a worker, merged by addition.

The state is a sum, so a dataset split into files is reduced as a tree of
:func:`~jaxcal.streaming.merge` calls over the per-file states; each file's rows keep their global row
numbers as Poisson-bootstrap ids (the offsets come from the Parquet footers), so the
numbers are those of one process reading everything (:func:`~jaxcal.streaming.parquet_state`). Needs the
optional extra ``jaxcal[dask]`` (``dask[distributed]``) and pyarrow.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from jaxcal.streaming._merge import merge
from jaxcal.streaming._parquet import ParquetStates, dataset, parquet_state


def _file_states(path: str, key_data, options: dict) -> ParquetStates:
    key = None if key_data is None else jax.random.wrap_key_data(key_data)
    out = parquet_state(path, key=key, **options)
    return jax.device_get(out)  # host arrays: they travel between processes as NumPy


def _merge(a: ParquetStates, b: ParquetStates) -> ParquetStates:
    reps = None
    if a.replicates is not None:
        reps = jax.tree_util.tree_map(np.add, a.replicates, b.replicates)
    return jax.device_get(ParquetStates(merge(a.state, b.state), reps, a.rows + b.rows))


def dask_state(
    source: Any, *, client: Any = None, key: jax.Array | None = None, **options: Any
) -> ParquetStates:
    """:func:`~jaxcal.streaming.parquet_state` of a dataset's files on a Dask cluster, merged.

    One task per file (with its first row number as ``first_id``), then a binary tree of
    merges; the result equals :func:`~jaxcal.streaming.parquet_state` of the whole dataset in one process
    (counts exactly, sums to float round-off; with ``n_replicates`` the same bootstrap
    weights, keyed by the global row number).

    Args:
      source: a folder of Parquet files, a list of paths or a ``pyarrow.dataset.Dataset``.
      client: a ``distributed.Client`` (default: dask's current scheduler).
      key: the bootstrap's key, as :func:`~jaxcal.streaming.parquet_state`.
      **options: the other keywords of :func:`~jaxcal.streaming.parquet_state` (``probs``, ``labels``,
        ``n_bins``, ``n_replicates``, ...), except ``first_id`` and ``progress``.

    Example:
      >>> import tempfile, numpy as np, pyarrow as pa, pyarrow.parquet as pq
      >>> import dask
      >>> from jaxcal import streaming
      >>> folder = tempfile.mkdtemp()
      >>> for i, (p, y) in enumerate([([0.1, 0.4], [0, 1]), ([0.8, 0.9], [1, 1])]):
      ...     pq.write_table(pa.table({"p": np.array(p, np.float32), "y": y}),
      ...                    f"{folder}/part-{i}.parquet")
      >>> with dask.config.set(scheduler="sync"):
      ...     out = streaming.dask_state(folder, probs="p", labels="y", n_bins=2)
      >>> out.rows, round(float(streaming.compute(out.state)["ece"]), 4)
      (4, 0.2)
    """
    try:
        import dask
    except ImportError as err:  # pragma: no cover - the extra is installed in CI
        raise ImportError("dask_state needs dask: pip install 'jaxcal[dask]'.") from err
    for name in ("first_id", "progress"):
        if name in options:
            raise ValueError(f"`{name}` is set per file by dask_state; leave it out.")
    data = dataset(source)
    fragments = list(data.get_fragments())
    if not fragments:
        raise ValueError(f"no Parquet file in {source}.")
    counts = [f.count_rows() for f in fragments]
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(int)
    key_data = None if key is None else np.asarray(jax.random.key_data(key))
    tasks = [
        dask.delayed(_file_states)(f.path, key_data, {**options, "first_id": int(o)})
        for f, o in zip(fragments, offsets, strict=True)
    ]
    while len(tasks) > 1:  # a binary tree of merges
        pairs = [dask.delayed(_merge)(a, b) for a, b in zip(tasks[::2], tasks[1::2], strict=False)]
        tasks = pairs + ([tasks[-1]] if len(tasks) % 2 else [])
    if client is not None:
        return client.compute(tasks[0]).result()
    return dask.compute(tasks[0])[0]

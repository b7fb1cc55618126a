"""Merging states across the processes of a multi-host JAX program.

On one host, ``jax.lax.psum`` inside ``shard_map`` merges the states of devices. Across
hosts (``jax.distributed.initialize``), :func:`~jaxcal.streaming.process_merge` sums every process's state
with one all-reduce: each process contributes its state as one row of a global array on
a mesh of one device per process, and a jitted sum over that axis (replicated output)
makes XLA insert the cross-process reduction (Gloo on CPU, NCCL on GPU).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxcal.streaming._merge import merge_stacked
from jaxcal.streaming._state import CalibrationState


def _sum_rows(tree: Any) -> Any:
    if isinstance(tree, CalibrationState):  # brought to one exponent first
        return merge_stacked(tree)
    return jax.tree_util.tree_map(lambda a: a.sum(0, dtype=a.dtype), tree)


def process_merge(tree: Any) -> Any:
    """The sum of a state (or any pytree of arrays, e.g. Poisson replicates) over all
    JAX processes, returned on every process; the identity with one process.

    Call it on every process (a collective), after ``jax.distributed.initialize``.

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal import streaming
      >>> s = streaming.update(streaming.init(2, 2, binary=True), jnp.array([0.3, 0.8]),
      ...                      jnp.array([0, 1]))
      >>> merged = streaming.process_merge(s)  # one process here: the state itself
      >>> int(merged.top_count.sum())
      2
    """
    if jax.process_count() == 1:
        return tree
    devices = [
        min(jax.local_devices(process_index=i), key=lambda d: d.id)
        for i in range(jax.process_count())
    ]
    mesh = Mesh(np.array(devices), ("processes",))
    rows = NamedSharding(mesh, PartitionSpec("processes"))
    replicated = NamedSharding(mesh, PartitionSpec())

    def global_rows(x):
        local = np.asarray(x)[None]
        return jax.make_array_from_process_local_data(rows, local, (len(devices), *local.shape[1:]))

    stacked = jax.tree_util.tree_map(global_rows, tree)
    summed = jax.jit(_sum_rows, out_shardings=replicated)(stacked)
    return jax.tree_util.tree_map(lambda a: jax.numpy.asarray(a.addressable_data(0)), summed)

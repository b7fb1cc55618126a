"""Merging states: :func:`~jaxcal.streaming.merge` of two, ``merge_stacked()`` of a stack of them.

States of different exponents (``jaxcal/streaming/_scale.py``) are brought to the larger
one before their arrays are added.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxcal.streaming._regression import RegressionState, regression_merge
from jaxcal.streaming._scale import common, rescaled, state_exponent
from jaxcal.streaming._state import CalibrationState, check_state


def merge(
    a: CalibrationState | RegressionState, b: CalibrationState | RegressionState
) -> CalibrationState | RegressionState:
    """The state of the concatenated streams: elementwise addition of every array.

    Two :class:`~jaxcal.streaming.CalibrationState` or two
    :class:`~jaxcal.streaming.RegressionState` of the same layout (for the latter a plain
    sum of every leaf, so ``jax.lax.psum`` is its merge always).

    Associative and commutative (up to float round-off in the sums; counts exactly), with
    :func:`~jaxcal.streaming.init` as the identity. States of different ``exponent`` (weights beyond
    ``[2**-65, 2**64)``) are first brought to the larger one (exact powers of two).
    Because it is otherwise a plain sum, ``jax.lax.psum(state, axis_name)`` is the same
    merge across the devices of a mesh axis whenever every device's ``exponent`` is 0
    (always, with weights inside that band); with extreme weights, gather the states
    (``jax.lax.all_gather``) and merge them (the ``reduce`` method of :class:`~jaxcal.streaming.CalibrationMetric` does).

    Example:
      >>> import jax.numpy as jnp
      >>> from jaxcal.streaming import compute, init, update
      >>> a = update(init(2, 2), jnp.array([[0.9, 0.1]]), jnp.array([0]))
      >>> b = update(init(2, 2), jnp.array([[0.2, 0.8]]), jnp.array([0]))
      >>> round(float(compute(merge(a, b))["ece"]), 4)  # as one batch of both rows
      0.35
    """
    if isinstance(a, RegressionState) or isinstance(b, RegressionState):
        return regression_merge(a, b)
    a, b = check_state(a, "a"), check_state(b, "b")
    if _layout(a) != _layout(b):
        raise ValueError(
            "`a` and `b` must come from init with the same n_bins, num_classes, closed, "
            f"binary and resolution; got {_layout(a)} and {_layout(b)}."
        )
    if a.dtype != b.dtype:
        raise ValueError(f"`a` and `b` must have the same dtype; got {a.dtype} and {b.dtype}.")
    return _merge_kernel(a, b)


@jax.jit
def _merge_kernel(a, b):
    e = common(state_exponent(a), state_exponent(b))
    merged = jax.tree_util.tree_map(jnp.add, rescaled(a, e), rescaled(b, e))
    return dataclasses.replace(merged, exponent=e)


def _layout(state: CalibrationState) -> tuple:
    return (state.n_bins, state.num_classes, state.closed, state.binary, state.resolution)


def merge_stacked(states):
    """The merge of a stack of states along their leading axis (e.g. an ``all_gather``)."""
    e = common(jnp.max(state_exponent(states)))
    aligned = rescaled(states, jnp.broadcast_to(e, states.totals.shape[:1]))
    summed = jax.tree_util.tree_map(lambda x: x.sum(axis=0, dtype=x.dtype), aligned)
    return dataclasses.replace(summed, exponent=e)

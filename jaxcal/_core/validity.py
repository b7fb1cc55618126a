"""Validity summaries computed inside the kernels, checked on the host afterwards.

A metric reads its inputs once; checking them in separate passes (min, max, row sums,
label range) cost 2-3 more passes, an eager call 1.9x the jitted kernel. Instead each
kernel returns, beside its result, a ``Summary`` of every argument, computed in the
pass the metric makes anyway where it can (the row sums and minima ride on the reduction
that finds the top label: ``row_stats()``). The public function
calls the kernel through ``run_validated()``:

* the first eager call with new shapes runs the stand-alone checks of ``jaxcal/_core/checks.py``
  up front, so bad input gets its error before anything compiles;
* later eager calls read the summary: three concrete scalars, one transfer; only when they
  report a problem does the diagnosis run (the stand-alone checks, which name the
  offending element), so the errors are the same;
* inside a transformation (``jit``, ``vmap``, ``grad``, ``scan``, ``shard_map``) the
  summary is traced: nothing is checked, and XLA drops the unused summary from the
  compiled program, so it costs nothing there.

The summaries are computed on ``stop_gradient`` inputs: they never take part in a
derivative (and the variadic reduction they share has no derivative rule).
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from jaxcal._core.checks import (
    RANGE_ATOL,
    check_labels,
    check_probs,
    check_weights,
    is_concrete,
    simplex_tolerance,
    subnormal_mask,
    values_checkable,
)
from jaxcal._core.confidence import RowStats, input_row_stats
from jaxcal._core.eager import PAD_MAX_ROWS, call_padded, on_one_device, size_class
from jaxcal._core.numerics import compute_dtype, mask_unweighted


class InputSummary(NamedTuple):
    """Device-side validity summary of a metric's ``(probs, labels, weights)``.

    Each field is one 0-d float: positive (or NaN) when the argument breaks its rule,
    so the host compares three scalars; the diagnosis then names the element.

    Attributes:
      probs: the largest excess over the rules of probabilities: ``-p - RANGE_ATOL``
        (below 0), ``p - 1 - RANGE_ATOL`` (above 1, for ``(N,)``), and for ``(N, K)``
        ``|row sum - 1| - tolerance``; +inf for NaN or inf (NaN is turned into +inf
        element by element before the max, ``_nan_to_inf()``).
      labels: the largest label read as unsigned (a negative label reads >= 2**31).
      weights: the largest ``-w`` (a negative weight), +inf for a non-finite weight, 1
        for a subnormal one; ``None`` without weights.
    """

    probs: jax.Array
    labels: jax.Array
    weights: jax.Array | None


def _nan_to_inf(x: jax.Array) -> jax.Array:
    """``x`` with NaN read as +inf, so that a ``max`` over it cannot lose a bad element.

    Never rely on a reduction carrying NaN: on XLA:CPU (jax 0.10.2) ``jnp.max`` of 4096
    or more float32 values returns a finite maximum of the others (or -inf, the NaN last)
    when one of them is NaN. +inf is an ordinary value for ``max`` on every backend.
    """
    return jnp.where(jnp.isnan(x), jnp.inf, x)


def _probs_excess(probs: jax.Array, rows: RowStats | None) -> jax.Array:
    p = jax.lax.stop_gradient(probs)
    dtype = compute_dtype(p.dtype)
    if p.ndim == 1:
        p = _nan_to_inf(p.astype(dtype))  # before the elementwise maximum too
        return jnp.max(jnp.maximum(p - 1, -p)) - RANGE_ATOL
    rows = input_row_stats(p) if rows is None else rows
    # One number per row (the checked sum) covers the range too: a negative entry adds
    # 4 to it, and with none a row summing to 1 has no entry above 1 (the diagnosis still
    # reports which rule broke). A row holding NaN sums to NaN (IEEE addition, no max
    # involved), read as +inf before the max over the rows.
    return jnp.max(_nan_to_inf(jnp.abs(rows.checked_sum - 1))) - simplex_tolerance(p.dtype)


def _labels_high(labels: jax.Array) -> jax.Array:
    # One maximum of the labels read as unsigned checks both ends of [0, K); in float32
    # because XLA:CPU reduces integers ~10x slower than floats (1 ms against 0.1 ms for
    # 1e6 int32); the conversion keeps every label >= K (< 2**24) at >= K.
    return jnp.max(labels.astype(jnp.uint32).astype(jnp.float32))


def _weights_excess(weights: jax.Array | None) -> jax.Array | None:
    if weights is None:
        return None
    w = jax.lax.stop_gradient(weights)
    excess = jnp.where(jnp.isfinite(w), -w, jnp.inf)
    if w.dtype.itemsize >= 4:  # subnormals read as 0 in arithmetic: flag them by their bits
        excess = jnp.where(subnormal_mask(w), 1, excess)
    return jnp.max(excess)


def summarize(
    probs: jax.Array,
    labels: jax.Array,
    weights: jax.Array | None,
    rows: RowStats | None = None,
) -> InputSummary:
    """The ``InputSummary`` of a metric's inputs (call inside the kernel).

    ``rows``: the kernel's ``input_row_stats()`` of 2-D ``probs``,
    so that the row sums and minima come from the pass that found the top label.
    """
    return InputSummary(_probs_excess(probs, rows), _labels_high(labels), _weights_excess(weights))


def mask_padding(
    probs: jax.Array,
    labels: jax.Array,
    weights: jax.Array | None,
    rows: RowStats | None = None,
) -> tuple[jax.Array, jax.Array, RowStats | None]:
    """``(probs, labels, rows)`` with the padding of zero-weight rows made harmless.

    Under ``jit`` nothing is validated, and the padding rows of a fixed-shape batch may
    hold anything: NaN (the softmax of all ``-inf`` logits), an ignore label (-100, or K).
    Their weight 0 alone does not mask them (``0 * nan`` is NaN, a label outside [0, K)
    gathers NaN), so in rows without positive weight non-finite probabilities become the
    uniform 1/K (1/2 for 1-D) and labels outside [0, K) become 0, as the streaming update
    does; the weight 0 keeps them out of every sum. Valid values stay as they are, so
    valid rows, and derivatives with respect to the weights, are unchanged.

    ``rows``: the ``input_row_stats()`` of the raw 2-D ``probs``,
    masked instead of them (a zero-weight row whose sum is not finite gets the statistics
    of the uniform row); ``probs`` then come back as they are, for a kernel that reads them
    through ``rows`` only (masking the ``(N, K)`` array as well doubled the time of a
    weighted ``ece``). The validity summary must be
    taken of the raw inputs, before this (eager calls validate every row, padding too).
    """
    if weights is None:
        return probs, labels, rows
    k = 2 if probs.ndim == 1 else probs.shape[1]
    fill = 1 / k
    labels = mask_unweighted(labels, weights, 0, (labels < 0) | (labels >= k))
    if rows is None:
        probs = mask_unweighted(probs, weights, fill)
    else:  # the kernel reads 2-D probs through their row statistics only
        bad = ~jnp.isfinite(rows.checked_sum)
        rows = RowStats(
            mask_unweighted(rows.max, weights, fill, bad),
            mask_unweighted(rows.argmax, weights, 0, bad),
            mask_unweighted(rows.checked_sum, weights, 1, bad),
        )
    return probs, labels, rows


def kernel_inputs(
    probs: jax.Array, labels: jax.Array, weights: jax.Array | None, *, rows: bool = True
) -> tuple[jax.Array, jax.Array, RowStats | None, InputSummary]:
    """What a metric's kernel does first: summarise its raw inputs, then mask the padding.

    Returns ``(probs, labels, rows, summary)``: the inputs through ``mask_padding()``,
    the ``input_row_stats()`` of 2-D ``probs`` (None for 1-D, or with
    ``rows=False`` for kernels that do not take the top label), and the
    ``InputSummary`` of the raw inputs, from the same pass over the rows.
    """
    stats = input_row_stats(probs) if rows else None
    summary = summarize(probs, labels, weights, stats)
    probs, labels, stats = mask_padding(probs, labels, weights, stats)
    return probs, labels, stats, summary


def raise_if_invalid(
    summary: InputSummary,
    probs: jax.Array,
    labels: jax.Array,
    weights: jax.Array | None,
    *,
    probs_name: str = "probs",
) -> None:
    """Raise the stand-alone checks' ``ValueError`` when the kernel's summary reports one.

    A no-op when the summary is traced (inside a transformation). Otherwise one transfer of
    three scalars; the diagnosis (locating the bad element) runs only on failure.
    """
    leaves = jax.tree_util.tree_leaves(summary)
    if not is_concrete(*leaves):
        return
    summary = jax.device_get(summary)
    if not float(summary.probs) <= 0:  # NaN fails too
        check_probs(probs, probs_name)
    num_classes = 2 if probs.ndim == 1 else probs.shape[1]
    if float(summary.labels) >= num_classes:
        check_labels(labels, probs.shape[0], num_classes)
    if summary.weights is not None and not float(summary.weights) <= 0:
        check_weights(weights, probs.shape[0])


#: Signatures (kernel, static options, shapes and dtypes) already validated eagerly, in
#: insertion order; the oldest are forgotten past ``_SEEN_MAX`` (a forgotten signature is
#: only validated up front once more).
_SEEN: dict[tuple, None] = {}
_SEEN_MAX = 4096


def _hashable(x: Any) -> Any:
    """A static option as is; an array argument (a traced hyperparameter) by its type."""
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return ("array", tuple(x.shape), str(x.dtype))
    return x


def _signature(identity, *arrays, rows: int | None = None) -> tuple:
    """The key of a validated call; ``rows``: the size class the first axis counts as."""
    kernel, static = identity

    def shape(a):
        return a.shape if rows is None or not a.ndim else (rows, *a.shape[1:])

    shapes = tuple(None if a is None else (shape(a), str(a.dtype)) for a in arrays)
    return (kernel, tuple(_hashable(v) for v in static), shapes)


def replicate_explicit(*arrays: jax.Array | None) -> tuple[jax.Array | None, ...]:
    """``arrays``, those sharded over *explicit* mesh axes resharded to replicated.

    Under ``jax.set_mesh`` of a mesh with ``AxisType.Explicit`` axes, an array's sharding
    is part of its type and every scatter (the kernels' per-bin sums) would need its own
    ``out_sharding``; the metrics reduce over all rows anyway, so they gather them first.
    Arrays without explicit sharding (the default) are returned as they are.

    Example:
      >>> import jax.numpy as jnp
      >>> replicate_explicit(jnp.ones(2), None)
      (Array([1., 1.], dtype=float32), None)
    """
    out = []
    for x in arrays:
        if x is not None and any(p is not None for p in jax.typeof(x).sharding.spec):
            x = jax.sharding.reshard(x, jax.sharding.PartitionSpec())
        out.append(x)
    return tuple(out)


def run_validated(
    kernel,
    probs: jax.Array,
    labels: jax.Array,
    weights: jax.Array | None,
    *static: Any,
    diagnose: jax.Array | None = None,
    probs_name: str = "probs",
    signature: Any = None,
    pad: bool = True,
    carry: Any = None,
) -> Any:
    """``kernel(probs, labels, weights, *static)`` with its inputs validated.

    The kernel returns ``(result, InputSummary)``. The first eager call with a new
    signature (kernel, static options, size class, dtypes) runs the stand-alone value
    checks *before* calling it, so bad input never waits for a compilation; later calls
    check the summary the kernel computed in its own pass (``raise_if_invalid()``).
    Eager calls run on rows padded to a size class, through executables kept per
    process and on disk (``jaxcal/_core/eager.py``; ``pad=False`` for kernels whose cost
    grows faster than N or whose options read every row regardless of weight). Inside a
    transformation nothing is checked or padded. ``diagnose``: the array the user passed
    as ``probs`` when the kernel gets a reshaped one (1-D probabilities as two columns).
    ``signature``: ``(identity, options)`` that identifies the kernel and its static
    options when ``kernel`` is a closure made per call (default: ``(kernel, static)``).
    ``carry``: a pytree of arrays the kernel takes first, ``kernel(carry, probs, ...)``,
    passed as it is, never padded (a streaming state).
    """
    probs, labels, weights, diagnose = replicate_explicit(probs, labels, weights, diagnose)
    user_probs = probs if diagnose is None else diagnose
    carried = [] if carry is None else jax.tree.leaves(carry)
    call = kernel if carry is None else partial(kernel, carry)
    if not values_checkable(user_probs, labels, weights, *_arrays(static), *carried):
        result, summary = call(probs, labels, weights, *static)
        raise_if_invalid(summary, user_probs, labels, weights, probs_name=probs_name)
        return result
    identity = (kernel, static) if signature is None else signature
    if carry is not None:
        identity = (identity[0], (jax.tree.structure(carry), *identity[1]))
    n = user_probs.shape[0]
    pad = (
        pad
        and signature is None
        and n <= PAD_MAX_ROWS
        and on_one_device(probs, labels, weights, diagnose, *_arrays(static), *carried)
    )
    key = _signature(identity, user_probs, labels, weights, rows=size_class(n) if pad else None)
    if key not in _SEEN:
        check_probs(user_probs, probs_name)
        num_classes = 2 if user_probs.ndim == 1 else user_probs.shape[1]
        check_labels(labels, n, num_classes)
        check_weights(weights, n)
        if len(_SEEN) >= _SEEN_MAX:
            del _SEEN[next(iter(_SEEN))]
        _SEEN[key] = None
    if pad and probs.shape[0] == n:
        result, summary = call_padded(kernel, probs, labels, weights, static, carry)
    else:
        result, summary = call(probs, labels, weights, *static)
    raise_if_invalid(summary, user_probs, labels, weights, probs_name=probs_name)
    return result


def _arrays(values: tuple) -> list:
    return [v for v in values if isinstance(v, jax.Array)]

"""The state's power-of-two scale: sums of any weights in a float32 state (issue 20).

A state sums weighted quantities across batches, so weights near 1e37 would overflow a
float32 sum and weights near 1e-38 would underflow it. The state therefore keeps its
float sums in units of ``2**exponent`` (an int32 leaf, :attr:`CalibrationState.exponent`):
the value of a sum is ``(high + low) * 2**exponent``. The exponent stays 0 while the
largest weight lies in ``[2**-65, 2**64)`` (sums of such weights fit float32 with room to
spare), so ordinary streams are summed exactly as before and ``jax.lax.psum`` of states
stays their merge. Beyond that band a batch is scaled by the binary exponent of its
largest weight, as the one-shot metrics do (``normalize_weights()``),
and the state by the largest exponent seen: every rescaling is a multiplication by a
power of two, exact (no rounding) unless a term leaves the normal range, so splitting a
stream into batches or shards changes nothing beyond round-off. An empty state (total
weight 0) has no scale of its own: it takes the one of the first data it meets.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxcal._core.numerics import times_pow2 as scale_pow2

#: Largest |binary exponent| of the largest weight for which a state stays unscaled.
BAND = 64
#: The effective exponent of an empty state or batch: below every real one.
_EMPTY = -(2**30)
_FLOAT_FIELDS = ("top_sums", "class_sums", "totals")


def weight_exponent(weights: jax.Array | None) -> jax.Array:
    """int32 exponent ``e`` a batch's weights are divided by (``2**e``; 0 inside the band)."""
    if weights is None:
        return jnp.zeros((), jnp.int32)
    _, e = jnp.frexp(jnp.max(weights))
    return jnp.where(jnp.abs(e) <= BAND, 0, e).astype(jnp.int32)


def times_pow2(x: jax.Array, k: jax.Array) -> jax.Array:
    """``x * 2**k`` for int ``k`` (broadcast on the leading axes of ``x``), by two exact
    multiplications (one power of two alone would leave the normal range for large ``|k|``).

    ``k`` is clamped to where both factors are finite: beyond it the callers' ``x`` is
    either 0 (an empty state) or its product leaves the float range anyway.
    """
    info = jnp.finfo(x.dtype)
    k = jnp.clip(k, 2 * int(info.minexp), 2 * (int(info.maxexp) - 1))
    return scale_pow2(x, k.reshape(k.shape + (1,) * (x.ndim - k.ndim)))


def effective(exponent: jax.Array, total: jax.Array) -> jax.Array:
    """The exponent of data holding ``total`` weight; ``_EMPTY`` where it holds none."""
    return jnp.where(total == 0, _EMPTY, exponent)


def common(*exponents: jax.Array) -> jax.Array:
    """The exponent both operands are brought to (their largest; 0 if all are empty)."""
    e = jnp.max(jnp.stack(jnp.broadcast_arrays(*exponents)), axis=0)
    return jnp.where(e == _EMPTY, 0, e).astype(jnp.int32)


def state_exponent(state) -> jax.Array:
    """The effective exponent of a state (or of each state of a stack)."""
    return effective(jnp.asarray(state.exponent, jnp.int32), state.totals[..., 0])


def rescaled(state, exponent: jax.Array):
    """``state`` with its float sums (and their low parts) in units of ``2**exponent``."""
    shift = jnp.asarray(state.exponent, jnp.int32) - exponent
    sums = {name: times_pow2(getattr(state, name), shift) for name in _FLOAT_FIELDS}
    low = tuple(times_pow2(c, shift) for c in state.compensation)
    return dataclasses.replace(
        state, **sums, compensation=low, exponent=jnp.broadcast_to(exponent, shift.shape)
    )


def unscaled(x: jax.Array, state) -> jax.Array:
    """A weight sum of the state in the caller's units (``inf`` if it exceeds the dtype)."""
    return times_pow2(x, jnp.asarray(state.exponent, jnp.int32))

"""Model outputs (logits or probabilities, a padding mask) to a weighted batch.

What the clu and Flax NNX metric adapters hand to :func:`jaxcal.streaming.update`: both
take a model's ``logits`` or ``probs`` with the frameworks' ``mask`` convention.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from jaxcal._core.numerics import compute_dtype


def model_output_batch(
    binary: bool, caller: str, labels: Any, probs: Any, logits: Any, mask: Any, weights: Any
) -> tuple[Any, Any, Any]:
    """``(probs, labels, weights)`` for ``update`` from one batch of model outputs.

    Exactly one of ``probs`` and ``logits`` is given; logits go through a softmax over the
    last axis (a sigmoid for a binary stream). ``mask`` (False or 0 rows are ignored) is
    multiplied into ``weights``, so masked rows get weight 0 and change nothing.
    ``caller`` names the method in the error message.
    """
    if (probs is None) == (logits is None):
        raise ValueError(f"Pass exactly one of `probs` and `logits` to {caller}.")
    if probs is None:
        logits = jnp.asarray(logits)
        probs = jax.nn.sigmoid(logits) if binary else jax.nn.softmax(logits, axis=-1)
    if mask is not None:
        m = jnp.asarray(mask).astype(compute_dtype(jnp.asarray(probs).dtype))
        weights = m if weights is None else jnp.asarray(weights) * m
    return probs, labels, weights

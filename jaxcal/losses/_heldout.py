"""The held-out ("interleaved") form of a calibration regulariser: cross-entropy on the
training batch plus lambda times the regulariser on a batch of rows held out of the
cross-entropy, and the batch indices of both drawn up front for ``lax.scan``."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from jaxcal._core.checks import check_finite, check_labels, check_positive_int, check_weights
from jaxcal._core.numerics import weighted_mean
from jaxcal.losses._saturation import SaturationStats, _stats


class HeldoutTerms(NamedTuple):
    """The parts of a held-out objective's value (0-d arrays), its ``has_aux`` output.

    Attributes:
      base: the base loss (cross-entropy) of the training batch.
      regularizer: the regulariser on the held-out batch (before the factor lambda).
      heldout: :class:`~jaxcal.losses.SaturationStats` of the held-out batch.
    """

    base: jax.Array
    regularizer: jax.Array
    heldout: SaturationStats


class BatchIndices(NamedTuple):
    """Row indices of every step's batches (int32), for ``lax.scan`` over the steps.

    Attributes:
      train: ``(steps, batch_size)`` indices into the training rows.
      heldout: ``(steps, heldout_batch_size)`` indices into the held-out rows.
    """

    train: jax.Array
    heldout: jax.Array


def cross_entropy(logits: jax.Array, labels: jax.Array, weights: jax.Array | None = None):
    """Mean softmax cross-entropy (1-D logits: sigmoid binary cross-entropy), optax's."""
    if logits.ndim == 1:
        per_row = optax.sigmoid_binary_cross_entropy(logits, labels.astype(logits.dtype))
    else:
        per_row = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
    return weighted_mean(per_row, weights)


def _unpack(batch: Any, name: str) -> tuple[Any, Any, Any]:
    if not isinstance(batch, (tuple, list)) or len(batch) not in (2, 3):
        raise ValueError(
            f"`{name}` must be a tuple (x, labels) or (x, labels, weights); got {type(batch)}"
            + (f" of length {len(batch)}" if isinstance(batch, (tuple, list)) else "")
            + "."
        )
    return (*batch, None) if len(batch) == 2 else tuple(batch)


def check_batch(apply_fn: Callable, params: Any, batch: Any, name: str) -> tuple[Any, Any, Any]:
    """``(x, labels, weights)`` of ``batch``, checked against the model's output shape.

    Shapes always; values when concrete (skipped under ``jit``/``grad``, as everywhere):
    every floating leaf of ``x`` finite, labels in ``[0, K)`` for the ``K`` of
    ``apply_fn(params, x)`` (found by ``jax.eval_shape``, nothing is computed), weights
    non-negative. A NaN input would otherwise come back as a NaN loss.
    """
    x, y, w = _unpack(batch, name)
    try:
        for leaf in jax.tree.leaves(x):
            if hasattr(leaf, "dtype") and jnp.issubdtype(leaf.dtype, jnp.inexact):
                check_finite("x", leaf)
        out = jax.eval_shape(apply_fn, params, x)
        if out.ndim not in (1, 2):
            raise ValueError(
                f"`apply_fn(params, x)` must return (B,) log-odds or (B, K) logits; got "
                f"shape {out.shape}."
            )
        check_labels(y, out.shape[0], 2 if out.ndim == 1 else out.shape[1])
        check_weights(w, out.shape[0])
    except ValueError as err:
        raise ValueError(f"`{name}` (x, labels[, weights]): {err}") from None
    return x, y, w


def _call(loss: Callable, logits: Any, labels: Any, weights: Any) -> jax.Array:
    return loss(logits, labels) if weights is None else loss(logits, labels, weights=weights)


def heldout_objective(
    apply_fn: Callable[[Any, Any], jax.Array],
    regularizer: Callable[..., jax.Array],
    *,
    lam: Any = 1.0,
    base_loss: Callable[..., jax.Array] | None = None,
) -> Callable[[Any, Any, Any], tuple[jax.Array, HeldoutTerms]]:
    """``objective(params, batch, heldout_batch) -> (loss, terms)``: CE here, calibration there.

    .. math::
       L(\\theta) = \\mathrm{CE}\\big(f(\\theta, x_b), y_b\\big)
       + \\lambda\\, R\\big(f(\\theta, x_c), y_c\\big),

    with ``(x_b, y_b)`` a training batch and ``(x_c, y_c)`` a batch of rows held out of the
    cross-entropy. Computed on the training batch, a calibration term R acts only while
    the network has not yet fitted that batch: on a batch it already gets right, R is near
    0 (MMCE_w exactly 0) whatever the network does on new data. On held-out rows R keeps
    measuring the over-confidence the network shows on data it does not fit, which is
    what calibration on a test set is about (Bohdal, Yang & Hospedales 2023 compute their
    meta-objective so; Karandikar et al. 2021 discuss the in-batch form's saturation). The
    held-out rows then train only through R; give every arm the same labelled rows when
    comparing (an arm without R trains on the union).

    Pure and traceable: use it with ``jax.value_and_grad(objective, has_aux=True)`` inside
    ``jit``/``vmap``/``lax.scan``. ``lam`` may be a traced 0-d array (a grid of lambdas
    under ``vmap``). The batch indices of every step come from
    :func:`~jaxcal.losses.heldout_batch_indices`.

    Args:
      apply_fn: ``apply_fn(params, x) -> logits`` ``(B, K)`` (or ``(B,)`` binary
        log-odds).
      regularizer: ``regularizer(logits, labels) -> scalar``, e.g.
        :func:`~jaxcal.losses.mmce_loss`, :func:`~jaxcal.losses.soft_ece_loss`,
        :func:`~jaxcal.losses.dca_loss`, :func:`~jaxcal.losses.dece_loss` or a
        ``functools.partial`` of one with its options; called with ``weights=`` when
        the held-out batch carries weights.
      lam: the factor lambda (number or 0-d array).
      base_loss: ``base_loss(logits, labels) -> scalar`` on the training batch (called
        with ``weights=`` when the batch carries weights); default the mean softmax
        cross-entropy, optax's (binary: sigmoid cross-entropy).

    Returns:
      ``objective(params, batch, heldout_batch)``, each batch a tuple ``(x, labels)`` or
      ``(x, labels, weights)``, returning ``(loss, HeldoutTerms(base, regularizer,
      heldout))`` with ``heldout`` the :class:`~jaxcal.losses.SaturationStats` of the
      held-out batch (log it: the share of all-correct held-out batches should stay low).

    Example:
      >>> import jax, jax.numpy as jnp
      >>> from jaxcal import losses
      >>> def apply_fn(params, x):
      ...     return x @ params["w"]
      >>> params = {"w": jnp.ones((4, 3)) * 0.1}
      >>> x = jnp.arange(24.0).reshape(6, 4) / 24
      >>> y = jnp.array([0, 1, 2, 0, 1, 2])
      >>> objective = losses.heldout_objective(apply_fn, losses.mmce_loss, lam=2.0)
      >>> (loss, terms), grads = jax.value_and_grad(objective, has_aux=True)(
      ...     params, (x[:4], y[:4]), (x[4:], y[4:]))
      >>> bool(jnp.isclose(loss, terms.base + 2.0 * terms.regularizer))
      True

    References:
      Bohdal, Yang & Hospedales (2023), "Meta-Calibration", TMLR (the calibration
      objective on a held-out batch); Kumar, Sarawagi & Jain (2018); Karandikar et al.
      (2021).
    """
    if not callable(apply_fn):
        raise ValueError(f"`apply_fn` must be callable (params, x) -> logits; got {apply_fn!r}.")
    if not callable(regularizer):
        raise ValueError(
            f"`regularizer` must be callable (logits, labels) -> scalar; got {regularizer!r}."
        )
    base = cross_entropy if base_loss is None else base_loss

    def objective(params: Any, batch: Any, heldout_batch: Any):
        x, y, w = check_batch(apply_fn, params, batch, "batch")
        xc, yc, wc = check_batch(apply_fn, params, heldout_batch, "heldout_batch")
        base_value = _call(base, apply_fn(params, x), y, w)
        logits_c = apply_fn(params, xc)
        reg = jnp.asarray(_call(regularizer, logits_c, yc, wc))
        stats = SaturationStats(*_stats(logits_c, yc, wc), reg)
        return base_value + lam * reg, HeldoutTerms(base_value, reg, stats)

    return objective


def _epoch_indices(key: jax.Array, n: int, batch: int, steps: int) -> jax.Array:
    """``(steps, batch)``: permutations of ``range(n)`` cut into batches, one per epoch, the
    remainder of each epoch left out; as many epochs as the steps need."""
    per_epoch = n // batch
    epochs = -(-steps // per_epoch)
    keys = jax.random.split(key, epochs)
    perms = jax.vmap(lambda k: jax.random.permutation(k, n))(keys)[:, : per_epoch * batch]
    return perms.reshape(epochs * per_epoch, batch)[:steps].astype(jnp.int32)


@partial(jax.jit, static_argnames=("num_train", "num_heldout", "steps", "batch", "heldout_batch"))
def _indices_kernel(key, num_train, num_heldout, steps, batch, heldout_batch):
    k_train, k_heldout = jax.random.split(key)
    return BatchIndices(
        _epoch_indices(k_train, num_train, batch, steps),
        _epoch_indices(k_heldout, num_heldout, heldout_batch, steps),
    )


def heldout_batch_indices(
    key: jax.Array,
    num_train: int,
    num_heldout: int,
    *,
    steps: int,
    batch_size: int,
    heldout_batch_size: int | None = None,
) -> BatchIndices:
    """Every step's training and held-out batch indices, drawn up front for ``lax.scan``.

    Each side is a sequence of epochs: a fresh permutation of its rows cut into batches,
    the last ``n mod batch`` rows of each epoch left out (so a batch never repeats a row),
    as many epochs as ``steps`` need. The held-out set is usually smaller: its epochs
    cycle faster (as ``itertools.cycle`` over a held-out loader does in Bohdal et al.'s
    code). Two independent streams from ``key``. Scan over them::

      idx = losses.heldout_batch_indices(key, len(x), len(x_cal), steps=1000, batch_size=64)
      def step(carry, i):
          b, c = (x[i.train], y[i.train]), (x_cal[i.heldout], y_cal[i.heldout])
          ...
      jax.lax.scan(step, carry, idx)

    Drawing the indices once, outside the training function, also keeps the random-bit
    generator out of every compiled training program.

    Args:
      key: a PRNG key.
      num_train, num_heldout: numbers of training and held-out rows (Python ints).
      steps: number of steps >= 1.
      batch_size: training batch size, 1 <= batch_size <= num_train.
      heldout_batch_size: held-out batch size, <= num_heldout; default ``batch_size``.

    Returns:
      :class:`~jaxcal.losses.BatchIndices` of int32 arrays ``(steps, batch_size)`` and
      ``(steps, heldout_batch_size)``.

    Example:
      >>> import jax
      >>> from jaxcal import losses
      >>> idx = losses.heldout_batch_indices(
      ...     jax.random.key(0), 10, 4, steps=6, batch_size=3, heldout_batch_size=2)
      >>> idx.train.shape, idx.heldout.shape
      ((6, 3), (6, 2))
      >>> sorted(idx.heldout[:2].ravel().tolist())  # one held-out epoch: every row once
      [0, 1, 2, 3]

    References:
      Bohdal, Yang & Hospedales (2023), "Meta-Calibration", TMLR (held-out batches
      cycled beside the training batches).
    """
    num_train = check_positive_int("num_train", num_train)
    num_heldout = check_positive_int("num_heldout", num_heldout)
    steps = check_positive_int("steps", steps)
    batch_size = check_positive_int("batch_size", batch_size)
    heldout_batch_size = check_positive_int(
        "heldout_batch_size", batch_size if heldout_batch_size is None else heldout_batch_size
    )
    if batch_size > num_train:
        raise ValueError(
            f"`batch_size` must be at most `num_train` ({num_train}); got {batch_size}. "
            "Lower the batch size."
        )
    if heldout_batch_size > num_heldout:
        raise ValueError(
            f"`heldout_batch_size` must be at most `num_heldout` ({num_heldout}); got "
            f"{heldout_batch_size}. Pass a smaller `heldout_batch_size`."
        )
    return _indices_kernel(key, num_train, num_heldout, steps, batch_size, heldout_batch_size)

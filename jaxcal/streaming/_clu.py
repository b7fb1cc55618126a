"""A ``clu.metrics.Metric`` adapter of :class:`~jaxcal.streaming.CalibrationState` (duck-typed: neither clu
nor flax is imported)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax

from jaxcal._core.cache import cached_factory
from jaxcal._core.checks import check_option
from jaxcal.metrics._ece import check_norm
from jaxcal.streaming._merge import merge, merge_stacked
from jaxcal.streaming._model_output import model_output_batch
from jaxcal.streaming._state import OUTPUTS, CalibrationState, compute, init, update


@dataclasses.dataclass(frozen=True)
class CalibrationMetric:
    """A ``clu.metrics.Metric``-style wrapper of :class:`~jaxcal.streaming.CalibrationState`.

    Make a configured class with :func:`~jaxcal.streaming.clu_metric`; instances hold one ``state`` field and
    are pytrees. They follow clu's protocol without importing clu or flax:
    ``empty()``, ``from_model_output(**model_output)``, ``merge(other)``, ``reduce()``
    (sums a leading device axis, as after ``jax.lax.all_gather``) and ``compute()``, so
    they go into a ``clu.metrics.Collection`` (``Collection.create(calib=clu_metric(...))``)
    and through ``gather_from_model_output`` in Flax evaluation loops.

    Attributes:
      state: the :class:`~jaxcal.streaming.CalibrationState` of the batches seen so far.
    """

    state: CalibrationState

    # Configuration, set on the subclasses made by clu_metric.
    n_bins = 15
    num_classes = 2
    closed = "right"
    binary = False
    output = None  # or a key of OUTPUTS
    norm = "l1"

    @classmethod
    def empty(cls) -> CalibrationMetric:
        """The metric of no data (``merge`` identity)."""
        return cls(init(cls.n_bins, cls.num_classes, closed=cls.closed, binary=cls.binary))

    @classmethod
    def from_model_output(
        cls,
        *,
        labels: Any,
        probs: Any = None,
        logits: Any = None,
        mask: Any = None,
        weights: Any = None,
        **_: Any,
    ) -> CalibrationMetric:
        """The metric of one batch of model outputs (other keyword outputs are ignored).

        Args:
          labels: ``(N,)`` int labels.
          probs: ``(N, K)`` probabilities (``(N,)`` for binary), or else
          logits: ``(N, K)`` logits (softmax) or ``(N,)`` binary logits (sigmoid).
          mask: optional ``(N,)`` bool, clu's padding mask (False rows are ignored).
          weights: optional ``(N,)`` sample weights (multiplied by ``mask``).
        """
        batch = model_output_batch(
            cls.binary, "from_model_output", labels, probs, logits, mask, weights
        )
        return cls(update(cls.empty().state, *batch))

    def merge(self, other: CalibrationMetric) -> CalibrationMetric:
        """The metric of both streams (``jaxcal.streaming.merge``)."""
        return type(self)(merge(self.state, other.state))

    def reduce(self) -> CalibrationMetric:
        """Merge along the leading (device) axis, e.g. after ``jax.lax.all_gather``."""
        return type(self)(merge_stacked(self.state))

    def compute(self) -> Any:
        """``compute(state)``'s dict, or its entry ``output`` when the class names one."""
        out = compute(self.state, norm=self.norm)
        return out if self.output is None else out[self.output]

    def compute_value(self) -> Any:
        """clu's ``compute_value``: ``clu.values.Scalar(compute())`` (needs ``output``)."""
        from clu import values  # only reached from clu's own Collection.compute_values

        return values.Scalar(self.compute())


@cached_factory
def clu_metric(
    n_bins: int = 15,
    num_classes: int = 2,
    *,
    closed: str = "right",
    binary: bool = False,
    output: str | None = None,
    norm: str = "l1",
) -> type[CalibrationMetric]:
    """A :class:`~jaxcal.streaming.CalibrationMetric` class configured for ``n_bins`` bins and K classes.

    Args:
      n_bins, num_classes, closed, binary: as :func:`~jaxcal.streaming.init`.
      output: ``None`` (``compute()`` returns the whole dict of :func:`~jaxcal.streaming.compute`) or one of
        its keys (``compute()`` returns that 0-d array, which clu's ``compute_value`` and
        ``Collection.compute_values`` need).
      norm: passed to :func:`~jaxcal.streaming.compute`.

    Returns:
      A subclass of :class:`~jaxcal.streaming.CalibrationMetric`, registered as a pytree.

    Example:
      >>> import jax.numpy as jnp
      >>> ECE = clu_metric(n_bins=2, num_classes=2, output="ece")
      >>> m = ECE.empty().merge(ECE.from_model_output(
      ...     probs=jnp.array([[0.9, 0.1], [0.2, 0.8]]), labels=jnp.array([0, 0])))
      >>> round(float(m.compute()), 4)
      0.35
    """
    init(n_bins, num_classes, closed=closed, binary=binary)  # validates the options
    if output is not None:
        check_option("output", output, OUTPUTS)
    check_norm(norm, False)
    name = f"CalibrationMetric_{n_bins}x{num_classes}"
    config = dict(
        n_bins=n_bins, num_classes=num_classes, closed=closed, binary=binary, output=output
    )
    cls = dataclasses.dataclass(frozen=True)(
        type(name, (CalibrationMetric,), {**config, "norm": norm, "__module__": __name__})
    )
    return jax.tree_util.register_dataclass(cls, data_fields=["state"], meta_fields=[])


jax.tree_util.register_dataclass(CalibrationMetric, data_fields=["state"], meta_fields=[])

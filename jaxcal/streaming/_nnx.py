"""A ``flax.nnx.Metric`` of :class:`~jaxcal.streaming.CalibrationState`: :func:`~jaxcal.streaming.nnx_metric`.

flax is an optional extra (``pip install "jaxcal[flax]"``): it is imported on the first
call of :func:`~jaxcal.streaming.nnx_metric`, never by ``import jaxcal``. The methods live in a plain mixin
here; the class that also subclasses ``flax.nnx.Metric`` is built once, on that first call.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from jaxcal._core.checks import check_option
from jaxcal.metrics._ece import check_norm
from jaxcal.streaming._merge import merge
from jaxcal.streaming._model_output import model_output_batch
from jaxcal.streaming._state import OUTPUTS, compute, init, update


class _CalibrationNNXMetric:
    """A ``flax.nnx.Metric`` over a :class:`~jaxcal.streaming.CalibrationState` (made by :func:`~jaxcal.streaming.nnx_metric`).

    ``reset()``, ``update(**model_output)`` and ``compute()`` follow the protocol of
    ``flax.nnx.metrics`` (``Average``, ``Accuracy``), so it goes into an
    ``nnx.MultiMetric``; ``merge(other)`` adds another metric's data in place.

    Attributes:
      state: an ``nnx.metrics.MetricState`` variable holding the
        :class:`~jaxcal.streaming.CalibrationState` of the batches seen since the last ``reset``
        (``state.get_value()``).
      output: ``None`` or the key of :func:`~jaxcal.streaming.compute`'s dict that ``compute()`` returns.
      norm: the norm passed to :func:`~jaxcal.streaming.compute`.
    """

    def __init__(self, n_bins, num_classes, closed, binary, output, norm) -> None:
        """Use :func:`~jaxcal.streaming.nnx_metric`, which documents the arguments and their defaults."""
        from flax import nnx  # the optional extra, already imported by _metric_class

        state = init(n_bins, num_classes, closed=closed, binary=binary)  # validates them
        if output is not None:
            check_option("output", output, OUTPUTS)
        check_norm(norm, False)
        self.output = output
        self.norm = norm
        self.state = nnx.metrics.MetricState(state)

    def reset(self) -> None:
        """Forget every batch: zero sums, same bins, classes and dtype."""
        self.state.set_value(jax.tree.map(jnp.zeros_like, self.state.get_value()))

    def update(self, *, labels, probs=None, logits=None, mask=None, weights=None, **_) -> None:
        """Add one batch in place (other keyword outputs, e.g. ``loss``, are ignored).

        Args:
          labels: ``(N,)`` int labels.
          probs: ``(N, K)`` probabilities (``(N,)`` for binary), or else
          logits: ``(N, K)`` logits (softmax) or ``(N,)`` binary logits (sigmoid).
          mask: optional ``(N,)`` bool or 0/1: False rows are ignored, whatever they hold
            under ``jit`` (eager calls validate every row).
          weights: optional ``(N,)`` sample weights (multiplied by ``mask``).
        """
        state = self.state.get_value()
        batch = model_output_batch(state.binary, "update", labels, probs, logits, mask, weights)
        self.state.set_value(update(state, *batch))

    def merge(self, other: Any) -> None:
        """Add ``other``'s batches in place (``jaxcal.streaming.merge`` of the states)."""
        if not isinstance(other, _CalibrationNNXMetric):
            raise ValueError(
                f"`other` must be a metric made by nnx_metric; got {type(other).__name__}."
            )
        self.state.set_value(merge(self.state.get_value(), other.state.get_value()))

    def compute(self) -> Any:
        """:func:`~jaxcal.streaming.compute`'s dict of the data so far, or its entry ``output``."""
        out = compute(self.state.get_value(), norm=self.norm)
        return out if self.output is None else out[self.output]


@functools.cache
def _metric_class() -> type:
    """The ``flax.nnx.Metric`` subclass, built on first use (flax is an optional extra)."""
    try:
        from flax import nnx
    except ImportError as error:
        raise ImportError(
            'jaxcal.streaming.nnx_metric needs flax: pip install "jaxcal[flax]".'
        ) from error

    class CalibrationNNXMetric(_CalibrationNNXMetric, nnx.Metric):
        __doc__ = _CalibrationNNXMetric.__doc__
        __qualname__ = "CalibrationNNXMetric"

    return CalibrationNNXMetric


def nnx_metric(
    n_bins: int = 15,
    num_classes: int = 2,
    *,
    closed: str = "right",
    binary: bool = False,
    output: str | None = None,
    norm: str = "l1",
) -> Any:
    """A ``flax.nnx.Metric`` of calibration, backed by a :class:`~jaxcal.streaming.CalibrationState`.

    The metric keeps the state in an ``nnx.metrics.MetricState`` variable and follows
    ``flax.nnx.metrics``' protocol, mutating in place as ``nnx.metrics.Accuracy`` does:

    * ``update(*, labels, probs=None | logits=None, mask=None, weights=None, **_)`` adds
      a batch (:func:`~jaxcal.streaming.update`); logits go through a softmax (a sigmoid when ``binary``),
      rows with a False ``mask`` are ignored (their weight is 0), other keyword arguments
      (``loss``, ...) are ignored, so one ``nnx.MultiMetric.update`` call feeds it and
      ``nnx.metrics.Accuracy`` alike;
    * ``compute()`` gives :func:`~jaxcal.streaming.compute`'s dict (or its entry ``output``), each value
      equal to the one-shot jaxcal function on the concatenated batches;
    * ``reset()`` zeroes the sums; ``merge(other)`` adds another metric's data.

    Inside ``nnx.jit`` (or ``jax.jit`` of a step over ``nnx.split`` state) ``update`` runs
    on device with no host sync: the value checks on the inputs run only on concrete
    (eager) calls, as everywhere in jaxcal. Batches of one shape compile once.

    Args:
      n_bins, num_classes, closed, binary: as :func:`~jaxcal.streaming.init`.
      output: ``None`` (``compute()`` returns the whole dict of :func:`~jaxcal.streaming.compute`) or one of
        its keys (``compute()`` returns that 0-d array).
      norm: passed to :func:`~jaxcal.streaming.compute`.

    Returns:
      A ``CalibrationNNXMetric``, a subclass of ``flax.nnx.Metric`` (flax is imported
      here, on the first call: install the ``flax`` extra).

    Example:
      >>> import jax.numpy as jnp
      >>> from flax import nnx
      >>> metrics = nnx.MultiMetric(
      ...     accuracy=nnx.metrics.Accuracy(), ece=nnx_metric(2, 2, output="ece"))
      >>> @nnx.jit
      ... def eval_step(metrics, logits, labels):
      ...     metrics.update(logits=logits, labels=labels)
      >>> eval_step(metrics, jnp.log(jnp.array([[0.9, 0.1], [0.2, 0.8]])), jnp.array([0, 0]))
      >>> {name: round(float(value), 4) for name, value in metrics.compute().items()}
      {'accuracy': 0.5, 'ece': 0.35}
    """
    return _metric_class()(n_bins, num_classes, closed, binary, output, norm)

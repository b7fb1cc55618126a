"""Summary replicates: each Poisson replicate's state at M bins and its view's buckets.

A replicate of :func:`~jaxcal.streaming.poisson_init` is a whole state at the stream's resolution R: at K =
10 classes and R = 4110 buckets, 3.3 MB (19 arrays of K x R numbers), so the 200
replicates of ``jaxcal report --stream`` hold 660 MB, and each update held the old and the
new states and the batch's sums at once (2.4 GB resident). The intervals need less:

* every metric of :func:`~jaxcal.streaming.compute` at M bins is a function of the state at M bins (what
  :func:`~jaxcal.streaming.rebin` makes of the R buckets, exactly), 2 x 10 x K x M numbers;
* the equal-mass ECE (:func:`~jaxcal.streaming.equal_mass_ece`) and the CORP decomposition
  (:func:`~jaxcal.streaming.corp_decomposition`) read only the R buckets of :func:`jaxcal.ece`'s view (the
  positive class, or the top-label confidence): a count and three compensated sums each.

:class:`~jaxcal.streaming.SummaryReplicates` keeps just those, B x 127 KB at K = 10, M = 15, R = 4110
(7 R numbers per replicate whatever K, plus 20 K M), and its update donates the old buffers
to the new ones. The multiplicities are those of :func:`~jaxcal.streaming.poisson_update` (a function of
key, example id and replicate), so each replicate is the same resample of the stream; its
sums are added at M bins (and in the view's buckets) instead of at R and re-binned, which
changes them by float round-off only (counts exactly).
"""

from __future__ import annotations

import dataclasses
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from jaxcal._core.binning import BinStats
from jaxcal._core.checks import check_positive_int
from jaxcal._core.numerics import two_sum
from jaxcal.streaming._poisson import check_batch, chunked_sums, poisson_init
from jaxcal.streaming._replicates import replicate_sums, view_sums
from jaxcal.streaming._state import CalibrationState, add_batch, mask_padding


@partial(
    jax.tree_util.register_dataclass,
    data_fields=["states", "count", "sums", "compensation"],
    meta_fields=[],
)
@dataclasses.dataclass(frozen=True)
class SummaryReplicates:
    """B Poisson-bootstrap replicates kept as the sums their intervals need (a pytree).

    What :func:`~jaxcal.streaming.array_state` and :func:`~jaxcal.streaming.parquet_state` return as ``replicates`` with
    ``replicates="summary"``. ``states`` is an ordinary replicate batch at M bins, so
    :func:`~jaxcal.streaming.poisson_compute` and :func:`~jaxcal.streaming.poisson_interval` of ``states`` give every
    :func:`~jaxcal.streaming.compute` metric and its interval, equal to those of whole replicate states to
    float round-off (counts exactly); ``jaxcal report --stream`` also reads the equal-mass
    ECE and the CORP decomposition from the view's buckets.

    Attributes:
      states: the replicates' :class:`~jaxcal.streaming.CalibrationState` at M bins (resolution M; leading
        axis B): every :func:`~jaxcal.streaming.compute` output, by :func:`~jaxcal.streaming.poisson_compute`.
      count: int32 ``(B, R)`` samples per bucket of :func:`jaxcal.ece`'s view (the
        positive class's probability, or the top-label confidence).
      sums: ``(B, 3, R)`` weight, sum of the score and sum of the target (``labels == 1``,
        or correctness) per bucket, high parts.
      compensation: ``(B, 3, R)`` the low parts (TwoSum), as a state's.
    """

    states: CalibrationState
    count: jax.Array
    sums: jax.Array
    compensation: jax.Array


def summary_init(
    n_bins: int, num_classes: int, n_replicates: int, *, resolution: int | None = None, **options
) -> SummaryReplicates:
    """B empty summary replicates: states at M = ``n_bins`` and R = ``resolution`` buckets
    (default M) of the view (``options``: ``closed``, ``binary``, ``dtype`` of :func:`~jaxcal.streaming.init`).
    """
    states = poisson_init(n_bins, num_classes, n_replicates, **options)
    r = n_bins if resolution is None else check_positive_int("resolution", resolution)
    sums = jnp.zeros((states.totals.shape[0], 3, r), states.dtype)
    count = jnp.zeros((states.totals.shape[0], r), jnp.int32)
    return SummaryReplicates(states, count, sums, jnp.zeros_like(sums))


@partial(jax.jit, donate_argnums=0, static_argnames="generator")
def _summary_update_kernel(reps, probs, labels, weights, ids, key, generator="threefry"):
    states = reps.states
    probs, labels, weights = mask_padding(states, probs, labels, weights)
    m, closed, binary = states.resolution, states.closed, states.binary

    def sums_of(w):
        coarse = replicate_sums(probs, labels, w, m, closed, binary)
        return coarse, view_sums(probs, labels, w, reps.count.shape[-1], closed)

    coarse, (count, sums) = chunked_sums(
        sums_of, key, ids, weights, states.totals.shape[0], states.dtype, generator
    )
    high, err = two_sum(reps.sums, sums.astype(states.dtype))
    return SummaryReplicates(
        jax.vmap(add_batch)(states, coarse), reps.count + count, high, reps.compensation + err
    )


def summary_update(
    reps: SummaryReplicates,
    probs: Any,
    labels: Any,
    ids: Any,
    *,
    key: jax.Array,
    weights: Any = None,
    generator: str = "threefry",
) -> SummaryReplicates:
    """Add a batch to the replicates, example ``ids[i]`` with its Poisson weight.

    Arguments as :func:`~jaxcal.streaming.poisson_update`. ``reps`` is consumed: its buffers are donated to
    the result (one copy of the replicates alive, not two), so use only the returned value.
    """
    probs, labels, weights, ids = check_batch(reps.states, probs, labels, ids, weights)
    return _summary_update_kernel(reps, probs, labels, weights, ids, key, generator)


def summary_cells(reps: SummaryReplicates) -> BinStats:
    """The view's buckets as :class:`~jaxcal.metrics.BinStats` (compensated sums added),
    fields ``(..., R)``: what ``main_cells()`` gives of a state."""
    value = reps.sums + reps.compensation
    return BinStats(reps.count, *(value[..., i, :] for i in range(3)))

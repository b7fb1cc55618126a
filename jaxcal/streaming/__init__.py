"""Streaming and many devices: a mergeable calibration state of per-bin sums.

Every binned calibration metric and the proper scoring rules are functions of a few sums
over the data (DESIGN.md, "sufficient statistics first"). :class:`~jaxcal.streaming.CalibrationState` keeps
exactly those sums, so an evaluation set can be fed batch by batch (:func:`~jaxcal.streaming.update`, also
inside ``jax.lax.scan``), spread over devices and hosts, and reduced at the end:

* :func:`~jaxcal.streaming.merge` is elementwise addition of the two states' arrays, hence
  ``jax.lax.psum(state, axis_name)`` inside ``shard_map`` *is* the multi-device merge
  (for states of equal ``exponent``: always, unless weights lie beyond ``2**±64``; see
  :func:`~jaxcal.streaming.merge`), and ``jax.jit`` over inputs sharded with ``NamedSharding`` gives the
  same numbers (XLA inserts the cross-device sum). Nothing is gathered: the state is O(n_bins x K) numbers
  whatever the number of samples, where torchmetrics and torch-uncertainty keep every
  prediction and all-gather them.
  Two JAX details: inside ``shard_map``, a ``lax.scan`` carry started from :func:`~jaxcal.streaming.init`
  must be typed as varying across the mesh axis
  (``jax.lax.pcast(init(...), axis_name, to="varying")``), since each device's sums
  differ; and a sharded ``jit`` needs ``Auto`` mesh axes (GSPMD propagation). With
  ``Explicit`` axes (the default of ``jax.make_mesh`` in recent JAX) every scatter and
  gather would need an explicit output sharding: use ``shard_map`` + ``psum`` there.
* :func:`~jaxcal.streaming.compute` turns the sums into the metrics, through the same code as the one-shot
  functions (``jaxcal.metrics._ece.gap_norm`` on ``BinStats``), so that streamed and one-shot
  values agree to float round-off on the concatenated data.

What the state holds, for M bins and K classes (C the accumulation dtype, float32 by
default, float64 under ``jax_enable_x64``):

* ``top_count`` int32 ``(K, M)`` and ``top_sums`` C ``(3, K, M)``: per (predicted class,
  bin of the top-label confidence) the number of samples, their weight, summed confidence
  and summed correctness. Summed over the predicted class they are the confidence-ECE bins.
* ``class_count`` int32 ``(K, M)`` and ``class_sums`` C ``(6, K, M)``: per (class k, bin of
  ``p_k``) the count, weight, sum of ``p_k``, sum of ``1[y = k]``, and the three moments of
  ``d = p_k - c_b`` (``c_b`` the bin's anchor: its centre, 0 or 1 at the ends) that make the Brier decomposition's
  within-bin terms exact: sum of ``d``, ``d^2`` and ``d * 1[y = k]`` (all weighted).
* ``totals`` C ``(3,)``: total weight, summed Brier score, summed log loss.
* ``compensation``: the low-order parts of the three float arrays (compensated, i.e.
  Kahan/Knuth TwoSum, accumulation across updates).
* ``exponent`` int32: the float sums are in units of ``2**exponent``. It is 0 unless a
  weight lies outside ``[2**-65, 2**64)``; beyond that band batches and states are scaled
  by exact powers of two, so weights of 1e37 or 1e-37 give the metrics of weights near 1
  (``jaxcal.streaming._scale``).

Numerics:

* Counts are int32, exact up to 2**31 - 1 samples per cell (far past float32's 2**24).
* Within a batch, sums are blocked then added by a radix tree (``jaxcal._core.binning.bin_sums``);
  across batches each sum is accumulated with an error-free transformation (TwoSum) into a
  (high, low) pair. A stream of a million batches is therefore as accurate as one batch:
  the float32 result is within a few ulps of the float64 value, not ``n_batches`` ulps.
  ``merge`` and ``psum`` add the pairs elementwise (one rounding per merge, not per batch).
* The within-bin variance and covariance need ``sum (f - mean_b)^2``, which one pass can
  only get as a difference of sums. The textbook ``sum f^2 - (sum f)^2 / n`` cancels
  catastrophically (both terms ~ n f^2, the result ~ n / (12 M^2)); shifting every ``f`` by
  its bin's anchor first (``|d| <= 1 / M``) keeps both terms within a factor ~3 of the
  result, so WBV and WBC keep about float32's relative precision (absolute error of order
  ``eps / M^2``, ~1e-10 in float32 at M = 15). Tests check them against a float64 oracle.

Why quantile (equal-mass) bins cannot stream: their edges are empirical quantiles of the
*whole* data set, unknown until the stream ends, and a sample's bin (hence every per-bin
sum) depends on samples not seen yet. Exact one-pass quantiles need memory linear in N
(Munro & Paterson 1980), which is what streaming avoids; approximate sketches (t-digest,
KLL) would give approximate edges, and per-bin sums accumulated with provisional edges
cannot be re-binned. Equal-mass bins need two passes (a first to fix the edges, a second
to stream with them fixed); only uniform bins, whose edges are known up front, stream.

Regression predictions stream too: :class:`~jaxcal.streaming.RegressionState`
(:func:`~jaxcal.streaming.regression_init`, :func:`~jaxcal.streaming.regression_update`,
:func:`~jaxcal.streaming.merge`, :func:`~jaxcal.streaming.regression_compute`) keeps, for
M PIT bins, the weight of the rows at each level ``k / M`` of the calibration curve
(counted by the very comparisons :func:`jaxcal.regression.calibration_curve` makes, for
the lower-quantile and the central-interval curves), the variance sums per bin of the
predicted std on edges fixed up front (``std_edges``: the batch ENCE's equal-width edges
over the data's range are unknown until the stream ends), and the CRPS, log-score and
squared-error sums. Its curve, miscalibration area, MACE and RMSCE equal the batch
functions with ``n_levels = M + 1``; ENCE and the RMV/RMSE curve equal the batch ones
when ``std_edges`` are the batch's edges. Every leaf is a sum: ``psum`` is its merge.

References:
  Guo et al. (2017); Kull et al. (2019); Gupta & Ramdas (2021); Murphy (1973); Stephenson,
  Coelho & Jolliffe (2008); Knuth, TAOCP vol. 2, 4.2.2 (TwoSum); Munro & Paterson (1980),
  "Selection and sorting with limited storage".
"""

from jaxcal.streaming._arrow import SCHEMA as SCHEMA  # the Arrow table's schema version
from jaxcal.streaming._arrow import from_arrow, to_arrow
from jaxcal.streaming._batches import array_state
from jaxcal.streaming._clu import CalibrationMetric, clu_metric
from jaxcal.streaming._corp import (
    BucketCorp,
    corp_curve,
    corp_decomposition,
    isotonic_params,
)
from jaxcal.streaming._dask import dask_state
from jaxcal.streaming._hosts import process_merge
from jaxcal.streaming._l2_interval import l2_ece_interval
from jaxcal.streaming._merge import merge
from jaxcal.streaming._nnx import nnx_metric  # imports flax on its first call only
from jaxcal.streaming._parquet import ParquetStates, parquet_state
from jaxcal.streaming._poisson import (
    poisson_compute,
    poisson_init,
    poisson_interval,
    poisson_update,
)
from jaxcal.streaming._regression import (
    RegressionState,
    RegressionSummary,
    regression_compute,
    regression_init,
    regression_update,
)
from jaxcal.streaming._state import OUTPUTS as OUTPUTS  # the keys of compute()'s dict
from jaxcal.streaming._state import (
    CalibrationState,
    compute,
    init,
    update,
)
from jaxcal.streaming._summary import SummaryReplicates
from jaxcal.streaming._table import TABLE_SCHEMA as TABLE_SCHEMA  # to_table's schema version
from jaxcal.streaming._table import from_table, to_table
from jaxcal.streaming._views import EqualMassECE, equal_mass_ece, rebin, reliability_curve

__all__ = [
    "BucketCorp",
    "CalibrationMetric",
    "CalibrationState",
    "EqualMassECE",
    "ParquetStates",
    "RegressionState",
    "RegressionSummary",
    "SummaryReplicates",
    "array_state",
    "clu_metric",
    "compute",
    "corp_curve",
    "corp_decomposition",
    "dask_state",
    "equal_mass_ece",
    "from_arrow",
    "from_table",
    "init",
    "isotonic_params",
    "l2_ece_interval",
    "merge",
    "nnx_metric",
    "parquet_state",
    "poisson_compute",
    "poisson_init",
    "poisson_interval",
    "poisson_update",
    "process_merge",
    "rebin",
    "regression_compute",
    "regression_init",
    "regression_update",
    "reliability_curve",
    "to_arrow",
    "to_table",
    "update",
]

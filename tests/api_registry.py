"""The registry of jaxcal's public API: every name of every public namespace, classified.

``tests/test_api.py`` runs the same contract over every entry of :data:`ENTRIES` (eager ==
``jit`` == ``jit`` of a closure, ``vmap`` == a loop, no recompilation, ``grad`` where
declared, float64 under x64, bf16/f16 inputs, padded rows, ``shard_map``). A public name
must be covered by an entry, or be listed in :data:`RESULT_TYPES` (classes whose instances
the entries return) or :data:`NOT_TRANSFORMED` (with the reason): a name added to an
``__all__`` without either fails ``test_every_public_name_is_registered``.

All entries share one small data set (:func:`make_data`): N = 24 rows (four shards of 6),
K = 3 classes, so that every transformation compiles each entry once.

Cost (CI runs the whole suite on 2 cores in under 20 minutes): each check compiles every
entry it covers, about two seconds of CPU each when the compilation cache is cold. The
fast suite runs eager == ``jit`` == closure with the no-recompile check and ``vmap`` == a
loop for the entries of :data:`SWEEP`; the slow one runs them for every other entry
(every entry, fast, cost 250 CPU-s cold: twice the fast budget). The sweeps (``grad``,
bf16/f16, padded rows, float64, ``shard_map``, resampled fits) are marked slow and cover
:data:`SWEEP`: per family, the entries whose kernels differ in how they could break a
transformation, namely

* metrics: one per kernel kind: binned (``ece``, ``ece.quantile``, ``classwise_ece``),
  soft and kernel (``soft_ece.l2``, ``mmce``, ``smooth_ece``), cumulative paths and
  segments (``calibration_tests``, ``ks_test.groups``, ``multicalibration_error``,
  ``subpopulation_test``; the binned per-segment sums ``ece.groups`` and the masked
  matrix products ``ece.group_masks``), loop fits (``ici``, ``calibration_slope_intercept``), counts
  (``observed_expected_ratio``, ``hosmer_lemeshow_test``), resampling (``bootstrap_ci``,
  ``corp_bands``), and Brier / log loss (the differentiable scores);
* stats: the loop-based Clopper-Pearson interval, one Brownian law, ``log_chi2_sf``;
* calibrators: temperature (the 1-D L-BFGS), Platt on logits, matrix scaling (the (K, K)
  fits), isotonic and Venn-Abers (the sorted, non-differentiable fits), the ``classwise``
  wrapper, and ``to_probs``;
* streaming: ``update``, ``compute``, one bucket view (``equal_mass_ece``) and the Poisson
  replicates' ``poisson_update``;
* coverage: the loop-based ``regression_ssc`` and ``hsic``, ``classification_ssc``;
* selective: ``aurc`` (one sort, then cumulative sums with ties averaged),
  ``prediction_rejection_ratio.quality`` (the oracle's second sort, a float target) and
  ``aurc.groups`` (the masked segments after one shared sort);
* presets: all three (a rank-binned sort, a Platt fit inside, a bisection loop);
* recalibrated metrics: ``recalibrated`` (vmapped L-BFGS fits over folds) and
  ``calibration_refinement`` (vmapped isotonic fits);
* regression: ``calibration_curve`` (one sort of the standardised residuals),
  ``crps_ensemble`` (a sort per row), ``pit.quantiles`` (the interpolated quantiles) and
  ``pit_test`` (the sorted weighted ECDF and the series of its laws), and the isotonic
  recalibration of the PIT (a PAV fit, its inverse by interpolation), and
  ``quantile_score_decomposition`` (the quantile PAV: a wavelet matrix and a while loop);
* losses: the four regularisers (the padding of the training losses), ``dece_loss``,
  ``saturation_stats``, and the two training-step helpers (user model and parameters).

A sweep that finds a defect in one entry of a family is then run over the family by hand
(``-k``); a new kind of kernel adds its first entry to :data:`SWEEP`.
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

import jaxcal
from jaxcal import calibrators as C
from jaxcal import coverage, losses, presets, regression, selective, spark, sql, streaming

#: Every public namespace: the one place to add a new one (e.g. ``jaxcal.losses``).
NAMESPACES = (
    "jaxcal",
    "jaxcal.metrics",
    "jaxcal.stats",
    "jaxcal.calibrators",
    "jaxcal.streaming",
    "jaxcal.coverage",
    "jaxcal.losses",
    "jaxcal.selective",
    "jaxcal.regression",
    "jaxcal.presets",
    "jaxcal.plot",
    "jaxcal.sklearn",
    "jaxcal.sql",
    "jaxcal.spark",
)

N, K, BATCH = 24, 3, 3

# Roles of an entry's positional arguments. Row arrays are split across shards, padded
# with rows of weight 0 and batched by vmap; PYTREE arguments (params, states) are batched
# and replicated; FIXED ones (PRNG keys) are neither batched nor split.
ROWS = "rows"  # float (N, ...) values: padding rows hold NaN
LABELS = "labels"  # int (N,) labels: padding rows hold the ignore index -100
WEIGHTS = "weights"  # (N,) weights: padding rows have weight 0
SETS = "sets"  # bool (N, K) prediction sets: padding rows hold every class
PYTREE = "pytree"
FIXED = "fixed"
ROW_ROLES = (ROWS, LABELS, WEIGHTS, SETS)
PAD_ROWS = 8
PAD_VALUES = {ROWS: np.nan, LABELS: -100, WEIGHTS: 0.0, SETS: True}


class Data(NamedTuple):
    """One data set of N rows, NumPy (converted per entry)."""

    probs: np.ndarray  # (N, K) rows on the simplex
    logits: np.ndarray  # (N, K)
    labels: np.ndarray  # (N,) int32 in [0, K)
    p: np.ndarray  # (N,) positive-class probabilities
    y: np.ndarray  # (N,) int32 0/1
    margins: np.ndarray  # (N,) real-valued scores
    weights: np.ndarray  # (N,) positive
    target: np.ndarray  # (N,) regression targets
    lower: np.ndarray  # (N,)
    upper: np.ndarray  # (N,)
    sets: np.ndarray  # (N, K) bool
    successes: np.ndarray  # (N,) float counts
    trials: np.ndarray  # (N,)
    x: np.ndarray  # (N,) positive, for the Brownian laws
    groups: np.ndarray  # (N,) int32 segment ids in [0, 3)
    subset: np.ndarray  # (N,) bool membership of a subpopulation


@functools.cache
def make_data(seed: int = 0) -> Data:
    """The shared data set number ``seed`` (float32 values)."""
    rng = np.random.default_rng(seed)
    logits = 2.0 * rng.normal(size=(N, K))
    probs = np.exp(logits - logits.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    labels = rng.integers(0, K, N)
    labels[:K] = np.arange(K)  # every class present, in every shard too
    labels[6 : 6 + K] = labels[12 : 12 + K] = labels[18 : 18 + K] = np.arange(K)
    p = rng.uniform(0.05, 0.95, N)
    y = (rng.uniform(size=N) < p).astype(np.int32)
    y[::2] = np.arange(N // 2) % 2  # both classes in every shard
    target = rng.normal(size=N)
    half = np.abs(rng.normal(size=N)) + 0.2
    centre = target + 0.8 * rng.normal(size=N)
    trials = rng.integers(1, 20, N)
    margins, weights = 3.0 * rng.normal(size=N), rng.uniform(0.5, 2.0, N)
    sets, successes = rng.uniform(size=(N, K)) < 0.6, rng.integers(0, trials + 1)
    x = rng.uniform(0.2, 3.0, N)
    groups = np.arange(N) % 3  # drawn last: the fields above keep their values
    subset = rng.uniform(size=N) < 0.5
    subset[:2] = True, False  # in and out of the subpopulation in every shard
    subset[6:8] = subset[12:14] = subset[18:20] = True, False
    f32 = functools.partial(np.asarray, dtype=np.float32)
    return Data(
        probs=f32(probs),
        logits=f32(logits),
        labels=labels.astype(np.int32),
        p=f32(p),
        y=y,
        margins=f32(margins),
        weights=f32(weights),
        target=f32(target),
        lower=f32(centre - half),
        upper=f32(centre + half),
        sets=sets,
        successes=f32(successes),
        trials=f32(trials),
        x=f32(x),
        groups=groups.astype(np.int32),
        subset=subset,
    )


@dataclasses.dataclass(frozen=True)
class Entry:
    """One call of a public function under the contract.

    Attributes:
      name: test id, e.g. ``"ece"`` or ``"temperature_scaling.fit"``.
      target: the public object the entry covers.
      fn: the call, static options bound; array arguments positional.
      args: ``args(data, dtype) -> tuple`` of the array arguments (float ones in ``dtype``).
      roles: the role of each argument (see ROWS ...).
      grad: argnums with respect to which the sum of the float outputs has a finite
        gradient (the entry declares them differentiable).
      view: maps the output to what is compared (e.g. a calibrator's probabilities for a
        fit, whose parameters need not be unique).
      rtol, atol: tolerances of the comparisons, where an iterative solver stops at its
        own tolerance (each entry that sets them says why).
      pad: padded rows give the unpadded result (entries whose result depends on N, such
        as resampling, opt out with a reason in ``skip``).
      shard: run under ``shard_map`` (one shard's rows per device).
      low_precision: bf16/f16 float arguments accepted.
      not_differentiable: differentiating the call raises a ValueError that says so.
      skip: ``{check: reason}`` for checks that do not apply.
      rebuild: for a factory (or a call taking a function, such as a metric): a
        zero-argument function that calls the factory anew (or builds a new, equal
        ``functools.partial``) and returns the call ``fn`` makes, so that two builds with
        equal options, and a call each, can be checked to compile once.
    """

    name: str
    target: Any
    fn: Callable[..., Any]
    args: Callable[[Data, Any], tuple]
    roles: tuple[str, ...]
    grad: tuple[int, ...] = ()
    view: Callable[[Any], Any] | None = None
    rtol: float | None = None
    atol: float | None = None
    not_differentiable: bool = False
    skip: dict[str, str] = dataclasses.field(default_factory=dict)
    rebuild: Callable[[], Callable[..., Any]] | None = None

    def __repr__(self) -> str:
        return self.name


def _as(x: np.ndarray, dtype: Any) -> jax.Array:
    return jnp.asarray(x, dtype) if np.issubdtype(x.dtype, np.floating) else jnp.asarray(x)


def _cols(*fields: str) -> Callable[[Data, Any], tuple]:
    """``args`` builder taking the named fields of the data (floats in the given dtype)."""
    return lambda d, dtype: tuple(_as(getattr(d, f), dtype) for f in fields)


# ---------------------------------------------------------------- metrics and tests

_PROBS = _cols("probs", "labels", "weights")
_BINARY = _cols("p", "y", "weights")
_PLW = (ROWS, LABELS, WEIGHTS)


def _metric(fn, name=None, grad=(0,), binary=False, **kw):
    return Entry(
        name or fn.__name__,
        fn,
        lambda p, y, w: fn(p, y, weights=w, **kw),
        _BINARY if binary else _PROBS,
        _PLW,
        grad=grad,
    )


_RESAMPLED = {"pad": "the resamples are drawn over all N rows, padding included"}


def _tcal_few_resamples(p, y, w, key):
    """tcal_test with 16 resamples, for speed: its warning that p cannot reach alpha
    (B / 17 > 0.05) is not what the registry checks."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "tcal_test cannot reject", UserWarning)
        return jaxcal.tcal_test(p, y, key=key, n_resamples=16, weights=w)


def _masked(fn, name=None, grad=(), binary=False, **kw):
    """A measure whose weights are a 0/1 mask (ece_sweep, tce): all-ones weights here,
    the padding rows' zeros in the padding check."""
    cols = ("p", "y") if binary else ("probs", "labels")

    def args(d, dtype):
        p, y = _cols(*cols)(d, dtype)
        return p, y, jnp.ones((p.shape[0],), dtype)

    return Entry(
        name or fn.__name__, fn, lambda p, y, w: fn(p, y, weights=w, **kw), args, _PLW, grad=grad
    )


#: Test locations of the UCME and CME entries: (m, K) rows and labels, and binary ones.
_TEST_P = np.array([[0.6, 0.3, 0.1], [0.2, 0.2, 0.6], [1 / 3, 1 / 3, 1 / 3]], np.float32)
_TEST_Y = np.array([0, 2, 1], np.int32)
_TEST_S = np.array([0.2, 0.5, 0.9], np.float32)
_TEST_B = np.array([0, 1, 1], np.int32)


def _resampling(name, fn, seed, metric=None, grad=()):
    """A resampling procedure (of ``metric`` when given) on probs, labels, weights, key.

    With a metric, ``rebuild`` passes a new ``functools.partial`` of it each time (equal
    partials must share the compiled program).
    """
    first = () if metric is None else (metric,)

    def call_with(*head):
        return lambda p, y, w, key: fn(*head, p, y, key=key, n_resamples=16, weights=w)

    return Entry(
        name,
        fn,
        call_with(*first),
        lambda d, dtype: (*_PROBS(d, dtype), jax.random.key(seed)),
        (*_PLW, FIXED),
        grad=grad,
        skip=_RESAMPLED,
        rebuild=None if metric is None else lambda: call_with(functools.partial(metric)),
    )


def _consistency_of(metric, p, y, key):
    return jaxcal.consistency_test(metric, p, y, key=key, n_resamples=16)


def _paired_of(metric, p, q, y, w, key):
    return jaxcal.paired_bootstrap(metric, p, q, y, key=key, n_resamples=16, weights=w)


METRICS = [
    _metric(jaxcal.ece),
    _metric(jaxcal.mce),
    _metric(jaxcal.classwise_ece),
    _metric(jaxcal.top_label_ece),
    _metric(jaxcal.brier_score),
    _metric(jaxcal.log_loss),
    _metric(jaxcal.brier_decomposition),
    _metric(jaxcal.reliability_curve),
    _metric(jaxcal.soft_ece),
    _metric(jaxcal.soft_ece, "soft_ece.l2", norm="l2"),
    _metric(jaxcal.mmce),
    _metric(jaxcal.smooth_ece),
    _metric(jaxcal.ece, "ece.quantile", binning="quantile"),
    _metric(jaxcal.ece, "ece.binary", binary=True),
    _metric(jaxcal.calibration_tests, binary=True),
    _metric(jaxcal.ks_test, binary=True),
    _metric(jaxcal.kuiper_test, binary=True),
    _metric(jaxcal.spiegelhalter_test, binary=True),
    Entry(
        "cumulative_differences",
        jaxcal.cumulative_differences,
        lambda s, y, w: jaxcal.cumulative_differences(s, y, weights=w),
        _BINARY,
        _PLW,
        skip={"pad": "the path has one step per row, padding included"},
    ),
    Entry(
        "ks_test.groups",
        jaxcal.ks_test,
        lambda s, y, g, w: jaxcal.ks_test(s, y, weights=w, groups=g, n_groups=3),
        _cols("p", "y", "groups", "weights"),
        (ROWS, LABELS, LABELS, WEIGHTS),
    ),
    *(
        Entry(
            f"{fn.__name__}.groups",
            fn,
            lambda p, y, g, w, fn=fn: fn(p, y, weights=w, groups=g, n_groups=3),
            _cols("probs", "labels", "groups", "weights"),
            (ROWS, LABELS, LABELS, WEIGHTS),
            grad=() if fn is jaxcal.reliability_curve else (0,),
        )
        for fn in (jaxcal.ece, jaxcal.reliability_curve, jaxcal.brier_score, jaxcal.log_loss)
    ),
    Entry(
        "ece.group_masks",
        jaxcal.ece,
        lambda p, y, m, w: jaxcal.ece(p, y, weights=w, groups=m),
        _cols("probs", "labels", "sets", "weights"),
        (ROWS, LABELS, SETS, WEIGHTS),
        grad=(0,),
    ),
    dataclasses.replace(
        _metric(jaxcal.ici, binary=True),
        # the gradient through the loess compiles for ~60 CPU-s; tests/stats/test_ici.py has it
        skip={"grad": "compiling the loess's gradient costs a minute of CI"},
    ),
    _metric(jaxcal.stats.calibration_slope_intercept, binary=True),
    _metric(jaxcal.stats.observed_expected_ratio, binary=True),
    Entry(
        "hosmer_lemeshow_test",
        jaxcal.stats.hosmer_lemeshow_test,
        lambda p, y, w: jaxcal.stats.hosmer_lemeshow_test(p, y, n_groups=4, weights=w),
        _BINARY,
        _PLW,
    ),
    Entry(
        "prevalence_weights",
        jaxcal.stats.prevalence_weights,
        lambda y, w: jaxcal.stats.prevalence_weights(y, 0.3, weights=w),
        _cols("y", "weights"),
        (LABELS, WEIGHTS),
        skip={"pad": "one weight per row, padding included", "low_precision": "no probs"},
    ),
    Entry(
        "multicalibration_error",
        jaxcal.stats.multicalibration_error,
        lambda p, y, g, w: jaxcal.stats.multicalibration_error(p, y, g, n_groups=3, weights=w),
        _cols("p", "y", "groups", "weights"),
        (ROWS, LABELS, LABELS, WEIGHTS),
    ),
    Entry(
        "subpopulation_test",
        jaxcal.stats.subpopulation_test,
        lambda p, y, sub, w: jaxcal.stats.subpopulation_test(p, y, sub, weights=w),
        _cols("p", "y", "subset", "weights"),
        (ROWS, LABELS, SETS, WEIGHTS),
    ),
    _metric(jaxcal.score_decomposition, grad=()),
    _metric(
        jaxcal.score_decomposition,
        "score_decomposition.log_binned",
        grad=(),
        score="log",
        method="binned",
        n_bins=4,
    ),
    _metric(jaxcal.murphy_diagram, grad=(), n_thresholds=9),
    Entry(
        "corp_curve",
        jaxcal.corp_curve,
        lambda p, y, w: jaxcal.corp_curve(p, y, weights=w),
        _PROBS,
        _PLW,
        skip={"pad": "one knot per row, padding included (its weight is 0)"},
    ),
    _resampling("corp_bands", jaxcal.corp_bands, 5),
    _resampling("score_decomposition_ci", jaxcal.score_decomposition_ci, 6),
    Entry(
        "confidence_and_correctness",
        jaxcal.confidence_and_correctness,
        jaxcal.confidence_and_correctness,
        _cols("probs", "labels"),
        (ROWS, LABELS),
        grad=(0,),
    ),
    Entry(
        "quantile_edges",
        jaxcal.quantile_edges,
        lambda s, w: jaxcal.quantile_edges(s, 4, "right", w),
        _cols("p", "weights"),
        (ROWS, WEIGHTS),
    ),
    Entry(
        "uniform_edges",
        jaxcal.uniform_edges,
        lambda: jaxcal.uniform_edges(5),
        lambda d, dtype: (),
        (),
        skip={"vmap": "no array argument", "low_precision": "no array argument"},
    ),
    Entry(
        "reliability_intervals",
        jaxcal.reliability_intervals,
        lambda p, y: jaxcal.reliability_intervals(p, y, method="clopper-pearson", n_bins=4),
        _cols("probs", "labels"),
        (ROWS, LABELS),
    ),
    Entry(
        "reliability_intervals.wilson",
        jaxcal.reliability_intervals,
        lambda p, y: jaxcal.reliability_intervals(p, y, n_bins=4),
        _cols("probs", "labels"),
        (ROWS, LABELS),
    ),
    Entry(
        "consistency_bands",
        jaxcal.consistency_bands,
        lambda p, key: jaxcal.consistency_bands(p, key=key, n_resamples=16, n_bins=4),
        lambda d, dtype: (_as(d.probs, dtype), jax.random.key(1)),
        (ROWS, FIXED),
    ),
    Entry(
        "consistency_test",
        jaxcal.consistency_test,
        lambda p, y, key: jaxcal.consistency_test(jaxcal.ece, p, y, key=key, n_resamples=16),
        lambda d, dtype: (_as(d.probs, dtype), jnp.asarray(d.labels), jax.random.key(2)),
        (ROWS, LABELS, FIXED),
        grad=(0,),
        rebuild=lambda: functools.partial(_consistency_of, functools.partial(jaxcal.ece, n_bins=5)),
    ),
    _resampling("consistency_test.generic", jaxcal.consistency_test, 2, jaxcal.brier_score),
    _resampling("bootstrap_ci", jaxcal.bootstrap_ci, 3, jaxcal.ece, grad=(0,)),
    _metric(jaxcal.skce),
    _metric(jaxcal.skce, "skce.binary", binary=True),
    _metric(jaxcal.skce, "skce.gaussian_biased", kernel="gaussian", estimator="biased"),
    _metric(jaxcal.skce, "skce.block", estimator="block", block_size=4),
    _metric(jaxcal.skce, "skce.top_label", kind="top_label", bandwidth=0.3),
    Entry(
        "skce_test",
        jaxcal.skce_test,
        lambda p, y, w, key: jaxcal.skce_test(p, y, key=key, n_resamples=16, weights=w),
        lambda d, dtype: (*_PROBS(d, dtype), jax.random.key(8)),
        (*_PLW, FIXED),
        skip=_RESAMPLED,
    ),
    _metric(jaxcal.skce_test, "skce_test.block", grad=(), method="block", block_size=4),
    Entry(
        "skce_test.consistency",
        jaxcal.skce_test,
        lambda p, y, w, key: jaxcal.skce_test(
            p, y, key=key, n_resamples=16, null="consistency", weights=w
        ),
        lambda d, dtype: (*_PROBS(d, dtype), jax.random.key(8)),
        (*_PLW, FIXED),
        skip=_RESAMPLED,
    ),
    _metric(
        jaxcal.skce_test,
        "skce_test.distribution_free",
        grad=(),
        binary=True,
        method="distribution_free",
        estimator="biased",
    ),
    Entry(
        "ucme",
        jaxcal.ucme,
        lambda p, y, w: jaxcal.ucme(p, y, test_probs=_TEST_P, test_labels=_TEST_Y, weights=w),
        _PROBS,
        _PLW,
        grad=(0,),
    ),
    Entry(
        "ucme.binary",
        jaxcal.ucme,
        lambda p, y, w: jaxcal.ucme(
            p, y, test_probs=_TEST_S, test_labels=_TEST_B, kernel="gaussian", weights=w
        ),
        _BINARY,
        _PLW,
        grad=(0,),
    ),
    Entry(
        "cme_test",
        jaxcal.cme_test,
        lambda p, y, w: jaxcal.cme_test(p, y, test_probs=_TEST_P, test_labels=_TEST_Y, weights=w),
        _PROBS,
        _PLW,
        # Kish's effective size and the covariance are rescaled by the padding's zero
        # weights only through round-off; the eigenvalues of a 3 x 3 covariance in float32
        rtol=1e-4,
        atol=1e-5,
    ),
    Entry(
        "cme_test.consistency",
        jaxcal.cme_test,
        lambda p, y, w, key: jaxcal.cme_test(
            p,
            y,
            test_probs=_TEST_P,
            test_labels=_TEST_Y,
            null="consistency",
            key=key,
            n_resamples=16,
            weights=w,
        ),
        lambda d, dtype: (*_PROBS(d, dtype), jax.random.key(9)),
        (*_PLW, FIXED),
        skip=_RESAMPLED,
        rtol=1e-4,
        atol=1e-5,
    ),
    _metric(jaxcal.ece_kde),
    _metric(jaxcal.ece_kde, "ece_kde.binary", binary=True, bandwidth=0.05, p=2),
    _metric(jaxcal.ece_kde, "ece_kde.marginal", kind="marginal", bandwidth=0.1),
    _metric(jaxcal.ece_kde, "ece_kde.top_label", kind="top_label", bandwidth=0.1),
    _metric(jaxcal.proper_calibration_error),
    _metric(
        jaxcal.proper_calibration_error,
        "proper_calibration_error.classwise_l2",
        kind="classwise",
        divergence="l2",
        bandwidth=0.1,
    ),
    Entry(
        "kde_bandwidth",
        jaxcal.kde_bandwidth,
        lambda p, w: jaxcal.kde_bandwidth(p, weights=w),
        _cols("probs", "weights"),
        (ROWS, WEIGHTS),
    ),
    _metric(jaxcal.l2_ece_interval, grad=(), n_bins=4),
    _metric(jaxcal.l2_ece_interval, "l2_ece_interval.binary", grad=(), binary=True, n_bins=4),
    Entry(
        "tcal_test",
        jaxcal.tcal_test,
        _tcal_few_resamples,
        lambda d, dtype: (*_BINARY(d, dtype), jax.random.key(10)),
        (*_PLW, FIXED),
        skip={
            **_RESAMPLED,
            "vmap": "a batch of T-Cal tests is jax.lax.map over data sets (vmap equals it)",
        },
    ),
    _masked(jaxcal.ece_sweep, grad=(0,)),
    _masked(jaxcal.ece_sweep, "ece_sweep.binary_l1", grad=(0,), binary=True, norm="l1"),
    _masked(jaxcal.tce, binary=True, n_min=3, n_max=8),
    _masked(jaxcal.tce, "tce.quantile", strategy="quantile", n_bin=4),
    Entry(
        "paired_bootstrap",
        jaxcal.paired_bootstrap,
        functools.partial(_paired_of, jaxcal.brier_score),
        lambda d, dtype: (
            _as(d.probs, dtype),
            _as(np.roll(d.probs, 1, axis=1), dtype),
            jnp.asarray(d.labels),
            _as(d.weights, dtype),
            jax.random.key(4),
        ),
        (ROWS, ROWS, LABELS, WEIGHTS, FIXED),
        grad=(0,),
        skip=_RESAMPLED,
        rebuild=lambda: functools.partial(_paired_of, functools.partial(jaxcal.brier_score)),
    ),
]


def _interval(fn):
    return Entry(
        fn.__name__,
        fn,
        lambda k, n: fn(k, n, confidence=0.9),
        _cols("successes", "trials"),
        (ROWS, ROWS),
        skip={"low_precision": "counts, not probabilities"},
    )


def _law(fn):
    return Entry(fn.__name__, fn, fn, _cols("x"), (ROWS,), grad=(0,))


STATS = [
    _interval(jaxcal.wilson_interval),
    _interval(jaxcal.clopper_pearson_interval),
    *(
        _law(f)
        for f in (
            jaxcal.brownian_max_cdf,
            jaxcal.brownian_max_sf,
            jaxcal.brownian_range_cdf,
            jaxcal.brownian_range_sf,
            jaxcal.log_brownian_max_sf,
            jaxcal.log_brownian_range_sf,
        )
    ),
    Entry(
        "log_chi2_sf",
        jaxcal.stats.log_chi2_sf,
        jaxcal.stats.log_chi2_sf,
        _cols("x", "trials"),
        (ROWS, ROWS),
        grad=(0,),
    ),
]

# ---------------------------------------------------------------- calibrators

#: A fitted calibrator is compared by its probabilities on these rows (its parameters
#: need not be unique: matrix scaling ignores a common shift of the logits).
_EVAL = make_data(7)

# The parametric fits stop where their gradient test holds (1e-6 in float32), so two
# runs that differ by float round-off (a closure folded by XLA, a vmapped batch) land at
# points whose probabilities agree to about that tolerance, not to the last bit.
_FIT_TOL = {"rtol": 1e-4, "atol": 1e-5}


def _calibrator(factory, build, binary, differentiable, field="logits", name=None):
    """The ``fit`` and ``apply`` entries of one calibrator (``build()`` makes it)."""
    name = name or factory.__name__
    cal = build()
    x_field = ("margins" if field == "logits" else "p") if binary else field
    label_field = "y" if binary else "labels"
    x_eval = getattr(_EVAL, x_field)

    def fit_view(params):
        return cal.apply(params, jnp.asarray(x_eval, params_dtype(params)))

    def fit_args(d, dtype):
        x, labels = getattr(d, x_field), getattr(d, label_field)
        return _as(x, dtype), jnp.asarray(labels), _as(d.weights, dtype)

    def apply_args(d, dtype):
        key = (name, id(d))  # make_data is cached: one object per seed
        if key not in _FITTED:  # one fit per calibrator and data set, as the fit entry's
            x, labels, weights = fit_args(d, jnp.float32)
            _FITTED[key] = cal.fit(x, labels, weights=weights)
        return _FITTED[key], _as(getattr(d, x_field), dtype)

    tol = _FIT_TOL if differentiable else {}
    fit = Entry(
        f"{name}.fit",
        factory,
        lambda x, y, w: cal.fit(x, y, weights=w),
        fit_args,
        _PLW,
        grad=(0, 2) if differentiable else (),
        view=fit_view,
        not_differentiable=not differentiable,
        skip={"vmap": "the resampled-fits test runs jit(vmap(fit)) against a loop"},
        rebuild=lambda: lambda x, y, w: build().fit(x, y, weights=w),
        **tol,
    )
    apply = Entry(
        f"{name}.apply",
        factory,
        cal.apply,
        apply_args,
        (PYTREE, ROWS),
        grad=(0, 1) if differentiable else (),
        rebuild=lambda: build().apply,
        **tol,
    )
    return [fit, apply]


_FITTED: dict[tuple, Any] = {}


def params_dtype(params: Any) -> Any:
    """The float dtype of a pytree of parameters."""
    leaves = [x for x in jax.tree.leaves(params) if jnp.issubdtype(x.dtype, jnp.floating)]
    return leaves[0].dtype if leaves else jnp.float32


def _calibrators():
    specs = [  # (factory, a builder calling it, binary, differentiable, input field, name)
        (C.temperature_scaling, lambda: C.temperature_scaling(), False, True, "logits", None),
        (C.vector_scaling, lambda: C.vector_scaling(), False, True, "logits", None),
        (C.matrix_scaling, lambda: C.matrix_scaling(l2=1e-3), False, True, "logits", None),
        # A small penalty, as for matrix scaling: without it the float32 L-BFGS stops on a flat
        # valley, at points whose probabilities differ by 2e-4 between eager and a closure.
        (C.dirichlet, lambda: C.dirichlet(inputs="probs", l2=1e-3), False, True, "probs", None),
        (C.platt_scaling, lambda: C.platt_scaling(), True, True, "probs", None),
        (C.platt_scaling, lambda: C.platt_scaling(inputs="logits"), True, True, "logits",
         "platt.logits"),
        (C.beta_calibration, lambda: C.beta_calibration(), True, True, "probs", None),
        (C.histogram_binning, lambda: C.histogram_binning(4), True, False, "probs", None),
        (C.isotonic, lambda: C.isotonic(), True, False, "probs", None),
        (C.scaling_binning, lambda: C.scaling_binning(4), True, False, "probs", None),
        (C.top_label, lambda: C.top_label(C.platt_scaling()), False, True, "probs", None),
        (C.classwise, lambda: C.classwise(C.isotonic()), False, False, "probs", None),
        (C.centred_isotonic, lambda: C.centred_isotonic(), True, False, "probs", None),
        (C.venn_abers, lambda: C.venn_abers(), True, False, "probs", None),
        (C.venn_abers, lambda: C.venn_abers(multiclass=True), False, False, "probs",
         "venn_abers.multi"),
    ]  # fmt: skip
    return [entry for spec in specs for entry in _calibrator(*spec)]


CALIBRATORS = _calibrators()


def _quartic(t):  # one function object: minimize compiles once per shape
    return jnp.sum((t - 1) ** 2 * (1 + t * t))


def _minimize(init, fun=_quartic):
    params, _ = C.minimize(fun, init)
    return params


def _shifted_quartic(t, shift):
    return jnp.sum((t - shift) ** 2 * (1 + t * t))


CALIBRATOR_HELPERS = [
    Entry(
        "venn_abers_interval",
        C.venn_abers_interval,
        C.venn_abers_interval,
        lambda d, dtype: next(e for e in CALIBRATORS if e.name == "venn_abers.apply").args(
            d, dtype
        ),
        (PYTREE, ROWS),
    ),
    Entry(
        "minimize",
        C.minimize,
        _minimize,
        lambda d, dtype: (_as(d.x[:2], dtype),),
        (PYTREE,),
        # a new, equal partial each time: the loop compiles once
        rebuild=lambda: functools.partial(
            _minimize, fun=functools.partial(_shifted_quartic, shift=1.0)
        ),
    ),
    Entry(
        "to_probs",
        C.to_probs,
        lambda z: C.to_probs(z, inputs="logits"),
        _cols("logits"),
        (ROWS,),
        grad=(0,),
    ),
    Entry(
        "to_logits",
        C.to_logits,
        lambda p: C.to_logits(p, inputs="probs"),
        _cols("p"),
        (ROWS,),
        grad=(0,),
    ),
]

# ---------------------------------------------------------------- streaming


def _state_dtype(dtype):
    """States accumulate in float32 at least: float64 only when asked (under x64)."""
    return jnp.float64 if dtype == jnp.float64 else None


def _empty(dtype):
    return streaming.init(4, K, dtype=_state_dtype(dtype))


def _state_of(d, dtype):
    return streaming.update(_empty(dtype), d.probs, d.labels, d.weights)


_CLU = streaming.clu_metric(4, K, output="ece")


def _clu_ece(probs, labels, mask):
    metric = streaming.clu_metric(4, K, output="ece")
    return metric.from_model_output(probs=probs, labels=labels, mask=mask).compute()


def _nnx_ece(probs, labels, mask):
    metric = streaming.nnx_metric(4, K, output="ece")
    metric.update(probs=probs, labels=labels, mask=mask)
    return metric.compute()


def _fine_of(d, dtype):
    fine = streaming.init(4, 2, binary=True, resolution=64, dtype=_state_dtype(dtype))
    return streaming.update(fine, d.p, d.y, d.weights)  # buckets for the bucket views


def _fine(name, fn, **kw):
    return Entry(
        f"streaming.{name}",
        fn,
        lambda s: fn(s, **kw),
        lambda d, dtype: (_fine_of(d, dtype),),
        (PYTREE,),
        skip={"low_precision": "states accumulate in float32 at least"},
    )


def _no_replicates(dtype):
    return streaming.poisson_init(4, 2, 8, binary=True, dtype=_state_dtype(dtype))


def _replicates_of(d, dtype):
    key = jax.random.key(8)
    return streaming.poisson_update(
        _no_replicates(dtype), d.p, d.y, np.arange(len(d.p)), key=key, weights=d.weights
    )


def _no_regression(dtype):
    return streaming.regression_init(4, std_edges=(0.5, 1.0, 2.0), dtype=_state_dtype(dtype))


def _regression_state_of(d, dtype):
    g = regression.Gaussian(_as(d.margins, dtype), _as(d.x, dtype))
    return streaming.regression_update(_no_regression(dtype), g, _as(d.target, dtype), d.weights)


def _regression_update(s, m, sd, y, w):
    return streaming.regression_update(s, regression.Gaussian(m, sd), y, w)


_STATE_ONLY = {"low_precision": "states accumulate in float32 at least"}
_REGRESSION_STATE = [
    Entry(
        "streaming.regression_init",
        streaming.regression_init,
        lambda: streaming.regression_init(4, std_edges=(0.5, 1.0, 2.0)),
        lambda d, dtype: (),
        (),
        skip={"vmap": "no array argument", "low_precision": "no array argument"},
    ),
    Entry(
        "streaming.regression_update",
        streaming.regression_update,
        _regression_update,
        lambda d, dtype: (
            _no_regression(dtype),
            *_cols("margins", "x", "target", "weights")(d, dtype),
        ),
        (PYTREE, ROWS, ROWS, ROWS, WEIGHTS),
    ),
    Entry(
        "streaming.merge.regression",
        streaming.merge,
        streaming.merge,
        lambda d, dtype: (
            _regression_state_of(d, dtype),
            _regression_state_of(make_data(5), dtype),
        ),
        (PYTREE, PYTREE),
        skip=_STATE_ONLY,
    ),
    Entry(
        "streaming.regression_compute",
        streaming.regression_compute,
        lambda s: streaming.regression_compute(s, prop_type="quantile"),
        lambda d, dtype: (_regression_state_of(d, dtype),),
        (PYTREE,),
        skip=_STATE_ONLY,
    ),
]

STREAMING = [
    _fine("corp_curve", streaming.corp_curve),
    _fine("corp_decomposition", streaming.corp_decomposition),
    _fine("equal_mass_ece", streaming.equal_mass_ece),
    _fine("isotonic_params", streaming.isotonic_params),
    _fine("rebin", streaming.rebin, n_bins=2),
    _fine("l2_ece_interval", streaming.l2_ece_interval, n_bins=2),
    Entry(
        "streaming.poisson_init",
        streaming.poisson_init,
        lambda: streaming.poisson_init(4, 2, 8, binary=True),
        lambda d, dtype: (),
        (),
        skip={"vmap": "no array argument", "low_precision": "no array argument"},
    ),
    Entry(
        "streaming.poisson_update",
        streaming.poisson_update,
        lambda s, p, y, ids, w, key: streaming.poisson_update(s, p, y, ids, key=key, weights=w),
        lambda d, dtype: (
            _no_replicates(dtype),
            *_cols("p", "y")(d, dtype),
            jnp.arange(len(d.p)),  # example ids (any length of data: test_bad_input.py)
            _as(d.weights, dtype),
            jax.random.key(9),
        ),
        (PYTREE, ROWS, LABELS, LABELS, WEIGHTS, FIXED),
    ),
    Entry(
        "streaming.poisson_compute",
        streaming.poisson_compute,
        streaming.poisson_compute,
        lambda d, dtype: (_replicates_of(d, dtype),),
        (PYTREE,),
        skip={"low_precision": "states accumulate in float32 at least"},
    ),
    Entry(
        "streaming.poisson_interval",
        streaming.poisson_interval,
        lambda s: streaming.poisson_interval(s, confidence=0.9),
        lambda d, dtype: (_replicates_of(d, dtype),),
        (PYTREE,),
        skip={"low_precision": "states accumulate in float32 at least"},
    ),
    Entry(
        "streaming.init",
        streaming.init,
        lambda: streaming.init(4, K),
        lambda d, dtype: (),
        (),
        skip={"vmap": "no array argument", "low_precision": "no array argument"},
    ),
    Entry(
        "streaming.update",
        streaming.update,
        streaming.update,
        lambda d, dtype: (_empty(dtype), *_PROBS(d, dtype)),
        (PYTREE, *_PLW),
        grad=(1,),
    ),
    Entry(
        "streaming.merge",
        streaming.merge,
        streaming.merge,
        lambda d, dtype: (_state_of(d, dtype), _state_of(make_data(5), dtype)),
        (PYTREE, PYTREE),
        skip={"low_precision": "states accumulate in float32 at least"},
    ),
    Entry(
        "streaming.compute",
        streaming.compute,
        streaming.compute,
        lambda d, dtype: (_state_of(d, dtype),),
        (PYTREE,),
        grad=(0,),
        skip={"low_precision": "states accumulate in float32 at least"},
    ),
    Entry(
        "streaming.reliability_curve",
        streaming.reliability_curve,
        streaming.reliability_curve,
        lambda d, dtype: (_state_of(d, dtype),),
        (PYTREE,),
        skip={"low_precision": "states accumulate in float32 at least"},
    ),
    Entry(
        "streaming.clu_metric",
        streaming.clu_metric,
        lambda p, y, m: _CLU.from_model_output(probs=p, labels=y, mask=m).compute(),
        lambda d, dtype: (_as(d.probs, dtype), jnp.asarray(d.labels), jnp.asarray(d.weights > 0)),
        (ROWS, LABELS, WEIGHTS),
        rebuild=lambda: _clu_ece,  # a new call of the factory per call
    ),
    Entry(
        "streaming.nnx_metric",
        streaming.nnx_metric,
        _nnx_ece,
        lambda d, dtype: (_as(d.probs, dtype), jnp.asarray(d.labels), jnp.asarray(d.weights > 0)),
        (ROWS, LABELS, WEIGHTS),
        rebuild=lambda: _nnx_ece,  # a new metric object per call
    ),
    *_REGRESSION_STATE,
]

# ---------------------------------------------------------------- coverage

_INTERVALS = _cols("target", "lower", "upper", "weights")
_YLUW = (ROWS, ROWS, ROWS, WEIGHTS)
_SETS = _cols("labels", "sets", "weights")


def _regression(fn, grad=(), **kw):
    return Entry(
        fn.__name__, fn, lambda y, lo, up, w: fn(y, lo, up, weights=w, **kw), _INTERVALS, _YLUW,
        grad=grad,
    )  # fmt: skip


def _classification(fn, **kw):
    return Entry(
        fn.__name__,
        fn,
        lambda y, s, w: fn(y, s, weights=w, **kw),
        _SETS,
        (LABELS, SETS, WEIGHTS),
        skip={"low_precision": "sets are boolean"},
    )


COVERAGE = [
    _regression(coverage.regression_coverage_score),
    Entry(
        "regression_mean_width_score",
        coverage.regression_mean_width_score,
        lambda lo, up, w: coverage.regression_mean_width_score(lo, up, weights=w),
        _cols("lower", "upper", "weights"),
        (ROWS, ROWS, WEIGHTS),
        grad=(0, 1),
    ),
    _regression(coverage.regression_ssc, num_bins=2),
    _regression(coverage.regression_ssc_score, num_bins=2),
    _regression(coverage.hsic),
    _regression(coverage.coverage_width_based, grad=(1, 2), eta=10.0, confidence_level=0.9),
    _regression(coverage.regression_mwi_score, grad=(1, 2), confidence_level=0.9),
    _classification(coverage.classification_coverage_score),
    Entry(
        "classification_mean_width_score",
        coverage.classification_mean_width_score,
        lambda s, w: coverage.classification_mean_width_score(s, weights=w),
        _cols("sets", "weights"),
        (SETS, WEIGHTS),
        skip={"low_precision": "sets are boolean"},
    ),
    _classification(coverage.classification_ssc),
    _classification(coverage.classification_ssc_score),
]

# ---------------------------------------------------------------- losses


def _loss(fn):
    return Entry(
        fn.__name__,
        fn,
        lambda z, y, w: fn(z, y, weights=w),
        _cols("logits", "labels", "weights"),
        _PLW,
        grad=(0,),
    )


_USER_MODEL = {"low_precision": "the user's apply_fn and parameters set the dtypes"}


def _mlp(params, x):
    return jnp.tanh(x @ params["hidden"]) @ params["out"]


def _mlp_params(dtype):
    rng = np.random.default_rng(7)
    return {
        "hidden": jnp.asarray(rng.normal(size=(K, 5)), dtype),
        "out": jnp.asarray(rng.normal(size=(5, K)), dtype),
    }


def _meta_step(params, hparams, x, y, xc, yc):
    """One meta-calibration step from a fresh state (SGD both sides: optax.adam's bias
    correction is not strict-promotion clean)."""
    mc = losses.meta_calibration(
        _mlp,
        optax.sgd(0.1),
        {"hidden": False, "out": True},
        hyper_optimizer=optax.sgd(0.01),
    )
    return mc.step(params, hparams, mc.init(params, hparams), (x, y), (xc, yc))


LOSSES = [
    *(
        _loss(f)
        for f in (
            losses.dca_loss,
            losses.ece_kde_loss,
            losses.focal_loss,
            losses.mmce_loss,
            losses.soft_ece_loss,
        )
    ),
    Entry("flsd53_gamma", losses.flsd53_gamma, losses.flsd53_gamma, _cols("p"), (ROWS,)),
    _loss(losses.dece_loss),
    Entry(
        "saturation_stats",
        losses.saturation_stats,
        lambda z, y, w: losses.saturation_stats(z, y, regularizer=losses.mmce_loss, weights=w),
        _cols("logits", "labels", "weights"),
        _PLW,
        grad=(0,),
    ),
    Entry(
        "hyper_cross_entropy",
        losses.hyper_cross_entropy,
        lambda z, y, h, w: losses.hyper_cross_entropy(z, y, h, weights=w),
        lambda d, dtype: (
            _as(d.logits, dtype),
            jnp.asarray(d.labels),
            {"label_smoothing": jnp.asarray(0.1, dtype), "temperature": jnp.asarray(1.5, dtype)},
            _as(d.weights, dtype),
        ),
        (ROWS, LABELS, PYTREE, WEIGHTS),
        grad=(0, 2),
    ),
    Entry(
        "heldout_objective",
        losses.heldout_objective,
        lambda p, x, y, xc, yc: losses.heldout_objective(_mlp, losses.mmce_loss, lam=0.5)(
            p, (x, y), (xc, yc)
        ),
        lambda d, dtype: (
            _mlp_params(dtype),
            *_cols("logits", "labels", "probs", "labels")(d, dtype),
        ),
        (PYTREE, ROWS, LABELS, ROWS, LABELS),
        grad=(0,),
        skip=_USER_MODEL,
    ),
    Entry(
        "heldout_batch_indices",
        losses.heldout_batch_indices,
        lambda key: losses.heldout_batch_indices(key, N, 8, steps=5, batch_size=6),
        lambda d, dtype: (jax.random.key(int(d.labels.sum())),),
        (PYTREE,),
        skip={"low_precision": "no float argument"},
    ),
    Entry(
        "meta_calibration.step",
        losses.meta_calibration,
        _meta_step,
        lambda d, dtype: (
            _mlp_params(dtype),
            {"label_smoothing": jnp.asarray(0.1, dtype), "temperature": jnp.asarray(1.0, dtype)},
            *_cols("logits", "labels", "probs", "labels")(d, dtype),
        ),
        (PYTREE, PYTREE, ROWS, LABELS, ROWS, LABELS),
        skip=_USER_MODEL,
    ),
]

# ---------------------------------------------------------------- selective prediction

_CURVE_SKIP = {"pad": "one point per row, padding included (of zero width)"}


def _selective(fn, name=None, binary=False, **kw):
    """A selective measure: differentiable in the weights (the confidence enters by its
    order only, so its gradient is 0 and finite)."""
    return _metric(fn, name, grad=(0, 2), binary=binary, **kw)


SELECTIVE = [
    dataclasses.replace(_selective(selective.risk_coverage_curve), skip=_CURVE_SKIP),
    _selective(selective.aurc),
    _selective(selective.aurc, "aurc.trapezoid", convention="trapezoid"),
    _selective(selective.aurc, "aurc.binary", binary=True),
    Entry(
        "aurc.scores",
        selective.aurc,
        lambda s, c, w: selective.aurc(confidence=s, correct=c, weights=w),
        _cols("margins", "y", "weights"),
        _PLW,
        grad=(0, 2),
    ),
    _selective(selective.e_aurc),
    _selective(selective.e_aurc, "e_aurc.closed_form", optimal="closed_form"),
    _selective(selective.augrc),
    _selective(selective.prediction_rejection_ratio, max_rejection=0.5),
    _selective(selective.risk_at_coverage, coverage=(0.5, 0.9)),
    _selective(selective.coverage_at_risk, risk=0.5),
    _selective(selective.correctness_auroc),
    Entry(
        "prediction_rejection_ratio.quality",
        selective.prediction_rejection_ratio,
        lambda s, q, w: selective.prediction_rejection_ratio(confidence=s, correct=q, weights=w),
        _cols("margins", "p", "weights"),
        (ROWS, ROWS, WEIGHTS),
        grad=(1, 2),
    ),
    Entry(
        "aurc.groups",
        selective.aurc,
        lambda p, y, g, w: selective.aurc(p, y, weights=w, groups=g, n_groups=3),
        _cols("probs", "labels", "groups", "weights"),
        (ROWS, LABELS, LABELS, WEIGHTS),
        grad=(3,),
    ),
]

# ---------------------------------------------------------------- recalibrated metrics

_PLATT = C.platt_scaling()  # one calibrator object per entry: built once
_ISOTONIC = C.isotonic()
_TEMPERATURE = C.temperature_scaling()
_FOLDS = {"pad": "the folds are dealt over all N rows, padding included"}

RECALIBRATED = [
    Entry(
        "cross_fit",
        jaxcal.stats.cross_fit,
        lambda p, y, w, key: jaxcal.stats.cross_fit(_PLATT, p, y, key=key, n_folds=3, weights=w),
        lambda d, dtype: (*_BINARY(d, dtype), jax.random.key(10)),
        (*_PLW, FIXED),
        skip=_FOLDS,
        **_FIT_TOL,  # the Platt fits stop at the L-BFGS tolerance
    ),
    Entry(
        "recalibrated",
        jaxcal.stats.recalibrated,
        lambda p, y, w, key: jaxcal.stats.recalibrated(
            jaxcal.ece, _TEMPERATURE, p, y, key=key, n_folds=3, weights=w
        ),
        lambda d, dtype: (*_cols("logits", "labels", "weights")(d, dtype), jax.random.key(11)),
        (*_PLW, FIXED),
        skip=_FOLDS,
        **_FIT_TOL,
        # a new metric partial and a new calibrator object per call: compiled once
        rebuild=lambda: (
            lambda p, y, w, key: jaxcal.stats.recalibrated(
                functools.partial(jaxcal.ece),
                C.temperature_scaling(),
                p,
                y,
                key=key,
                n_folds=3,
                weights=w,
            )
        ),
    ),
    Entry(
        "calibration_refinement",
        jaxcal.calibration_refinement,
        lambda p, y, w, key: jaxcal.calibration_refinement(
            p, y, calibrator=_ISOTONIC, key=key, n_folds=3, weights=w
        ),
        lambda d, dtype: (*_BINARY(d, dtype), jax.random.key(12)),
        (*_PLW, FIXED),
        skip=_FOLDS,
    ),
]

# ---------------------------------------------------------------- regression

_G_ARGS = _cols("margins", "x", "target", "weights")  # mean, std (> 0), y, weights
_MSYW = (ROWS, ROWS, ROWS, WEIGHTS)
_LEVELS = np.array([0.25, 0.5, 0.75], np.float32)


def _quantile_args(d, dtype):
    """(N, 3) sorted quantiles (the sorted logits around the target), levels, y, weights."""
    q = np.sort(d.logits, axis=1) + d.target[:, None]
    return _as(q, dtype), _as(_LEVELS, dtype), _as(d.target, dtype), _as(d.weights, dtype)


def _sample_args(d, dtype):
    return _as(d.logits + d.target[:, None], dtype), _as(d.target, dtype), _as(d.weights, dtype)


_QLYW = (ROWS, FIXED, ROWS, WEIGHTS)
_SYW = (ROWS, ROWS, WEIGHTS)
_PER_ROW = {"pad": "one PIT value per row, padding included"}


def _gaussian_measure(fn, name=None, grad=(), **kw):
    return Entry(
        name or fn.__name__,
        fn,
        lambda m, s, y, w: fn(regression.Gaussian(m, s), y, weights=w, **kw),
        _G_ARGS,
        _MSYW,
        grad=grad,
    )


def _gaussian_score(fn, **kw):
    return Entry(
        fn.__name__, fn, lambda m, s, y, w: fn(m, s, y, weights=w, **kw), _G_ARGS, _MSYW,
        grad=(0, 1),
    )  # fmt: skip


REGRESSION = [
    Entry(
        "pit.gaussian",
        regression.pit,
        lambda m, s, y: regression.pit(regression.Gaussian(m, s), y),
        _cols("margins", "x", "target"),
        (ROWS, ROWS, ROWS),
        grad=(0, 1),
        skip=_PER_ROW,
    ),
    Entry(
        "pit.quantiles",
        regression.pit,
        lambda q, lv, y: regression.pit(regression.Quantiles(q, lv), y),
        lambda d, dtype: _quantile_args(d, dtype)[:3],
        (ROWS, FIXED, ROWS),
        skip=_PER_ROW,
    ),
    Entry(
        "pit.samples",
        regression.pit,
        lambda x, y: regression.pit(regression.Samples(x), y),
        lambda d, dtype: _sample_args(d, dtype)[:2],
        (ROWS, ROWS),
        skip=_PER_ROW,
    ),
    _gaussian_measure(regression.calibration_curve, n_levels=11),
    Entry(
        "calibration_curve.quantiles",
        regression.calibration_curve,
        lambda q, lv, y, w: regression.calibration_curve(
            regression.Quantiles(q, lv), y, n_levels=11, prop_type="quantile", weights=w
        ),
        _quantile_args,
        _QLYW,
    ),
    Entry(
        "calibration_curve.samples",
        regression.calibration_curve,
        lambda x, y, w: regression.calibration_curve(
            regression.Samples(x), y, n_levels=11, weights=w
        ),
        _sample_args,
        _SYW,
    ),
    _gaussian_measure(regression.miscalibration_area),
    _gaussian_measure(regression.mean_absolute_calibration_error),
    _gaussian_measure(regression.root_mean_squared_calibration_error),
    _gaussian_measure(regression.qce),
    _gaussian_measure(regression.soft_miscalibration_area, grad=(0, 1), n_levels=11),
    _gaussian_measure(regression.conditional_qce, n_bins=4),
    _gaussian_measure(regression.ence, n_bins=4),
    _gaussian_measure(regression.uce, n_bins=4),
    _gaussian_measure(regression.variance_curve, n_bins=4),
    _gaussian_score(regression.crps_gaussian),
    _gaussian_score(regression.log_score_gaussian),
    Entry(
        "crps_ensemble",
        regression.crps_ensemble,
        lambda x, y, w: regression.crps_ensemble(x, y, weights=w),
        _sample_args,
        _SYW,
        grad=(0,),
    ),
    Entry(
        "crps_ensemble.plugin",
        regression.crps_ensemble,
        lambda x, y, w: regression.crps_ensemble(x, y, estimator="plugin", weights=w),
        _sample_args,
        _SYW,
        grad=(0,),
    ),
    *(
        Entry(
            fn.__name__,
            fn,
            lambda q, lv, y, w, fn=fn: fn(q, lv, y, weights=w),
            _quantile_args,
            _QLYW,
            grad=(0,),
        )
        for fn in (regression.pinball_loss, regression.crps_quantile)
    ),
    *(
        Entry(
            fn.__name__,
            fn,
            lambda m, y, w, fn=fn: fn(m, y, weights=w),
            _cols("margins", "target", "weights"),
            (ROWS, ROWS, WEIGHTS),
            grad=(0,) if fn is regression.mean_score_decomposition else (),
            skip={"pad": "buffers of N knots, padding included"}
            if fn is regression.mean_reliability
            else {},
        )
        for fn in (regression.mean_reliability, regression.mean_score_decomposition)
    ),
    *(
        Entry(
            fn.__name__,
            fn,
            lambda q, y, w, fn=fn: fn(q, y, level=0.8, weights=w),
            _cols("margins", "target", "weights"),
            (ROWS, ROWS, WEIGHTS),
            grad=(0,) if fn is regression.quantile_score_decomposition else (),
            skip={"pad": "buffers of N knots, padding included"}
            if fn is regression.quantile_reliability
            else {},
        )
        for fn in (regression.quantile_reliability, regression.quantile_score_decomposition)
    ),
    Entry(
        "pit_test",
        jaxcal.stats.pit_test,
        lambda u, w: jaxcal.stats.pit_test(u, weights=w),
        _cols("p", "weights"),
        (ROWS, WEIGHTS),
    ),
    Entry(
        "interval_score",
        regression.interval_score,
        lambda lo, up, y, w: regression.interval_score(lo, up, y, alpha=0.2, weights=w),
        _cols("lower", "upper", "target", "weights"),
        (ROWS, ROWS, ROWS, WEIGHTS),
        grad=(0, 1),
    ),
]


_ISO_R = regression.isotonic_recalibration()  # one object per entry: built once
_STD_S = regression.std_scaling()
_CQR = regression.conformal_quantile_regression(alpha=0.2)
_EVAL_G = (_EVAL.margins, _EVAL.x)


def _iso_view(params):
    dtype = params_dtype(params)
    g = regression.Gaussian(*(jnp.asarray(a, dtype) for a in _EVAL_G))
    return _ISO_R.apply(params, g, jnp.asarray(_LEVELS, dtype)).values


def _fitted(name, fit, d):
    key = (name, id(d))
    if key not in _FITTED:
        _FITTED[key] = fit(*_G_ARGS(d, jnp.float32))
    return _FITTED[key]


def _iso_fit(m, s, y, w):
    return _ISO_R.fit(regression.Gaussian(m, s), y, weights=w)


def _std_fit(m, s, y, w):
    return _STD_S.fit(regression.Gaussian(m, s), y, weights=w)


RECALIBRATORS = [
    Entry(
        "isotonic_recalibration.fit",
        regression.isotonic_recalibration,
        _iso_fit,
        _G_ARGS,
        _MSYW,
        view=_iso_view,
        skip={"resample": "four arguments (mean, std, y, weights): test_recalibrate.py"},
        rebuild=lambda: (
            lambda m, s, y, w: regression.isotonic_recalibration().fit(
                regression.Gaussian(m, s), y, weights=w
            )
        ),
    ),
    Entry(
        "isotonic_recalibration.apply",
        regression.isotonic_recalibration,
        lambda p, m, s, lv: _ISO_R.apply(p, regression.Gaussian(m, s), lv),
        lambda d, dtype: (
            _fitted("isotonic_recalibration", _iso_fit, d),
            _as(d.margins, dtype),
            _as(d.x, dtype),
            _as(_LEVELS, dtype),
        ),
        (PYTREE, ROWS, ROWS, FIXED),
        grad=(1, 2),
        rebuild=lambda: (
            lambda p, m, s, lv: regression.isotonic_recalibration().apply(
                p, regression.Gaussian(m, s), lv
            )
        ),
    ),
    Entry(
        "std_scaling.fit",
        regression.std_scaling,
        _std_fit,
        _G_ARGS,
        _MSYW,
        grad=(0, 1),
        rebuild=lambda: (
            lambda m, s, y, w: regression.std_scaling().fit(regression.Gaussian(m, s), y, weights=w)
        ),
    ),
    Entry(
        "std_scaling.apply",
        regression.std_scaling,
        lambda p, m, s: _STD_S.apply(p, regression.Gaussian(m, s)),
        lambda d, dtype: (
            _fitted("std_scaling", _std_fit, d),
            _as(d.margins, dtype),
            _as(d.x, dtype),
        ),
        (PYTREE, ROWS, ROWS),
        grad=(0, 1, 2),
        rebuild=lambda: (
            lambda p, m, s: regression.std_scaling().apply(p, regression.Gaussian(m, s))
        ),
    ),
    Entry(
        "conformal_quantile_regression.fit",
        regression.conformal_quantile_regression,
        lambda lo, up, y, w: _CQR.fit(lo, up, y, weights=w),
        _cols("lower", "upper", "target", "weights"),
        (ROWS, ROWS, ROWS, WEIGHTS),
        rebuild=lambda: (
            lambda lo, up, y, w: regression.conformal_quantile_regression(alpha=0.2).fit(
                lo, up, y, weights=w
            )
        ),
    ),
    Entry(
        "conformal_quantile_regression.apply",
        regression.conformal_quantile_regression,
        _CQR.apply,
        lambda d, dtype: (
            _CQR.fit(*_cols("lower", "upper", "target")(d, jnp.float32)),
            _as(d.lower, dtype),
            _as(d.upper, dtype),
        ),
        (PYTREE, ROWS, ROWS),
        grad=(1, 2),
        rebuild=lambda: regression.conformal_quantile_regression(alpha=0.2).apply,
    ),
]

# ---------------------------------------------------------------- harness presets

PRESETS = [
    Entry(
        "hle_calibration_error",
        presets.hle_calibration_error,
        lambda c, y: presets.hle_calibration_error(c, y, beta=4),
        _cols("p", "y"),
        (ROWS, LABELS),
        grad=(0,),
    ),
    Entry(
        "helm_calibration",
        presets.helm_calibration,
        presets.helm_calibration,
        _cols("p", "y"),
        (ROWS, LABELS),
        **_FIT_TOL,  # its Platt fit stops at the L-BFGS tolerance
    ),
    Entry(
        "temperature_tuned",
        presets.temperature_tuned,
        lambda z, y: presets.temperature_tuned(z, y, beta=4),
        _cols("logits", "labels"),
        (ROWS, LABELS),
    ),
]

ENTRIES: list[Entry] = [
    *METRICS,
    *STATS,
    *CALIBRATORS,
    *CALIBRATOR_HELPERS,
    *STREAMING,
    *COVERAGE,
    *LOSSES,
    *SELECTIVE,
    *RECALIBRATED,
    *PRESETS,
    *REGRESSION,
    *RECALIBRATORS,
]


def builds_closures(obj: Any) -> bool:
    """Whether a public callable is a factory (it returns a ``Calibrator`` or a class) or
    takes a function among its options (``metric``, ``fun``, a ``Calibrator``): the calls whose
    compiled programs must be shared across equal options, not tied to one object."""
    import inspect

    if not callable(obj) or inspect.isclass(obj):
        return False
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return False
    returns = str(sig.return_annotation)
    takes_function = any(
        name in ("metric", "fun") or "Calibrator" in str(param.annotation)
        for name, param in sig.parameters.items()
    )
    return "Calibrator" in returns or returns.startswith("type[") or takes_function


#: Factories that return a fresh object by design (their entry's ``rebuild`` still
#: checks that a new object compiles nothing).
FRESH_OBJECTS = {streaming.nnx_metric: "a mutable flax.nnx.Metric, one per call"}

#: The entries the slow sweeps cover (see the module docstring for the choice).
SWEEP = frozenset(
    {
        *("ece", "ece.quantile", "classwise_ece", "soft_ece.l2", "mmce", "smooth_ece"),
        *("calibration_tests", "ks_test.groups", "multicalibration_error"),
        *("ece.groups", "ece.group_masks"),
        *("subpopulation_test", "ici", "calibration_slope_intercept"),
        *("observed_expected_ratio", "hosmer_lemeshow_test", "bootstrap_ci", "corp_bands"),
        *("brier_score", "log_loss"),
        *("skce", "skce.binary", "skce_test", "ucme", "cme_test", "ece_kde", "ece_kde_loss"),
        *("l2_ece_interval", "tcal_test", "ece_sweep", "tce"),
        *("clopper_pearson_interval", "log_brownian_range_sf", "log_chi2_sf"),
        *("temperature_scaling.fit", "temperature_scaling.apply"),
        *("platt.logits.fit", "platt.logits.apply", "matrix_scaling.fit", "matrix_scaling.apply"),
        *("isotonic.fit", "isotonic.apply", "venn_abers.fit", "venn_abers.apply"),
        *("classwise.fit", "classwise.apply", "to_probs"),
        *("streaming.update", "streaming.compute", "streaming.equal_mass_ece"),
        "streaming.poisson_update",
        "streaming.regression_update",
        *("regression_ssc", "hsic", "classification_ssc"),
        *("dca_loss", "focal_loss", "mmce_loss", "soft_ece_loss"),
        *("aurc", "prediction_rejection_ratio.quality", "aurc.groups"),
        *("hle_calibration_error", "helm_calibration", "temperature_tuned"),
        *("recalibrated", "calibration_refinement"),
        *("dece_loss", "heldout_objective", "meta_calibration.step", "saturation_stats"),
        *("calibration_curve", "crps_ensemble", "pit.quantiles", "pit_test"),
        *("isotonic_recalibration.fit", "isotonic_recalibration.apply"),
        "quantile_score_decomposition",
    }
)

# ---------------------------------------------------------------- names that are no call

#: Public classes: the results (and parameters) the entries return, pytrees of arrays.
RESULT_TYPES = {
    jaxcal.BinStats: "bin sums of the metrics' kernels (returned by no public call)",
    jaxcal.BinomialInterval: "wilson_interval, clopper_pearson_interval",
    jaxcal.BootstrapResult: "bootstrap_ci",
    jaxcal.BrierDecomposition: "brier_decomposition",
    jaxcal.CalibrationTests: "calibration_tests",
    jaxcal.ConsistencyBands: "consistency_bands",
    jaxcal.CorpBands: "corp_bands",
    jaxcal.CorpCurve: "corp_curve",
    jaxcal.DecompositionIntervals: "score_decomposition_ci",
    jaxcal.MurphyDiagram: "murphy_diagram",
    jaxcal.ScoreDecomposition: "score_decomposition",
    jaxcal.ConsistencyTestResult: "consistency_test",
    jaxcal.CumulativeDifferences: "cumulative_differences",
    jaxcal.PairedBootstrapResult: "paired_bootstrap",
    jaxcal.ReliabilityCurve: "reliability_curve",
    jaxcal.ReliabilityIntervals: "reliability_intervals",
    jaxcal.SKCETestResult: "skce_test",
    jaxcal.CMETestResult: "cme_test",
    jaxcal.L2ECEInterval: "l2_ece_interval, streaming.l2_ece_interval",
    jaxcal.TCalResult: "tcal_test",
    jaxcal.TestResult: "ks_test, kuiper_test, spiegelhalter_test, hosmer_lemeshow_test",
    jaxcal.ICI: "ici",
    jaxcal.stats.CalibrationSlopeIntercept: "calibration_slope_intercept",
    jaxcal.stats.MulticalibrationResult: "multicalibration_error",
    jaxcal.stats.ObservedExpected: "observed_expected_ratio",
    jaxcal.stats.PITTestResult: "pit_test",
    jaxcal.stats.SubpopulationTest: "subpopulation_test",
    jaxcal.stats.WaldEstimate: "the fields of calibration_slope_intercept",
    C.AffineParams: "vector_scaling, matrix_scaling, dirichlet",
    C.BetaParams: "beta_calibration",
    C.FitInfo: "the parametric calibrators' fits",
    C.HistogramParams: "histogram_binning",
    C.IsotonicParams: "isotonic",
    C.PlattParams: "platt_scaling",
    C.ScalingBinningParams: "scaling_binning",
    C.TemperatureParams: "temperature_scaling",
    C.VennAbersParams: "venn_abers",
    streaming.CalibrationState: "streaming.init, update, merge",
    streaming.BucketCorp: "streaming.corp_curve",
    streaming.EqualMassECE: "streaming.equal_mass_ece",
    streaming.RegressionState: "streaming.regression_init, regression_update, merge",
    streaming.RegressionSummary: "streaming.regression_compute",
    # parquet_state and dask_state read files (NOT_TRANSFORMED): no entry returns it
    streaming.ParquetStates: (
        "parquet_state, dask_state, array_state (host I/O, no public call in JAX)"
    ),
    coverage.SizeStratifiedCoverage: "regression_ssc, classification_ssc",
    selective.RiskCoverageCurve: "risk_coverage_curve",
    presets.HelmCalibration: "helm_calibration",
    presets.HleCalibrationError: "hle_calibration_error",
    jaxcal.CalibrationRefinement: "calibration_refinement",
    presets.TemperatureTuned: "temperature_tuned",
    regression.CalibrationCurve: "regression.calibration_curve",
    regression.VarianceCurve: "regression.variance_curve",
    regression.MeanReliability: "regression.mean_reliability",
    regression.MeanScoreDecomposition: "regression.mean_score_decomposition",
    regression.QuantileReliability: "regression.quantile_reliability",
    regression.QuantileScoreDecomposition: "regression.quantile_score_decomposition",
    regression.IsotonicRecalibrationParams: "isotonic_recalibration().fit",
    regression.StdScalingParams: "std_scaling().fit",
    regression.ConformalParams: "conformal_quantile_regression().fit",
    losses.BatchIndices: "heldout_batch_indices",
    losses.HeldoutTerms: "heldout_objective (its aux output)",
    losses.MetaCalibrationInfo: "meta_calibration's step",
    losses.MetaCalibrationState: "meta_calibration's init and step",
    losses.SaturationStats: "saturation_stats, heldout_objective",
    streaming.SummaryReplicates: (
        "array_state, parquet_state with replicates='summary' (host I/O, no public call in JAX)"
    ),
}

#: Public names with no array computation to transform, and why.
NOT_TRANSFORMED = {
    jaxcal.calibrators: "a namespace",
    jaxcal.metrics: "a namespace",
    jaxcal.stats: "a namespace",
    jaxcal.coverage: "a namespace",
    jaxcal.losses: "a namespace",
    jaxcal.selective: "a namespace",
    jaxcal.presets: "a namespace",
    jaxcal.streaming: "a namespace",
    jaxcal.regression: "a namespace",
    regression.Gaussian: "an input pytree (mean, std) the regression entries build",
    regression.Quantiles: "an input pytree (values, levels) the regression entries build",
    regression.Samples: "an input pytree (values,) the regression entries build",
    regression.RegressionCalibrator: "a NamedTuple of two functions (the entries call them)",
    jaxcal.Calibrator: "a NamedTuple of two functions (the entries call them)",
    losses.MetaCalibration: "a NamedTuple of two functions (meta_calibration.step calls them)",
    streaming.CalibrationMetric: "the class clu_metric configures (its entry calls it)",
    streaming.to_arrow: "builds a pyarrow.Table on the host (device_get of the state)",
    streaming.from_arrow: "reads a pyarrow.Table on the host into a state",
    streaming.to_table: "builds a pyarrow.Table on the host (device_get of the states)",
    streaming.from_table: "reads a pyarrow.Table, DataFrame or Parquet file on the host",
    jaxcal.sql: "a namespace",
    sql.state_query: "writes SQL text (a string), no array computation",
    sql.check_query: "writes SQL text (a string), no array computation",
    sql.state: "runs SQL in DuckDB on the host and reads its table into a state",
    jaxcal.spark: "a namespace",
    spark.state: "runs a Spark job (mapInArrow, groupBy().sum()) and reads its table",
    streaming.parquet_state: "reads Parquet files with pyarrow, batch by batch, on the host",
    streaming.array_state: "slices NumPy (memory-mapped) arrays batch by batch on the host",
    streaming.dask_state: "runs parquet_state on a Dask cluster's workers (host I/O)",
    jaxcal.set_executable_store: "a process-wide setting (where compiled programs are kept)",
    streaming.process_merge: (
        "a collective across JAX processes on concrete arrays (make_array_from_process_local"
        "_data), called between steps; the identity in one process"
    ),
}


#: Public names merged after the registry was written, awaiting an entry (none now): a
#: name may be parked here only with a reason, and the set may only shrink.
NOT_YET_REGISTERED: dict[Any, str] = {}


def host_only() -> dict[Any, str]:
    """jaxcal.plot draws with matplotlib on the host, jaxcal.sklearn works on NumPy arrays
    (each imported only when asked for)."""
    from jaxcal import plot
    from jaxcal import sklearn as sk

    return {
        sk.CalibratedClassifierCV: "a scikit-learn estimator on NumPy arrays (host side)",
        sk.CalibrationDisplay: "draws with matplotlib (host side)",
        sk.calibration_curve: "scikit-learn's NumPy float64 result, reproduced on the host",
        sk.expected_failed_checks: "a dict of scikit-learn check names (host side)",
        plot.reliability_diagram: "draws with matplotlib (host side)",
        plot.cumulative_differences_plot: "draws with matplotlib (host side)",
        plot.corp_diagram: "draws with matplotlib (host side)",
        plot.murphy_diagram: "draws with matplotlib (host side)",
        plot.ReliabilityDiagram: "the figure handles of reliability_diagram",
    }

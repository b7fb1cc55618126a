"""``jaxcal report`` on regression predictions: the numbers and the verdict (printed and
written by ``jaxcal/cli/_regression_output.py``).

One kernel per form (``Kernel("report_regression")``, served from the executable store as
the classifier report's kernels are, so a second run compiles nothing) computes every
number of one model with ``jaxcal.regression`` and :func:`jaxcal.stats.pit_test`:

* bootstrapped (percentile intervals, the classifier report's resamples: indices drawn
  from ``split(key(seed))[0]``; each replicate from per-row terms computed once, the
  resample's counts as weights, so no sort per resample, ``replicate_fn()``):
  miscalibration area, MACE and RMSCE (100 levels, central
  intervals, uncertainty-toolbox's), the coverage of the central 90% interval, the form's
  CRPS (closed form for a Gaussian, the fair ensemble estimator for samples, twice the
  mean pinball loss for quantiles), the pinball loss (quantiles), the log score, ENCE and
  UCE (Gaussian; ``--bins`` equal-width bins of the std);
* point estimates: the calibration curve at a few levels (central intervals and lower
  quantiles), the PIT's KS and Kuiper tests, and the CORP decomposition of the squared
  error of the mean forecast (Gaussian: ``mean``; samples: the ensemble mean), whose
  isotonic fit is not resampled (no interval).

The verdict (``verdict()``; docs/guides/report.md, "Regression predictions") reads the PIT.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from jaxcal import regression as reg
from jaxcal import stats
from jaxcal._core.random import indices, resample_seeds
from jaxcal._core.store import FAST_RUN, Kernel
from jaxcal.cli._format import format_p
from jaxcal.cli._regression_input import RegressionModel
from jaxcal.cli._report import CONFIDENCE
from jaxcal.regression._calibration import _statistic as curve_statistic
from jaxcal.regression._calibration import _thresholds as curve_thresholds
from jaxcal.regression._calibration import trapezoid_gap_area
from jaxcal.stats._resampling.consistency import batch_plan, map_batches, vmap_batch

#: Level of the PIT's Kuiper test that decides "miscalibrated".
ALPHA = 0.05
#: Standard errors a PIT mean or variance must be off to read as a direction.
Z = 1.96
#: Levels of the curve summaries (uncertainty-toolbox's default grid).
N_LEVELS = 100
#: The levels as ``calibration_curve`` makes them (float64 linspace, then the data's dtype).
GRID = tuple(float(v) for v in np.linspace(0.0, 1.0, N_LEVELS))
#: Levels of the printed calibration curve.
INTERVAL_LEVELS = (0.2, 0.5, 0.8, 0.9, 0.95)
QUANTILE_LEVELS = (0.05, 0.25, 0.5, 0.75, 0.95)

#: (key, display name) of the bootstrapped rows, in table order (a form's own only).
METRIC_ROWS = (
    ("miscalibration_area", f"miscalibration area ({N_LEVELS} levels)"),
    ("mace", "mean absolute calibration error"),
    ("rmsce", "root mean squared calibration error"),
    ("coverage_90", "coverage of the central 90% interval"),
    ("crps", "CRPS"),
    ("pinball", "pinball loss (mean over levels)"),
    ("log_score", "log score (Gaussian NLL)"),
    ("ence", "ENCE"),
    ("uce", "UCE"),
)
CORP_ROWS = (
    ("score", "mean squared error, CORP decomposition"),
    ("miscalibration", "  miscalibration (MCB)"),
    ("discrimination", "  discrimination (DSC)"),
    ("uncertainty", "  uncertainty (UNC)"),
)
CRPS_VARIANT = {
    "gaussian": "closed form",
    "quantiles": "twice the mean pinball loss",
    "samples": "fair ensemble estimator",
}
ADVICE = {
    "gaussian": "recalibrate on held-out data: jaxcal.regression.std_scaling for the spread, "
    "isotonic_recalibration for the shape",
    "quantiles": "recalibrate on held-out data: jaxcal.regression.conformal_quantile_regression "
    "for an interval, isotonic_recalibration for every level",
    "samples": "recalibrate on held-out data: jaxcal.regression.isotonic_recalibration",
}


def _pred(form: str, data):
    if form == "gaussian":
        return reg.Gaussian(*data)
    if form == "quantiles":
        return reg.Quantiles(*data)
    return reg.Samples(*data)


def _metrics(form: str, data, y, n_bins: int) -> dict:
    """The bootstrapped numbers of one (resampled) data set, each a 0-d array."""
    pred = _pred(form, data)
    out = {
        "miscalibration_area": reg.miscalibration_area(pred, y, n_levels=N_LEVELS),
        "mace": reg.mean_absolute_calibration_error(pred, y, n_levels=N_LEVELS),
        "rmsce": reg.root_mean_squared_calibration_error(pred, y, n_levels=N_LEVELS),
        "coverage_90": reg.calibration_curve(pred, y, levels=(0.9,)).observed[0],
    }
    if form == "gaussian":
        out["crps"] = reg.crps_gaussian(*data, y)
        out["log_score"] = reg.log_score_gaussian(*data, y)
        out["ence"] = reg.ence(pred, y, n_bins=n_bins)
        out["uce"] = reg.uce(pred, y, n_bins=n_bins)
    elif form == "quantiles":
        out["crps"] = reg.crps_quantile(*data, y)
        out["pinball"] = reg.pinball_loss(*data, y)
    else:
        out["crps"] = reg.crps_ensemble(data[0], y)
    return out


def _row_terms(form: str, data, y, pred) -> dict:
    """Per-row terms whose weighted means are the bootstrapped numbers (the scores) and
    the central-interval statistic of the calibration curves (``|z|`` for a Gaussian,
    ``|PIT - 1/2|`` otherwise, as ``jaxcal.regression.calibration_curve`` compares)."""
    if form == "gaussian":
        terms = {
            "crps": reg.crps_gaussian(*data, y, reduction="none"),
            "log_score": reg.log_score_gaussian(*data, y, reduction="none"),
        }
    elif form == "quantiles":
        terms = {
            "crps": reg.crps_quantile(*data, y, reduction="none"),
            "pinball": reg.pinball_loss(*data, y, reduction="none"),
        }
    else:
        terms = {"crps": reg.crps_ensemble(data[0], y, reduction="none")}
    stat, scale = curve_statistic(pred, y, "interval")
    return terms, stat, scale


def _replicate(counts, terms, level_of_row, covered_90, n_levels, form, data, y, n_bins):
    """The bootstrapped numbers of one resample, given as the rows' ``counts``.

    Equal to recomputing each number on the resampled rows: the scores are means of
    per-row terms; observed coverage at level l is the share of rows whose statistic is at
    most the level's threshold (row i counts from level ``level_of_row[i]`` on); ENCE
    and UCE take the counts as weights. No sort per resample.
    """
    dtype = y.dtype
    c = counts.astype(dtype)
    total = jnp.sum(c)
    out = {name: jnp.sum(c * t) / total for name, t in terms.items()}
    hits = jax.ops.segment_sum(c, level_of_row, n_levels + 1)
    observed = jnp.cumsum(hits)[:n_levels] / total
    expected = jnp.asarray(GRID, dtype)
    gap = observed - expected
    out["miscalibration_area"] = trapezoid_gap_area(expected, gap)
    out["mace"] = jnp.mean(jnp.abs(gap))
    out["rmsce"] = jnp.sqrt(jnp.mean(gap * gap))
    out["coverage_90"] = jnp.sum(c * covered_90) / total
    if form == "gaussian":
        pred = reg.Gaussian(*data)
        out["ence"] = reg.ence(pred, y, n_bins=n_bins, weights=c)
        out["uce"] = reg.uce(pred, y, n_bins=n_bins, weights=c)
    return out


def replicate_fn(form: str, data, y, n_bins: int):
    """``one(idx)``: the bootstrapped numbers of the rows ``idx`` (``(N,)`` indices drawn
    with replacement), from per-row terms computed once here."""
    n = y.shape[0]
    dtype = y.dtype
    terms, stat, scale = _row_terms(form, data, y, _pred(form, data))
    thresholds = curve_thresholds(jnp.asarray(GRID, dtype), "interval", scale).astype(dtype)
    level_of_row = jnp.searchsorted(thresholds, stat, side="left")
    t90 = curve_thresholds(jnp.asarray(0.9, dtype), "interval", scale).astype(dtype)
    covered_90 = (stat <= t90).astype(dtype)

    def one(idx):
        counts = jax.ops.segment_sum(jnp.ones_like(idx), idx, n)
        return _replicate(counts, terms, level_of_row, covered_90, N_LEVELS, form, data, y, n_bins)

    return one


def _regression_kernel(*arrays, form, n_bins, n_resamples):
    """Every number of one regression model's report, as a dict of arrays (one jit)."""
    *data, y, key_data = arrays
    pred = _pred(form, data)
    boot_key, _ = jax.random.split(jax.random.wrap_key_data(key_data))
    estimates = _metrics(form, data, y, n_bins)
    n = y.shape[0]
    n_batches, batch = batch_plan(n_resamples, None, n)
    one = replicate_fn(form, data, y, n_bins)
    seeds = resample_seeds(boot_key, n_resamples)
    samples = map_batches(vmap_batch(one), seeds, n_batches, batch, partial(indices, n=n))
    tail = (1 - CONFIDENCE) / 2
    out = {}
    for name, est in estimates.items():
        low, high = jnp.quantile(samples[name].astype(est.dtype), jnp.array([tail, 1 - tail]))
        out[name] = (est, low, high)
    u = reg.pit(pred, y)
    test = stats.pit_test(u)
    out["pit"] = u
    out["ks"] = tuple(test.ks)
    out["kuiper"] = tuple(test.kuiper)
    out["interval_curve"] = reg.calibration_curve(pred, y, levels=INTERVAL_LEVELS).observed
    out["quantile_curve"] = reg.calibration_curve(
        pred, y, levels=QUANTILE_LEVELS, prop_type="quantile"
    ).observed
    if form != "quantiles":
        mean = data[0] if form == "gaussian" else jnp.mean(data[0], axis=1)
        out["corp"] = tuple(reg.mean_score_decomposition(mean, y))
    return out


_KERNEL = Kernel("report_regression", _regression_kernel)
#: From this many rows the kernel is compiled at XLA's default optimisation
#: (``FAST_RUN``): at N = 1e5 (Gaussian, 200 resamples, load 10) it compiles in 29 s
#: against 17 s but runs in 7 s against 38 s; smaller inputs compile for speed.
LARGE_ROWS = 2**14
_KERNEL_LARGE = Kernel("report_regression_large", _regression_kernel, options=FAST_RUN)


def regression_call(model: RegressionModel, *, n_bins: int, n_resamples: int, seed: int):
    """(kernel, arrays, static options) of one model's report."""
    key_data = jax.random.key_data(jax.random.key(seed))
    arrays = (*model.arrays, model.y, key_data)
    kernel = _KERNEL_LARGE if model.n >= LARGE_ROWS else _KERNEL
    return kernel, arrays, {"form": model.form, "n_bins": n_bins, "n_resamples": n_resamples}


def pit_null_variance(model: RegressionModel) -> float:
    """Variance of the PIT of a calibrated forecaster of the model's form (its mean is 1/2):
    1/12 for a Gaussian; for S samples the uniform law on the S + 1 rank-bin centres,
    ``(1 - 1/(S+1)^2) / 12``; for quantiles at levels ``l_1 < ... < l_Q``, uniform between
    ``l_1`` and ``l_Q`` and the tails' mass at ``l_1/2`` and ``(1 + l_Q)/2``."""
    if model.form == "gaussian":
        return 1 / 12
    if model.form == "samples":
        m = model.arrays[0].shape[1] + 1
        return (1 - 1 / m**2) / 12
    lo, hi = (float(v) for v in np.asarray(model.arrays[1], np.float64)[[0, -1]])
    second = lo * (lo / 2) ** 2 + (1 - hi) * ((1 + hi) / 2) ** 2 + (hi**3 - lo**3) / 3
    return second - 0.25


def _pit_summary(model: RegressionModel, u: np.ndarray) -> dict:
    u = np.asarray(u, np.float64)
    n = u.shape[0]
    mean = float(u.mean())
    dev = (u - mean) ** 2
    root = math.sqrt(n)
    sd = float(u.std(ddof=1)) if n > 1 else math.inf
    return {
        "mean": mean,
        "mean_se": sd / root,
        "variance": float(dev.mean()),
        "variance_expected": pit_null_variance(model),
        "variance_se": float(dev.std(ddof=1)) / root if n > 1 else math.inf,
    }


def compute_regression(model: RegressionModel, *, n_bins: int, n_resamples: int, seed: int):
    """Host floats of every number of one model (the JSON entry's fields)."""
    kernel, arrays, static = regression_call(
        model, n_bins=n_bins, n_resamples=n_resamples, seed=seed
    )
    raw = jax.device_get(kernel(*arrays, **static))
    metrics = {}
    for key, _ in METRIC_ROWS:
        if key in raw:
            value, low, high = (float(v) for v in raw[key])
            metrics[key] = {"value": value, "low": low, "high": high}
    tests = {}
    for key in ("ks", "kuiper"):
        stat, p, log_p = (float(v) for v in raw[key])
        tests[f"pit_{key}"] = {
            "statistic": stat,
            "p_value": p,
            "log10_p_value": log_p / math.log(10),
        }
    curve = {
        "interval": [
            {"expected": e, "observed": float(o)}
            for e, o in zip(INTERVAL_LEVELS, raw["interval_curve"], strict=True)
        ],
        "quantile": [
            {"expected": e, "observed": float(o)}
            for e, o in zip(QUANTILE_LEVELS, raw["quantile_curve"], strict=True)
        ],
    }
    corp = None
    if "corp" in raw:
        corp = {key: float(v) for (key, _), v in zip(CORP_ROWS, raw["corp"], strict=True)}
        corp["forecast"] = "mean" if model.form == "gaussian" else "ensemble mean"
    return {
        "metrics": metrics,
        "tests": tests,
        "curve": curve,
        "pit": _pit_summary(model, raw["pit"]),
        "corp": corp,
    }


def verdict(model: RegressionModel, result: dict) -> dict:
    """The verdict of one model: miscalibrated when the PIT's Kuiper test has p < ALPHA;
    the direction from the PIT's variance (above a calibrated forecaster's by more than Z
    standard errors: under-dispersed, below: over-dispersed) and its mean (above 1/2:
    forecasts too low, below: too high)."""
    kuiper, ks = result["tests"]["pit_kuiper"], result["tests"]["pit_ks"]
    pit = result["pit"]
    miscalibrated = kuiper["p_value"] < ALPHA
    dispersion = location = None
    if miscalibrated:
        gap = pit["variance"] - pit["variance_expected"]
        if gap > Z * pit["variance_se"]:
            dispersion = "under-dispersed"
        elif gap < -Z * pit["variance_se"]:
            dispersion = "over-dispersed"
        shift = pit["mean"] - 0.5
        if shift > Z * pit["mean_se"]:
            location = "forecasts too low"
        elif shift < -Z * pit["mean_se"]:
            location = "forecasts too high"
    if not miscalibrated:
        reads = "no evidence of miscalibration"
    else:
        parts = [p for p in (dispersion, location) if p]
        reads = " and ".join(parts) or (
            "miscalibrated, neither over- nor under-dispersed nor biased on average"
        )
    cov = result["metrics"]["coverage_90"]
    advice = ADVICE[model.form] if miscalibrated else "no recalibration indicated"
    text = (
        f"{model.name}: {reads}: PIT Kuiper test p = "
        f"{format_p(kuiper['p_value'], kuiper['log10_p_value'])} (KS p = "
        f"{format_p(ks['p_value'], ks['log10_p_value'])}); the central 90% interval covers "
        f"{cov['value']:.4f} [{cov['low']:.4f}, {cov['high']:.4f}]; PIT mean "
        f"{pit['mean']:.4f} (calibrated: 0.5), variance {pit['variance']:.4f} (calibrated: "
        f"{pit['variance_expected']:.4f}). {advice[0].upper()}{advice[1:]}."
    )
    return {
        "reads": reads,
        "miscalibrated": miscalibrated,
        "alpha": ALPHA,
        "dispersion": dispersion,
        "location": location,
        "pit_kuiper_p_value": kuiper["p_value"],
        "pit_ks_p_value": ks["p_value"],
        "coverage_90": dict(cov),
        "advice": advice,
        "text": text,
    }

"""Computing ``jaxcal report``'s numbers: every metric, interval and test of one model.

All of a model's metrics, their percentile bootstrap intervals (the same resamples for
every metric) and the tests are one jitted computation, so a second model of the same
shape costs no compilation. The numbers come back as host floats in the shape of the
``--json`` schema's ``metrics`` and ``tests``.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from jax.scipy.special import log_ndtr

import jaxcal
from jaxcal import stats
from jaxcal.cli._clinical import clinical_numbers, to_host
from jaxcal.cli._io import Model
from jaxcal.cli._kernels import Kernel

#: Level of the bootstrap intervals.
CONFIDENCE = 0.95


def accuracy(probs, labels, *, weights=None):
    """Share of correct top-1 predictions (binary: ``p > 1/2`` predicts the positive class)."""
    pred = (probs > 0.5).astype(jnp.int32) if probs.ndim == 1 else jnp.argmax(probs, axis=1)
    right = (pred == labels).astype(probs.dtype)
    if weights is None:
        return jnp.mean(right)
    w = weights.astype(probs.dtype)
    return jnp.sum(w * right) / jnp.maximum(jnp.sum(w), jnp.finfo(w.dtype).tiny)


def metric_specs(n_bins: int, binary: bool) -> list[tuple[str, str, Any]]:
    """(key, display name, metric with options bound) of the bootstrapped metrics."""
    specs = [
        ("accuracy", "accuracy", accuracy),
        ("ece", f"ECE (l1, {n_bins} uniform bins)", partial(jaxcal.ece, n_bins=n_bins)),
        (
            "ece_quantile",
            f"ECE (l1, {n_bins} equal-mass bins)",
            partial(jaxcal.ece, n_bins=n_bins, binning="quantile"),
        ),
        (
            "ece_l2_debiased",
            "ECE (l2, debiased, Kumar et al.)",
            partial(jaxcal.ece, n_bins=n_bins, norm="l2", debias=True),
        ),
    ]
    if not binary:
        specs += [
            ("classwise_ece", "classwise ECE", partial(jaxcal.classwise_ece, n_bins=n_bins)),
            ("top_label_ece", "top-label ECE", partial(jaxcal.top_label_ece, n_bins=n_bins)),
        ]
    specs += [
        ("brier", "Brier score", jaxcal.brier_score),
        ("log_loss", "log loss (nats)", jaxcal.log_loss),
    ]
    return specs


#: CORP decomposition rows (key, display name): the positive class (binary) or the top-label
#: confidence (multiclass), Brier and log score, each S = MCB - DSC + UNC with intervals.
CORP_ROWS = tuple(
    (f"corp_{score}{suffix}", label)
    for score, name in (("brier", "Brier"), ("log", "log score"))
    for suffix, label in (
        ("", f"{name}, CORP decomposition"),
        ("_miscalibration", "  miscalibration (MCB)"),
        ("_discrimination", "  discrimination (DSC)"),
        ("_uncertainty", "  uncertainty (UNC)"),
    )
)

#: Rows of the metrics table, top to bottom (those a model lacks are left out).
ROW_ORDER = (
    "accuracy",
    "positive_rate",
    "ece",
    "ece_quantile",
    "ece_l2_debiased",
    "mce",
    "classwise_ece",
    "top_label_ece",
    "brier",
    "brier_reliability",
    "brier_resolution",
    "brier_uncertainty",
    "brier_within_bin_variance",
    "brier_within_bin_covariance",
    "log_loss",
    *(key for key, _ in CORP_ROWS),
)

DECOMPOSITION = (
    ("brier_reliability", "  reliability (REL)", "reliability"),
    ("brier_resolution", "  resolution (RES)", "resolution"),
    ("brier_uncertainty", "  uncertainty (UNC)", "uncertainty"),
    ("brier_within_bin_variance", "  within-bin variance", "within_bin_variance"),
    ("brier_within_bin_covariance", "  within-bin covariance", "within_bin_covariance"),
)


def _report_kernel(probs, labels, key_data, *, n_bins, n_resamples):
    """Every number of the report for one model, as a dict of 0-d arrays (one jit)."""
    binary = probs.ndim == 1
    boot_key, consistency_key = jax.random.split(jax.random.wrap_key_data(key_data))
    out = {}
    for name, _, metric in metric_specs(n_bins, binary):
        res = stats.bootstrap_ci(
            metric, probs, labels, key=boot_key, n_resamples=n_resamples, confidence=CONFIDENCE
        )
        out[name] = (res.estimate, res.low, res.high)
    out["mce"] = (jaxcal.mce(probs, labels, n_bins=n_bins),)
    dec = jaxcal.brier_decomposition(probs, labels, n_bins=n_bins)
    for name, _, field in DECOMPOSITION:
        out[name] = (getattr(dec, field),)
    for score in ("brier", "log"):
        corp = stats.score_decomposition_ci(
            probs,
            labels,
            key=boot_key,
            score=score,
            reduction="top_label",
            n_resamples=n_resamples,
            confidence=CONFIDENCE,
        )
        for field in corp.estimate._fields:
            suffix = "" if field == "score" else f"_{field}"
            out[f"corp_{score}{suffix}"] = tuple(getattr(t, field) for t in corp[:3])
    if binary:
        out["positive_rate"] = (jnp.mean(labels.astype(probs.dtype)),)
    tests = stats.calibration_tests(probs, labels)
    z = tests.spiegelhalter.statistic
    out["ks"] = (*tests.ks, stats.log_brownian_max_sf(tests.ks.statistic))
    out["kuiper"] = (*tests.kuiper, stats.log_brownian_range_sf(tests.kuiper.statistic))
    log_p = jnp.minimum(jnp.log(2.0) + log_ndtr(-jnp.abs(z)), 0.0)
    out["spiegelhalter"] = (z, tests.spiegelhalter.p_value, log_p)
    cons = stats.consistency_test(
        partial(jaxcal.ece, n_bins=n_bins),
        probs,
        labels,
        key=consistency_key,
        n_resamples=n_resamples,
    )
    out["ece_consistency"] = (cons.statistic, cons.p_value, jnp.log(cons.p_value))
    if binary:
        out["clinical"] = clinical_numbers(probs, labels, CONFIDENCE)
    return out


_REPORT = Kernel("report", _report_kernel)


def report_call(model: Model, *, n_bins: int, n_resamples: int, seed: int) -> tuple:
    """(kernel, arrays, static options) of one model's report."""
    key_data = jax.random.key_data(jax.random.key(seed))
    return (
        _REPORT,
        (model.probs, model.labels, key_data),
        {
            "n_bins": n_bins,
            "n_resamples": n_resamples,
        },
    )


def start_report(model: Model, *, n_bins: int, n_resamples: int, seed: int) -> dict:
    """Dispatch the report kernel of one model; its device arrays (not waited for)."""
    kernel, arrays, static = report_call(model, n_bins=n_bins, n_resamples=n_resamples, seed=seed)
    return kernel(*arrays, **static)


def finish_report(raw: dict) -> dict:
    """Host floats of ``start_report()``'s arrays, in the shape of the JSON schema."""
    raw = jax.device_get(raw)
    metrics, tests = {}, {}
    clinical = to_host(raw.pop("clinical")) if "clinical" in raw else None
    for name, values in raw.items():
        values = [float(v) for v in values]
        if name in ("ks", "kuiper", "spiegelhalter", "ece_consistency"):
            stat, p, log_p = values
            tests[name] = {"statistic": stat, "p_value": p, "log10_p_value": log_p / math.log(10)}
        elif len(values) == 3:
            metrics[name] = {"value": values[0], "low": values[1], "high": values[2]}
        else:
            metrics[name] = {"value": values[0], "low": None, "high": None}
    metrics = {k: metrics[k] for k in ROW_ORDER if k in metrics}
    return {"metrics": metrics, "tests": tests, "clinical": clinical}


def compute_report(model: Model, *, n_bins: int, n_resamples: int, seed: int) -> dict:
    """Host floats of every metric and test of one model (see the JSON schema)."""
    return finish_report(start_report(model, n_bins=n_bins, n_resamples=n_resamples, seed=seed))

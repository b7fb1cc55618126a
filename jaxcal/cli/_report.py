"""Computing ``jaxcal report``'s numbers: every metric, interval and test of one model.

All of a model's metrics, their percentile bootstrap intervals (the same resamples for
every metric), the selective-prediction block (``jaxcal/cli/_selective.py``) and the tests
(SKCE's included) are two jitted computations on the rows padded to a size class
(``padded_inputs()``; the padding weighs 0 and no resample draws it), so a second model of
any N in the same class costs no compilation and its numbers are those of its N rows. The
numbers come back as host floats in the shape of the ``--json`` schema's ``metrics`` and
``tests``.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxcal
from jaxcal import stats
from jaxcal._core.eager import pad_rows, size_class
from jaxcal._core.store import FAST_RUN, Kernel
from jaxcal.cli._clinical import clinical_numbers, to_host
from jaxcal.cli._io import Model
from jaxcal.cli._selective import KEYS as SELECTIVE_KEYS
from jaxcal.cli._selective import selective_numbers
from jaxcal.stats._resampling.bootstrap import bootstrap_padded
from jaxcal.stats._resampling.consistency import consistency_test_padded
from jaxcal.stats._resampling.corp import score_decomposition_ci_padded

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


#: SKCE's asymptotic test (bootstrap of the null) costs O(N^2 (K + R)) for N samples, K
#: classes and R resamples: it is used while N^2 (K + R) is at most this (N = 2,000 at
#: K = 10 and the default 200 resamples; ~0.03 s), else the block z-test (O(N K), blocks
#: of ``SKCE_BLOCK``). The bound was N = 10,000 until the report became compile-free:
#: there the asymptotic test alone took 1.1 s of a 10,000-row model's 2.3 s (K = 4,
#: warm), the report's largest cost, for a test the block test replaces at that size.
SKCE_ASYMPTOTIC_MAX_WORK = 84 * 10**7
#: Block size of the SKCE block test (CalibrationTests.jl's default, 2).
SKCE_BLOCK = 2
#: Test NAMEs whose entries are (statistic, p-value, log p-value).
TESTS = ("ks", "kuiper", "spiegelhalter", "ece_consistency")


def skce_method(n: int, k: int, n_resamples: int) -> str:
    """Which SKCE test the report runs on N samples of K classes: ``"asymptotic"``,
    ``"block"``, or ``"none"`` for N < 2 (no pair of samples: the row reads ``-``)."""
    if n < 2:
        return "none"
    return "asymptotic" if n * n * (k + n_resamples) <= SKCE_ASYMPTOTIC_MAX_WORK else "block"


def _classes(model: Model) -> int:
    return 2 if model.probs.ndim == 1 else model.probs.shape[1]


def skce_key(key):
    """The SKCE test's key: ``fold_in(key(seed), 2)``, apart from the other resamples'."""
    return jax.random.fold_in(key, 2)


def skce_numbers(probs, labels, key, n_resamples: int, method: str, weights=None) -> tuple:
    """(statistic, p-value, log p-value, estimate, bandwidth, reliable, expected errors) of
    :func:`jaxcal.stats.skce_test`
    (unbiased SKCE, Laplacian kernel, median bandwidth; ``method`` from ``skce_method()``),
    inside the report's kernel. ``weights``: 0 on padding rows, which the test drops
    exactly (its null draws from the weights: the same with or without the padding)."""
    if method == "none":
        nan = jnp.full((), jnp.nan, probs.dtype)
        return (nan,) * 5 + (jnp.ones((), bool), nan)
    if method == "asymptotic":
        res = stats.skce_test(probs, labels, key=key, n_resamples=n_resamples, weights=weights)
    else:
        res = stats.skce_test(probs, labels, method="block", block_size=SKCE_BLOCK, weights=weights)
    return (
        *(res.statistic, res.p_value, res.log_p_value, res.estimate, res.bandwidth),
        *(res.reliable, res.expected_errors),
    )


def _report_kernel(probs, labels, weights, rows, key_data, *, n_bins, n_resamples):
    """Every number of the report for one model, as a dict of 0-d arrays (one jit).

    The rows are padded to a size class (``report_calls()``): ``weights`` are 1 on the
    first ``rows`` rows and 0 after, and the resampling draws those of the unpadded
    rows, so a new N inside a class compiles nothing and gives the unpadded numbers.
    """
    binary = probs.ndim == 1
    base_key = jax.random.wrap_key_data(key_data)
    boot_key, consistency_key = jax.random.split(base_key)
    data = (probs, labels, weights, rows)
    resampling = {"n_resamples": n_resamples, "confidence": CONFIDENCE}
    out = {}
    specs = metric_specs(n_bins, binary)
    # Every metric but the debiased ECE (whose correction counts distinct rows) reads
    # integer weights as repeated rows: resampled as multiplicities (bootstrap_padded).
    repetition = tuple(key != "ece_l2_debiased" for key, _, _ in specs)
    metrics = [m for _, _, m in specs]
    boots = bootstrap_padded(metrics, *data, key=boot_key, repetition=repetition, **resampling)
    for (name, _, _), res in zip(specs, boots, strict=True):
        out[name] = (res.estimate, res.low, res.high)
    out["mce"] = (jaxcal.mce(probs, labels, n_bins=n_bins, weights=weights),)
    dec = jaxcal.brier_decomposition(probs, labels, n_bins=n_bins, weights=weights)
    for name, _, field in DECOMPOSITION:
        out[name] = (getattr(dec, field),)
    corps = score_decomposition_ci_padded(
        *data, key=boot_key, scores=("brier", "log"), reduction="top_label", **resampling
    )
    for score, corp in zip(("brier", "log"), corps, strict=True):
        for field in corp.estimate._fields:
            suffix = "" if field == "score" else f"_{field}"
            out[f"corp_{score}{suffix}"] = tuple(getattr(t, field) for t in corp[:3])
    if binary:
        positives = jnp.sum(weights * labels.astype(probs.dtype))
        out["positive_rate"] = (positives / rows.astype(probs.dtype),)
    tests = stats.calibration_tests(probs, labels, weights=weights)
    for name in ("ks", "kuiper", "spiegelhalter"):  # (statistic, p, log p) each
        out[name] = tuple(getattr(tests, name))
    cons = consistency_test_padded(
        partial(jaxcal.ece, n_bins=n_bins), *data, key=consistency_key, n_resamples=n_resamples
    )
    out["ece_consistency"] = (cons.statistic, cons.p_value, jnp.log(cons.p_value))
    if binary:
        out["clinical"] = clinical_numbers(probs, labels, CONFIDENCE, weights)
    return out


def _extras_kernel(probs, labels, weights, rows, key_data, *, n_resamples, skce):
    """The SKCE test and the selective-prediction block of one model (one jit).

    Apart from ``_report_kernel`` for speed, not for lack of room: both are sorts and
    tiled products repeated over every resample, which XLA:CPU runs 4-8x faster at its
    default optimisation level (``FAST_RUN``: the selective block 36 ms and the SKCE test
    25 ms per demo model, against 243 ms and 204 ms at the report kernel's
    ``FAST_COMPILE``), for about 3 s more compilation (5 s against 3 s, load 4) in the
    first run only; later runs load it from the store.
    The resamples are the report's: the same ``boot_key`` as the metrics table.
    """
    base_key = jax.random.wrap_key_data(key_data)
    boot_key, _ = jax.random.split(base_key)
    skce_args = (skce_key(base_key), n_resamples, skce, weights)
    out = {"skce": skce_numbers(probs, labels, *skce_args)}
    data = (probs, labels, weights, rows)
    out.update(selective_numbers(*data, boot_key, n_resamples, CONFIDENCE))
    return out


# Both at XLA's default optimisation: the report kernel at -O0 (``FAST_COMPILE``) ran
# 3.5x slower (6.8 s against 1.9 s at N = 12,288, K = 4) for 30 % less compilation
# (10 s against 15 s), and since it is compiled once per size class and then loaded
# from the store, the run time is the one paid on every run.
_REPORT = Kernel("report", _report_kernel, options=FAST_RUN)
_EXTRAS = Kernel("report_extras", _extras_kernel, options=FAST_RUN)


def padded_inputs(model: Model) -> tuple:
    """(probs, labels, weights, rows) of a model's rows padded to ``size_class(N)``.

    The padding repeats the first row (no new value, tie or extreme enters a sort) with
    weight 0; ``rows`` (int32, 0-d) is N. One compiled report serves every N of a class.
    """
    n = model.probs.shape[0]
    m = size_class(n)
    probs, labels = (pad_rows(x, n, m) for x in (model.probs, model.labels))
    dtype = jax.dtypes.canonicalize_dtype(np.result_type(probs.dtype, np.float32))
    weights = (np.arange(m) < n).astype(dtype)
    return probs, labels, weights, np.asarray(n, np.int32)


def report_calls(model: Model, *, n_bins: int, n_resamples: int, seed: int) -> list[tuple]:
    """(kernel, arrays, static options) of each kernel of one model's report."""
    key_data = jax.random.key_data(jax.random.key(seed))
    arrays = (*padded_inputs(model), key_data)
    skce = skce_method(model.probs.shape[0], _classes(model), n_resamples)  # static option
    return [
        (_REPORT, arrays, {"n_bins": n_bins, "n_resamples": n_resamples}),
        (_EXTRAS, arrays, {"n_resamples": n_resamples, "skce": skce}),
    ]


def start_report(model: Model, *, n_bins: int, n_resamples: int, seed: int) -> dict:
    """Dispatch the report's kernels of one model; their device arrays (not waited for)."""
    raw = {}
    for kernel, arrays, static in report_calls(
        model, n_bins=n_bins, n_resamples=n_resamples, seed=seed
    ):
        raw.update(kernel(*arrays, **static))
    return raw


def finish_report(raw: dict, *, skce: str | None = None) -> dict:
    """Host floats of ``start_report()``'s arrays, in the shape of the JSON schema
    (``skce``: the SKCE test's method, ``skce_method()``)."""
    raw = jax.device_get(raw)
    metrics, tests = {}, {}
    clinical = to_host(raw.pop("clinical")) if "clinical" in raw else None
    for name, values in raw.items():
        values = [float(v) for v in values]
        if name in TESTS or name == "skce":
            stat, p, log_p = values[:3]
            tests[name] = {"statistic": stat, "p_value": p, "log10_p_value": log_p / math.log(10)}
            if name == "skce":
                tests[name].update(estimate=values[3], bandwidth=values[4], method=skce)
                tests[name].update(reliable=bool(values[5]), expected_errors=values[6])
        elif len(values) == 3:
            metrics[name] = {"value": values[0], "low": values[1], "high": values[2]}
        else:
            metrics[name] = {"value": values[0], "low": None, "high": None}
    metrics = {k: metrics[k] for k in (*ROW_ORDER, *SELECTIVE_KEYS) if k in metrics}
    return {"metrics": metrics, "tests": tests, "clinical": clinical}


def compute_report(model: Model, *, n_bins: int, n_resamples: int, seed: int) -> dict:
    """Host floats of every metric and test of one model (see the JSON schema)."""
    raw = start_report(model, n_bins=n_bins, n_resamples=n_resamples, seed=seed)
    n, k = model.probs.shape[0], _classes(model)
    return finish_report(raw, skce=skce_method(n, k, n_resamples))

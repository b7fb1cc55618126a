"""The ``jaxcal`` command line: ``jaxcal report FILE`` and ``jaxcal report --demo``.

``jaxcal report`` reads predictions and labels and prints the whole picture of a model's
calibration: the binned calibration errors, the Brier score and its decomposition and the
log loss, each with a bootstrap interval; the Kolmogorov-Smirnov, Kuiper, Spiegelhalter
and ECE-consistency tests with their p-values; with ``--fit``, what temperature scaling,
top-label Platt scaling and top-label isotonic regression do on held-out folds; with
``--plot OUT.png``, the reliability diagram and the cumulative-differences plot.

Input files (the format is decided by the extension):

* ``.npz``: arrays ``probs`` ((N,) positive-class probabilities or (N, K) rows on the
  simplex) and/or ``logits`` ((N,) log-odds or (N, K)), and ``labels`` ((N,) integers).
  ``--labels KEY`` names another label key. When the file has only logits, the
  probabilities are their softmax (sigmoid for (N,)); when it has both, the metrics use
  ``probs`` and temperature scaling uses ``logits``. ``--probs [KEY]`` or ``--logits
  [KEY]`` use that one array only (default key ``probs`` or ``logits``). Pickled (object)
  arrays are refused.
* ``.npy``: one array of scores, with the labels in a second ``.npy`` given by
  ``--labels LABELS.npy`` (required). The scores are probabilities, or logits with
  ``--logits`` (no value).
* ``.csv``: a header row, then one row per sample, numbers only (no pandas needed).
  ``--labels COL`` names the label column (default: the first of ``label``, ``labels``,
  ``y``, ``target``, ``class`` present); ``--probs COLS`` or ``--logits COLS`` name the
  score columns, comma-separated, each a name or a glob (``--probs 'p_*'``), in that
  order; by default every other column holds probabilities. One score column is a binary
  problem (its values are the positive class's probability or log-odds); K columns are
  the K classes in the order given.

Several FILEs are reported side by side (each with its own labels). ``--demo`` reports
the two real models shipped in ``jaxcal/data`` and turns ``--fit`` on (``--no-fit`` turns
it off).

Intervals are percentile bootstrap intervals (:func:`jaxcal.stats.bootstrap_ci`) over
``--resamples`` resamples of the N samples (default 200; the same resamples for every
metric, seed ``--seed``). All metrics, intervals and tests of a model are one compiled
JAX computation, so a second model of the same shape costs no compilation.

Output: the table on stdout; progress of the long steps on stderr (``--quiet`` silences
it); ``--json OUT`` (``-`` for stdout, instead of the table) writes every number in the
schema below; ``--plot OUT.png`` (or ``.pdf``, ``.svg``; needs matplotlib) writes the
figure. Nothing is written to disk unless asked.

JSON schema (``"schema": "jaxcal.report/1"``)::

  {"schema": "jaxcal.report/1", "jaxcal_version": str,
   "settings": {"n_bins": int, "resamples": int, "confidence": 0.95, "seed": int,
                "interval": "percentile bootstrap", "folds": int or null},
   "models": [{"name": str, "source": str, "n": int, "num_classes": int,
               "binary": bool, "inputs": "probs" | "logits",
               "metrics": {NAME: {"value": float, "low": float or null,
                                  "high": float or null}},
               "tests": {NAME: {"statistic": float or null, "p_value": float,
                                "log10_p_value": float or null}},
               "fit": null or {"folds": int, "seed": int,
                               "temperature_inputs": "logits" | "log_probs",
                               "results": {CALIBRATOR: {"ece": float, "log_loss": float,
                                                        "brier": float, "accuracy": float}}}}]}

Metric NAMEs: ``accuracy``, ``ece``, ``ece_quantile``, ``ece_l2_debiased``, ``mce``,
``classwise_ece`` and ``top_label_ece`` (multiclass only), ``brier``, ``log_loss`` (with
intervals); ``brier_reliability``, ``brier_resolution``, ``brier_uncertainty``,
``brier_within_bin_variance``, ``brier_within_bin_covariance``, and ``positive_rate``
(binary only) without. Test NAMEs: ``ks``, ``kuiper``, ``spiegelhalter`` (two-sided),
``ece_consistency``. CALIBRATORs: ``uncalibrated``, ``temperature_scaling``, and
``top_label_platt``, ``top_label_isotonic`` (multiclass) or ``platt``, ``isotonic``
(binary). Non-finite numbers are written as null (an infinite statistic when sigma = 0,
log10 of a p-value of 0). Binary ``accuracy`` predicts the positive class when p > 1/2.

Errors in the input (missing keys, wrong shapes, pickles, non-numeric CSV cells, NaN,
labels out of range, ...) are one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
import json
import math
import sys
import time
from collections.abc import Sequence
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

DEMO_FILES = (("GaussianNB", "digits_gaussian_nb.npz"), ("MLP", "digits_mlp.npz"))
DEMO_DESCRIPTION = (
    "GaussianNB and an MLP on scikit-learn's handwritten digits (held-out half, N=899, "
    "K=10); regenerate with scripts/make_demo_data.py"
)
LABEL_COLUMNS = ("label", "labels", "y", "target", "class")
CONFIDENCE = 0.95


class InputError(Exception):
    """A problem with the user's file or arguments (exit code 2)."""


class Model(NamedTuple):
    """One model's predictions as read from a file (host arrays)."""

    name: str
    source: str
    probs: np.ndarray  # (N,) or (N, K), float32
    labels: np.ndarray  # (N,)
    logits: np.ndarray | None  # same shape as probs, or None
    inputs: str  # "probs" or "logits": what the file held


# ----------------------------------------------------------------------------- reading


def _softmax(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    if z.ndim == 1:
        return (1 / (1 + np.exp(-z))).astype(np.float32)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def _numeric(path: Path, name: str, arr: np.ndarray) -> np.ndarray:
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)
    ):
        raise InputError(f"{path}: `{name}` must be numeric; got dtype {arr.dtype}.")
    if arr.ndim == 0:
        raise InputError(
            f"{path}: `{name}` must be an array of shape (N,) or (N, K); got a scalar."
        )
    return arr


def _model(path: Path, name: str, probs, logits, labels) -> Model:
    """Assemble a Model; probabilities from logits when the file has only logits."""
    if logits is not None:
        logits = _numeric(path, "logits", logits)
        if not np.all(np.isfinite(logits)):
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(logits))[0])
            raise InputError(f"{path}: `logits` must be finite; got {logits[bad]} at index {bad}.")
    inputs = "probs" if probs is not None else "logits"
    if probs is None:
        probs = _softmax(logits)
    probs = _numeric(path, "probs", probs)
    labels = _numeric(path, "labels", labels)
    if logits is not None and logits.shape != probs.shape:
        raise InputError(
            f"{path}: `logits` {logits.shape} must have the shape of `probs` {probs.shape}."
        )
    return Model(name, str(path), probs, labels, logits, inputs)


def load_npz(path: Path, *, probs_key=None, logits_key=None, labels_key=None, name=None) -> Model:
    """A model from an ``.npz`` file; pickled objects are refused."""
    labels_key = labels_key or "labels"
    try:
        with np.load(path, allow_pickle=False) as data:
            files = set(data.files)
            wanted = [k for k in (probs_key, logits_key, labels_key) if k is not None]
            missing = [k for k in wanted if k not in files]
            has_scores = (probs_key or "probs") in files or (logits_key or "logits") in files
            if missing or not has_scores:
                need = missing or ["probs' or 'logits"]
                raise InputError(
                    f"{path}: missing key(s) {need}; found {sorted(files)}. "
                    "Save with np.savez(path, probs=..., labels=...) (or logits=...)."
                )

            def get(key):
                return np.asarray(data[key]) if key in files else None

            probs = get(probs_key or "probs") if logits_key is None or probs_key else None
            logits = get(logits_key or "logits") if probs_key is None or logits_key else None
            labels = get(labels_key)
    except InputError:
        raise
    except (OSError, ValueError, EOFError) as err:
        raise InputError(f"{path}: cannot read as .npz ({err}).") from err
    return _model(path, name or path.stem, probs, logits, labels)


def _load_npy_array(path: Path, what: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise InputError(f"{path}: cannot read {what} as .npy ({err}).") from err


def load_npy(path: Path, labels_path: str | None, *, logits: bool) -> Model:
    """A model from ``SCORES.npy`` and ``--labels LABELS.npy``."""
    if not labels_path:
        raise InputError(
            f"{path}: a .npy file holds one array; give the labels as a second .npy file "
            "with --labels LABELS.npy."
        )
    scores = _load_npy_array(path, "the scores")
    labels = _load_npy_array(Path(labels_path), "the labels")
    if logits:
        return _model(path, path.stem, None, scores, labels)
    return _model(path, path.stem, scores, None, labels)


def _select(path: Path, header: list[str], spec: str, what: str) -> list[int]:
    """Column indices for a comma-separated list of names or globs, in the given order."""
    chosen: list[int] = []
    for pattern in (p.strip() for p in spec.split(",")):
        hits = [i for i, h in enumerate(header) if fnmatch.fnmatchcase(h, pattern)]
        if not pattern or not hits:
            raise InputError(f"{path}: no column matches {what} {pattern!r}; columns: {header}.")
        chosen += [i for i in hits if i not in chosen]
    return chosen


def load_csv(path: Path, *, probs_cols=None, logits_cols=None, labels_col=None) -> Model:
    """A model from a ``.csv`` file with a header row (stdlib ``csv`` and NumPy only)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = [row for row in csv.reader(f) if row and any(c.strip() for c in row)]
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise InputError(f"{path}: cannot read as .csv ({err}).") from err
    if len(rows) < 2:
        raise InputError(f"{path}: a .csv file needs a header row and at least one data row.")
    header = [h.strip() for h in rows[0]]
    if labels_col is None:
        present = [c for c in LABEL_COLUMNS if c in header]
        if not present:
            raise InputError(
                f"{path}: no label column among {list(LABEL_COLUMNS)}; name it with --labels COL "
                f"(columns: {header})."
            )
        labels_col = present[0]
    if labels_col not in header:
        raise InputError(f"{path}: no column {labels_col!r} for the labels; columns: {header}.")
    y_idx = header.index(labels_col)
    spec = logits_cols if logits_cols is not None else probs_cols
    if spec:
        score_idx = _select(path, header, spec, "--logits" if logits_cols else "--probs")
    else:
        score_idx = [i for i in range(len(header)) if i != y_idx]
    if y_idx in score_idx or not score_idx:
        raise InputError(f"{path}: the score columns must be other than the label column.")
    values = np.empty((len(rows) - 1, len(header)), dtype=np.float64)
    for r, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise InputError(
                f"{path}: line {r} has {len(row)} fields; the header has {len(header)}."
            )
        for c in [y_idx, *score_idx]:
            cell = row[c].strip()
            try:
                values[r - 2, c] = float(cell)
            except ValueError:
                raise InputError(
                    f"{path}: non-numeric value {cell!r} in column {header[c]!r}, line {r}."
                ) from None
    scores = values[:, score_idx]
    scores = scores[:, 0] if len(score_idx) == 1 else scores
    labels = values[:, y_idx]
    if logits_cols is not None:
        return _model(path, path.stem, None, scores, labels)
    return _model(path, path.stem, scores.astype(np.float32), None, labels)


def load(path: Path, args: argparse.Namespace) -> Model:
    """Dispatch on the extension."""
    suffix = path.suffix.lower()
    logits_flag = args.logits is not None
    if suffix == ".npz":
        # A flag without a value names the default key: "--logits" uses only the logits.
        return load_npz(
            path,
            probs_key=args.probs or ("probs" if args.probs == "" else None),
            logits_key=args.logits or ("logits" if args.logits == "" else None),
            labels_key=args.labels,
        )
    if suffix == ".npy":
        if args.probs or args.logits:
            raise InputError(
                f"{path}: --probs/--logits take no column names with .npy files "
                "(write --logits alone when the array holds logits)."
            )
        return load_npy(path, args.labels, logits=logits_flag)
    if suffix == ".csv":
        return load_csv(
            path,
            probs_cols=args.probs or None,
            logits_cols=(args.logits or None) if logits_flag else None,
            labels_col=args.labels,
        )
    raise InputError(f"{path}: unsupported file type {suffix!r}; use .npz, .npy or .csv.")


def load_demo() -> list[Model]:
    """The two real models shipped with the package."""
    models = []
    for name, filename in DEMO_FILES:
        ref = resources.files("jaxcal") / "data" / filename
        with resources.as_file(ref) as local:
            model = load_npz(Path(local), name=name)
        models.append(model._replace(source=f"jaxcal/data/{filename}"))
    return models


def validate(model: Model) -> Model:
    """Value checks (shapes, NaN, range, simplex, labels) as InputError; labels as int32."""
    from jaxcal._checks import check_probs_labels

    try:
        probs, labels, _ = check_probs_labels(model.probs, model.labels)
    except ValueError as err:
        raise InputError(f"{model.source}: {err}") from err
    if probs.ndim == 2 and probs.shape[1] < 2:
        raise InputError(
            f"{model.source}: `probs` needs at least 2 class columns; got {probs.shape}."
        )
    return model._replace(
        probs=np.asarray(probs, dtype=np.float32), labels=np.asarray(labels, dtype=np.int32)
    )


# ----------------------------------------------------------------------------- computing


def _accuracy(probs, labels, *, weights=None):
    """Share of correct top-1 predictions (binary: ``p > 1/2`` predicts the positive class)."""
    import jax.numpy as jnp

    pred = (probs > 0.5).astype(jnp.int32) if probs.ndim == 1 else jnp.argmax(probs, axis=1)
    right = (pred == labels).astype(probs.dtype)
    if weights is None:
        return jnp.mean(right)
    w = weights.astype(probs.dtype)
    return jnp.sum(w * right) / jnp.maximum(jnp.sum(w), jnp.finfo(w.dtype).tiny)


def _metric_specs(n_bins: int, binary: bool) -> list[tuple[str, str, Any]]:
    """(key, display name, metric with options bound) of the bootstrapped metrics."""
    import jaxcal

    specs = [
        ("accuracy", "accuracy", _accuracy),
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
)

DECOMPOSITION = (
    ("brier_reliability", "  reliability (REL)", "reliability"),
    ("brier_resolution", "  resolution (RES)", "resolution"),
    ("brier_uncertainty", "  uncertainty (UNC)", "uncertainty"),
    ("brier_within_bin_variance", "  within-bin variance", "within_bin_variance"),
    ("brier_within_bin_covariance", "  within-bin covariance", "within_bin_covariance"),
)


def _report_kernel_impl(probs, labels, key, n_bins, n_resamples):
    """Every number of the report for one model, as a dict of 0-d arrays (one jit)."""
    import jax
    import jax.numpy as jnp

    import jaxcal
    from jaxcal import stats

    binary = probs.ndim == 1
    boot_key, consistency_key = jax.random.split(key)
    out = {}
    for name, _, metric in _metric_specs(n_bins, binary):
        res = stats.bootstrap_ci(
            metric, probs, labels, key=boot_key, n_resamples=n_resamples, confidence=CONFIDENCE
        )
        out[name] = (res.estimate, res.low, res.high)
    out["mce"] = (jaxcal.mce(probs, labels, n_bins=n_bins),)
    dec = jaxcal.brier_decomposition(probs, labels, n_bins=n_bins)
    for name, _, field in DECOMPOSITION:
        out[name] = (getattr(dec, field),)
    if binary:
        out["positive_rate"] = (jnp.mean(labels.astype(probs.dtype)),)
    tests = stats.calibration_tests(probs, labels)
    z = tests.spiegelhalter.statistic
    out["ks"] = (*tests.ks, stats.log_brownian_max_sf(tests.ks.statistic))
    out["kuiper"] = (*tests.kuiper, stats.log_brownian_range_sf(tests.kuiper.statistic))
    log_p = jnp.minimum(jnp.log(2.0) + jax.scipy.special.log_ndtr(-jnp.abs(z)), 0.0)
    out["spiegelhalter"] = (z, tests.spiegelhalter.p_value, log_p)
    cons = stats.consistency_test(
        partial(jaxcal.ece, n_bins=n_bins),
        probs,
        labels,
        key=consistency_key,
        n_resamples=n_resamples,
    )
    out["ece_consistency"] = (cons.statistic, cons.p_value, jnp.log(cons.p_value))
    return out


def compute_report(model: Model, *, n_bins: int, n_resamples: int, seed: int) -> dict:
    """Host floats of every metric and test of one model (see the JSON schema)."""
    import jax

    kernel = _jitted("report", _report_kernel_impl, static_argnames=("n_bins", "n_resamples"))
    raw = kernel(
        model.probs, model.labels, jax.random.key(seed), n_bins=n_bins, n_resamples=n_resamples
    )
    raw = jax.device_get(raw)
    metrics, tests = {}, {}
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
    return {"metrics": metrics, "tests": tests}


_JITTED: dict[str, Any] = {}


def _jitted(name: str, fn, **kwargs):
    """``jax.jit(fn)``, made once per process.

    The report's kernels are large graphs that run once on small data: on CPU they are
    compiled without LLVM's backend optimisations, which cuts their compile time by a
    quarter and costs nothing measurable at run time (0.1 s for the demo either way).
    """
    import jax

    if name not in _JITTED:
        options = {"xla_backend_optimization_level": 0} if jax.default_backend() == "cpu" else None
        _JITTED[name] = jax.jit(fn, compiler_options=options, **kwargs)
    return _JITTED[name]


# --- cross-fitted calibrators


_CALIBRATORS: dict[str, Any] = {}


def _calibrator(name: str, build) -> Any:
    """One calibrator per process: each factory call makes new closures, a new compile."""
    if name not in _CALIBRATORS:
        _CALIBRATORS[name] = build()
    return _CALIBRATORS[name]


def _calibrators(binary: bool, logits_input: bool) -> dict[str, tuple[Any, str]]:
    """Name -> (calibrator, what it is fitted on: "scores", "pair" or "probs")."""
    from jaxcal import calibrators as cal

    space = "logits" if logits_input else "log_probs"
    temperature = _calibrator(space, lambda: cal.temperature_scaling(inputs=space))
    if binary:
        return {
            "temperature_scaling": (temperature, "pair"),
            "platt": (_calibrator("platt", cal.platt_scaling), "probs"),
            "isotonic": (_calibrator("isotonic", cal.isotonic), "probs"),
        }
    return {
        "temperature_scaling": (temperature, "scores"),
        "top_label_platt": (
            _calibrator("top_label_platt", lambda: cal.top_label(cal.platt_scaling())),
            "probs",
        ),
        "top_label_isotonic": (
            _calibrator("top_label_isotonic", lambda: cal.top_label(cal.isotonic())),
            "probs",
        ),
    }


def _cross_fit_impl(cal, x, labels, folds, n_folds):
    """Held-out predictions: fit on all folds but one (others weighted 0), apply to it."""
    import jax
    import jax.numpy as jnp

    fold_ids = jnp.arange(n_folds, dtype=jnp.int32)
    weights = (folds[None, :] != fold_ids[:, None]).astype(jnp.float32)
    params = jax.vmap(lambda w: cal.fit(x, labels, weights=w))(weights)
    out = jax.vmap(lambda p: cal.apply(p, x))(params)
    return out[folds, jnp.arange(x.shape[0])]


def _held_out_metrics_impl(probs, labels, n_bins):
    import jaxcal

    return {
        "ece": jaxcal.ece(probs, labels, n_bins=n_bins),
        "log_loss": jaxcal.log_loss(probs, labels),
        "brier": jaxcal.brier_score(probs, labels),
        "accuracy": _accuracy(probs, labels),
    }


def compute_fit(model: Model, *, n_bins: int, n_folds: int, seed: int) -> dict:
    """Cross-fitted calibrators: ECE, log loss, Brier, accuracy on held-out folds."""
    import jax
    import jax.numpy as jnp

    n = model.probs.shape[0]
    folds = np.empty(n, dtype=np.int32)
    folds[np.random.default_rng(seed).permutation(n)] = np.arange(n) % n_folds
    binary = model.probs.ndim == 1
    logits_input = model.logits is not None
    probs = jnp.asarray(model.probs)
    labels = jnp.asarray(model.labels)
    scores = jnp.asarray(model.logits if logits_input else model.probs)
    if binary:  # temperature scaling of the two-class problem (log(1 - p), log p) or (0, z)
        if logits_input:
            pair = jnp.stack([jnp.zeros_like(scores), scores], axis=1)
        else:
            p = jnp.clip(probs, 0, 1)
            pair = jnp.log(jnp.maximum(jnp.stack([1 - p, p], axis=1), jnp.finfo(p.dtype).tiny))
    elif not logits_input:
        scores = jnp.log(jnp.maximum(probs, jnp.finfo(probs.dtype).tiny))
    cross = _jitted("cross", _cross_fit_impl, static_argnames=("cal", "n_folds"))
    held = _jitted("held", _held_out_metrics_impl, static_argnames=("n_bins",))
    results = {"uncalibrated": held(probs, labels, n_bins=n_bins)}
    folds_j = jnp.asarray(folds)
    for name, (cal, source) in _calibrators(binary, logits_input).items():
        if source == "pair":
            out = cross(cal, pair, labels, folds_j, n_folds=n_folds)[:, 1]
        else:
            x = scores if source == "scores" else probs
            out = cross(cal, x, labels, folds_j, n_folds=n_folds)
        results[name] = held(out, labels, n_bins=n_bins)
    order = list(results)  # device_get returns dicts with sorted keys
    results = jax.device_get(results)
    return {
        "folds": n_folds,
        "seed": seed,
        "temperature_inputs": "logits" if logits_input else "log_probs",
        "results": {
            k: {m: float(results[k][m]) for m in ("ece", "log_loss", "brier", "accuracy")}
            for k in order
        },
    }


# ----------------------------------------------------------------------------- printing


def _num(x: float | None) -> str:
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.4f}"


def format_p(p: float, log10_p: float) -> str:
    """A p-value: four decimals, or mantissa and exponent (from its log) when below 1e-4."""
    if p >= 1e-4 or not math.isfinite(log10_p):
        return f"{p:.4f}"
    exponent = math.floor(log10_p)
    return f"{10 ** (log10_p - exponent):.1f}e{exponent}"


def _table(rows: list[list[str]], out, indent: str = "") -> None:
    """Left-aligned first column, right-aligned others, a rule under the header."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for j, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        print(indent + "  ".join(cells).rstrip(), file=out)
        if j == 0:
            print(indent + "  ".join("-" * w for w in widths), file=out)


def print_report(models: list[Model], results: list[dict], settings: dict, out) -> None:
    """The human-readable report."""
    print("jaxcal report", file=out)
    for model in models:
        shape = "binary (N,)" if model.probs.ndim == 1 else f"{model.probs.shape[1]} classes"
        print(
            f"  {model.name}: {model.source}\n    N = {model.probs.shape[0]}, {shape}, "
            f"from {model.inputs}",
            file=out,
        )
    n_bins, resamples = settings["n_bins"], settings["resamples"]
    pct = round(100 * settings["confidence"])
    print(
        f"\nMetrics, with {pct}% percentile bootstrap intervals ({resamples} resamples, "
        f"seed {settings['seed']})",
        file=out,
    )
    labels = {key: label for key, label, _ in _metric_specs(n_bins, False)}
    labels["positive_rate"] = "positive rate"
    labels["mce"] = "MCE (max gap)"
    labels.update({key: label for key, label, _ in DECOMPOSITION})
    present = {key for r in results for key in r["metrics"]}
    rows = [["metric"] + [h for m in models for h in (f"{pct}% interval", m.name)]]
    for key in ROW_ORDER:
        if key in present:
            rows.append([labels[key], *_cells(results, key)])
    _table(rows, out)
    print(
        "  Binned ECEs are biased upwards: for a well-calibrated model their interval can lie\n"
        "  above the estimate (the debiased l2 ECE corrects for it); MCE has no interval.",
        file=out,
    )
    print("\nTests of calibration (p-values; small means miscalibrated)", file=out)
    rows = [["test"] + [h for m in models for h in (m.name, "p-value")]]
    tests = (
        ("ks", "Kolmogorov-Smirnov (cumulative)"),
        ("kuiper", "Kuiper (cumulative)"),
        ("spiegelhalter", "Spiegelhalter Z (two-sided)"),
        ("ece_consistency", f"ECE consistency ({resamples} resamples)"),
    )
    for key, label in tests:
        row = [label]
        for r in results:
            t = r["tests"][key]
            row += [_num(t["statistic"]), format_p(t["p_value"], t["log10_p_value"])]
        rows.append(row)
    _table(rows, out)
    print(
        "  KS/Kuiper/Spiegelhalter test the top-label confidence (multiclass) or the "
        "positive class (binary);\n  ECE consistency p = (1 + #{resampled ECE >= ECE}) / "
        f"(1 + {resamples}), labels drawn from the predictions.",
        file=out,
    )
    if all(r.get("fit") for r in results):
        _print_fit(models, results, settings, out)


def _cells(results: list[dict], key: str) -> list[str]:
    cells = []
    for r in results:
        m = r["metrics"].get(key)
        if m is None:
            cells += ["", ""]
        elif m["low"] is None:
            cells += ["", _num(m["value"])]
        else:
            cells += [f"[{_num(m['low'])}, {_num(m['high'])}]", _num(m["value"])]
    return cells


FIT_LABELS = {
    "uncalibrated": "uncalibrated",
    "temperature_scaling": "temperature scaling",
    "top_label_platt": "top-label Platt",
    "top_label_isotonic": "top-label isotonic",
    "platt": "Platt scaling",
    "isotonic": "isotonic regression",
}


def _print_fit(models, results, settings, out) -> None:
    n_bins = settings["n_bins"]
    print(
        f"\nCalibrators, cross-fitted ({settings['folds']} folds, seed {settings['seed']}): "
        "metrics of the held-out predictions",
        file=out,
    )
    for model, r in zip(models, results, strict=True):
        fit = r["fit"]
        source = "logits" if fit["temperature_inputs"] == "logits" else "log-probabilities"
        note = "" if source == "logits" else " (the file has no logits)"
        print(f"  {model.name}: temperature scaling fitted on {source}{note}", file=out)
        rows = [["calibrator", f"ECE ({n_bins} bins)", "log loss", "Brier", "accuracy"]]
        for name, m in fit["results"].items():
            rows.append(
                [FIT_LABELS[name], *(_num(m[k]) for k in ("ece", "log_loss", "brier", "accuracy"))]
            )
        _table(rows, out, indent="  ")


def _json_safe(x):
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def report_json(models: list[Model], results: list[dict], settings: dict) -> dict:
    """The ``--json`` document (schema in the module docstring)."""
    import jaxcal

    return _json_safe(
        {
            "schema": "jaxcal.report/1",
            "jaxcal_version": jaxcal.__version__,
            "settings": settings,
            "models": [
                {
                    "name": m.name,
                    "source": m.source,
                    "n": int(m.probs.shape[0]),
                    "num_classes": 2 if m.probs.ndim == 1 else int(m.probs.shape[1]),
                    "binary": m.probs.ndim == 1,
                    "inputs": m.inputs,
                    "metrics": r["metrics"],
                    "tests": r["tests"],
                    "fit": r.get("fit"),
                }
                for m, r in zip(models, results, strict=True)
            ],
        }
    )


def write_plot(models: list[Model], path: Path, *, n_bins: int, n_resamples: int, seed: int):
    """Reliability diagram (models overlaid) and cumulative differences, side by side."""
    try:
        import matplotlib
    except ImportError as err:
        raise InputError('--plot needs matplotlib: pip install "jaxcal[plot]".') from err
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from jaxcal.plot import cumulative_differences_plot, reliability_diagram

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 6.2))
    groups: dict[tuple, list[Model]] = {}
    for m in models:  # models of different shapes or labels cannot share one call
        groups.setdefault((m.probs.shape, m.labels.tobytes()), []).append(m)
    for group in groups.values():
        probs = {m.name: m.probs for m in group}
        reliability_diagram(
            probs, group[0].labels, n_bins=n_bins, ax=left, n_resamples=n_resamples, key=seed
        )
        cumulative_differences_plot(probs, group[0].labels, ax=right)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except (OSError, ValueError) as err:
        raise InputError(f"cannot write the plot to {path}: {err}") from err
    finally:
        plt.close(fig)


# ----------------------------------------------------------------------------- main


class _Progress:
    """'message ... done (1.2 s)' on stderr, unless quiet."""

    def __init__(self, quiet: bool):
        self.quiet = quiet

    def __call__(self, message: str):
        self.message = message
        return self

    def __enter__(self):
        self.start = time.perf_counter()
        if not self.quiet:
            print(f"jaxcal: {self.message} ...", end="", file=sys.stderr, flush=True)
        return self

    def __exit__(self, exc_type, *_):
        if not self.quiet:
            took = time.perf_counter() - self.start
            end = f" done ({took:.1f} s)" if exc_type is None else " failed"
            print(end, file=sys.stderr, flush=True)
        return False


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jaxcal", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    rep = commands.add_parser(
        "report",
        help="print the calibration report of a predictions file",
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rep.add_argument(
        "files",
        nargs="*",
        type=Path,
        metavar="FILE",
        help=".npz, .npy or .csv predictions (several: side by side)",
    )
    rep.add_argument("--demo", action="store_true", help="run on the real data shipped with jaxcal")
    rep.add_argument(
        "--labels", metavar="COL", help="label key (.npz), column (.csv) or LABELS.npy file (.npy)"
    )
    scores = rep.add_mutually_exclusive_group()
    scores.add_argument(
        "--probs",
        metavar="COLS",
        nargs="?",
        const="",
        help="probability key (.npz) or columns (.csv: names or globs, comma-separated)",
    )
    scores.add_argument(
        "--logits",
        metavar="COLS",
        nargs="?",
        const="",
        help="logit key (.npz) or columns (.csv); alone: the .npy holds logits",
    )
    rep.add_argument("--bins", type=int, default=15, help="number of bins (default 15)")
    rep.add_argument(
        "--fit",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="cross-fit temperature, top-label Platt and isotonic calibrators "
        "(default: on with --demo, off otherwise)",
    )
    rep.add_argument("--folds", type=int, default=5, help="folds of --fit (default 5)")
    rep.add_argument(
        "--resamples",
        type=int,
        default=200,
        help="bootstrap and consistency resamples (default 200)",
    )
    rep.add_argument("--seed", type=int, default=0, help="seed of resamples and folds (default 0)")
    rep.add_argument("--json", metavar="OUT", help="write every number as JSON ('-': stdout)")
    rep.add_argument(
        "--plot",
        metavar="OUT.png",
        type=Path,
        help="write the reliability diagram and cumulative plot (png, pdf, svg)",
    )
    rep.add_argument("--quiet", action="store_true", help="no progress messages on stderr")
    return parser


def _check_args(args: argparse.Namespace) -> None:
    if args.bins < 1:
        raise InputError(f"--bins must be an integer >= 1; got {args.bins}.")
    if args.resamples < 1:
        raise InputError(f"--resamples must be an integer >= 1; got {args.resamples}.")
    if args.folds < 2:
        raise InputError(f"--folds must be an integer >= 2; got {args.folds}.")
    if args.seed < 0:
        raise InputError(f"--seed must be a non-negative integer; got {args.seed}.")
    if args.demo == bool(args.files):
        raise InputError("give either FILE(s) or --demo.")
    if args.plot is not None and args.plot.suffix.lower() not in (".png", ".pdf", ".svg"):
        raise InputError(f"--plot must end in .png, .pdf or .svg; got {args.plot}.")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``jaxcal`` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    progress = _Progress(args.quiet)
    try:
        _check_args(args)
        models = load_demo() if args.demo else [load(path, args) for path in args.files]
        models = [validate(m) for m in models]
        names = [m.name for m in models]
        if len(set(names)) < len(names):  # same stem in different folders
            models = [m._replace(name=f"{m.name}#{i + 1}") for i, m in enumerate(models)]
        fit = args.demo if args.fit is None else args.fit
        for m in models if fit else ():
            if m.probs.shape[0] < 2 * args.folds:
                raise InputError(
                    f"{m.source}: --fit with {args.folds} folds needs at least "
                    f"{2 * args.folds} samples; got {m.probs.shape[0]}."
                )
        settings = {
            "n_bins": args.bins,
            "resamples": args.resamples,
            "confidence": CONFIDENCE,
            "seed": args.seed,
            "interval": "percentile bootstrap",
            "folds": args.folds if fit else None,
        }
        results = []
        for model in models:
            with progress(f"{model.name}: metrics, tests, {args.resamples} bootstrap resamples"):
                results.append(
                    compute_report(
                        model, n_bins=args.bins, n_resamples=args.resamples, seed=args.seed
                    )
                )
            if fit:
                with progress(f"{model.name}: cross-fitting calibrators on {args.folds} folds"):
                    results[-1]["fit"] = compute_fit(
                        model, n_bins=args.bins, n_folds=args.folds, seed=args.seed
                    )
        if args.json == "-":
            json.dump(report_json(models, results, settings), sys.stdout, indent=2)
            print()
        else:
            print_report(models, results, settings, sys.stdout)
        if args.json not in (None, "-"):
            try:
                with open(args.json, "w", encoding="utf-8") as f:
                    json.dump(report_json(models, results, settings), f, indent=2)
            except OSError as err:
                raise InputError(f"cannot write the JSON report to {args.json}: {err}") from err
        if args.plot is not None:
            with progress(f"writing {args.plot}"):
                write_plot(
                    models, args.plot, n_bins=args.bins, n_resamples=args.resamples, seed=args.seed
                )
            if args.json != "-":
                print(f"\nreliability diagram and cumulative plot written to {args.plot}")
    except InputError as err:
        print(f"jaxcal: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

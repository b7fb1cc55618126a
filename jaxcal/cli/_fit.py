"""``jaxcal report --fit``: calibrators cross-fitted on folds, scored on held-out data.

Each calibrator is fitted K times at once (``vmap`` over fold weights: the held-out fold
weighted 0) and applied to every sample; each sample keeps the prediction of the fit that
did not see it. Temperature scaling, and top-label Platt scaling and isotonic regression
(multiclass) or Platt scaling and isotonic regression (binary), are scored by the ECE,
log loss, Brier score and accuracy of those held-out predictions. The rows are padded to
a size class as the report's (in fold K, weight 0 in every fit), so a new N inside a
class compiles nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache, partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxcal
from jaxcal import calibrators
from jaxcal._core.eager import pad_rows, size_class
from jaxcal._core.store import FAST_RUN, Kernel
from jaxcal.cli._io import Model
from jaxcal.cli._report import accuracy, padded_inputs

#: Calibrator id -> (factory, what it is fitted on: "scores" (the logits, or the
#: log-probabilities when the file has none) or "probs").
_FACTORIES: dict[str, tuple[Callable[[], Any], str]] = {
    "temperature_scaling:logits": (
        partial(calibrators.temperature_scaling, inputs="logits"),
        "scores",
    ),
    "temperature_scaling:log_probs": (
        partial(calibrators.temperature_scaling, inputs="log_probs"),
        "scores",
    ),
    "platt": (calibrators.platt_scaling, "probs"),
    "isotonic": (calibrators.isotonic, "probs"),
    "top_label_platt": (lambda: calibrators.top_label(calibrators.platt_scaling()), "probs"),
    "top_label_isotonic": (lambda: calibrators.top_label(calibrators.isotonic()), "probs"),
    "centred_isotonic": (calibrators.centred_isotonic, "probs"),
    "venn_abers": (calibrators.venn_abers, "probs"),
    "venn_abers_multiclass": (partial(calibrators.venn_abers, multiclass=True), "probs"),
}


@cache
def _calibrator(name: str) -> Any:
    """One calibrator per process: each factory call makes new closures, a new compile."""
    return _FACTORIES[name][0]()


def _calibrator_ids(binary: bool, logits_input: bool) -> dict[str, str]:
    """Reported name -> calibrator id, in the order of the report."""
    temperature = "temperature_scaling:" + ("logits" if logits_input else "log_probs")
    if binary:
        return {
            "temperature_scaling": temperature,
            "platt": "platt",
            "isotonic": "isotonic",
            "centred_isotonic": "centred_isotonic",
            "venn_abers": "venn_abers",
        }
    return {
        "temperature_scaling": temperature,
        "top_label_platt": "top_label_platt",
        "top_label_isotonic": "top_label_isotonic",
        "venn_abers": "venn_abers_multiclass",
    }


def _fit_inputs(probs, scores, calibrator):
    """What ``calibrator`` is fitted on; ``scores`` are the logits, or the probabilities when
    the file has no logits."""
    if _FACTORIES[calibrator][1] == "probs":
        return probs
    logits = calibrator.endswith(":logits")
    if probs.ndim == 2:  # logits, or log-probabilities
        return scores if logits else jnp.log(jnp.maximum(probs, jnp.finfo(probs.dtype).tiny))
    # Temperature scaling of the two-class problem: (0, z), or (log(1 - p), log p).
    if logits:
        return jnp.stack([jnp.zeros_like(scores), scores], axis=1)
    p = jnp.clip(probs, 0, 1)
    return jnp.log(jnp.maximum(jnp.stack([1 - p, p], axis=1), jnp.finfo(p.dtype).tiny))


def _cross_fit(probs, scores, labels, folds, *, calibrator, n_folds, n_bins):
    """Held-out predictions: fit on all folds but one (others weighted 0), apply to it; their
    ECE, log loss, Brier score and accuracy."""
    cal = _calibrator(calibrator)
    x = _fit_inputs(probs, scores, calibrator)
    fold_ids = jnp.arange(n_folds, dtype=jnp.int32)
    real = folds < n_folds  # padding rows (fold n_folds) weigh 0 in every fit
    weights = ((folds[None, :] != fold_ids[:, None]) & real[None, :]).astype(jnp.float32)
    # One fold after another: the fits' sweeps and optimisers are while_loops, and a
    # vmapped while_loop selects its whole carry at every step (the 10-class Venn-Abers
    # cross-fit of the demo ran 0.71 s vmapped, at the report's -O0).
    params = jax.lax.map(lambda w: cal.fit(x, labels, weights=w), weights)
    out = jax.vmap(lambda p: cal.apply(p, x))(params)
    out = out[jnp.minimum(folds, n_folds - 1), jnp.arange(x.shape[0])]
    if out.ndim == 2 and probs.ndim == 1:  # the binary pair: the positive class
        out = out[:, 1]
    return _held_out_metrics(out, labels, real, n_bins)


def _held_out_metrics(probs, labels, real, n_bins):
    w = real.astype(jnp.float32)
    return {
        "ece": jaxcal.ece(probs, labels, n_bins=n_bins, weights=w),
        "log_loss": jaxcal.log_loss(probs, labels, weights=w),
        "brier": jaxcal.brier_score(probs, labels, weights=w),
        "accuracy": accuracy(probs, labels, weights=w),
    }


def _uncalibrated(probs, labels, folds, *, n_bins, n_folds):
    return _held_out_metrics(probs, labels, folds < n_folds, n_bins)


# Platt scaling's L-BFGS loops run long enough for optimised code to pay off.
_CROSS_FIT = Kernel("cross_fit", _cross_fit)
_CROSS_FIT_RUN = Kernel("cross_fit", _cross_fit, options=FAST_RUN)
_UNCALIBRATED = Kernel("uncalibrated", _uncalibrated)


def fit_calls(model: Model, *, n_bins: int, n_folds: int, seed: int) -> list[tuple]:
    """(reported name, kernel, arrays, static options) of each number set of ``--fit``."""
    n = model.probs.shape[0]
    m = size_class(n)  # rows padded as the report's (``padded_inputs``), in fold n_folds
    folds = np.full(m, n_folds, dtype=np.int32)
    folds[np.random.default_rng(seed).permutation(n)] = np.arange(n) % n_folds
    binary = model.probs.ndim == 1
    probs, labels, _, _ = padded_inputs(model)
    scores = probs if model.logits is None else pad_rows(model.logits, n, m)
    uncalibrated = (probs, labels, folds)
    calls = [("uncalibrated", _UNCALIBRATED, uncalibrated, {"n_bins": n_bins, "n_folds": n_folds})]
    for name, calibrator in _calibrator_ids(binary, model.logits is not None).items():
        kernel = _CROSS_FIT_RUN if "platt" in calibrator else _CROSS_FIT
        arrays = (probs, scores, labels, folds)
        static = {"calibrator": calibrator, "n_folds": n_folds, "n_bins": n_bins}
        calls.append((name, kernel, arrays, static))
    return calls


def start_fit(model: Model, *, n_bins: int, n_folds: int, seed: int) -> dict:
    """Dispatch the cross-fits of one model; device arrays by reported name (not waited for)."""
    calls = fit_calls(model, n_bins=n_bins, n_folds=n_folds, seed=seed)
    return {
        "folds": n_folds,
        "seed": seed,
        "temperature_inputs": "logits" if model.logits is not None else "log_probs",
        "results": {name: kernel(*arrays, **static) for name, kernel, arrays, static in calls},
    }


def finish_fit(raw: dict) -> dict:
    """Host floats of ``start_fit()``'s arrays, in the shape of the JSON schema."""
    results = {
        k: {m: float(v[m]) for m in ("ece", "log_loss", "brier", "accuracy")}
        for k, v in raw["results"].items()
    }
    return {**raw, "results": results}


def compute_fit(model: Model, *, n_bins: int, n_folds: int, seed: int) -> dict:
    """Cross-fitted calibrators: ECE, log loss, Brier, accuracy on held-out folds."""
    return finish_fit(start_fit(model, n_bins=n_bins, n_folds=n_folds, seed=seed))

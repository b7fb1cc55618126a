"""``jaxcal report --fit``: calibrators cross-fitted on folds, scored on held-out data.

Each calibrator is fitted K times at once (``vmap`` over fold weights: the held-out fold
weighted 0) and applied to every sample; each sample keeps the prediction of the fit that
did not see it. Temperature scaling, Venn-Abers (merged probabilities), and top-label
Platt scaling and isotonic regression (multiclass) or Platt scaling, isotonic and centred
isotonic regression (binary), are scored by the ECE,
log loss, Brier score and accuracy of those held-out predictions.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import jaxcal
from jaxcal import calibrators
from jaxcal.cli._io import Model
from jaxcal.cli._report import accuracy, jit_once

_CALIBRATORS: dict[str, Any] = {}


def _calibrator(name: str, build) -> Any:
    """One calibrator per process: each factory call makes new closures, a new compile."""
    if name not in _CALIBRATORS:
        _CALIBRATORS[name] = build()
    return _CALIBRATORS[name]


def _calibrators(binary: bool, logits_input: bool) -> dict[str, tuple[Any, str]]:
    """Name -> (calibrator, what it is fitted on: "scores", "pair" or "probs")."""
    space = "logits" if logits_input else "log_probs"
    temperature = _calibrator(space, lambda: calibrators.temperature_scaling(inputs=space))
    if binary:
        return {
            "temperature_scaling": (temperature, "pair"),
            "platt": (_calibrator("platt", calibrators.platt_scaling), "probs"),
            "isotonic": (_calibrator("isotonic", calibrators.isotonic), "probs"),
            "centred_isotonic": (
                _calibrator("centred_isotonic", calibrators.centred_isotonic),
                "probs",
            ),
            "venn_abers": (_calibrator("venn_abers", calibrators.venn_abers), "probs"),
        }
    return {
        "temperature_scaling": (temperature, "scores"),
        "top_label_platt": (
            _calibrator(
                "top_label_platt", lambda: calibrators.top_label(calibrators.platt_scaling())
            ),
            "probs",
        ),
        "top_label_isotonic": (
            _calibrator(
                "top_label_isotonic", lambda: calibrators.top_label(calibrators.isotonic())
            ),
            "probs",
        ),
        "venn_abers": (
            _calibrator("venn_abers_multiclass", lambda: calibrators.venn_abers(multiclass=True)),
            "probs",
        ),
    }


def _cross_fit_impl(cal, x, labels, folds, n_folds):
    """Held-out predictions: fit on all folds but one (others weighted 0), apply to it."""
    fold_ids = jnp.arange(n_folds, dtype=jnp.int32)
    weights = (folds[None, :] != fold_ids[:, None]).astype(jnp.float32)
    params = jax.vmap(lambda w: cal.fit(x, labels, weights=w))(weights)
    out = jax.vmap(lambda p: cal.apply(p, x))(params)
    return out[folds, jnp.arange(x.shape[0])]


def _held_out_metrics_impl(probs, labels, n_bins):
    return {
        "ece": jaxcal.ece(probs, labels, n_bins=n_bins),
        "log_loss": jaxcal.log_loss(probs, labels),
        "brier": jaxcal.brier_score(probs, labels),
        "accuracy": accuracy(probs, labels),
    }


def compute_fit(model: Model, *, n_bins: int, n_folds: int, seed: int) -> dict:
    """Cross-fitted calibrators: ECE, log loss, Brier, accuracy on held-out folds."""
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
    cross = jit_once("cross", _cross_fit_impl, static_argnames=("cal", "n_folds"))
    held = jit_once("held", _held_out_metrics_impl, static_argnames=("n_bins",))
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

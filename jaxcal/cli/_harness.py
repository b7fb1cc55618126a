"""``jaxcal report --harness``: the calibration numbers of LLM evaluation harnesses.

What other tools print for the same predictions, reproduced by :mod:`jaxcal.presets`
(quirks included; each preset's docstring quotes the reference code): Humanity's Last
Exam's RMS calibration error (:func:`jaxcal.presets.hle_calibration_error`, bins of 100
by rank, the last bin skipped), HELM's fields (:func:`jaxcal.presets.helm_calibration`)
and the temperature-tuned metrics asked of lm-evaluation-harness
(:func:`jaxcal.presets.temperature_tuned`). Inputs as the harnesses take them: the
top-label confidence and its correctness (binary ``(N,)`` probabilities as the rows
``(1 - p, p)``), and for the temperature the logits when the file has them, else the
log-probabilities. One stored kernel per input shape, compiled only with the flag.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from jaxcal import presets
from jaxcal._core.store import FAST_RUN, Kernel
from jaxcal.cli._io import Model
from jaxcal.cli._selective import as_rows

#: HLE's bin size (and the RMS error's of the temperature-tuned metrics): N >= BETA needed.
BETA = 100

#: (key, display name) of the rows, top to bottom.
ROWS = (
    ("hle_calibration_error", "HLE calib_err (RMS, bins of 100, last skipped)"),
    ("ece_10_bin", "HELM ece_10_bin (equal-mass, l1)"),
    ("ece_1_bin", "HELM ece_1_bin"),
    ("selective_cov_acc_area", "HELM selective_cov_acc_area"),
    ("selective_acc@10", "HELM selective_acc@10"),
    ("platt_coef", "HELM platt_coef"),
    ("platt_intercept", "HELM platt_intercept"),
    ("platt_ece_10_bin", "HELM platt_ece_10_bin"),
    ("platt_ece_1_bin", "HELM platt_ece_1_bin"),
    ("temperature", "temperature-tuned: T"),
    ("brier", "temperature-tuned: Brier (sum over classes)"),
    ("rms_calibration_error", "temperature-tuned: RMS calibration error"),
    ("log_loss", "temperature-tuned: log loss"),
)


def harness_inputs(probs, labels, scores, *, from_logits: bool):
    """(top-label confidence, 0/1 correctness, (N, K) logits or log-probabilities)."""
    rows = as_rows(probs)
    confidence = jnp.max(rows, axis=1)
    correct = (jnp.argmax(rows, axis=1) == labels).astype(jnp.int32)
    if from_logits:
        z = scores if scores.ndim == 2 else jnp.stack([jnp.zeros_like(scores), scores], axis=1)
    else:
        z = jnp.log(jnp.maximum(rows, jnp.finfo(rows.dtype).tiny))
    return confidence, correct, z


def _harness_kernel(probs, labels, scores, *, from_logits):
    confidence, correct, z = harness_inputs(probs, labels, scores, from_logits=from_logits)
    out = dict(presets.helm_calibration(confidence, correct).helm_stats())
    if probs.shape[0] >= BETA:  # both presets need a full bin of BETA samples
        hle = presets.hle_calibration_error(confidence, correct, beta=BETA)
        out["hle_calibration_error"] = hle.value
        out.update(presets.temperature_tuned(z, labels, beta=BETA)._asdict())
    return out


# Platt's and the temperature's iterative fits run 5x slower at FAST_COMPILE's -O0.
_HARNESS = Kernel("harness", _harness_kernel, options=FAST_RUN)


def harness_call(model: Model) -> tuple:
    """(kernel, arrays, static options) of one model's harness numbers."""
    from_logits = model.logits is not None
    scores = model.logits if from_logits else model.probs
    return _HARNESS, (model.probs, model.labels, scores), {"from_logits": from_logits}


def compute_harness(model: Model) -> dict:
    """``{NAME: float}`` (NaN: not available; see ``print_harness()``)."""
    kernel, arrays, static = harness_call(model)
    raw = jax.device_get(kernel(*arrays, **static))
    out = {key: float(raw[key]) if key in raw else math.nan for key, _ in ROWS}
    out["temperature_inputs"] = "logits" if static["from_logits"] else "log_probs"
    return out


def print_harness(models, results, num, table, out) -> None:
    """The block, one column per model (nothing without ``--harness``)."""
    blocks = [r.get("harness") for r in results]
    if not any(blocks):
        return
    print(
        "\nHarness presets (--harness): what LLM evaluation harnesses report, reproduced",
        file=out,
    )
    rows = [["number"] + [m.name for m in models]]
    for key, label in ROWS:
        rows.append([label, *(num(b[key]) if b else "" for b in blocks)])
    table(rows, out)
    print(
        "  Top-label confidence against correctness (binary: max(p, 1 - p)). HLE:\n"
        "  jaxcal.presets.hle_calibration_error (unrounded, not x100); HELM:\n"
        "  jaxcal.presets.helm_calibration; temperature-tuned: jaxcal.presets.temperature_tuned\n"
        "  on the logits, else the log-probabilities (T fitted on these same items, so optimistic,\n"
        "  searched in [0.2, 5] as the reference). HELM's Platt fields are '-' when every answer\n"
        f"  is right or every one wrong; HLE and temperature-tuned need N >= {BETA} ('-' below).",
        file=out,
    )

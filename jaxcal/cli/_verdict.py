"""The verdict line of ``jaxcal report``: what the numbers say, in one line per model.

The rule (documented on ``docs/guides/report.md``, "The verdict"):

1. **Miscalibrated or not** is the ECE consistency test at level ``ALPHA`` = 0.05: its
   p-value (labels redrawn from the predictions, ``--resamples`` times) below 0.05 is
   evidence of miscalibration; otherwise "no evidence of miscalibration".
2. **Which way**, for a miscalibrated model: the mean top-label confidence minus the
   accuracy (binary: confidence max(p, 1 - p), the positive class predicted when
   p > 1/2), with its standard error s = sd(confidence - correct) / sqrt(N). A gap above
   ``Z`` s (1.96) reads "over-confident", below -1.96 s "under-confident", in between
   "miscalibrated, neither over- nor under-confident on average" (the errors of different
   confidence levels cancel: the reliability diagram shows where).
3. **What to do**: nothing for "no evidence". For a miscalibrated model with ``--fit``:
   temperature scaling when its held-out ECE is below the uncalibrated one (and the
   calibrator with the lowest held-out ECE named when another one is lower still); else
   the calibrator with the lowest held-out ECE when it lowers the ECE; else none does.
   Without ``--fit``: run it with ``--fit``.

The numbers quoted are the report's own: the ECE of the metrics table with its bootstrap
interval, the consistency test's p-value, and ``--fit``'s held-out ECEs.
"""

from __future__ import annotations

import math

import numpy as np

from jaxcal.cli._format import format_p
from jaxcal.cli._io import Model

#: Level of the consistency test that decides "miscalibrated".
ALPHA = 0.05
#: Standard errors the confidence-accuracy gap must exceed to read as a direction.
Z = 1.96

_CALIBRATOR_NAMES = {
    "temperature_scaling": "temperature scaling",
    "top_label_platt": "top-label Platt",
    "top_label_isotonic": "top-label isotonic",
    "platt": "Platt scaling",
    "isotonic": "isotonic regression",
    "centred_isotonic": "centred isotonic",
    "venn_abers": "Venn-Abers",
}


def confidence_gap(probs: np.ndarray, labels: np.ndarray) -> tuple[float, float, float, float]:
    """(mean top-label confidence, accuracy, their gap, the gap's standard error)."""
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(labels)
    if p.ndim == 1:
        conf = np.maximum(p, 1.0 - p)
        correct = (p > 0.5).astype(np.int64) == y
    else:
        conf = p.max(axis=1)
        correct = p.argmax(axis=1) == y
    diff = conf - correct
    n = diff.shape[0]
    se = float(diff.std(ddof=1) / math.sqrt(n)) if n > 1 else math.inf
    return float(conf.mean()), float(correct.mean()), float(diff.mean()), se


def _p_text(p: float, log10_p: float | None, resamples: int | None) -> str:
    text = f"p = {format_p(p, log10_p if log10_p is not None else math.nan)}"
    if resamples and p <= 1.0 / (1 + resamples) * (1 + 1e-6):
        text += f" (the smallest {resamples} resamples can give)"
    return text


def _advice(miscalibrated: bool, fit: dict | None) -> str:
    if not miscalibrated:
        return "no recalibration indicated"
    if not fit:
        return (
            "run it with --fit to see what temperature scaling and other calibrators do "
            "on held-out folds"
        )
    res = fit["results"]
    before = res["uncalibrated"]["ece"]
    scored = {k: v["ece"] for k, v in res.items() if k != "uncalibrated" and k in _CALIBRATOR_NAMES}
    best = min(scored, key=scored.get)
    ts = scored.get("temperature_scaling", math.inf)
    if ts < before:
        text = (
            f"fit temperature scaling: --fit shows it lowers the held-out ECE from "
            f"{before:.4f} to {ts:.4f}"
        )
        if best != "temperature_scaling" and scored[best] < ts:
            text += f" ({_CALIBRATOR_NAMES[best]} lowers it most, to {scored[best]:.4f})"
        return text
    if scored[best] < before:
        return (
            f"fit {_CALIBRATOR_NAMES[best]}: --fit shows it lowers the held-out ECE from "
            f"{before:.4f} to {scored[best]:.4f} (temperature scaling does not: {ts:.4f})"
        )
    return (
        f"no calibrator of --fit lowers the held-out ECE ({before:.4f}); "
        "see where the model errs with --plot"
    )


def verdict(model: Model, result: dict, resamples: int | None = None) -> dict:
    """The verdict of one model from its report ``result`` (``compute_report()``'s dict,
    with ``"fit"`` when ``--fit`` ran): the JSON entry, with the printed line as ``"text"``."""
    ece = result["metrics"]["ece"]
    test = result["tests"]["ece_consistency"]
    p, log10_p = test["p_value"], test["log10_p_value"]
    mean_conf, acc, gap, se = confidence_gap(model.probs, model.labels)
    miscalibrated = p < ALPHA
    if not miscalibrated:
        reads = "no evidence of miscalibration"
    elif gap > Z * se:
        reads = "over-confident"
    elif gap < -Z * se:
        reads = "under-confident"
    else:
        reads = "miscalibrated, neither over- nor under-confident on average"
    advice = _advice(miscalibrated, result.get("fit"))
    interval = "" if ece["low"] is None else f" [{ece['low']:.4f}, {ece['high']:.4f}]"
    text = (
        f"{model.name}: {reads}: ECE {ece['value']:.4f}{interval}, ECE consistency test "
        f"{_p_text(p, log10_p, resamples)}; mean confidence {mean_conf:.4f} vs accuracy "
        f"{acc:.4f}. {advice[0].upper()}{advice[1:]}."
    )
    return {
        "reads": reads,
        "miscalibrated": miscalibrated,
        "alpha": ALPHA,
        "ece": dict(ece),
        "consistency_p_value": p,
        "consistency_log10_p_value": log10_p,
        "mean_confidence": mean_conf,
        "accuracy": acc,
        "confidence_gap": gap,
        "confidence_gap_se": se,
        "advice": advice,
        "text": text,
    }

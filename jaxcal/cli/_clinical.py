"""The clinical block of ``jaxcal report`` for binary models.

Calibration slope and intercept and calibration-in-the-large with Wald intervals
(:func:`jaxcal.stats.calibration_slope_intercept`), the integrated calibration index and
its quantiles (:func:`jaxcal.ici`, loess as Austin & Steyerberg), and the Hosmer-Lemeshow
test (:func:`jaxcal.stats.hosmer_lemeshow_test`). Self-contained: the report calls
``clinical_numbers()`` inside its jitted kernel and ``print_clinical()`` after the
tests.
"""

from __future__ import annotations

import math

import jax.numpy as jnp

import jaxcal
from jaxcal import stats

#: (key, label) of the rows, in order.
ROWS = (
    ("slope", "calibration slope (1 when calibrated)"),
    ("intercept", "calibration intercept (0)"),
    ("citl", "calibration-in-the-large (0)"),
    ("ici", "ICI, loess (0)"),
    ("e50", "  E50"),
    ("e90", "  E90"),
    ("emax", "  Emax"),
)


FITTED = ("slope", "intercept", "citl")
SUMMARIES = ("ici", "e50", "e90", "emax")


def clinical_numbers(probs, labels, confidence: float, weights=None) -> dict:
    """0-d arrays of the clinical block (called inside the report's jitted kernel;
    ``weights``: 0 on the padding rows, which every function here masks)."""
    fit = stats.calibration_slope_intercept(probs, labels, confidence=confidence, weights=weights)
    out = {key: (e.estimate, e.low, e.high) for key, e in zip(FITTED, fit[:3], strict=True)}
    for key, value in zip(SUMMARIES, jaxcal.ici(probs, labels, weights=weights), strict=True):
        out[key] = (value,)
    hl = stats.hosmer_lemeshow_test(probs, labels, weights=weights)
    # log of the p-value (floored at the dtype's smallest normal, as documented).
    out["hosmer_lemeshow"] = (hl.statistic, hl.p_value, jnp.log(hl.p_value))
    return out


def to_host(raw: dict) -> dict:
    """The JSON form: ``{NAME: {"value", "low", "high"}}`` and the Hosmer-Lemeshow test."""
    out = {}
    for key, _ in ROWS:
        values = [float(v) for v in raw[key]]
        low, high = (values[1], values[2]) if len(values) == 3 else (None, None)
        out[key] = {"value": values[0], "low": low, "high": high}
    stat, p, log_p = (float(v) for v in raw["hosmer_lemeshow"])
    out["hosmer_lemeshow"] = {
        "statistic": stat,
        "p_value": p,
        "log10_p_value": log_p / math.log(10),
    }
    return out


def print_clinical(models, results, pct: int, num, format_p, table, out) -> None:
    """The block, one column pair per binary model (nothing when none is binary)."""
    blocks = [r.get("clinical") for r in results]
    if not any(blocks):
        return
    print(
        f"\nClinical calibration (binary models; {pct}% Wald intervals, "
        "Van Calster et al. 2016, Austin & Steyerberg 2019)",
        file=out,
    )
    rows = [["measure"] + [h for m in models for h in (f"{pct}% interval", m.name)]]
    for key, label in ROWS:
        row = [label]
        for block in blocks:
            if not block:
                row += ["", ""]
                continue
            cell = block[key]
            interval = "" if cell["low"] is None else f"[{num(cell['low'])}, {num(cell['high'])}]"
            row += [interval, num(cell["value"])]
        rows.append(row)
    table(rows, out)
    # A test, not a measure with an interval: its own lines, not under the interval column.
    for model, block in zip(models, blocks, strict=True):
        if not block:
            continue
        hl = block["hosmer_lemeshow"]
        stat = hl["statistic"]
        c = "inf" if stat is None or not math.isfinite(stat) else f"{stat:.4g}"
        log10_p = hl["log10_p_value"]
        p = format_p(hl["p_value"], -math.inf if log10_p is None else log10_p)
        print(f"Hosmer-Lemeshow test (10 groups), {model.name}: C = {c}, p = {p}", file=out)

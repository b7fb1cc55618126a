"""Writing ``jaxcal report``'s results: the table on stdout, the JSON document, the figure.

The table and the JSON document are built from the host floats of
``compute_report()`` and ``compute_fit()``; the
figure (``--plot``, matplotlib imported only then) from the models' predictions.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import numpy as np

import jaxcal
from jaxcal.cli._clinical import print_clinical
from jaxcal.cli._io import InputError, Model
from jaxcal.cli._report import (
    CORP_ROWS,
    DECOMPOSITION,
    ROW_ORDER,
    SKCE_ASYMPTOTIC_MAX_WORK,
    SKCE_BLOCK,
    metric_specs,
)
from jaxcal.cli._selective import print_selective, risk_coverage_panel
from jaxcal.plot import corp_diagram, cumulative_differences_plot, reliability_diagram


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
    verdicts = [r["verdict"]["text"] for r in results if r.get("verdict")]
    if verdicts:
        print("\nVerdict (the rule: docs/guides/report.md, 'The verdict')", file=out)
        for line in verdicts:
            wrapped = textwrap.fill(
                line, width=78, initial_indent="  ", subsequent_indent="    ",
                break_on_hyphens=False,
            )  # fmt: skip
            print(wrapped, file=out)
    n_bins, resamples = settings["n_bins"], settings["resamples"]
    pct = round(100 * settings["confidence"])
    print(
        f"\nMetrics, with {pct}% percentile bootstrap intervals ({resamples} resamples, "
        f"seed {settings['seed']})",
        file=out,
    )
    labels = {key: label for key, label, _ in metric_specs(n_bins, False)}
    labels["positive_rate"] = "positive rate"
    labels["mce"] = "MCE (max gap)"
    labels.update({key: label for key, label, _ in DECOMPOSITION})
    labels.update(dict(CORP_ROWS))
    if any(m.probs.ndim == 2 for m in models):
        # Two quantities, two names (E7): the Brier score of the whole (N, K) rows, summed
        # over the classes, and the CORP decomposition of the top-label confidence's.
        labels["brier"] = "Brier score (sum over classes)"
        labels["corp_brier"] = "top-label Brier, CORP decomposition"
        labels["corp_log"] = "top-label log score, CORP decomposition"
    present = {key for r in results for key in r["metrics"]}
    rows = [["metric"] + [h for m in models for h in (f"{pct}% interval", m.name)]]
    for key in ROW_ORDER:
        if key in present:
            rows.append([labels[key], *_cells(results, key)])
    _table(rows, out)
    print(
        "  Binned ECEs and the CORP miscalibration (MCB) are biased upwards: for a well-\n"
        "  calibrated model their interval can lie above the estimate (the debiased l2 ECE\n"
        "  corrects for it); MCE has no interval.\n"
        "  CORP rows (Dimitriadis et al. 2021): the positive class (binary) or the top-label\n"
        "  confidence (multiclass) recalibrated by isotonic regression; S = MCB - DSC + UNC.",
        file=out,
    )
    print("\nTests of calibration (p-values; small means miscalibrated)", file=out)
    rows = [["test"] + [h for m in models for h in (m.name, "p-value")]]
    tests = (
        ("ks", "Kolmogorov-Smirnov (cumulative)"),
        ("kuiper", "Kuiper (cumulative)"),
        ("spiegelhalter", "Spiegelhalter Z (two-sided)"),
        ("ece_consistency", f"ECE consistency ({resamples} resamples)"),
        ("skce", "SKCE (unbiased, Laplacian, median bandwidth)"),
    )
    for key, label in tests:
        row = [label]
        for r in results:
            t = r["tests"].get(key)
            if t is None:
                row += ["", ""]
                continue
            # SKCE: the estimate its row names (the asymptotic test's statistic is
            # n/(n-1) SKCE_u - SKCE_b, in the JSON); squared errors are small: 4 digits.
            stat = _sig(t["estimate"]) if key == "skce" else _num(t["statistic"])
            p = t["p_value"]
            p = "-" if p is None or not math.isfinite(p) else format_p(p, t["log10_p_value"])
            if key == "skce" and not t.get("reliable", True):  # the asymptotic null fails
                p += f" unreliable: {t['expected_errors']:.2g} expected errors < 10"
            row += [stat, p]
        rows.append(row)
    _table(rows, out)
    print(
        "  KS/Kuiper/Spiegelhalter test the top-label confidence (multiclass) or the "
        "positive class (binary);\n  ECE consistency p = (1 + #{resampled ECE >= ECE}) / "
        f"(1 + {resamples}), labels drawn from the predictions.",
        file=out,
    )
    _skce_note(models, results, resamples, out)
    print_clinical(models, results, pct, _num, format_p, _table, out)
    print_selective(models, results, pct, _cells, _table, out)
    if all(r.get("fit") for r in results):
        _print_fit(models, results, settings, out)


def _sig(x: float | None) -> str:
    """Four significant digits (the SKCE is a squared error: 1e-4 is not 0)."""
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x:.4g}"


def _skce_note(models, results, resamples: int, out) -> None:
    """What the SKCE row is, and which test gave each model's p-value."""
    block = [
        m.name
        for m, r in zip(models, results, strict=True)
        if r["tests"]["skce"]["method"] == "block"
    ]
    print(
        "  SKCE (Widmann et al. 2019): the unbiased estimate over the whole probability vector,\n"
        "  kernel exp(-|p - p'|_2 / h), h the median distance between predictions; p from its\n"
        f"  asymptotic test (bootstrap of the null, {resamples} resamples, O(N^2 (K + resamples)))"
        f" while\n  N^2 (K + resamples) <= {SKCE_ASYMPTOTIC_MAX_WORK:.2g} (N = 2,000 at K = 10 "
        "and 200 resamples).",
        file=out,
    )
    if block:
        print(
            f"  {', '.join(block)}: beyond that, so the block z-test (blocks of {SKCE_BLOCK}, "
            "O(N K)), less powerful;\n  the asymptotic test of a subsample: "
            "jaxcal.stats.skce_test(probs, labels, key=...).",
            file=out,
        )


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
    "centred_isotonic": "centred isotonic",
    "venn_abers": "Venn-Abers (merged)",
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


def _short(x: float) -> float:
    """A float32 value (most of the report's numbers) as the shortest decimal that reads
    back to the same float32 (N16: 0.8563, not 0.8562999963760376); other floats as is."""
    f32 = np.float32(x)
    return float(str(f32)) if float(f32) == x else x


def write_json(path: str | None, document: dict) -> None:
    """Write the ``--json`` document to ``path`` (None or ``-``: nothing to write here;
    ``-`` is printed by the caller in place of the table)."""
    if path in (None, "-"):
        return
    try:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(document, f, indent=2)
    except OSError as err:
        raise InputError(f"cannot write the JSON report to {path}: {err}") from err


def _json_safe(x):
    if isinstance(x, float):
        return _short(x) if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def report_json(models: list[Model], results: list[dict], settings: dict) -> dict:
    """The ``--json`` document (schema on ``docs/guides/report.md``, "The JSON schema")."""
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
                    "clinical": r.get("clinical"),
                    "fit": r.get("fit"),
                    "verdict": r.get("verdict"),
                }
                for m, r in zip(models, results, strict=True)
            ],
        }
    )


def write_plot(
    models: list[Model],
    path: Path,
    *,
    n_bins: int,
    n_resamples: int,
    seed: int,
    results: list[dict] | None = None,
):
    """Reliability diagram, cumulative differences, CORP diagram and risk-coverage curve
    (models overlaid; ``results``: the AURCs for the last panel's legend)."""
    try:
        import matplotlib
    except ImportError as err:
        raise InputError('--plot needs matplotlib: pip install "jaxcal[plot]".') from err
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ((left, right), (corp, risk)) = plt.subplots(2, 2, figsize=(13, 12))
    groups: dict[tuple, list[Model]] = {}
    for m in models:  # models of different shapes or labels cannot share one call
        groups.setdefault((m.probs.shape, m.labels.tobytes()), []).append(m)
    for group in groups.values():
        probs = {m.name: m.probs for m in group}
        reliability_diagram(
            probs, group[0].labels, n_bins=n_bins, ax=left, n_resamples=n_resamples, key=seed
        )
        cumulative_differences_plot(probs, group[0].labels, ax=right)
        corp_diagram(probs, group[0].labels, ax=corp, n_resamples=n_resamples, key=seed)
    risk_coverage_panel(risk, models, results or [{"metrics": {}} for _ in models])
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except (OSError, ValueError) as err:
        raise InputError(f"cannot write the plot to {path}: {err}") from err
    finally:
        plt.close(fig)

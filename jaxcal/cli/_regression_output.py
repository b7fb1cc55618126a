"""``jaxcal report`` on regression predictions: the run, the printed table and the JSON.

The numbers and the verdict come from ``jaxcal/cli/_regression_report.py``; the input
forms from ``jaxcal/cli/_regression_input.py``; the reference is the section "Regression
predictions" of docs/guides/report.md.
"""

from __future__ import annotations

import json
import sys
import textwrap

import jaxcal
from jaxcal.cli._format import _json_safe, _num, _table, format_p, write_json
from jaxcal.cli._io import InputError
from jaxcal.cli._regression_input import FORM_NAMES, RegressionModel, load_regression
from jaxcal.cli._regression_report import (
    CORP_ROWS,
    CRPS_VARIANT,
    INTERVAL_LEVELS,
    METRIC_ROWS,
    N_LEVELS,
    QUANTILE_LEVELS,
    compute_regression,
    regression_call,
    verdict,
)
from jaxcal.cli._report import CONFIDENCE


def _describe(model: RegressionModel) -> str:
    if model.form == "gaussian":
        return "Gaussian (mean, std)"
    if model.form == "quantiles":
        levels = ", ".join(f"{v:g}" for v in model.arrays[1].tolist())
        return f"{model.arrays[0].shape[1]} quantiles at levels {levels}"
    return f"{model.arrays[0].shape[1]} samples per row"


def print_regression(models, results, settings: dict, out) -> None:
    """The human-readable regression report."""
    print("jaxcal report (regression predictions)", file=out)
    for m in models:
        print(f"  {m.name}: {m.source}\n    N = {m.n}, {_describe(m)}", file=out)
    print("\nVerdict (the rule: docs/guides/report.md, 'Regression predictions')", file=out)
    for r in results:
        wrapped = textwrap.fill(
            r["verdict"]["text"], width=78, initial_indent="  ", subsequent_indent="    ",
            break_on_hyphens=False,
        )  # fmt: skip
        print(wrapped, file=out)
    pct = round(100 * settings["confidence"])
    print(
        f"\nMetrics, with {pct}% percentile bootstrap intervals ({settings['resamples']} "
        f"resamples, seed {settings['seed']})",
        file=out,
    )
    rows = [["metric"] + [h for m in models for h in (f"{pct}% interval", m.name)]]
    for key, label in METRIC_ROWS:
        if not any(key in r["metrics"] for r in results):
            continue
        if key in ("ence", "uce"):
            label += f" ({settings['n_bins']} bins)"
        row = [label]
        for r in results:
            v = r["metrics"].get(key)
            row += (
                ["", ""]
                if v is None
                else [f"[{_num(v['low'])}, {_num(v['high'])}]", _num(v["value"])]
            )
        rows.append(row)
    for key, label in CORP_ROWS:
        if any(r["corp"] for r in results):
            rows.append(
                [label, *(c for r in results for c in ("", _num((r["corp"] or {}).get(key))))]
            )
    _table(rows, out)
    variants = sorted({f"{FORM_NAMES[m.form]}: {CRPS_VARIANT[m.form]}" for m in models})
    note = (
        f"CRPS: {'; '.join(variants)}. Calibration errors over {N_LEVELS} levels of central "
        "intervals (uncertainty-toolbox's). CORP rows (Gneiting & Resin 2023): the mean "
        "forecast (Gaussian) or ensemble mean (samples) recalibrated by isotonic regression, "
        "S = MCB - DSC + UNC, without intervals (quantiles: no mean forecast, no rows)."
    )
    print(textwrap.fill(note, width=88, initial_indent="  ", subsequent_indent="  "), file=out)
    print("\nCalibration curve: observed against expected coverage", file=out)
    rows = [["level", "expected", *(m.name for m in models)]]
    for kind, label in (
        ("interval", "central {:.0%} interval"),
        ("quantile", "below the {:.0%} quantile"),
    ):
        for j, expected in enumerate(INTERVAL_LEVELS if kind == "interval" else QUANTILE_LEVELS):
            observed = [_num(r["curve"][kind][j]["observed"]) for r in results]
            rows.append([label.format(expected), f"{expected:.4f}", *observed])
    _table(rows, out)
    print(
        "\nTests of probabilistic calibration: uniformity of the PIT (small p: miscalibrated)",
        file=out,
    )
    rows = [["test"] + [h for m in models for h in (m.name, "p-value")]]
    for key, label in (("pit_ks", "Kolmogorov-Smirnov"), ("pit_kuiper", "Kuiper")):
        row = [label]
        for r in results:
            t = r["tests"][key]
            row += [_num(t["statistic"]), format_p(t["p_value"], t["log10_p_value"])]
        rows.append(row)
    _table(rows, out)
    print(
        "  Asymptotic laws at Stephens' finite-n scaling (jaxcal.stats.pit_test). The PIT of S\n"
        "  samples is discrete (rank-bin centres): the tests are off by O(1/S); use many.",
        file=out,
    )


def regression_json(models, results, settings: dict) -> dict:
    """The ``--json`` document of the regression report (schema on docs/guides/report.md)."""
    return _json_safe(
        {
            "schema": "jaxcal.regression_report/1",
            "jaxcal_version": jaxcal.__version__,
            "settings": settings,
            "models": [
                {
                    "name": m.name,
                    "source": m.source,
                    "n": m.n,
                    "form": m.form,
                    "crps_variant": CRPS_VARIANT[m.form],
                    **r,
                }
                for m, r in zip(models, results, strict=True)
            ],
        }
    )


#: Options of the classifier report that the regression report does not take.
CLASSIFIER_ONLY = (
    ("fit", "--fit"),
    ("plot", "--plot"),
    ("by", "--by"),
    ("harness", "--harness"),
    ("stream", "--stream"),
    ("renormalize", "--renormalize"),
    ("probs", "--probs"),
    ("logits", "--logits"),
    ("demo", "--demo"),
)


def report_regression(args, progress) -> int:
    """Read, compute and print (or write as JSON) the regression report of ``args.files``."""
    for attr, flag in CLASSIFIER_ONLY:
        if getattr(args, attr, None) not in (None, False):
            raise InputError(f"{flag} is not available for regression predictions.")
    if args.resamples < 2:
        raise InputError(
            f"--resamples must be >= 2 for the regression report (its intervals resample); "
            f"got {args.resamples}."
        )
    models = []
    for path in args.files:
        with progress(f"reading {path}", delay=2.0):
            models.append(load_regression(path, args.labels))
    names = [m.name for m in models]
    if len(set(names)) < len(names):
        models = [m._replace(name=f"{m.name}#{i + 1}") for i, m in enumerate(models)]
    settings = {
        "task": "regression",
        "n_bins": args.bins,
        "n_levels": N_LEVELS,
        "resamples": args.resamples,
        "confidence": CONFIDENCE,
        "seed": args.seed,
        "interval": "percentile bootstrap",
    }
    options = {"n_bins": args.bins, "n_resamples": args.resamples, "seed": args.seed}
    with progress("tracing the kernels (compiled in the background, or loaded)"):
        for model in models:
            kernel, arrays, static = regression_call(model, **options)
            kernel.prepare(*arrays, **static)
    results = []
    for model in models:
        with progress(f"{model.name}: metrics, PIT tests, {args.resamples} bootstrap resamples"):
            results.append(compute_regression(model, **options))
        results[-1]["verdict"] = verdict(model, results[-1])
    document = regression_json(models, results, settings)
    if args.json == "-":
        json.dump(document, sys.stdout, indent=2)
        print()
    else:
        print_regression(models, results, settings, sys.stdout)
    write_json(args.json, document)
    return 0

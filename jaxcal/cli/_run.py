"""Running ``jaxcal report`` once its arguments are checked: read, compute, print.

Apart from ``_main`` (the parser and the checks of the arguments) so that ``jaxcal report
--help``, a wrong argument or a missing file answer before JAX and the kernels are
imported (1.5-2.5 s): ``_main.main`` imports this module once the arguments are good.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from jaxcal._core.cache_dir import kernel_folder, plot_cache
from jaxcal._core.store import set_store
from jaxcal.cli._args import InputError, is_parquet
from jaxcal.cli._fit import compute_fit, fit_calls
from jaxcal.cli._format import (
    _json_safe,
    _num,
    _table,
    format_p,
    print_report,
    report_json,
    write_json,
    write_plot,
)
from jaxcal.cli._harness import compute_harness, harness_call, print_harness
from jaxcal.cli._io import load, load_demo
from jaxcal.cli._parquet import report_streamed
from jaxcal.cli._progress import Progress
from jaxcal.cli._regression_input import task_of
from jaxcal.cli._regression_output import report_regression
from jaxcal.cli._report import CONFIDENCE, compute_report, report_calls
from jaxcal.cli._segments import compute_segments, print_segments, read_column
from jaxcal.cli._validate import validate
from jaxcal.cli._verdict import verdict
from jaxcal.cli._warehouse import report_warehouse

#: Values (N x K) from which the in-memory report suggests ``--stream`` on stderr.
STREAM_HINT_VALUES = 50_000_000


def _stream_hint(models) -> None:
    """One stderr line suggesting ``--stream`` for a large input (stdout unchanged)."""
    large = [m for m in models if m.probs.size >= STREAM_HINT_VALUES]
    if large:
        m = large[0]
        print(
            f"jaxcal: hint: {m.name} has {m.probs.size:,} values; the in-memory report needs "
            "several copies of them. --stream reports .npz/.npy files in bounded memory "
            "(no tests, --fit or --plot).",
            file=sys.stderr,
        )


def _prepare(models, args: argparse.Namespace, fit: bool) -> None:
    """Trace every kernel the models need, their compilation started in worker threads."""
    for model in models:
        for kernel, arrays, static in report_calls(
            model, n_bins=args.bins, n_resamples=args.resamples, seed=args.seed
        ):
            kernel.prepare(*arrays, **static)
        for _, kernel, arrays, static in (
            fit_calls(model, n_bins=args.bins, n_folds=args.folds, seed=args.seed) if fit else ()
        ):
            kernel.prepare(*arrays, **static)
        if args.harness:
            kernel, arrays, static = harness_call(model)
            kernel.prepare(*arrays, **static)


def run(args: argparse.Namespace) -> int:
    """The report of checked arguments (``_main.main``); its exit code. Raises
    ``InputError`` for a problem found in the files."""
    set_store(kernel_folder(no_cache=args.no_cache))
    progress = Progress(args.quiet)
    if args.sql is not None or args.state is not None:
        code = report_warehouse(args)
        sys.stdout.flush()
        return code
    tasks = {task_of(p, args) for p in args.files} or {args.task or "classification"}
    if "regression" in tasks:
        if len(tasks) > 1:
            raise InputError(
                "the files hold regression and classifier predictions: report them apart."
            )
        code = report_regression(args, progress)
        sys.stdout.flush()
        return code
    if args.stream or any(is_parquet(p) for p in args.files):
        if not args.stream and not all(is_parquet(p) for p in args.files):
            raise InputError(
                "Parquet input is streamed: report it apart from other files, or stream "
                "them all with --stream."
            )
        code = report_streamed(args)
        sys.stdout.flush()  # as below: a closed pipe raises inside the try
        return code
    fit = args.demo if args.fit is None else args.fit
    models = []
    for path in [None] if args.demo else args.files:
        with progress(f"reading {path or 'the demo data'}", delay=2.0):
            loaded = load_demo() if path is None else [load(path, args)]
            for m in loaded:
                if fit and m.probs.shape[0] < 2 * args.folds:
                    raise InputError(
                        f"{m.source}: --fit with {args.folds} folds needs at least "
                        f"{2 * args.folds} samples; got {m.probs.shape[0]}."
                    )
                models.append(validate(m, renormalize=args.renormalize))
    if not args.quiet and args.json != "-":
        _stream_hint(models)
    names = [m.name for m in models]
    if len(set(names)) < len(names):  # same stem in different folders
        models = [m._replace(name=f"{m.name}#{i + 1}") for i, m in enumerate(models)]
    settings = {
        "n_bins": args.bins,
        "resamples": args.resamples,
        "confidence": CONFIDENCE,
        "seed": args.seed,
        "interval": "percentile bootstrap",
        "folds": args.folds if fit else None,
    }
    with progress("tracing the kernels (compiled in the background, or loaded)"):
        _prepare(models, args, fit)
    results = []
    for model in models:
        with progress(f"{model.name}: metrics, tests, {args.resamples} bootstrap resamples"):
            results.append(
                compute_report(model, n_bins=args.bins, n_resamples=args.resamples, seed=args.seed)
            )
        if args.by is not None:
            with progress(f"{model.name}: calibration within segments of {args.by!r}"):
                values = read_column(Path(model.source), args.by, model.probs.shape[0])
                results[-1]["segments"] = compute_segments(model, values, args.by)
        if args.harness:
            with progress(f"{model.name}: harness presets"):
                results[-1]["harness"] = compute_harness(model)
        if fit:
            with progress(f"{model.name}: cross-fitting calibrators on {args.folds} folds"):
                results[-1]["fit"] = compute_fit(
                    model, n_bins=args.bins, n_folds=args.folds, seed=args.seed
                )
    for model, result in zip(models, results, strict=True):
        result["verdict"] = verdict(model, result, args.resamples)
    document = report_json(models, results, settings)
    for entry, result in zip(document["models"], results, strict=True):
        if "segments" in result:
            entry["segments"] = _json_safe(result["segments"])
        if "harness" in result:
            entry["harness"] = _json_safe(result["harness"])
    if args.json == "-":
        json.dump(document, sys.stdout, indent=2)
        print()
    else:
        print_report(models, results, settings, sys.stdout)
        print_harness(models, results, _num, _table, sys.stdout)
        print_segments(models, results, sys.stdout, format_p, _table, args.max_segments)
    write_json(args.json, document)
    if args.plot is not None:
        plot_cache(kernel_folder(no_cache=args.no_cache))
        with progress(f"writing {args.plot}"):
            write_plot(
                models,
                args.plot,
                n_bins=args.bins,
                n_resamples=args.resamples,
                seed=args.seed,
                results=results,
            )
        if args.json != "-":
            print(
                f"\nreliability, cumulative, CORP and risk-coverage diagrams written to {args.plot}"
            )
    sys.stdout.flush()  # a closed pipe raises here, inside the try, not at exit
    return 0

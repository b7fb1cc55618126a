"""The jaxcal command line: jaxcal report FILE... and jaxcal report --demo.

This module parses the arguments and runs the report; ``jaxcal report --help`` is built
from ``DESCRIPTION``, the options' help and ``EPILOG`` (plain text, the options first).
The reference (every input format in full, every row of the table, the verdict's rule,
the ``--json`` schema) is the report's docs page, ``docs/guides/report.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from jaxcal._core.cache_dir import kernel_folder, plot_cache
from jaxcal._core.store import set_store
from jaxcal.cli._args import LIMITS, check_args
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
from jaxcal.cli._io import InputError, load, load_demo
from jaxcal.cli._parquet import is_parquet, report_streamed
from jaxcal.cli._progress import Progress
from jaxcal.cli._regression_input import task_of
from jaxcal.cli._regression_output import report_regression
from jaxcal.cli._report import CONFIDENCE, compute_report, report_calls
from jaxcal.cli._segments import compute_segments, print_segments, read_column
from jaxcal.cli._validate import validate
from jaxcal.cli._verdict import verdict
from jaxcal.cli._warehouse import report_warehouse

DESCRIPTION = textwrap.fill(
    "Print the calibration report of predictions and labels: a verdict line per model "
    "(miscalibrated or not, which way, what to do), the calibration errors, Brier score and "
    "log loss with bootstrap intervals, the tests of calibration (KS, Kuiper, Spiegelhalter, "
    "ECE consistency, SKCE), the selective-prediction block (AURC, E-AURC, AUGRC, risk at "
    "80/90/95% coverage) and, for binary models, the clinical block.",
    width=88,
)

EPILOG = """\
input files (the format is decided by the extension):
  .npz      arrays probs ((N,) positive-class probabilities or (N, K) rows) and/or
            logits, and labels ((N,) integers); --labels KEY names another label key
  .npy      one array of scores; the labels in a second file: --labels LABELS.npy
            (add --logits when the scores are logits)
  .csv      a header row, then numbers; the label column is the first of label,
            labels, y, target, class (or --labels COL); every other column holds the
            probabilities (or --probs 'p_*'); one score column is a binary problem
  .parquet  or a folder of Parquet files: streamed in bounded memory, no tests, --fit
            or --plot (pip install "jaxcal[parquet]")
  regression  y and mean, std | quantiles, levels (q_0.05, ...) | samples (sample_0, ...)
  --sql DB --table T   a DuckDB table: the state is computed inside DuckDB and the
            streamed report printed (pip install "jaxcal[sql]"); --state FILE reports a
            stored state table (jaxcal.streaming.to_table)

examples:
  jaxcal report --demo
  jaxcal report preds.npz --fit --json report.json
  jaxcal report preds.npz --plot report.png      (needs pip install "jaxcal[plot]")
  jaxcal report preds.csv --labels y --probs 'p_*' --by region

compilation cache: the compiled kernels are kept in kernels/ of $JAXCAL_CACHE_DIR,
else $XDG_CACHE_HOME/jaxcal, else ~/.cache/jaxcal; deleting it is always safe;
--no-cache or JAXCAL_NO_COMPILATION_CACHE=1 turn it off.

Errors in the input or the arguments print one line on stderr and exit with code 2,
before any computation.

reference: every input format in full, what each row and test is, the verdict's rule
and the --json schema are on the documentation's "jaxcal report" page
(docs/guides/report.md in the source).
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jaxcal", description=__doc__.splitlines()[0][3:])
    commands = parser.add_subparsers(dest="command", required=True)
    rep = commands.add_parser(
        "report",
        help="print the calibration report of a predictions file",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rep.add_argument(
        "files",
        nargs="*",
        type=Path,
        metavar="FILE",
        help=".npz, .npy, .csv or .parquet predictions, or a folder of Parquet files",
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
    rep.add_argument(
        "--seed",
        type=int,
        default=0,
        help=f"seed of resamples and folds, in [0, {LIMITS['seed'][1] + 1:#x}) (default 0)",
    )
    rep.add_argument(
        "--renormalize",
        action="store_true",
        help="divide each probability row by its sum (rounded exports whose rows miss 1 "
        "by more than the tolerance); the metrics' renormalize=True",
    )
    rep.add_argument(
        "--by",
        metavar="COLUMN",
        help="also test calibration within the segments of a .csv column or .npz key "
        "(Holm-adjusted Kuiper tests, one per distinct value)",
    )
    rep.add_argument(
        "--max-segments",
        type=int,
        default=20,
        metavar="M",
        help="rows of the --by table (default 20; the JSON has every segment)",
    )
    rep.add_argument(
        "--harness",
        action="store_true",
        help="also print what LLM evaluation harnesses report: HLE's calib_err, HELM's "
        "calibration fields, the temperature-tuned Brier and RMS error (jaxcal.presets)",
    )
    rep.add_argument("--json", metavar="OUT", help="write every number as JSON ('-': stdout)")
    rep.add_argument(
        "--plot",
        metavar="OUT.png",
        type=Path,
        help="write the reliability, cumulative-differences, CORP and risk-coverage diagrams "
        '(png, pdf, svg; needs matplotlib: pip install "jaxcal[plot]")',
    )
    rep.add_argument(
        "--stream",
        action="store_true",
        help="report .npz/.npy files in batches, in bounded memory, as Parquet input is "
        "(no tests, --fit, --plot or --by)",
    )
    rep.add_argument(
        "--sql",
        metavar="DB",
        type=Path,
        help="compute the state in DuckDB from the file DB's --table (no rows leave DuckDB; "
        "the streamed report; needs jaxcal[sql])",
    )
    rep.add_argument("--table", metavar="NAME", help="the table, view or FROM clause of --sql")
    rep.add_argument(
        "--state",
        metavar="FILE",
        type=Path,
        help="report a stored state table (Parquet, jaxcal.streaming.to_table); with --sql: "
        "store the computed one there",
    )
    rep.add_argument(
        "--row-key",
        metavar="COL",
        help="--sql: unique integer column keying the bootstrap replicates (default rowid)",
    )
    rep.add_argument(
        "--task",
        choices=("regression", "classification"),
        metavar="TASK",
        help="regression or classification (default: from the names in the files)",
    )
    rep.add_argument("--quiet", action="store_true", help="no progress messages on stderr")
    rep.add_argument(
        "--no-cache",
        action="store_true",
        help="do not read or write the compilation cache (see 'compilation cache' below)",
    )
    return parser


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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``jaxcal`` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    set_store(kernel_folder(no_cache=args.no_cache))
    progress = Progress(args.quiet)
    try:
        check_args(args)
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
                    compute_report(
                        model, n_bins=args.bins, n_resamples=args.resamples, seed=args.seed
                    )
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
                    f"\nreliability, cumulative, CORP and risk-coverage diagrams written to "
                    f"{args.plot}"
                )
        sys.stdout.flush()  # a closed pipe raises here, inside the try, not at exit
    except InputError as err:
        print(f"jaxcal: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`jaxcal report f.npz | head`): stop quietly, as Unix tools
        # do. stdout points at /dev/null so that Python's flush at exit cannot raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return 0

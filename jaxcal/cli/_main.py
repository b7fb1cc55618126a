"""The jaxcal command line: jaxcal report FILE... and jaxcal report --demo.

This module parses and checks the arguments, then runs the report (``_run``, imported
only then: ``--help`` and bad arguments answer before JAX is imported); ``jaxcal report
--help`` is built
from ``DESCRIPTION``, the options' help and ``EPILOG`` (plain text, the options first).
The reference (every input format in full, every row of the table, the verdict's rule,
the ``--json`` schema) is the report's docs page, ``docs/guides/report.md``.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from jaxcal.cli._args import LIMITS, InputError, check_args

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

compilation cache: compiled kernels are kept in kernels/ of $JAXCAL_CACHE_DIR, else
$XDG_CACHE_HOME/jaxcal, else ~/.cache/jaxcal, for every N of a size class; deleting it
is always safe; --no-cache or JAXCAL_NO_COMPILATION_CACHE=1 turn it off.

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


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``jaxcal`` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        check_args(args)
        from jaxcal.cli._run import run  # JAX and the kernels: only for good arguments

        return run(args)
    except InputError as err:
        print(f"jaxcal: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (`jaxcal report f.npz | head`): stop quietly, as Unix tools
        # do. stdout points at /dev/null so that Python's flush at exit cannot raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1

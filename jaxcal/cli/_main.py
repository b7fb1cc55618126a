"""The ``jaxcal`` command line: ``jaxcal report FILE`` and ``jaxcal report --demo``.

``jaxcal report`` reads predictions and labels and prints the whole picture of a model's
calibration: the binned calibration errors, the Brier score and its decomposition and the
log loss, each with a bootstrap interval; the CORP decomposition S = MCB - DSC + UNC of the
Brier and the log score (Dimitriadis, Gneiting & Jordan 2021), with intervals; the Kolmogorov-Smirnov, Kuiper, Spiegelhalter
and ECE-consistency tests and SKCE's test with their p-values; the selective-prediction
block (AURC, E-AURC, AUGRC, risk at 80/90/95% coverage, with intervals); with ``--fit``,
what temperature scaling, top-label Platt scaling and top-label isotonic regression do on
held-out folds; with ``--plot OUT.png``, the reliability diagram, the cumulative-differences
plot, the CORP reliability diagram and the risk-coverage curve; with ``--harness``, what LLM
evaluation harnesses report (HLE's calib_err, HELM's calibration fields, lm-eval's
temperature-tuned Brier and RMS calibration error; ``jaxcal.presets``).

Input files (the format is decided by the extension):

* ``.npz``: arrays ``probs`` ((N,) positive-class probabilities or (N, K) rows on the
  simplex) and/or ``logits`` ((N,) log-odds or (N, K)), and ``labels`` ((N,) integers).
  ``--labels KEY`` names another label key. When the file has only logits, the
  probabilities are their softmax (sigmoid for (N,)); when it has both, the metrics use
  ``probs`` and temperature scaling uses ``logits``. ``--probs [KEY]`` or ``--logits
  [KEY]`` use that one array only (default key ``probs`` or ``logits``). Pickled (object)
  arrays are refused. Members stored uncompressed (``np.savez``) are memory-mapped, not
  copied.
* ``.npy``: one array of scores, with the labels in a second ``.npy`` given by
  ``--labels LABELS.npy`` (required). The scores are probabilities, or logits with
  ``--logits`` (no value).
* ``.csv``: a header row, then one row per sample, numbers only (read by NumPy's parser;
  UTF-8 with or without the byte-order mark Excel writes; a cell is a plain decimal
  number, so ``1_0`` is an error, not 10; every value error names the column and row).
  ``--labels COL`` names the label column (default: the first of ``label``, ``labels``,
  ``y``, ``target``, ``class`` present); ``--probs COLS`` or ``--logits COLS`` name the
  score columns, comma-separated, each a name or a glob (``--probs 'p_*'``), in that
  order; by default every other column holds probabilities. One score column is a binary
  problem (its values are the positive class's probability or log-odds); K columns are
  the K classes in the order given.

* ``.parquet`` (or ``.pq``), or a folder of Parquet files: streamed in record batches, in
  bounded memory, with a progress bar (needs pyarrow: ``pip install "jaxcal[parquet]"``).
  ``--labels COL`` and ``--probs COLS`` choose the columns as for ``.csv``. The streamed
  report has the binned metrics, the Brier decomposition, the log loss, the equal-mass
  ECE and (binary input) the CORP rows from a fine histogram (the smallest multiple of
  ``--bins`` of at least 4096 buckets: 4110 at the default 15 bins), with Poisson-bootstrap
  intervals keyed by row number (``--resamples B``; 0 for none); no tests, ``--fit`` or
  ``--plot`` (they need every score in memory). Large files: ``--resamples 0`` is fastest.
  SKCE, the selective-prediction block and ``--harness`` need the in-memory report (one
  footnote line says so).

``--stream`` reports ``.npz`` and ``.npy`` files as Parquet is reported: the memory-mapped
arrays (``np.savez``, uncompressed, or ``.npy``) are read in batches, so memory is one
batch plus the states whatever N, where the in-memory report's bootstraps and tests need
several copies of the data (a 220 MB ``.npz`` of N = 5e6, K = 10 peaks at 3.4 GB). The
report, its intervals and its JSON are those of Parquet input (``"streamed": true``), with
the same rows left out; ``--fit``, ``--plot``, ``--by``, ``--renormalize`` and
``--logits`` are refused, and ``.csv`` files too (parsed whole: convert them). For an
input of 5e7 values or more the in-memory report suggests ``--stream`` on stderr.

Several FILEs are reported side by side (each with its own labels). ``--demo`` reports
the two real models shipped in ``jaxcal/data`` and turns ``--fit`` on (``--no-fit`` turns
it off).

Intervals are percentile bootstrap intervals (:func:`jaxcal.stats.bootstrap_ci`) over
``--resamples`` resamples of the N samples (default 200, the same resamples for every
metric, seed ``--seed``; at least 2: the intervals and the ECE consistency test resample,
so ``--resamples 0`` is for the streamed report only). All metrics, intervals and tests
of a model are two compiled JAX computations (the SKCE test and the selective block in the
second, compiled for speed of running), so a second model of the same shape costs no
compilation.

SKCE (``jaxcal.stats.skce_test``): the unbiased squared kernel calibration error of the
whole probability vector, Laplacian kernel exp(-|p - p'|_2 / h), h the median pairwise
distance; its p-value from the asymptotic test (bootstrap of the null, ``--resamples``
resamples, key ``fold_in(key(seed), 2)``), whose cost is O(N^2 (K + resamples)), while
N^2 (K + resamples) <= 2.1e10 (N = 10,000 at K = 10 and 200 resamples); beyond, from the
block z-test (blocks of 2, O(N K)), and a footnote says so.

Selective prediction (``jaxcal.selective``): the confidence is the top-label probability
(binary: max(p, 1 - p)); AURC in the ``"mean"`` convention (Geifman & El-Yaniv's mean of the
running error rates), E-AURC against the exact best ranking, AUGRC in Traub et al.'s
convention, risk at 80/90/95% coverage; tied confidences averaged over their orders;
intervals as the metrics table's (the same resamples).

``--by COLUMN`` adds calibration within segments: the distinct values of a ``.csv``
column (any text; with a ``.csv`` it is not a score column) or of an ``.npz`` key split
the samples; a column of non-integer numbers with more than 20 distinct values (a score,
an income) is cut into 10 equal-count bins instead. Each segment gets the Kuiper test of
its cumulative differences (:func:`jaxcal.stats.multicalibration_error`, one sort for
all); a segment of fewer than 10 rows, or of events too rare for the test's Brownian
approximation, is excluded (listed, not tested). The table lists the tested segments by
Holm-adjusted p-value, then the excluded ones, at most ``--max-segments`` rows (default
20), with the family-wise p-value; the JSON gains a ``"segments"`` entry per model with
every segment (schema in ``jaxcal/cli/_segments.py``).

Probabilities rounded on export (rows that miss 1 by more than the tolerance) are
refused; ``--renormalize`` divides each row by its sum first (the metrics'
``renormalize=True``).

Output: the table on stdout; progress of the long steps on stderr, with their running
time (``--quiet`` silences it); ``--json OUT`` (``-`` for stdout, instead of the table) writes every number in the
schema below; ``--plot OUT.png`` (or ``.pdf``, ``.svg``; needs matplotlib) writes the
figure. Nothing is written to disk unless asked.

JSON schema (``"schema": "jaxcal.report/1"``; revisions only add metric NAMEs, so a reader
of an earlier revision reads every later one)::

  {"schema": "jaxcal.report/1", "jaxcal_version": str,
   "settings": {"n_bins": int, "resamples": int, "confidence": 0.95, "seed": int,
                "interval": "percentile bootstrap", "folds": int or null},
   "models": [{"name": str, "source": str, "n": int, "num_classes": int,
               "binary": bool, "inputs": "probs" | "logits",
               "metrics": {NAME: {"value": float, "low": float or null,
                                  "high": float or null}},
               "tests": {NAME: {"statistic": float or null, "p_value": float,
                                "log10_p_value": float or null}},
               "clinical": null (multiclass) or {CLINICAL: {"value": float,
                           "low": float or null, "high": float or null},
                           "hosmer_lemeshow": {"statistic": float, "p_value": float,
                                               "log10_p_value": float}},
               "harness": (with --harness only) {HARNESS: float or null,
                           "temperature_inputs": "logits" | "log_probs"},
               "fit": null or {"folds": int, "seed": int,
                               "temperature_inputs": "logits" | "log_probs",
                               "results": {CALIBRATOR: {"ece": float, "log_loss": float,
                                                        "brier": float, "accuracy": float}}}}]}

A streamed (Parquet or ``--stream``) report has ``"interval": "Poisson bootstrap (keyed by row number)"``
(null with ``--resamples 0``), ``"folds": null``, empty ``"tests"``, ``"fit": null``, and
adds ``"streamed": true`` and ``"resolution"`` (buckets) to the settings and
``"ece_quantile_bound"`` (the equal-mass ECE's error bound) to each model.

Metric NAMEs: ``accuracy``, ``ece``, ``ece_quantile``, ``ece_l2_debiased``, ``mce``,
``classwise_ece`` and ``top_label_ece`` (multiclass only), ``brier``, ``log_loss``, and the
CORP decomposition ``corp_brier``, ``corp_brier_miscalibration``,
``corp_brier_discrimination``, ``corp_brier_uncertainty`` and the same four ``corp_log*``
(the positive class, or the top-label confidence for multiclass; since the CORP revision
of the schema) (with intervals); ``brier_reliability``, ``brier_resolution``, ``brier_uncertainty``,
``brier_within_bin_variance``, ``brier_within_bin_covariance``, and ``positive_rate``
(binary only) without; the selective block ``aurc``, ``e_aurc``, ``augrc``,
``risk_at_coverage_80``, ``risk_at_coverage_90``, ``risk_at_coverage_95`` (with intervals).
Test NAMEs: ``ks``, ``kuiper``, ``spiegelhalter`` (two-sided), ``ece_consistency``, and
``skce``, whose entry adds ``"estimate"`` (the unbiased SKCE, printed in the table),
``"bandwidth"`` and ``"method"`` (``"asymptotic"`` or ``"block"``; the statistic is the
asymptotic test's n/(n-1) SKCE_u - SKCE_b, or the block test's z), ``"reliable"`` and
``"expected_errors"`` (the asymptotic null holds its size only with >= 10 expected errors). HARNESS:
``hle_calibration_error``; HELM's ``ece_10_bin``, ``ece_1_bin``, ``selective_cov_acc_area``,
``selective_acc@10``, ``platt_coef``, ``platt_intercept``, ``platt_ece_10_bin``,
``platt_ece_1_bin``; the temperature-tuned ``temperature``, ``brier``,
``rms_calibration_error``, ``log_loss`` (null where N < 100). CALIBRATORs: ``uncalibrated``, ``temperature_scaling``,
``venn_abers``, and ``top_label_platt``, ``top_label_isotonic`` (multiclass) or ``platt``,
``isotonic``, ``centred_isotonic`` (binary). CLINICAL (binary models): ``slope``,
``intercept``, ``citl`` (with 95% Wald intervals), ``ici``, ``e50``, ``e90``, ``emax``
(loess). Non-finite numbers are written as null (an infinite statistic when sigma = 0,
log10 of a p-value of 0). Binary ``accuracy`` predicts the positive class when p > 1/2.

Compilation cache: almost all of a first run is compiling the report's kernels. The
compiled executables are kept in ``kernels/`` of ``$JAXCAL_CACHE_DIR``, else
``$XDG_CACHE_HOME/jaxcal``, else ``~/.cache/jaxcal``, and later runs load them without
tracing or compiling (not the streamed report's, nor a kernel with a host callback:
in-memory inputs of 1024 rows or more compile the report in each run). Entries are keyed
by the program, the versions and the machine; deleting the folder is always safe.
``--no-cache``, ``JAXCAL_NO_COMPILATION_CACHE=1`` or ``JAXCAL_KERNEL_STORE=0`` turn it off.

Errors in the input (missing keys, wrong shapes, pickles, non-numeric CSV cells, NaN,
labels out of range, ...) and arguments out of range (``--bins`` in [1, 10**6],
``--resamples`` in [2, 10**6] (streamed: 0 or [2, 10**6]), ``--folds`` in [2, 10**4],
``--seed`` in [0, 2**63), ``--max-segments`` in [1, 10**6]) or
destinations that cannot be written are one line on stderr and exit code 2, never a
traceback, found before any computation.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from jaxcal.cli._args import LIMITS, check_args
from jaxcal.cli._cache import kernel_folder, plot_cache
from jaxcal.cli._fit import compute_fit, fit_calls
from jaxcal.cli._format import (
    _json_safe,
    _num,
    _table,
    format_p,
    print_report,
    report_json,
    write_plot,
)
from jaxcal.cli._harness import compute_harness, harness_call, print_harness
from jaxcal.cli._io import InputError, load, load_demo
from jaxcal.cli._kernels import set_store
from jaxcal.cli._parquet import is_parquet, report_streamed
from jaxcal.cli._progress import Progress
from jaxcal.cli._report import CONFIDENCE, compute_report, report_calls
from jaxcal.cli._segments import compute_segments, print_segments, read_column
from jaxcal.cli._validate import validate


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jaxcal", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    rep = commands.add_parser(
        "report",
        help="print the calibration report of a predictions file",
        description=__doc__.split("\n\n", 1)[1],
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
        help="write the reliability, cumulative and CORP diagrams (png, pdf, svg)",
    )
    rep.add_argument(
        "--stream",
        action="store_true",
        help="report .npz/.npy files in batches, in bounded memory, as Parquet input is "
        "(no tests, --fit, --plot or --by)",
    )
    rep.add_argument("--quiet", action="store_true", help="no progress messages on stderr")
    rep.add_argument(
        "--no-cache",
        action="store_true",
        help="do not read or write the compilation cache (see 'Compilation cache' above)",
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
        if args.json not in (None, "-"):
            try:
                with open(args.json, "w", encoding="utf-8") as f:
                    json.dump(document, f, indent=2)
            except OSError as err:
                raise InputError(f"cannot write the JSON report to {args.json}: {err}") from err
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

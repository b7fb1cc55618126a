"""The ``jaxcal`` command line: ``jaxcal report FILE`` and ``jaxcal report --demo``.

Reads predictions and labels, prints a table of calibration metrics. Errors in the input
file are reported on stderr with exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path

import numpy as np

DEMO_FILE = "digits_gaussian_nb.npz"
DEMO_DESCRIPTION = (
    "GaussianNB on scikit-learn's handwritten digits (held-out half, N=899, K=10); "
    "regenerate with scripts/make_demo_data.py"
)


class InputError(Exception):
    """A problem with the user's file or arguments (exit code 2)."""


def load_npz(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``probs`` and ``labels`` from an ``.npz`` file; pickled objects are refused."""
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = [k for k in ("probs", "labels") if k not in data.files]
            if missing:
                raise InputError(
                    f"{path}: missing key(s) {missing}; found {sorted(data.files)}. "
                    "Save with np.savez(path, probs=..., labels=...)."
                )
            return np.asarray(data["probs"]), np.asarray(data["labels"])
    except InputError:
        raise
    except (OSError, ValueError) as err:
        raise InputError(f"{path}: cannot read as .npz ({err}).") from err


def _metric_rows(probs, labels, n_bins: int) -> list[tuple[str, Callable[[], object]]]:
    import jaxcal

    binary = probs.ndim == 1

    def ece(**kw):
        return lambda: jaxcal.ece(probs, labels, n_bins=n_bins, **kw)

    rows = [
        (
            "accuracy" if not binary else "positive rate",
            lambda: np.mean(np.argmax(probs, 1) == labels) if not binary else np.mean(labels),
        ),
        (f"ECE (l1, {n_bins} uniform bins)", ece()),
        (f"ECE (l1, {n_bins} equal-mass bins)", ece(binning="quantile")),
        ("ECE (l2, debiased, Kumar et al.)", ece(norm="l2", debias=True)),
        ("MCE (max gap)", ece(norm="max")),
    ]
    if not binary:
        rows += [
            ("classwise ECE", lambda: jaxcal.classwise_ece(probs, labels, n_bins=n_bins)),
            ("top-label ECE", lambda: jaxcal.top_label_ece(probs, labels, n_bins=n_bins)),
        ]
    decomposition = jaxcal.brier_decomposition(probs, labels, n_bins=n_bins)
    rows += [
        ("Brier score", lambda: decomposition.brier),
        ("  reliability (REL)", lambda: decomposition.reliability),
        ("  resolution (RES)", lambda: decomposition.resolution),
        ("  uncertainty (UNC)", lambda: decomposition.uncertainty),
        ("  within-bin variance", lambda: decomposition.within_bin_variance),
        ("  within-bin covariance", lambda: decomposition.within_bin_covariance),
        ("log loss (nats)", lambda: jaxcal.log_loss(probs, labels)),
    ]
    return rows


def report(probs: np.ndarray, labels: np.ndarray, *, n_bins: int, source: str, out=None) -> None:
    """Validate the predictions and print the metrics table (to ``out``, default stdout)."""
    out = sys.stdout if out is None else out
    import jaxcal._checks as checks

    try:
        checks.check_probs_labels(probs, labels)
    except ValueError as err:
        raise InputError(f"{source}: {err}") from err
    shape = "binary (N,)" if probs.ndim == 1 else f"{probs.shape[1]} classes"
    print(f"jaxcal report: {source}", file=out)
    print(f"N = {probs.shape[0]}, {shape}", file=out)
    rows = _metric_rows(probs, labels, n_bins)
    width = max(len(name) for name, _ in rows)
    print(f"\n{'metric':<{width}}  value", file=out)
    print(f"{'-' * width}  {'-' * 8}", file=out)
    for name, value in rows:
        print(f"{name:<{width}}  {float(value()):.4f}", file=out)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="jaxcal", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    rep = commands.add_parser("report", help="print the calibration report of a predictions file")
    rep.add_argument("file", nargs="?", type=Path, help=".npz with arrays 'probs' and 'labels'")
    rep.add_argument("--demo", action="store_true", help="run on the shipped real data set")
    rep.add_argument("--bins", type=int, default=15, help="number of bins (default 15)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``jaxcal`` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        if args.bins < 1:
            raise InputError(f"--bins must be an integer >= 1; got {args.bins}.")
        if args.demo == (args.file is not None):
            raise InputError("give either a FILE or --demo.")
        if args.demo:
            path = resources.files("jaxcal") / "data" / DEMO_FILE
            with resources.as_file(path) as local:
                probs, labels = load_npz(Path(local))
            source = DEMO_DESCRIPTION
        else:
            probs, labels = load_npz(args.file)
            source = str(args.file)
        report(probs, labels, n_bins=args.bins, source=source)
    except InputError as err:
        print(f"jaxcal: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Range checks of ``jaxcal report``'s arguments and destinations, before any work.

Every check here runs before a file is read or a kernel traced, so a wrong argument or an
unwritable ``--json`` / ``--plot`` destination costs no computation and prints one line
(an ``InputError``, exit code 2).
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
from pathlib import Path


class InputError(Exception):
    """A problem with the user's file or arguments (exit code 2)."""


#: Suffixes of Parquet files (a folder is a Parquet dataset too).
PARQUET_SUFFIXES = (".parquet", ".pq")


def is_parquet(path: Path) -> bool:
    """A Parquet file (by its suffix) or a folder (a dataset of Parquet files)."""
    return path.is_dir() or path.suffix.lower() in PARQUET_SUFFIXES


#: Inclusive ranges of the integer options. Seeds are NumPy/JAX 64-bit seeds; the upper
#: limits of the others keep every size far inside int32 and memory.
LIMITS = {
    "bins": (1, 1_000_000),
    "resamples": (2, 1_000_000),
    "folds": (2, 10_000),
    "seed": (0, 2**63 - 1),
    "max_segments": (1, 1_000_000),
}

PLOT_SUFFIXES = (".png", ".pdf", ".svg")


def _check_range(option: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        flag = option.replace("_", "-")
        raise InputError(f"--{flag} must be an integer >= {low} and <= {high}; got {value}.")


def check_destination(path: Path, option: str) -> None:
    """Raise unless ``path`` can be written: not a folder, in a folder that takes a file.

    The folder is probed with a temporary file (removed at once), which is what a write
    will meet, whoever runs the command (``os.access`` says yes to root on read-only mounts).
    """
    if path.is_dir():
        raise InputError(f"{option} {path} is a folder; give a file name in it.")
    folder = path.parent
    if not folder.is_dir():
        raise InputError(f"{option} {path}: the folder {folder} does not exist.")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise InputError(f"{option} {path}: cannot write in {folder} ({err.strerror}).") from err


def check_args(args: argparse.Namespace) -> None:
    """Every argument in range, the inputs chosen once, the destinations writable."""
    streamed = bool(args.files) and (args.stream or all(is_parquet(p) for p in args.files))
    table = getattr(args, "sql", None) is not None or getattr(args, "state", None) is not None
    streamed = streamed or table  # --sql / --state: the streamed report of a state table
    for option, (low, high) in LIMITS.items():
        value = getattr(args, option)
        if option == "resamples" and streamed:  # 0: no intervals
            if value == 1:
                raise InputError("--resamples must be 0 (no intervals) or >= 2; got 1.")
            low = 0
        if option == "resamples" and not streamed and value < low:
            # Kept on purpose (E1): the in-memory report's ECE consistency test and its
            # intervals are resampling; the streamed report has neither test nor a need.
            raise InputError(
                f"--resamples must be >= 2 for the in-memory report (its intervals and the "
                f"ECE consistency test resample); got {value}. For a quick look use a few "
                "(e.g. --resamples 20); 0 (no intervals) is for the streamed report "
                "(--stream, or Parquet input)."
            )
        _check_range(option, value, low, high)
    if args.demo == bool(args.files) and not table:
        raise InputError("give either FILE(s) or --demo.")
    for path in args.files:  # here, not when read: before JAX is imported (N12)
        if not path.exists():
            raise InputError(f"{path}: no such file or folder.")
    if args.stream and args.demo:
        raise InputError("--stream needs FILE(s), not --demo.")
    if args.by is not None and args.demo:
        raise InputError("--by needs FILE(s), not --demo.")
    if args.plot is not None and args.plot.suffix.lower() not in PLOT_SUFFIXES:
        raise InputError(f"--plot must end in .png, .pdf or .svg; got {args.plot}.")
    if args.json not in (None, "-"):
        check_destination(Path(args.json), "--json")
    if getattr(args, "sql", None) is not None and args.state is not None:
        check_destination(args.state, "--state")
    if args.plot is not None:
        check_destination(args.plot, "--plot")
        if importlib.util.find_spec("matplotlib") is None:  # N1: before, not after, the report
            raise InputError(
                '--plot needs matplotlib, which is not installed: pip install "jaxcal[plot]" '
                "(or run without --plot)."
            )

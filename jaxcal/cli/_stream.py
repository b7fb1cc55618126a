"""``jaxcal report --stream`` on ``.npz`` and ``.npy`` files: the arrays as a stream.

The arrays are memory-mapped (``.npz`` members stored uncompressed, by
``jaxcal/cli/_npz.py``; ``.npy`` files by ``np.load(mmap_mode="r")``), checked on the host
in row chunks (``jaxcal/cli/_validate.py``: nothing is compiled for a malformed file), and
fed to :func:`jaxcal.streaming.array_state` a batch at a time, so the report of
``jaxcal/cli/_parquet.py`` runs on them in memory of one batch plus the states, whatever N.
A compressed ``.npz`` member (``np.savez_compressed``) cannot be mapped and is read whole.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from jaxcal import streaming
from jaxcal.cli._io import InputError, load_npy, load_npz
from jaxcal.cli._validate import _host_checks


class Stream(NamedTuple):
    """One input of the streamed report.

    Attributes:
      rows: the number of rows.
      columns: the number of probability columns (1: a binary problem).
      states: ``states(**options)`` streams the rows: :func:`jaxcal.streaming.parquet_state`
        or :func:`jaxcal.streaming.array_state` with the input's columns bound.
    """

    rows: int
    columns: int
    states: Callable[..., streaming.ParquetStates]


def array_stream(path: Path, args: argparse.Namespace) -> Stream:
    """The memory-mapped probabilities and labels of an ``.npz`` or ``.npy`` file."""
    suffix = path.suffix.lower()
    if args.logits is not None:
        raise InputError(f"{path}: --logits is not available with --stream; give probabilities.")
    if suffix == ".npz":
        model = load_npz(path, probs_key=args.probs or "probs", labels_key=args.labels)
    elif suffix == ".npy":
        if args.probs:
            raise InputError(f"{path}: --probs takes no key with .npy files.")
        model = load_npy(path, args.labels, logits=False, mmap=True)
    elif suffix == ".csv":
        raise InputError(
            f"{path}: --stream reads .npz, .npy and Parquet files; a .csv is parsed whole "
            "(run without --stream, or convert it to .npz or Parquet)."
        )
    else:
        raise InputError(f"{path}: unsupported file type {suffix!r} for --stream; use .npz, .npy.")
    try:
        _host_checks(model.probs, model.labels, renormalize=False)
    except ValueError as err:
        raise InputError(f"{path}: {err}") from err
    probs, labels = model.probs, model.labels
    if probs.ndim == 2 and probs.shape[1] < 2:
        raise InputError(f"{path}: `probs` needs at least 2 class columns; got {probs.shape}.")
    columns = 1 if probs.ndim == 1 else probs.shape[1]
    return Stream(
        labels.shape[0], columns, lambda **options: streaming.array_state(probs, labels, **options)
    )

"""Reading ``jaxcal report``'s inputs: ``.npz``, ``.npy`` and ``.csv`` files, and the demo.

Every problem with a file is an ``InputError`` naming the file and what was wrong
(the command prints it on one line and exits with code 2). The formats are described in
the reference on ``docs/guides/report.md``.
"""

from __future__ import annotations

import argparse
import fnmatch
import struct
import zipfile
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import numpy as np

from jaxcal.cli._args import InputError
from jaxcal.cli._csv import CsvError, read_columns, read_header
from jaxcal.cli._npz import member_names, read_members

DEMO_FILES = (("GaussianNB", "digits_gaussian_nb.npz"), ("MLP", "digits_mlp.npz"))
DEMO_DESCRIPTION = (
    "GaussianNB and an MLP on scikit-learn's handwritten digits (held-out half, N=899, "
    "K=10); regenerate with scripts/make_demo_data.py"
)
LABEL_COLUMNS = ("label", "labels", "y", "target", "class")


class Model(NamedTuple):
    """One model's predictions as read from a file (host arrays)."""

    name: str
    source: str
    probs: np.ndarray  # (N,) or (N, K), float32
    labels: np.ndarray  # (N,)
    logits: np.ndarray | None  # same shape as probs, or None
    inputs: str  # "probs" or "logits": what the file held


def _softmax(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    if z.ndim == 1:
        return (1 / (1 + np.exp(-z))).astype(np.float32)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)


def _numeric(path: Path, name: str, arr: np.ndarray) -> np.ndarray:
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)
    ):
        raise InputError(f"{path}: `{name}` must be numeric; got dtype {arr.dtype}.")
    if arr.ndim == 0:
        raise InputError(
            f"{path}: `{name}` must be an array of shape (N,) or (N, K); got a scalar."
        )
    return arr


def _model(path: Path, name: str, probs, logits, labels) -> Model:
    """Assemble a Model; probabilities from logits when the file has only logits."""
    if logits is not None:
        logits = _numeric(path, "logits", logits)
        if not np.all(np.isfinite(logits)):
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(logits))[0])
            raise InputError(f"{path}: `logits` must be finite; got {logits[bad]} at index {bad}.")
    inputs = "probs" if probs is not None else "logits"
    if probs is None:
        probs = _softmax(logits)
    probs = _numeric(path, "probs", probs)
    labels = _numeric(path, "labels", labels)
    if logits is not None and logits.shape != probs.shape:
        raise InputError(
            f"{path}: `logits` {logits.shape} must have the shape of `probs` {probs.shape}."
        )
    return Model(name, str(path), probs, labels, logits, inputs)


def load_npz(path: Path, *, probs_key=None, logits_key=None, labels_key=None, name=None) -> Model:
    """A model from an ``.npz`` file; pickled objects are refused."""
    labels_key = labels_key or "labels"
    try:
        files = member_names(path)
        wanted = [k for k in (probs_key, logits_key, labels_key) if k is not None]
        missing = [k for k in wanted if k not in files]
        has_scores = (probs_key or "probs") in files or (logits_key or "logits") in files
        if missing or not has_scores:
            need = missing or ["probs' or 'logits"]
            raise InputError(
                f"{path}: missing key(s) {need}; found {sorted(files)}. "
                "Save with np.savez(path, probs=..., labels=...) (or logits=...)."
            )
        # A key named alone (--probs or --logits) uses that array only; else both if present.
        probs_key, logits_key = (
            (probs_key or "probs") if logits_key is None or probs_key else None,
            (logits_key or "logits") if probs_key is None or logits_key else None,
        )
        keys = [k for k in (probs_key, logits_key, labels_key) if k is not None and k in files]
        arrays = read_members(path, keys)
    except InputError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, struct.error) as err:
        raise InputError(f"{path}: cannot read as .npz ({err}).") from err
    probs, logits, labels = (arrays.get(k) for k in (probs_key, logits_key, labels_key))
    return _model(path, name or path.stem, probs, logits, labels)


def _load_npy_array(path: Path, what: str, mmap: bool = False) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False, mmap_mode="r" if mmap else None)
    except (OSError, ValueError, EOFError) as err:
        raise InputError(f"{path}: cannot read {what} as .npy ({err}).") from err


def load_npy(path: Path, labels_path: str | None, *, logits: bool, mmap: bool = False) -> Model:
    """A model from ``SCORES.npy`` and ``--labels LABELS.npy`` (``mmap``: memory-mapped)."""
    if not labels_path:
        raise InputError(
            f"{path}: a .npy file holds one array; give the labels as a second .npy file "
            "with --labels LABELS.npy."
        )
    scores = _load_npy_array(path, "the scores", mmap)
    labels = _load_npy_array(Path(labels_path), "the labels", mmap)
    if logits:
        return _model(path, path.stem, None, scores, labels)
    return _model(path, path.stem, scores, None, labels)


def _select(path: Path, header: list[str], spec: str, what: str) -> list[int]:
    """Column indices for a comma-separated list of names or globs, in the given order."""
    chosen: list[int] = []
    for pattern in (p.strip() for p in spec.split(",")):
        hits = [i for i, h in enumerate(header) if fnmatch.fnmatchcase(h, pattern)]
        if not pattern or not hits:
            raise InputError(f"{path}: no column matches {what} {pattern!r}; columns: {header}.")
        chosen += [i for i in hits if i not in chosen]
    return chosen


def label_column(path: Path, header: list[str], labels_col: str | None) -> str:
    """The label column of a table: ``--labels COL``, else the first of LABEL_COLUMNS."""
    if labels_col is None:
        present = [c for c in LABEL_COLUMNS if c in header]
        if not present:
            raise InputError(
                f"{path}: no label column among {list(LABEL_COLUMNS)}; name it with --labels COL "
                f"(columns: {header})."
            )
        labels_col = present[0]
    if labels_col not in header:
        raise InputError(f"{path}: no column {labels_col!r} for the labels; columns: {header}.")
    return labels_col


#: Header names of an unnamed first column: pandas' default ``to_csv`` index ("" when
#: written, "Unnamed: 0" after a read_csv / to_csv round trip).
PANDAS_INDEX_NAMES = ("", "Unnamed: 0")


def _check_columns(path: Path, names: list[str], values: np.ndarray, probs: bool) -> None:
    """Name the column and the data row of a non-finite (or, for probabilities, outside
    [0, 1]) value, so that an extra ``id`` column is not reported as a bad probability."""
    for j, name in enumerate(names):
        column = values[:, j]
        bad = ~np.isfinite(column)
        if probs:
            bad |= (column < 0) | (column > 1)
        if not bad.any():
            continue
        i = int(np.argmax(bad))
        if not np.isfinite(column[i]):
            raise InputError(
                f"{path}: column {name!r} must be finite; got {column[i]} in data row {i + 1}."
            )
        raise InputError(
            f"{path}: column {name!r} must hold probabilities in [0, 1]; got {column[i]} in "
            f"data row {i + 1} (choose the score columns with --probs COLS)."
        )


def load_csv(
    path: Path, *, probs_cols=None, logits_cols=None, labels_col=None, exclude=()
) -> Model:
    """A model from a ``.csv`` file with a header row (NumPy's parser).

    ``exclude``: columns that are not scores when none are named (the ``--by`` column).
    """
    try:
        header = read_header(path)
    except CsvError as err:
        raise InputError(f"{path}: {err}.") from err
    y_idx = header.index(label_column(path, header, labels_col))
    spec = logits_cols if logits_cols is not None else probs_cols
    if spec:
        score_idx = _select(path, header, spec, "--logits" if logits_cols else "--probs")
    else:
        score_idx = [i for i in range(len(header)) if i != y_idx and header[i] not in exclude]
    if y_idx in score_idx or not score_idx:
        raise InputError(f"{path}: the score columns must be other than the label column.")
    if not spec and header[0] in PANDAS_INDEX_NAMES and 0 in score_idx:
        raise InputError(
            f"{path}: the first column has no name ({header[0]!r}): it looks like the index "
            "column pandas' DataFrame.to_csv writes by default. Write the file with "
            "df.to_csv(path, index=False), or name the score columns with --probs COLS."
        )
    try:
        values = read_columns(path, header, [y_idx, *score_idx])
    except CsvError as err:
        hint = ""
        if f"in column {header[y_idx]!r}" in str(err):
            col = header[y_idx]
            hint = (
                f" Labels must be integers 0..K-1: encode text labels first, e.g. "
                f"df[{col!r}] = pandas.factorize(df[{col!r}], sort=True)[0] (binary: "
                f"df[{col!r}] = (df[{col!r}] == POSITIVE).astype(int), the score column "
                "being the probability of label 1)."
            )
        raise InputError(f"{path}: {err}.{hint}") from err
    labels, scores = values[:, 0], values[:, 1:]
    _check_columns(path, [header[y_idx]], values[:, :1], probs=False)
    _check_columns(path, [header[i] for i in score_idx], scores, probs=logits_cols is None)
    scores = scores[:, 0] if len(score_idx) == 1 else scores
    if logits_cols is not None:
        return _model(path, path.stem, None, scores, labels)
    return _model(path, path.stem, scores.astype(np.float32), None, labels)


def load(path: Path, args: argparse.Namespace) -> Model:
    """Dispatch on the extension."""
    suffix = path.suffix.lower()
    logits_flag = args.logits is not None
    if suffix == ".npz":
        # A flag without a value names the default key: "--logits" uses only the logits.
        return load_npz(
            path,
            probs_key=args.probs or ("probs" if args.probs == "" else None),
            logits_key=args.logits or ("logits" if args.logits == "" else None),
            labels_key=args.labels,
        )
    if suffix == ".npy":
        if args.probs or args.logits:
            raise InputError(
                f"{path}: --probs/--logits take no column names with .npy files "
                "(write --logits alone when the array holds logits)."
            )
        return load_npy(path, args.labels, logits=logits_flag)
    if suffix == ".csv":
        return load_csv(
            path,
            probs_cols=args.probs or None,
            logits_cols=(args.logits or None) if logits_flag else None,
            labels_col=args.labels,
            exclude=() if getattr(args, "by", None) is None else (args.by,),
        )
    raise InputError(f"{path}: unsupported file type {suffix!r}; use .npz, .npy, .csv or .parquet.")


def load_demo() -> list[Model]:
    """The two real models shipped with the package."""
    models = []
    for name, filename in DEMO_FILES:
        ref = resources.files("jaxcal") / "data" / filename
        with resources.as_file(ref) as local:
            model = load_npz(Path(local), name=name)
        models.append(model._replace(source=f"jaxcal/data/{filename}"))
    return models

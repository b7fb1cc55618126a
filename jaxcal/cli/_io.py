"""Reading ``jaxcal report``'s inputs: ``.npz``, ``.npy`` and ``.csv`` files, and the demo.

Every problem with a file is an :class:`InputError` naming the file and what was wrong
(the command prints it on one line and exits with code 2). The formats are described in
``jaxcal report --help`` (:mod:`jaxcal.cli._main`).
"""

from __future__ import annotations

import argparse
import csv
import fnmatch
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import numpy as np

from jaxcal._checks import check_probs_labels

DEMO_FILES = (("GaussianNB", "digits_gaussian_nb.npz"), ("MLP", "digits_mlp.npz"))
DEMO_DESCRIPTION = (
    "GaussianNB and an MLP on scikit-learn's handwritten digits (held-out half, N=899, "
    "K=10); regenerate with scripts/make_demo_data.py"
)
LABEL_COLUMNS = ("label", "labels", "y", "target", "class")


class InputError(Exception):
    """A problem with the user's file or arguments (exit code 2)."""


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
        with np.load(path, allow_pickle=False) as data:
            files = set(data.files)
            wanted = [k for k in (probs_key, logits_key, labels_key) if k is not None]
            missing = [k for k in wanted if k not in files]
            has_scores = (probs_key or "probs") in files or (logits_key or "logits") in files
            if missing or not has_scores:
                need = missing or ["probs' or 'logits"]
                raise InputError(
                    f"{path}: missing key(s) {need}; found {sorted(files)}. "
                    "Save with np.savez(path, probs=..., labels=...) (or logits=...)."
                )

            def get(key):
                return np.asarray(data[key]) if key in files else None

            probs = get(probs_key or "probs") if logits_key is None or probs_key else None
            logits = get(logits_key or "logits") if probs_key is None or logits_key else None
            labels = get(labels_key)
    except InputError:
        raise
    except (OSError, ValueError, EOFError) as err:
        raise InputError(f"{path}: cannot read as .npz ({err}).") from err
    return _model(path, name or path.stem, probs, logits, labels)


def _load_npy_array(path: Path, what: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as err:
        raise InputError(f"{path}: cannot read {what} as .npy ({err}).") from err


def load_npy(path: Path, labels_path: str | None, *, logits: bool) -> Model:
    """A model from ``SCORES.npy`` and ``--labels LABELS.npy``."""
    if not labels_path:
        raise InputError(
            f"{path}: a .npy file holds one array; give the labels as a second .npy file "
            "with --labels LABELS.npy."
        )
    scores = _load_npy_array(path, "the scores")
    labels = _load_npy_array(Path(labels_path), "the labels")
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


def load_csv(path: Path, *, probs_cols=None, logits_cols=None, labels_col=None) -> Model:
    """A model from a ``.csv`` file with a header row (stdlib ``csv`` and NumPy only)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = [row for row in csv.reader(f) if row and any(c.strip() for c in row)]
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise InputError(f"{path}: cannot read as .csv ({err}).") from err
    if len(rows) < 2:
        raise InputError(f"{path}: a .csv file needs a header row and at least one data row.")
    header = [h.strip() for h in rows[0]]
    y_idx = header.index(label_column(path, header, labels_col))
    spec = logits_cols if logits_cols is not None else probs_cols
    if spec:
        score_idx = _select(path, header, spec, "--logits" if logits_cols else "--probs")
    else:
        score_idx = [i for i in range(len(header)) if i != y_idx]
    if y_idx in score_idx or not score_idx:
        raise InputError(f"{path}: the score columns must be other than the label column.")
    values = np.empty((len(rows) - 1, len(header)), dtype=np.float64)
    for r, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise InputError(
                f"{path}: line {r} has {len(row)} fields; the header has {len(header)}."
            )
        for c in [y_idx, *score_idx]:
            cell = row[c].strip()
            try:
                values[r - 2, c] = float(cell)
            except ValueError:
                raise InputError(
                    f"{path}: non-numeric value {cell!r} in column {header[c]!r}, line {r}."
                ) from None
    scores = values[:, score_idx]
    scores = scores[:, 0] if len(score_idx) == 1 else scores
    labels = values[:, y_idx]
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


def validate(model: Model) -> Model:
    """Value checks (shapes, NaN, range, simplex, labels) as InputError; labels as int32."""
    try:
        probs, labels, _ = check_probs_labels(model.probs, model.labels)
    except ValueError as err:
        raise InputError(f"{model.source}: {err}") from err
    if probs.ndim == 2 and probs.shape[1] < 2:
        raise InputError(
            f"{model.source}: `probs` needs at least 2 class columns; got {probs.shape}."
        )
    return model._replace(
        probs=np.asarray(probs, dtype=np.float32), labels=np.asarray(labels, dtype=np.int32)
    )

"""Reading ``jaxcal report``'s regression inputs: the form of the predictions and the targets.

A regression predictions file holds the targets and one of three forms
(``jaxcal.regression``'s ``Gaussian``, ``Quantiles``, ``Samples``):

=============  ==========================================  ==================================
form           ``.npz`` arrays                             ``.csv`` / Parquet columns
=============  ==========================================  ==================================
Gaussian       ``mean`` (N,), ``std`` (N,)                 ``mean``, ``std``
quantiles      ``quantiles`` (N, Q), ``levels`` (Q,)       ``q_<level>``, e.g. ``q_0.05``
samples        ``samples`` (N, S)                          ``sample_<j>``: ``sample_0`` ...
=============  ==========================================  ==================================

plus the targets: ``.npz`` key ``y`` (else ``target``, ``labels``, ``label``; or
``--labels KEY``), a table's label column (the first of ``label, labels, y, target,
class``, or ``--labels COL``). Quantile columns are read in the file's order and their
levels must increase; sample columns are ordered by ``j``. Other columns are ignored.

The task is decided from the names (``task_of()``): a file with regression names and
none of a classifier's (``.npz`` keys ``probs``, ``logits``; ``--probs`` or ``--logits``)
is a regression file; one with both needs ``--task``. Every problem is an
``InputError`` (one line, exit code 2) naming the file, what was found and what is expected.
"""

from __future__ import annotations

import re
import struct
import zipfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

from jaxcal.cli._csv import CsvError, read_columns, read_header
from jaxcal.cli._io import LABEL_COLUMNS, InputError, label_column
from jaxcal.cli._npz import member_names, read_members

FORMS = ("gaussian", "quantiles", "samples")
FORM_NAMES = {"gaussian": "Gaussian", "quantiles": "quantiles", "samples": "samples"}
#: ``.npz`` keys of each form, and the target keys tried in order.
NPZ_KEYS = {
    "gaussian": ("mean", "std"),
    "quantiles": ("quantiles", "levels"),
    "samples": ("samples",),
}
NPZ_TARGETS = ("y", "target", "labels", "label")
_QUANTILE = re.compile(r"q_(\d*\.?\d+(?:[eE][+-]?\d+)?)")
_SAMPLE = re.compile(r"sample_(\d+)")
EXPECTED = (
    "expected one form: `mean` and `std` (Gaussian), `quantiles` (N, Q) with `levels` (Q,) "
    "(.npz) or columns q_<level> such as q_0.05 (tables), or `samples` (N, S) (.npz) or "
    "columns sample_0 ... sample_<S-1> (tables); plus the targets `y`"
)

_TASK_HINT = " (a classifier's file: pass --task classification)"


class RegressionModel(NamedTuple):
    """One model's regression predictions as read from a file (host float32 arrays)."""

    name: str
    source: str
    form: str  # one of FORMS
    y: np.ndarray  # (N,)
    arrays: tuple  # gaussian: (mean, std); quantiles: (values, levels); samples: (values,)

    @property
    def n(self) -> int:
        return int(self.y.shape[0])


def _table_markers(names: list[str]) -> dict[str, list[str]]:
    """The regression columns of a table, by form."""
    return {
        "gaussian": [c for c in names if c in ("mean", "std")],
        "quantiles": [c for c in names if _QUANTILE.fullmatch(c)],
        "samples": [c for c in names if _SAMPLE.fullmatch(c)],
    }


def _npz_markers(names) -> dict[str, list[str]]:
    return {form: [k for k in keys if k in names] for form, keys in NPZ_KEYS.items()}


def parquet_names(path: Path) -> list[str] | None:
    """The column names of a Parquet file or folder (None without pyarrow)."""
    try:
        import pyarrow.dataset as ds
    except ImportError:
        return None
    try:
        return list(ds.dataset(str(path), format="parquet").schema.names)
    except Exception as err:  # pyarrow's errors vary by version
        raise InputError(f"{path}: cannot read as Parquet ({err}).") from err


def task_of(path: Path, args) -> str:
    """``"regression"`` or ``"classification"`` for ``path`` (``--task``, else the names)."""
    task = getattr(args, "task", None)
    if task is not None:
        return task
    suffix = path.suffix.lower()
    if suffix == ".npz":
        try:
            names = member_names(path)
        except (OSError, zipfile.BadZipFile, ValueError):
            return "classification"  # the classifier's reader reports the broken file
        markers = _npz_markers(names)
        classifier = sorted(k for k in ("probs", "logits") if k in names)
    elif suffix == ".csv" or path.is_dir() or suffix in (".parquet", ".pq"):
        try:
            names = read_header(path) if suffix == ".csv" else parquet_names(path)
        except (CsvError, InputError):
            return "classification"  # the classifier's reader reports the unreadable file
        if names is None:
            return "classification"
        markers = _table_markers(names)
        classifier = (
            ["--probs/--logits"] if args.probs is not None or args.logits is not None else []
        )
    else:
        return "classification"
    found = [c for cols in markers.values() for c in cols]
    if found and classifier:
        raise InputError(
            f"{path}: holds both regression predictions ({', '.join(found)}) and a "
            f"classifier's ({', '.join(classifier)}): pass --task regression or --task "
            "classification."
        )
    return "regression" if found else "classification"


def _short(names: list[str]) -> str:
    return ", ".join(names) if len(names) <= 4 else f"{names[0]}, {names[1]}, ..., {names[-1]}"


def _form(path: Path, markers: dict[str, list[str]], complete) -> str:
    """The one form whose names are all present; an error listing what was found."""
    present = [f for f in FORMS if markers[f]]
    found = "; ".join(f"{FORM_NAMES[f]}: {_short(markers[f])}" for f in present) or "none"
    if len(present) != 1:
        what = "mixed forms" if present else "no regression predictions"
        raise InputError(f"{path}: {what} (found {found}); {EXPECTED}{_TASK_HINT}.")
    form = present[0]
    missing = complete(form)
    if missing:
        raise InputError(
            f"{path}: incomplete {FORM_NAMES[form]} predictions: missing {', '.join(missing)} "
            f"(found {found}); {EXPECTED}{_TASK_HINT}."
        )
    return form


def _level(column: str) -> float:
    return float(_QUANTILE.fullmatch(column).group(1))


def _from_table(path: Path, names: list[str], labels_col, read) -> RegressionModel:
    """A model from a table's columns; ``read(columns)`` gives their (N, C) float64 values."""
    y_col = label_column(path, names, labels_col)
    markers = _table_markers([c for c in names if c != y_col])
    form = _form(
        path, markers, lambda f: [c for c in NPZ_KEYS[f] if f == "gaussian" and c not in names]
    )
    cols = markers[form]
    if form == "gaussian":
        cols = ["mean", "std"]
    elif form == "samples":
        cols = sorted(cols, key=lambda c: int(_SAMPLE.fullmatch(c).group(1)))
    values = read([y_col, *cols])
    _finite(path, [y_col, *cols], values)
    y, rest = values[:, 0], values[:, 1:]
    if form == "gaussian":
        arrays = (rest[:, 0], rest[:, 1])
    elif form == "quantiles":
        arrays = (rest, np.array([_level(c) for c in cols]))
    else:
        arrays = (rest,)
    return _check(path, path.stem, form, y, arrays, columns=cols)


def _finite(path: Path, names: list[str], values: np.ndarray) -> None:
    bad = ~np.isfinite(values)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise InputError(
            f"{path}: column {names[j]!r} must be finite; got {values[i, j]} in data row {i + 1}."
        )


def load_regression_csv(path: Path, labels_col: str | None) -> RegressionModel:
    """A regression model from a ``.csv`` file (columns as in the module's table)."""
    try:
        header = read_header(path)
    except CsvError as err:
        raise InputError(f"{path}: {err}.") from err

    def read(cols):
        try:
            return read_columns(path, header, [header.index(c) for c in cols])
        except CsvError as err:
            raise InputError(f"{path}: {err}.") from err

    return _from_table(path, header, labels_col, read)


def load_regression_parquet(path: Path, labels_col: str | None) -> RegressionModel:
    """A regression model from a Parquet file or folder, read into memory (pyarrow)."""
    names = parquet_names(path)
    if names is None:
        raise InputError(f'{path}: Parquet input needs pyarrow: pip install "jaxcal[parquet]".')
    import pyarrow.dataset as ds

    def read(cols):
        try:
            table = ds.dataset(str(path), format="parquet").to_table(columns=cols)
            values = np.stack(
                [table.column(c).to_numpy(zero_copy_only=False) for c in cols], axis=1
            ).astype(np.float64)
        except (ValueError, TypeError) as err:
            raise InputError(f"{path}: the columns {cols} must be numeric ({err}).") from err
        if values.shape[0] == 0:
            raise InputError(f"{path}: no rows.")
        return values

    return _from_table(path, names, labels_col, read)


def load_regression_npz(path: Path, labels_key: str | None) -> RegressionModel:
    """A regression model from an ``.npz`` file (arrays as in the module's table)."""
    try:
        names = member_names(path)
        targets = [labels_key] if labels_key else [k for k in NPZ_TARGETS if k in names]
        if not targets or targets[0] not in names:
            raise InputError(
                f"{path}: no targets: missing key {labels_key or 'y'!r} (found "
                f"{sorted(names)}); save with np.savez(path, y=..., mean=..., std=...)."
            )
        markers = _npz_markers(names - {targets[0]})
        form = _form(path, markers, lambda f: [k for k in NPZ_KEYS[f] if k not in names])
        arrays = read_members(path, [targets[0], *NPZ_KEYS[form]])
    except InputError:
        raise
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, struct.error) as err:
        raise InputError(f"{path}: cannot read as .npz ({err}).") from err
    keys = [targets[0], *NPZ_KEYS[form]]
    for key in keys:
        a = arrays[key]
        if a.dtype == object or not np.issubdtype(a.dtype, np.number):
            raise InputError(f"{path}: `{key}` must be numeric; got dtype {a.dtype}.")
        if not np.all(np.isfinite(a)):
            bad = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
            raise InputError(f"{path}: `{key}` must be finite; got {a[bad]} at index {bad}.")
    y = np.asarray(arrays[keys[0]], np.float64)
    rest = tuple(np.asarray(arrays[k], np.float64) for k in keys[1:])
    return _check(path, path.stem, form, y, rest, columns=None)


def _check(path: Path, name: str, form: str, y, arrays, columns) -> RegressionModel:
    """Shapes and values of one form; float32 host arrays."""
    if y.ndim != 1 or y.shape[0] < 1:
        raise InputError(f"{path}: the targets must have shape (N,) with N >= 1; got {y.shape}.")
    n = y.shape[0]
    if form == "gaussian":
        for key, a in zip(("mean", "std"), arrays, strict=True):
            if a.shape != (n,):
                raise InputError(f"{path}: `{key}` must have shape ({n},) like y; got {a.shape}.")
        std = arrays[1]
        if not (std > 0).all():
            i = int(np.argmax(~(std > 0)))
            raise InputError(
                f"{path}: `std` must be > 0 (a standard deviation); got {std[i]} in row {i + 1}."
            )
    else:
        key = "quantiles" if form == "quantiles" else "samples"
        values = arrays[0]
        if values.ndim != 2 or values.shape[0] != n or values.shape[1] < 1:
            raise InputError(
                f"{path}: `{key}` must have shape ({n}, {'Q' if form == 'quantiles' else 'S'}) "
                f"with one row per target; got {values.shape}."
            )
    if form == "quantiles":
        levels = arrays[1]
        shown = columns if columns is not None else levels.tolist()
        if levels.shape != (arrays[0].shape[1],):
            raise InputError(
                f"{path}: `levels` must have shape ({arrays[0].shape[1]},), one level per "
                f"column of `quantiles`; got {levels.shape}."
            )
        if not ((levels > 0) & (levels < 1)).all():
            raise InputError(f"{path}: quantile levels must lie in (0, 1); got {shown}.")
        if (np.diff(levels) <= 0).any():
            raise InputError(
                f"{path}: quantile levels must be strictly increasing (in the file's order); "
                f"got {shown}."
            )
    as32 = tuple(np.asarray(a, np.float32) for a in arrays)
    if form == "gaussian" and not (as32[1] > 0).all():
        i = int(np.argmax(~(as32[1] > 0)))
        raise InputError(
            f"{path}: `std` must be > 0 in float32; got {arrays[1][i]} in row {i + 1}."
        )
    return RegressionModel(name, str(path), form, np.asarray(y, np.float32), as32)


def load_regression(path: Path, labels: str | None) -> RegressionModel:
    """Dispatch on the extension (``.npz``, ``.csv``, Parquet file or folder)."""
    suffix = path.suffix.lower()
    if suffix == ".npz":
        return load_regression_npz(path, labels)
    if suffix == ".csv":
        return load_regression_csv(path, labels)
    if path.is_dir() or suffix in (".parquet", ".pq"):
        return load_regression_parquet(path, labels)
    raise InputError(
        f"{path}: unsupported file type {suffix!r} for regression predictions; use .npz, "
        ".csv or .parquet."
    )


__all__ = ["LABEL_COLUMNS", "RegressionModel", "load_regression", "task_of"]

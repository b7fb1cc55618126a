"""``jaxcal report FILE --by COLUMN``: calibration within the segments of a column.

The segments are the distinct values of a ``.csv`` column (any text) or of an ``.npz``
key (a 1-D array). :func:`jaxcal.stats.multicalibration_error` runs the Kuiper test within
each (the positive class, or the top-label confidence for multiclass) from one sort; the
table lists the segments by Holm-adjusted p-value, smallest first, and ends with the
family-wise result. JSON: each model gains ``"segments"``::

  {"by": str, "n_segments": int, "mce_sigma": float, "family_p_value": float,
   "log10_family_p_value": float or null,
   "rows": [{"value": str, "n": int, "statistic": float or null, "ecce": float,
             "p_value": float, "log10_p_value": float or null, "p_holm": float,
             "p_bonferroni": float}]}   (rows sorted by p_holm, then p_value)
"""

from __future__ import annotations

import math
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from jaxcal import stats
from jaxcal.cli._csv import CsvError, read_header, read_text_column
from jaxcal.cli._io import InputError, Model

_LOG10_E = 1 / math.log(10)


def read_column(path: Path, column: str, n: int) -> np.ndarray:
    """The ``(N,)`` segment values of ``column`` in the ``.csv`` or ``.npz`` at ``path``."""
    suffix = path.suffix.lower()
    if suffix == ".csv":
        try:
            header = read_header(path)
        except CsvError as err:
            raise InputError(f"{path}: {err}.") from err
        if column not in header:
            raise InputError(f"{path}: no column {column!r} for --by; columns: {header}.")
        values = read_text_column(path, header, header.index(column))
    elif suffix == ".npz":
        with np.load(path, allow_pickle=False) as data:
            if column not in data.files:
                raise InputError(f"{path}: no key {column!r} for --by; keys: {data.files}.")
            values = np.asarray(data[column])
    else:
        raise InputError(f"{path}: --by needs a .csv column or an .npz key; got {suffix}.")
    if values.shape != (n,):
        raise InputError(f"{path}: --by {column!r} must have shape ({n},); got {values.shape}.")
    return values


def _log10_of(p: float) -> float:
    return math.log10(p) if p > 0 else -math.inf


def _log10(x: float) -> float | None:
    return x * _LOG10_E if math.isfinite(x) else None


def compute_segments(model: Model, values: np.ndarray, by: str) -> dict:
    """Per-segment Kuiper tests of ``model`` with Holm control, as host numbers."""
    names, ids = np.unique(values, return_inverse=True)
    r = stats.multicalibration_error(
        jnp.asarray(model.probs),
        jnp.asarray(model.labels.astype(np.int32)),
        jnp.asarray(ids.astype(np.int32)),
        n_groups=len(names),
    )
    host = {k: np.asarray(v, np.float64) for k, v in r._asdict().items()}
    order = np.lexsort((host["p_value"], host["p_holm"]))
    rows = [
        {
            "value": str(names[g]),
            "n": int(np.rint(host["weight"][g])),
            "statistic": float(host["statistic"][g]),
            "ecce": float(host["ecce"][g]),
            "p_value": float(host["p_value"][g]),
            "log10_p_value": _log10(float(host["log_p_value"][g])),
            "p_holm": float(host["p_holm"][g]),
            "p_bonferroni": float(host["p_bonferroni"][g]),
        }
        for g in order
    ]
    return {
        "by": by,
        "n_segments": len(names),
        "mce_sigma": float(host["mce_sigma"]),
        "family_p_value": float(host["family_p_value"]),
        "log10_family_p_value": _log10(float(host["log_family_p_value"])),
        "rows": rows,
    }


def print_segments(models: list[Model], results: list[dict], out, format_p, table) -> None:
    """One table per model: segments by Holm-adjusted p-value, then the family result."""
    for model, result in zip(models, results, strict=True):
        seg = result.get("segments")
        if seg is None:
            continue
        print(
            f"\nCalibration within segments of {seg['by']!r} ({model.name}, "
            f"{seg['n_segments']} segments; Kuiper test of the cumulative differences)",
            file=out,
        )
        rows = [["segment", "n", "H (sigmas)", "ECCE", "p-value", "Holm p"]]
        for row in seg["rows"]:
            stat = row["statistic"]
            rows.append(
                [
                    row["value"],
                    str(row["n"]),
                    "inf" if not math.isfinite(stat) else f"{stat:.2f}",
                    f"{row['ecce']:.4f}",
                    format_p(row["p_value"], row["log10_p_value"] or -math.inf),
                    format_p(row["p_holm"], _log10_of(row["p_holm"])),
                ]
            )
        table(rows, out, indent="  ")
        log10_family = seg["log10_family_p_value"]
        print(
            f"  max H (MCGrad's mce_sigma) = {seg['mce_sigma']:.2f}; family-wise p-value "
            f"(Holm) = {format_p(seg['family_p_value'], log10_family or -math.inf)}",
            file=out,
        )

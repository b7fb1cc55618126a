"""``jaxcal report FILE --by COLUMN``: calibration within the segments of a column.

The segments are the distinct values of a ``.csv`` column (any text, taken as written:
``' 1'`` and ``'1'`` are two segments) or of an ``.npz`` key (a 1-D array). A column of
non-integer numbers with more than ``MAX_LEVELS`` distinct values (a score, an income) is
continuous: it is cut into ``QUANTILE_BINS`` equal-count bins (ties kept together), named
by their intervals, rather than split into one segment per value (a continuous key made
4,000 one-row segments and a family-wise p of 6e-126). Integer or text columns are
categories, however many.

:func:`jaxcal.stats.multicalibration_error` runs the Kuiper test within each (the positive
class, or the top-label confidence for multiclass) from one sort, with its default
validity conditions: a segment of fewer than 10 rows, or too skewed for the Brownian tail
(rare events), is *excluded*: listed as such, counted in no adjustment. The table lists
the tested segments by Holm-adjusted p-value, smallest first, then the excluded ones, at
most ``--max-segments`` rows (the JSON has every segment), and ends with the family-wise
result. JSON: each model gains ``"segments"``::

  {"by": str, "binned": null or {"bins": int, "distinct_values": int},
   "n_segments": int, "n_tested": int, "min_segment_size": int, "max_skewness": float,
   "mce_sigma": float, "family_p_value": float, "log10_family_p_value": float or null,
   "rows": [{"value": str, "n": int, "tested": bool, "skewness": float,
             "statistic": float or null, "ecce": float, "p_value": float,
             "log10_p_value": float or null, "p_holm": float,
             "log10_p_holm": float or null, "p_bonferroni": float}]}
   (tested rows by p_holm, then p_value; then the excluded rows by size, largest first)
"""

from __future__ import annotations

import math
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from jaxcal import stats
from jaxcal.cli._csv import CsvError, read_header, read_text_column
from jaxcal.cli._io import InputError, Model
from jaxcal.stats._paths.multicalibration import MAX_SKEWNESS, MIN_SEGMENT_SIZE

_LOG10_E = 1 / math.log(10)

#: A numeric column with non-integer values and more distinct values than this is cut
#: into QUANTILE_BINS equal-count bins.
MAX_LEVELS = 20
QUANTILE_BINS = 10

#: Rows of the printed table by default (``--max-segments``).
MAX_SEGMENTS = 20


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


def _as_numbers(values: np.ndarray) -> np.ndarray | None:
    """``values`` as float64 when every one is a number (CSV text parsed), else None."""
    if values.dtype.kind in "biuf":
        return values.astype(np.float64)
    if values.dtype.kind not in "US":
        return None
    try:
        return np.array([float(v) for v in values], np.float64)
    except ValueError:
        return None


def _quantile_bins(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Names and ids of QUANTILE_BINS equal-count bins of ``x`` (right-closed, ties
    together: a bin is (edge_b, edge_{b+1}], the first [min, edge_1])."""
    inner = np.unique(np.quantile(x, np.arange(1, QUANTILE_BINS) / QUANTILE_BINS))
    ids = np.searchsorted(inner, x, side="left")
    edges = [float(np.min(x)), *inner.tolist(), float(np.max(x))]
    names = [
        f"{'[' if b == 0 else '('}{edges[b]:.4g}, {edges[b + 1]:.4g}]"
        for b in range(len(edges) - 1)
    ]
    used = np.unique(ids)  # a bin may be empty when ties fill a whole quantile
    return np.array(names)[used], np.searchsorted(used, ids)


def segments_of(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict | None]:
    """``(names, ids, binned)``: the segment of each row, and how a continuous column was
    binned (None for a column of categories)."""
    numbers = _as_numbers(values)
    if numbers is not None and np.all(np.isfinite(numbers)):
        distinct = np.unique(numbers).size
        if distinct > MAX_LEVELS and np.any(numbers != np.round(numbers)):
            names, ids = _quantile_bins(numbers)
            return names, ids, {"bins": len(names), "distinct_values": int(distinct)}
    names, ids = np.unique(values, return_inverse=True)
    return np.array([str(v) for v in names]), ids, None


def _log10(x: float) -> float | None:
    return x * _LOG10_E if math.isfinite(x) else None


def _log_holm(log_p: np.ndarray, tested: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values in logs over the tested segments, float64 on the host (the
    device's float32 ``p_holm`` underflows to 0 where ``log p`` is -300)."""
    out = np.zeros_like(log_p)
    idx = np.flatnonzero(tested)
    order = idx[np.argsort(log_p[idx], kind="stable")]
    g = idx.size
    adjusted = np.maximum.accumulate(log_p[order] + np.log(g - np.arange(g)))
    out[order] = np.minimum(adjusted, 0)
    return out


def compute_segments(model: Model, values: np.ndarray, by: str) -> dict:
    """Per-segment Kuiper tests of ``model`` with Holm control, as host numbers."""
    names, ids, binned = segments_of(values)
    r = stats.multicalibration_error(
        jnp.asarray(model.probs),
        jnp.asarray(model.labels.astype(np.int32)),
        jnp.asarray(ids.astype(np.int32)),
        n_groups=len(names),
    )
    host = {k: np.asarray(v, np.float64) for k, v in r._asdict().items()}
    tested = np.asarray(r.tested)
    log_holm = _log_holm(host["log_p_value"], tested)
    first = np.lexsort((host["p_value"], log_holm, ~tested))[: int(tested.sum())]
    rest = np.flatnonzero(~tested)
    rest = rest[np.argsort(-host["size"][rest], kind="stable")]
    rows = [
        {
            "value": str(names[g]),
            "n": int(host["size"][g]),
            "tested": bool(tested[g]),
            "skewness": float(host["skewness"][g]),
            "statistic": float(host["statistic"][g]),
            "ecce": float(host["ecce"][g]),
            "p_value": float(host["p_value"][g]),
            "log10_p_value": _log10(float(host["log_p_value"][g])),
            "p_holm": float(host["p_holm"][g]),
            "log10_p_holm": _log10(float(log_holm[g])),
            "p_bonferroni": float(host["p_bonferroni"][g]),
        }
        for g in [*first, *rest]
    ]
    return {
        "by": by,
        "binned": binned,
        "n_segments": len(names),
        "n_tested": int(tested.sum()),
        "min_segment_size": MIN_SEGMENT_SIZE,
        "max_skewness": MAX_SKEWNESS,
        "mce_sigma": float(host["mce_sigma"]),
        "family_p_value": float(host["family_p_value"]),
        "log10_family_p_value": _log10(float(host["log_family_p_value"])),
        "rows": rows,
    }


def _shown(name: str) -> str:
    """A segment's name as printed: quoted when empty or padded with spaces."""
    return repr(name) if name == "" or name != name.strip() else name


def print_segments(
    models: list[Model], results: list[dict], out, format_p, table, max_rows: int = MAX_SEGMENTS
) -> None:
    """One table per model: tested segments by Holm-adjusted p-value, then the excluded
    ones, at most ``max_rows`` rows; then the family result."""
    for model, result in zip(models, results, strict=True):
        seg = result.get("segments")
        if seg is None:
            continue
        how = ""
        if seg["binned"]:
            how = (
                f", {seg['binned']['distinct_values']} distinct numbers cut into "
                f"{seg['binned']['bins']} equal-count bins"
            )
        print(
            f"\nCalibration within segments of {seg['by']!r} ({model.name}, "
            f"{seg['n_segments']} segments{how}; Kuiper test of the cumulative differences)",
            file=out,
        )
        rows = [["segment", "n", "H (sigmas)", "ECCE", "p-value", "Holm p"]]
        for row in seg["rows"][:max_rows]:
            stat = row["statistic"]
            tested = row["tested"]
            rows.append(
                [
                    _shown(row["value"]),
                    str(row["n"]),
                    "inf" if not math.isfinite(stat) else f"{stat:.2f}",
                    f"{row['ecce']:.4f}",
                    format_p(row["p_value"], row["log10_p_value"] or -math.inf)
                    if tested
                    else "excluded",
                    format_p(row["p_holm"], row["log10_p_holm"] or -math.inf) if tested else "-",
                ]
            )
        table(rows, out, indent="  ")
        hidden = len(seg["rows"]) - max_rows
        if hidden > 0:
            print(
                f"  ... {hidden} more segments not shown (--max-segments {max_rows}; the JSON "
                "has every one)",
                file=out,
            )
        excluded = seg["n_segments"] - seg["n_tested"]
        if excluded:
            print(
                f"  {excluded} segment{'s' if excluded > 1 else ''} excluded, not tested: "
                f"fewer than {seg['min_segment_size']} rows, or events too rare for the\n"
                f"  Brownian tail (skewness above {seg['max_skewness']}; see "
                "jaxcal.stats.multicalibration_error)",
                file=out,
            )
        log10_family = seg["log10_family_p_value"]
        print(
            f"  max H over the {seg['n_tested']} tested segments (MCGrad's mce_sigma) = "
            f"{seg['mce_sigma']:.2f}; family-wise p-value (Holm) = "
            f"{format_p(seg['family_p_value'], log10_family or -math.inf)}",
            file=out,
        )

"""Reading the numeric columns of a ``.csv`` file: NumPy's C parser, errors located exactly.

The header is read with the stdlib ``csv`` module; the data columns the report needs are
parsed by :func:`numpy.loadtxt` (a C tokenizer and float parser, in chunks, so memory is
about the size of the parsed columns, not 20 times the file's as a Python parse). Files
saved by Excel as "CSV UTF-8" start with a byte-order mark, which ``utf-8-sig`` drops.

When the fast parse fails, the file is scanned again in Python to name the line and the
column of the first bad cell (``loadtxt``'s own message counts rows differently and does
not know the header). A cell must be a plain decimal number: Python's ``float`` would
read ``1_0`` as 10, so the scan uses a strict pattern, as the C parser does.
"""

from __future__ import annotations

import csv
import re
import warnings
from pathlib import Path

import numpy as np

#: A cell the C parser accepts: a decimal number, optionally signed and with an exponent,
#: or nan / inf (no underscores, no hexadecimal).
_NUMBER = re.compile(
    r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|nan|inf|infinity)", re.IGNORECASE
)

ENCODING = "utf-8-sig"


class CsvError(Exception):
    """A malformed ``.csv`` file (the caller adds the path)."""


def read_header(path: Path) -> list[str]:
    """The header row's names (stripped), BOM removed; :class:`CsvError` if none."""
    try:
        with open(path, newline="", encoding=ENCODING) as f:
            for row in csv.reader(f):
                if row and any(c.strip() for c in row):
                    return [h.strip() for h in row]
    except (OSError, UnicodeDecodeError, csv.Error) as err:
        raise CsvError(f"cannot read as .csv ({err})") from err
    raise CsvError("a .csv file needs a header row and at least one data row")


def _locate(path: Path, header: list[str], columns: list[int]) -> CsvError:
    """The first bad cell or ragged line, scanned in Python (only after a failed parse)."""
    with open(path, newline="", encoding=ENCODING) as f:
        reader = csv.reader(f)
        seen_header = False
        for row in reader:
            if not row or not any(c.strip() for c in row):
                continue
            if not seen_header:
                seen_header = True
                continue
            line = reader.line_num
            if len(row) != len(header):
                return CsvError(f"line {line} has {len(row)} fields; the header has {len(header)}")
            for c in columns:
                cell = row[c].strip()
                if not _NUMBER.fullmatch(cell):
                    return CsvError(
                        f"non-numeric value {cell!r} in column {header[c]!r}, line {line}"
                    )
    return CsvError("cannot parse the numeric columns")


def read_columns(path: Path, header: list[str], columns: list[int]) -> np.ndarray:
    """The ``(N, len(columns))`` float64 values of the given columns (in that order)."""
    try:
        with open(path, encoding=ENCODING) as f, warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "input contained no data": below
            values = np.loadtxt(
                f,
                delimiter=",",
                quotechar='"',
                skiprows=1,
                usecols=columns,
                dtype=np.float64,
                ndmin=2,
            )
    except (ValueError, UnicodeDecodeError) as err:
        raise _locate(path, header, columns) from err
    except OSError as err:
        raise CsvError(f"cannot read as .csv ({err})") from err
    if values.shape[0] == 0:
        raise CsvError("a .csv file needs a header row and at least one data row")
    return values


def read_text_column(path: Path, header: list[str], column: int) -> np.ndarray:
    """One column's cells as strings (the ``--by`` segments), blank lines skipped."""
    with open(path, newline="", encoding=ENCODING) as f:
        rows = [row for row in csv.reader(f) if row and any(c.strip() for c in row)]
    return np.array([row[column].strip() if column < len(row) else "" for row in rows[1:]])

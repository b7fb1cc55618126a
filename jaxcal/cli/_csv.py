"""Reading the numeric columns of a ``.csv`` file: NumPy's C parser, errors located exactly.

The header is read with the stdlib ``csv`` module; the data columns the report needs are
parsed by :func:`numpy.loadtxt` (a C tokenizer and float parser, in chunks, so memory is
about the size of the parsed columns, not 20 times the file's as a Python parse). Files
saved by Excel as "CSV UTF-8" start with a byte-order mark, which ``utf-8-sig`` drops.

When the fast parse fails, the file is scanned again in Python to name the line and the
column of the first bad cell (``loadtxt``'s own message counts rows differently and does
not know the header). A cell must be a plain decimal number: Python's ``float`` would
read ``1_0`` as 10, so the scan uses a strict pattern, as the C parser does.

``loadtxt(usecols=...)`` reads only the columns it is given, so a row with more fields
than the header, or one missing a column the report does not read, would pass unseen:
after a successful parse the commas of every line are counted (NumPy, in blocks of
``_BLOCK`` bytes; files with quoted fields are counted by the ``csv`` module instead), and
a line with another count than the header's (blank lines aside) is refused.
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

#: Bytes per block of the field count (memory: about the block and its comma positions).
_BLOCK = 1 << 22


class CsvError(Exception):
    """A malformed ``.csv`` file (the caller adds the path)."""


def read_header(path: Path) -> list[str]:
    """The header row's names (stripped), BOM removed; ``CsvError`` if none."""
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
        data_row = -1  # the header is row 0
        for row in reader:
            if not row or not any(c.strip() for c in row):
                continue
            data_row += 1
            if not data_row:
                continue
            line = reader.line_num
            if len(row) != len(header):
                return CsvError(
                    f"line {line} has {len(row)} fields; the header has {len(header)} "
                    f"(data row {data_row})"
                )
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
    if _ragged(path, len(header)):
        raise _locate(path, header, columns)
    return values


def _ragged(path: Path, n_fields: int) -> bool:
    """Whether a non-blank line has other than ``n_fields`` fields (the header has them)."""
    with open(path, "rb") as f:
        tail = b""
        while block := f.read(_BLOCK):
            data = tail + block
            if b'"' in data:  # quoted fields may hold commas: let the csv module count
                return _locate_ragged(path, n_fields)
            cut = data.rfind(b"\n") + 1
            lines, tail = data[:cut], data[cut:]
            buf = np.frombuffer(lines, np.uint8)
            ends = np.flatnonzero(buf == ord("\n"))
            commas = np.flatnonzero(buf == ord(","))
            counts = np.bincount(np.searchsorted(ends, commas), minlength=ends.size)
            starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
            for i in np.flatnonzero(counts != n_fields - 1).tolist():
                if lines[starts[i] : ends[i]].strip():  # blank lines are skipped
                    return True
    return bool(tail.strip()) and tail.count(b",") != n_fields - 1


def _locate_ragged(path: Path, n_fields: int) -> bool:
    with open(path, newline="", encoding=ENCODING) as f:
        rows = (row for row in csv.reader(f) if row and any(c.strip() for c in row))
        next(rows, None)
        return any(len(row) != n_fields for row in rows)


def read_text_column(path: Path, header: list[str], column: int) -> np.ndarray:
    """One column's cells as strings (the ``--by`` segments), blank lines skipped.

    Cells are taken as written (not stripped): ``' 1'`` and ``'1'`` are different values.
    """
    with open(path, newline="", encoding=ENCODING) as f:
        rows = [row for row in csv.reader(f) if row and any(c.strip() for c in row)]
    return np.array([row[column] if column < len(row) else "" for row in rows[1:]])

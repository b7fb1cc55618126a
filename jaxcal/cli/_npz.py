"""Arrays of an ``.npz`` file, memory-mapped where the archive stores them uncompressed.

``np.load(path.npz)`` ignores ``mmap_mode`` and reads every member it is asked for into
memory, through a zip stream. ``np.savez`` stores its members uncompressed, so each is an
``.npy`` file at a known offset inside the archive: ``read_member()`` maps it read-only
(:class:`numpy.memmap`), and the pages are read when used (and can be dropped again by
the system), so loading costs no copy. Compressed members (``np.savez_compressed``) and
Fortran-ordered arrays fall back to ``np.load``'s copy. Pickled (object) arrays are refused
either way.
"""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format

#: Size of a zip local file header before its name and extra field.
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
_LOCAL_SIGNATURE = b"PK\x03\x04"


def _mapped(path: Path, info: zipfile.ZipInfo) -> np.ndarray | None:
    """The member as a read-only memmap, or None where it cannot be mapped."""
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        fields = _LOCAL_HEADER.unpack(f.read(_LOCAL_HEADER.size))
        if fields[0] != _LOCAL_SIGNATURE:
            return None
        name_length, extra_length = fields[-2:]
        f.seek(info.header_offset + _LOCAL_HEADER.size + name_length + extra_length)
        version = npy_format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = npy_format.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = npy_format.read_array_header_2_0(f)
        else:
            return None
        if dtype.hasobject:
            raise ValueError("Object arrays cannot be loaded when allow_pickle=False")
        offset = f.tell()
    count = int(np.prod(shape, dtype=np.int64))
    if (
        fortran
        or count == 0
        or offset + count * dtype.itemsize
        > info.header_offset + (_LOCAL_HEADER.size + name_length + extra_length + info.file_size)
    ):
        return None  # Fortran order, empty, or a truncated member: let np.load decide
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)


def member_names(path: Path) -> set[str]:
    """The array names in the archive (its ``NAME.npy`` members)."""
    with zipfile.ZipFile(path) as archive:
        return {n.removesuffix(".npy") for n in archive.namelist()}


def read_members(path: Path, keys: list[str]) -> dict[str, np.ndarray]:
    """``{key: array}`` of the archive's members ``keys`` (which must exist)."""
    out = {}
    with zipfile.ZipFile(path) as archive:
        infos = {info.filename: info for info in archive.infolist()}
        for key in keys:
            info = infos.get(f"{key}.npy")
            out[key] = None if info is None else _mapped(path, info)
    missing = [k for k, v in out.items() if v is None]
    if missing:  # opened here: np.load leaks its handle when the archive is corrupt
        with open(path, "rb") as f, np.load(f, allow_pickle=False) as data:
            out.update({k: np.asarray(data[k]) for k in missing})
    return out

"""Zip archives written byte by byte, for the tests of the inspect log guard: members compressed by any method
(Python 3.11's ``zipfile`` writes no Zstandard) and declaring any inflated size, true or not.

The layout is the zip specification's (APPNOTE 4.3): a local header and the data of each member, the central
directory, the end record. CRCs are left 0: the guard never checks them (inspect would, after the guard).
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pyarrow as pa

STORED, DEFLATED, ZSTANDARD = 0, 8, 93


def zeros_zstd(n_frames: int, frame_bytes: int = 16 << 20) -> bytes:
    """A Zstandard stream of ``n_frames`` frames, each ``frame_bytes`` zero bytes inflated (a few hundred bytes
    compressed: 2 GiB of zeros is about 70 KB)."""
    return pa.Codec("zstd").compress(b"\0" * frame_bytes, asbytes=True) * n_frames


def deflate(data: bytes) -> bytes:
    """``data`` as raw Deflate (zip's method 8)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush()


def write_zip(path: Path, members: list[tuple[str, bytes, int, int]], *, flags: int = 0) -> Path:
    """Write a zip of ``members``: ``(name, data as stored, method, declared inflated size)``."""
    body, directory = b"", b""
    for name, data, method, declared in members:
        raw = name.encode()
        offset = len(body)
        fields = (20, flags, method, 0, 0x21, 0, len(data), declared, len(raw))
        body += struct.pack("<IHHHHHIIIHH", 0x04034B50, *fields, 0) + raw + data
        directory += struct.pack("<IH", 0x02014B50, 20) + struct.pack(
            "<HHHHHIIIHHHHHII", *fields, 0, 0, 0, 0, 0, offset
        )
        directory += raw
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(directory), len(body), 0)
    path.write_bytes(body + directory + end)
    return path

"""Describing generated files, and generators for formats that need a few steps."""

from __future__ import annotations

import io
import json
import struct
import zipfile
import zlib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.backends.backend_pdf import PdfPages

from backend.files import FileMetadata
from backend.files.metadata import extract_file_metadata


def describe(path: Path, name: str | None = None) -> FileMetadata:
    """`extract_file_metadata` on a real file; the result must be plain JSON."""
    with path.open("rb") as handle:
        metadata = extract_file_metadata(name or path.name, handle, path.stat().st_size)
    json.dumps(metadata.to_dict(), allow_nan=False)
    return metadata


def write_pdf(path: Path, pages: list[str]) -> None:
    with matplotlib.rc_context({"pdf.fonttype": 42}), PdfPages(path) as pdf:
        for text in pages:
            figure = plt.figure(figsize=(4, 3))
            figure.text(0.1, 0.5, text)
            pdf.savefig(figure)
            plt.close(figure)


def zip_bomb_bytes(member: str, megabytes: int = 50) -> bytes:
    """A zip whose one member is `megabytes` of zeros (about 1000:1)."""
    buffer = io.BytesIO()
    with (
        zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open(member, "w", force_zip64=True) as target,
    ):
        for _ in range(megabytes):
            target.write(bytes(1024 * 1024))
    return buffer.getvalue()


def png_claiming(width: int, height: int) -> bytes:
    """A PNG whose header claims `width` by `height` pixels (with a valid CRC)."""
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    chunk = b"IHDR" + header
    ihdr = struct.pack(">I", len(header)) + chunk + struct.pack(">I", zlib.crc32(chunk))
    end = struct.pack(">I", 0) + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND"))
    return b"\x89PNG\r\n\x1a\n" + ihdr + end


def zip_bytes(entries: dict[str, bytes]) -> bytes:
    """A deflated zip holding `entries` (name -> content)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in entries.items():
            archive.writestr(name, data)
    return buffer.getvalue()

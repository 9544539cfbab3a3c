"""A tiny legacy .xls (BIFF8 in an OLE2 compound file) writer for the tests.

No library that writes .xls is installed, so this writes the minimum xlrd and
pandas read: one XF, a shared string table, BOUNDSHEETs, NUMBER and LABELSST
cells, in a compound file with one FAT sector (streams up to ~60 KB).
"""

from __future__ import annotations

import struct
from pathlib import Path

_END_OF_CHAIN = 0xFFFFFFFE
_FREE = 0xFFFFFFFF
_FAT_SECTOR = 0xFFFFFFFD
_NO_STREAM = 0xFFFFFFFF
_SECTOR = 512

Cell = str | float | int


def _record(kind: int, data: bytes = b"") -> bytes:
    return struct.pack("<HH", kind, len(data)) + data


def _bof(kind: int) -> bytes:
    return _record(0x0809, struct.pack("<HHHHII", 0x0600, kind, 0x0DBB, 0x07CC, 0, 6))


def _short_text(text: str) -> bytes:
    return struct.pack("<BB", len(text), 0) + text.encode("latin-1")


def _sheet_stream(rows: list[list[Cell]], strings: dict[str, int]) -> bytes:
    width = max((len(row) for row in rows), default=0)
    body = [_bof(0x0010), _record(0x0200, struct.pack("<IIHHH", 0, len(rows), 0, width, 0))]
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            if isinstance(value, str):
                index = strings.setdefault(value, len(strings))
                body.append(_record(0x00FD, struct.pack("<HHHI", r, c, 0, index)))
            else:
                body.append(_record(0x0203, struct.pack("<HHHd", r, c, 0, float(value))))
    body.append(_record(0x000A))
    return b"".join(body)


def _workbook_stream(sheets: dict[str, list[list[Cell]]]) -> bytes:
    strings: dict[str, int] = {}
    streams = [_sheet_stream(rows, strings) for rows in sheets.values()]
    xf = _record(0x00E0, struct.pack("<HHHBBBBIiH", 0, 0, 0xFFF5, 0x20, 0, 0, 0, 0, 0, 0x20C0))
    sst = struct.pack("<II", len(strings), len(strings)) + b"".join(
        struct.pack("<HB", len(text), 0) + text.encode("latin-1") for text in strings
    )

    def globals_part(offsets: list[int]) -> bytes:
        bound = [
            _record(0x0085, struct.pack("<IBB", offset, 0, 0) + _short_text(name))
            for offset, name in zip(offsets, sheets, strict=True)
        ]
        return b"".join([_bof(0x0005), xf, *bound, _record(0x00FC, sst), _record(0x000A)])

    start = len(globals_part([0] * len(sheets)))
    offsets = []
    for stream in streams:
        offsets.append(start)
        start += len(stream)
    return globals_part(offsets) + b"".join(streams)


def _directory_entry(name: str, kind: int, child: int, start: int, size: int) -> bytes:
    encoded = (name + "\x00").encode("utf-16-le") if name else b""
    return (
        encoded.ljust(64, b"\x00")
        + struct.pack("<HBB", len(encoded), kind, 1 if kind else 0)
        + struct.pack("<III", _NO_STREAM, _NO_STREAM, child)
        + bytes(16)
        + struct.pack("<IQQIQ", 0, 0, 0, start, size)
    )


def write_xls(path: Path, sheets: dict[str, list[list[Cell]]]) -> None:
    stream = _workbook_stream(sheets).ljust(4096, b"\x00")  # at least a "big" stream
    stream = stream.ljust(-(-len(stream) // _SECTOR) * _SECTOR, b"\x00")
    stream_sectors = len(stream) // _SECTOR
    directory_sector, fat_sector = stream_sectors, stream_sectors + 1
    if fat_sector >= _SECTOR // 4:
        raise ValueError("too much data for this tiny writer")
    fat = [*range(1, stream_sectors), _END_OF_CHAIN, _END_OF_CHAIN, _FAT_SECTOR]
    fat += [_FREE] * (_SECTOR // 4 - len(fat))
    directory = (
        _directory_entry("Root Entry", 5, 1, _END_OF_CHAIN, 0)
        + _directory_entry("Workbook", 2, _NO_STREAM, 0, len(stream))
        + _directory_entry("", 0, _NO_STREAM, 0, 0) * 2
    )
    header = (
        bytes.fromhex("D0CF11E0A1B11AE1")
        + bytes(16)
        + struct.pack("<HHHHH", 0x3E, 3, 0xFFFE, 9, 6)
        + bytes(6)
        + struct.pack(
            "<IIIIIIIII", 0, 1, directory_sector, 0, 4096, _END_OF_CHAIN, 0, _END_OF_CHAIN, 0
        )
        + struct.pack("<I", fat_sector)
        + struct.pack("<I", _FREE) * 108
    )
    path.write_bytes(header + stream + directory + struct.pack(f"<{_SECTOR // 4}I", *fat))

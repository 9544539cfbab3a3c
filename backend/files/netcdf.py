"""Classic netCDF (CDF-1, CDF-2, CDF-5) headers, parsed without touching the data.

scipy's reader loads every variable when it cannot memory-map, and mapping a
file that sandboxed code may truncate could crash the server, so the header
(dimensions, variables, global text attributes) is decoded here from its first
`MAX_HEADER_BYTES`. netCDF-4 files are HDF5 and go through h5py instead.
"""

from __future__ import annotations

import struct
from typing import Any

MAX_HEADER_BYTES = 1024 * 1024
MAX_VARIABLES = 50
_DIMENSION, _VARIABLE, _ATTRIBUTE = 10, 11, 12
_TYPES = {
    1: ("int8", 1),
    2: ("char", 1),
    3: ("int16", 2),
    4: ("int32", 4),
    5: ("float32", 4),
    6: ("float64", 8),
    7: ("uint8", 1),
    8: ("uint16", 2),
    9: ("uint32", 4),
    10: ("int64", 8),
    11: ("uint64", 8),
}


class _Header:
    def __init__(self, data: bytes) -> None:
        if data[:3] != b"CDF" or data[3] not in (1, 2, 5):
            raise ValueError("not a classic netCDF file")
        self.data = data
        self.version = data[3]
        self.position = 4

    def unpack(self, fmt: str) -> int:
        value: int = struct.unpack_from(fmt, self.data, self.position)[0]
        self.position += struct.calcsize(fmt)
        return value

    def int32(self) -> int:
        return self.unpack(">i")

    def count(self) -> int:
        """NON_NEG: 8 bytes in CDF-5, 4 before."""
        return self.unpack(">q" if self.version == 5 else ">i")

    def raw(self, length: int) -> bytes:
        if length < 0 or self.position + length > len(self.data):
            raise ValueError(f"the netCDF header is larger than {MAX_HEADER_BYTES:,} bytes")
        value = self.data[self.position : self.position + length]
        self.position += -(-length // 4) * 4  # padded to 4 bytes
        return value

    def name(self) -> str:
        return self.raw(self.count()).decode("utf-8", errors="replace")

    def list_length(self, tag: int) -> int:
        found, length = self.int32(), self.count()
        if found not in (0, tag):
            raise ValueError("the netCDF header is damaged")
        return length

    def attributes(self) -> dict[str, str]:
        """Text attributes (cut short); others are skipped."""
        texts: dict[str, str] = {}
        for _ in range(self.list_length(_ATTRIBUTE)):
            name = self.name()
            kind = self.int32()
            value = self.raw(self.count() * _TYPES.get(kind, ("?", 1))[1])
            if kind == 2 and len(texts) < 10:
                texts[name] = value.decode("utf-8", errors="replace").rstrip("\x00")[:120]
        return texts


def read_header(data: bytes) -> dict[str, Any]:
    """Dimensions, variables and global attributes of a classic netCDF header."""
    header = _Header(data[:MAX_HEADER_BYTES])
    records = header.unpack(">q" if header.version == 5 else ">i")
    dimensions: list[tuple[str, int]] = []
    for _ in range(header.list_length(_DIMENSION)):
        name = header.name()
        length = header.count()
        dimensions.append((name, length or records))
    global_attributes = header.attributes()
    variables: list[dict[str, Any]] = []
    total = header.list_length(_VARIABLE)
    for _ in range(min(total, MAX_VARIABLES)):
        name = header.name()
        ids = [header.count() for _ in range(header.count())]
        attributes = header.attributes()
        dtype = _TYPES.get(header.int32(), ("unknown", 1))[0]
        header.count()  # vsize
        header.raw(4 if header.version == 1 else 8)  # begin
        variable: dict[str, Any] = {
            "name": name,
            "dimensions": [dimensions[i][0] for i in ids],
            "shape": [dimensions[i][1] for i in ids],
            "dtype": dtype,
        }
        if "units" in attributes:
            variable["units"] = attributes["units"]
        variables.append(variable)
    return {
        "format": f"classic netCDF (CDF-{header.version})",
        "dimensions": dict(dimensions),
        "variables": variables,
        "variable_count": total,
        "attributes": global_attributes,
    }

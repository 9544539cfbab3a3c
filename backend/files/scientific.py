"""HDF5, netCDF and raw binary files: what they hold, not what they contain.

h5py walks the object tree (hard links only, so external links to other files
are never opened) and reports each dataset's shape and dtype without reading
it. Classic netCDF headers are decoded by `netcdf`. A .dat that is not text is
described as raw binary.
"""

from __future__ import annotations

from typing import Any

import h5py  # type: ignore[import-untyped]

from backend.files.model import FileMetadata, Source, human_size
from backend.files.netcdf import MAX_HEADER_BYTES, read_header

MAX_DATASETS = 50
MAX_OBJECTS = 10_000
HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def _hdf5_tree(handle: Any) -> dict[str, Any]:
    datasets: list[dict[str, Any]] = []
    seen = 0

    def visit(name: str, item: Any) -> bool | None:
        nonlocal seen
        seen += 1
        if isinstance(item, h5py.Dataset):
            datasets.append({"name": name, "shape": list(item.shape), "dtype": str(item.dtype)})
        return True if len(datasets) >= MAX_DATASETS or seen >= MAX_OBJECTS else None

    with h5py.File(handle, "r") as hdf5:
        hdf5.visititems(visit)
        attributes = [str(name) for name in list(hdf5.attrs)[:20]]
    return {
        "format": "HDF5",
        "datasets": datasets,
        "truncated": len(datasets) >= MAX_DATASETS or seen >= MAX_OBJECTS,
        "attributes": attributes,
    }


def _summary(kind: str, names: list[str], more: bool) -> str:
    shown = ", ".join(names[:6]) + (", …" if more or len(names) > 6 else "")
    return f"{kind}: {shown}" if names else f"{kind}, empty"


def describe_hdf5(source: Source) -> FileMetadata:
    source.handle.seek(0)
    details = _hdf5_tree(source.handle)
    if source.extension == "nc":
        details["format"] = "netCDF-4 (HDF5)"
    names = [f"{d['name']}{tuple(d['shape'])}" for d in details["datasets"]]
    return source.describe(
        "data", _summary(f"{details['format']} datasets", names, details["truncated"]), details
    )


def describe_netcdf(source: Source) -> FileMetadata:
    head = source.read_at(0, MAX_HEADER_BYTES)
    if not head.startswith(b"CDF"):
        return describe_hdf5(source)
    details = read_header(head)
    names = [v["name"] for v in details["variables"]]
    more = details["variable_count"] > len(names)
    return source.describe("data", _summary(f"{details['format']} variables", names, more), details)


def describe_binary(source: Source) -> FileMetadata:
    head = source.read_at(0, 32)
    if head.startswith(HDF5_SIGNATURE):
        return describe_hdf5(source)
    return source.describe(
        "data",
        f"binary data, {human_size(source.size)}",
        {"first_bytes_hex": head.hex(" ")},
    )

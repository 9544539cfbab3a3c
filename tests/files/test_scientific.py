"""HDF5, netCDF (classic and netCDF-4) and raw binary files."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
from scipy.io import netcdf_file

from tests.files.helpers import describe


def test_hdf5_datasets_shapes_and_dtypes(tmp_path: Path) -> None:
    path = tmp_path / "run.h5"
    with h5py.File(path, "w") as hdf5:
        hdf5.create_dataset("temperature", data=np.zeros((10, 3), dtype="float32"))
        hdf5.create_group("meta").create_dataset("ids", data=np.arange(5))
        hdf5["elsewhere"] = h5py.ExternalLink("/etc/passwd", "/x")
        hdf5.attrs["title"] = "run 1"
    metadata = describe(path)
    assert (metadata.kind, metadata.error) == ("data", None)
    assert metadata.details["datasets"] == [
        {"name": "meta/ids", "shape": [5], "dtype": "int64"},
        {"name": "temperature", "shape": [10, 3], "dtype": "float32"},
    ]
    assert metadata.details["attributes"] == ["title"]


def test_classic_netcdf_header(tmp_path: Path) -> None:
    for version in (1, 2):
        path = tmp_path / f"climate{version}.nc"
        with netcdf_file(path, "w", version=version) as nc:
            nc.title = "demo"
            nc.createDimension("time", None)
            nc.createDimension("lat", 3)
            temp = nc.createVariable("temp", "f4", ("time", "lat"))
            temp.units = "K"
            temp[:] = np.ones((4, 3))
            nc.createVariable("lat", "f8", ("lat",))[:] = [1.0, 2.0, 3.0]
        metadata = describe(path)
        assert metadata.error is None
        details = metadata.details
        assert details["format"] == f"classic netCDF (CDF-{version})"
        assert details["dimensions"] == {"time": 4, "lat": 3}
        variables = {variable["name"]: variable for variable in details["variables"]}
        assert variables["lat"]["shape"] == [3]
        assert variables["temp"] == {
            "name": "temp",
            "dimensions": ["time", "lat"],
            "shape": [4, 3],
            "dtype": "float32",
            "units": "K",
        }
        assert details["attributes"] == {"title": "demo"}


def test_netcdf4_is_read_as_hdf5(tmp_path: Path) -> None:
    path = tmp_path / "modern.nc"
    with h5py.File(path, "w") as hdf5:
        hdf5.create_dataset("sst", data=np.zeros((2, 2)))
    metadata = describe(path)
    assert metadata.details["format"] == "netCDF-4 (HDF5)"
    assert metadata.details["datasets"][0]["name"] == "sst"


def test_damaged_scientific_files_are_errors(tmp_path: Path) -> None:
    for name, data in (("x.h5", b"\x89HDF\r\n\x1a\n" + bytes(64)), ("x.nc", b"CDF\x01" + bytes(3))):
        path = tmp_path / name
        path.write_bytes(data)
        assert describe(path).error is not None

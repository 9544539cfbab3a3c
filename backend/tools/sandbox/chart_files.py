"""The interactive charts among the files a run wrote (see `charts.py`, in the sandbox).

A chart is its spec, `outputs/chart_<run>_<n>.plotly.json` or `.vl.json` (<run>: the
sandbox's id of the run), with its static image beside it, `outputs/chart_<run>_<n>.png`;
a spec without its PNG is not a chart (only the sandbox writes both).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

_SPEC = re.compile(
    r"^outputs/chart_(?P<run>[0-9A-Za-z]+)_(?P<n>[0-9]+)\.(?P<kind>plotly|vl)\.json$"
)
ChartLibrary = Literal["plotly", "vega-lite"]


@dataclass(frozen=True)
class ChartFiles:
    library: ChartLibrary
    spec_path: str
    png_path: str


def chart_files(files: list[str]) -> list[ChartFiles]:
    """The charts among `files`, in their order."""
    present = set(files)
    charts: list[ChartFiles] = []
    for path in files:
        match = _SPEC.match(path)
        if match is None:
            continue
        png = f"outputs/chart_{match['run']}_{match['n']}.png"
        if png in present:
            library: ChartLibrary = "plotly" if match["kind"] == "plotly" else "vega-lite"
            charts.append(ChartFiles(library, path, png))
    return charts

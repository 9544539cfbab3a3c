"""A sample row's cells as JSON values, for the readers (numpy scalars, timestamps, NaN).

The readers' side only (the isolated helper): it imports numpy and pandas, which the
server's own modules never need for metadata.
"""

from __future__ import annotations

import datetime
import math
from typing import Any

import numpy as np
from pandas import isna
from pandas.api.types import is_scalar

MAX_CELL_CHARS = 80


def jsonable(value: Any) -> Any:
    """A JSON-safe stand-in for one cell: missing values become None, long text is cut."""
    if is_scalar(value) and isna(value):
        return None
    if isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        text = str(value)
        return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, np.generic) and not isinstance(value, np.datetime64):
        return jsonable(value.item())
    return jsonable(str(value))

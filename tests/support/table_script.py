"""A turn whose run shows a 1,000,000-row DataFrame as a table (API and UI tests)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

ROWS = 1_000_000
CITIES = ["paris", "lyon", "nice", "lille", "Paris-Nord"]
# The cell's last expression is the table (shown, and printed as a notebook would).
TABLE_CODE = (
    "import numpy as np, pandas as pd\n"
    "rng = np.random.default_rng(7)\n"
    f"big = pd.DataFrame({{'id': np.arange({ROWS}), 'x': rng.normal(size={ROWS}).round(6),\n"
    f"    'city': rng.choice({CITIES!r}, {ROWS}), 'k': rng.integers(0, 1000, {ROWS})}})\n"
    "big\n"
)


def table_turn(tag: str) -> list[dict[str, Any]]:
    """ReAct hands the question to python_coder, whose code (four statements, so it is
    reviewed) shows the table; the answer is the turn's."""
    return [
        {"when": ["[stage: react]", tag], "content": f"Action: coder\nAction Input: {tag} table"},
        {"when": ["[stage: generate]", tag], "content": f"```python\n{TABLE_CODE}```"},
        {"when": ["[stage: review]", tag], "content": '{"answers_question": true}'},
        {"when": ["[stage: answer]", tag], "content": "Here is the table of cities."},
    ]


# DataFrames the run only saves: a table each, folded unless the answer names it.
VARIABLES_CODE = (
    "import pandas as pd\n"
    "sales = pd.DataFrame({'region': ['north', 'south'], 'price': [10, 30]})\n"
    "costs = pd.DataFrame({'cost': [1, 2, 3]})\n"
    "print('total:', sales['price'].sum())\n"
)


def variables_turn(tag: str) -> list[dict[str, Any]]:
    """python_coder saves two DataFrames; the answer names one of them."""
    return [
        {"when": ["[stage: react]", tag], "content": f"Action: coder\nAction Input: {tag} sum"},
        {"when": ["[stage: generate]", tag], "content": f"```python\n{VARIABLES_CODE}```"},
        {"when": ["[stage: review]", tag], "content": '{"answers_question": true}'},
        {"when": ["[stage: answer]", tag], "content": "The sales total is 40."},
    ]


def expected_frame() -> pd.DataFrame:
    """The same data, made here."""
    rng = np.random.default_rng(7)
    return pd.DataFrame(
        {
            "id": np.arange(ROWS),
            "x": rng.normal(size=ROWS).round(6),
            "city": rng.choice(CITIES, ROWS),
            "k": rng.integers(0, 1000, ROWS),
        }
    )

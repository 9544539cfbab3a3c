"""The JSON values in a model's reply, wherever it put them (a fence, after prose)."""

from __future__ import annotations

import json
import re
from typing import Any

_JSON_FENCE = re.compile(r"```(?:json)?\s*\n(.*?)```", re.DOTALL)


def json_values(reply: str) -> list[Any]:
    """The JSON values in `reply` (eight at most): those in fences first, then bare ones or
    ones after prose."""
    texts = [*_JSON_FENCE.findall(reply), reply]
    found: list[Any] = []
    decoder = json.JSONDecoder()
    for text in texts:
        for start, char in enumerate(text):
            if char not in "{[":
                continue
            try:
                value, _ = decoder.raw_decode(text, start)
            except ValueError:
                continue
            found.append(value)
            if len(found) >= 8:
                return found
    return found

"""A run's own report of its CPU seconds is the sandbox's word: kept within what is possible."""

from __future__ import annotations

import math
import os

import pytest

from backend.tools.sandbox.executor import reported_cpu

CORES = os.cpu_count() or 1


@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        (0.4, 0.4),
        (0, 0.0),
        (-5.0, 0.0),  # a forged negative would have taken usage off the user's day
        (1e12, 2.0 * CORES),  # no more than the wall time on every core
        (math.nan, 2.0),  # not a number: counted as busy throughout
        (math.inf, 2.0),
        ("1.5", 2.0),
        (True, 2.0),
        (None, 2.0),
    ],
)
def test_a_forged_cpu_report_is_kept_in_bounds(reported: object, expected: float) -> None:
    assert reported_cpu(reported, 2.0) == expected

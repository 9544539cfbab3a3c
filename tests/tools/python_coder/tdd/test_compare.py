"""Comparing results with expected values: tolerance, NaN, containers, pandas, numpy."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from backend.tools.python_coder.tdd.compare import decode_value, report_value, values_equal


@pytest.mark.parametrize(
    ("actual", "expected"),
    [
        (0.1 + 0.2, 0.3),
        (1e9 + 0.5, 1e9),  # within the relative tolerance
        (1e-12, 0.0),  # within the absolute tolerance
        (3, 3.0),
        (float("nan"), float("nan")),
        (np.float64("nan"), decode_value({"$float": "nan"})),
        (math.inf, decode_value({"$float": "inf"})),
        (np.int64(7), 7),
        (np.bool_(True), True),
        ({"a": [1.0, 2.0], "b": {"c": None}}, {"b": {"c": None}, "a": [1, 2.0000000001]}),
        ({1: "x", 2: "y"}, {"1": "x", "2": "y"}),  # JSON's keys are strings
        ((1, 2), [1, 2]),
        ({3, 1, 2}, [1, 2, 3]),
        (np.array([[1, 2], [3, 4]]), [[1, 2], [3, 4]]),
        ([float("nan"), 1.0], [float("nan"), 1.0]),
        ("text", "text"),
        (None, None),
    ],
)
def test_equal_values(actual: Any, expected: Any) -> None:
    assert values_equal(actual, expected)


@pytest.mark.parametrize(
    ("actual", "expected"),
    [
        (0.31, 0.3),
        (1.0001, 1.0),
        (float("nan"), None),
        (None, 0),
        (True, 1),
        (1, True),
        ({"a": 1}, {"a": 1, "b": 2}),
        ({"a": 1}, [1]),
        ([1, 2], [2, 1]),
        ([1, 2], [1, 2, 3]),
        ({1, 2}, [1, 2, 2]),
        ("1", 1),
        ([[1, 2]], [[1, 3]]),
        (2**64 + 1, 2**64),  # big integers compare exactly
    ],
)
def test_different_values(actual: Any, expected: Any) -> None:
    assert not values_equal(actual, expected)


def test_frames_ignore_dtype_and_column_order_and_tolerate_floats() -> None:
    actual = pd.DataFrame({"b": [1.0, 2.0000000001], "a": [1, 2]})
    assert values_equal(actual, decode_value({"$dataframe": {"a": [1, 2], "b": [1, 2]}}))
    assert values_equal(actual, {"a": [1, 2], "b": [1, 2]})  # a plain dict of columns
    assert values_equal(actual, [{"a": 1, "b": 1}, {"a": 2, "b": 2}])  # or of records
    assert not values_equal(actual, {"a": [1, 2], "b": [1, 3]})
    assert not values_equal(actual, {"a": [1, 2]})


def test_frames_treat_nan_as_equal() -> None:
    actual = pd.DataFrame({"x": [1.0, np.nan]})
    assert values_equal(actual, decode_value({"$dataframe": {"x": [1.0, {"$float": "nan"}]}}))
    assert values_equal(actual, pd.DataFrame({"x": [1.0, float("nan")]}))


def test_a_json_frame_ignores_the_index_but_keeps_the_row_order() -> None:
    sorted_frame = pd.DataFrame({"v": [3, 1, 2]}).sort_values("v")  # index 1, 2, 0
    assert values_equal(sorted_frame, {"v": [1, 2, 3]})
    assert not values_equal(sorted_frame, {"v": [3, 1, 2]})
    grouped = pd.DataFrame({"k": ["a", "b", "a"], "v": [1, 2, 3]}).groupby("k")["v"].sum()
    assert values_equal(grouped.to_frame(), {"k": ["a", "b"], "v": [4, 2]})  # index as column


def test_series_compare_with_lists_dicts_and_series() -> None:
    counts = pd.Series([2, 1], index=["a", "b"])
    assert values_equal(counts, {"a": 2, "b": 1})
    assert values_equal(counts, [2, 1])
    assert values_equal(counts, decode_value({"$series": [2.0, 1.0]}))
    assert not values_equal(counts, {"a": 2, "b": 2})
    assert values_equal(pd.Series([1.0, np.nan]), pd.Series([1.0, np.nan]))


def test_decode_value_makes_tagged_objects_real() -> None:
    decoded = decode_value(
        {"t": {"$tuple": [1, 2]}, "s": {"$set": [1]}, "a": {"$ndarray": [1, 2]}, "$x": 1}
    )
    assert decoded["t"] == (1, 2) and decoded["s"] == {1}
    assert isinstance(decoded["a"], np.ndarray) and decoded["$x"] == 1


def test_report_value_is_json_or_a_repr() -> None:
    reported = report_value({"x": (1, float("nan")), "f": pd.DataFrame({"a": [1]})})
    assert json.loads(json.dumps(reported, allow_nan=False)) == {
        "x": {"$tuple": [1, {"$float": "nan"}]},
        "f": {"$dataframe": {"a": [1]}},
    }
    assert report_value(object())["$repr"].startswith("<object object")
    assert len(report_value(list(range(10_000)))["$repr"]) <= 2000

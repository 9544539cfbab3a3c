"""Comparing a function's result with a test's expected value, inside the sandbox.

The test harness ships this module's source into the sandbox (the server never
runs model-written code), so it must stay self-contained: standard library,
numpy and pandas, no dunder access, annotations that need no imports beyond
its own. The server imports it too, for its unit tests.

Equality is what a person would accept: numbers within a tolerance, NaN equal
to NaN, tuples equal to lists, JSON's string keys equal to the keys they
print as, DataFrames and Series compared by `pandas.testing` without dtype
checks. JSON has no NaN, DataFrame or tuple, so tests write those as tagged
objects: `{"$float": "nan"}`, `{"$dataframe": {column: [values]}}` (or a list
of records), `{"$series": [values]}`, `{"$ndarray": [...]}`, `{"$tuple": [...]}`,
`{"$set": [...]}`.
"""

from __future__ import annotations

import cmath
import json
import math
import numbers
from typing import Any

import numpy as np
import pandas as pd

REL_TOL = 1e-6
ABS_TOL = 1e-9
MAX_DEPTH = 40
REPORT_CHARS = 2000


def decode_value(value: Any) -> Any:
    """A test's JSON value with its tagged objects made real."""
    if isinstance(value, list):
        return [decode_value(item) for item in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        tag, content = next(iter(value.items()))
        if tag == "$float":
            return float(content)
        if tag == "$dataframe":
            return pd.DataFrame(decode_value(content))
        if tag == "$series":
            return pd.Series(decode_value(content))
        if tag == "$ndarray":
            return np.array(decode_value(content))
        if tag == "$tuple":
            return tuple(decode_value(content))
        if tag == "$set":
            return set(decode_value(content))
    return {key: decode_value(item) for key, item in value.items()}


def values_equal(actual: Any, expected: Any) -> bool:
    """Whether `actual` is what `expected` (decoded) describes; never raises."""
    try:
        return _equal(actual, expected, 0)
    except Exception:
        return False


def _equal(actual: Any, expected: Any, depth: int) -> bool:
    if depth > MAX_DEPTH:
        return False
    if isinstance(actual, pd.DataFrame) or isinstance(expected, pd.DataFrame):
        return _frames_equal(actual, expected)
    if isinstance(actual, pd.Series) or isinstance(expected, pd.Series):
        return _series_equal(actual, expected, depth)
    actual, expected = _plain(actual), _plain(expected)
    if isinstance(actual, bool) or isinstance(expected, bool):
        return isinstance(actual, bool) and isinstance(expected, bool) and actual == expected
    if _is_missing(actual) or _is_missing(expected):
        return _is_missing(actual) and _is_missing(expected)
    if isinstance(actual, numbers.Number) and isinstance(expected, numbers.Number):
        return _numbers_equal(actual, expected)
    if isinstance(expected, dict):
        return isinstance(actual, dict) and _dicts_equal(actual, expected, depth)
    if isinstance(expected, set | frozenset) or isinstance(actual, set | frozenset):
        sized = isinstance(actual, list | tuple | set | frozenset)
        return sized and _unordered_equal(list(actual), list(expected), depth)
    if isinstance(expected, list | tuple):
        if not isinstance(actual, list | tuple) or len(actual) != len(expected):
            return False
        return all(_equal(a, e, depth + 1) for a, e in zip(actual, expected, strict=True))
    if isinstance(actual, list | tuple | dict):
        return False
    return bool(actual == expected)


def _plain(value: Any) -> Any:
    """numpy scalars and arrays as Python values."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def _is_missing(value: Any) -> bool:
    """NaN, and pandas' NA and NaT, which all mean "no value" (None does not)."""
    if value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float) and math.isnan(value)


def _numbers_equal(actual: Any, expected: Any) -> bool:
    if isinstance(actual, complex) or isinstance(expected, complex):
        return cmath.isclose(complex(actual), complex(expected), rel_tol=REL_TOL, abs_tol=ABS_TOL)
    if isinstance(actual, int) and isinstance(expected, int):
        return actual == expected
    return math.isclose(float(actual), float(expected), rel_tol=REL_TOL, abs_tol=ABS_TOL)


def _dicts_equal(actual: dict[Any, Any], expected: dict[Any, Any], depth: int) -> bool:
    if len(actual) != len(expected):
        return False
    for key, value in expected.items():
        if key in actual:
            found = actual[key]
        else:  # JSON keys are strings: {"1": ...} stands for {1: ...}
            matches = [other for other in actual if str(other) == str(key)]
            if len(matches) != 1:
                return False
            found = actual[matches[0]]
        if not _equal(found, value, depth + 1):
            return False
    return True


def _unordered_equal(actual: list[Any], expected: list[Any], depth: int) -> bool:
    if len(actual) != len(expected):
        return False
    unmatched = list(expected)
    for item in actual:
        match = next((i for i, e in enumerate(unmatched) if _equal(item, e, depth + 1)), None)
        if match is None:
            return False
        unmatched.pop(match)
    return True


def _series_equal(actual: Any, expected: Any, depth: int) -> bool:
    if not isinstance(actual, pd.Series):
        plain = expected.to_dict() if isinstance(actual, dict) else expected.tolist()
        return _equal(actual, plain, depth + 1)
    if not isinstance(expected, pd.Series):
        plain = actual.to_dict() if isinstance(expected, dict) else actual.tolist()
        return _equal(plain, expected, depth + 1)
    if _pandas_match(pd.testing.assert_series_equal, actual, expected, check_names=False):
        return True
    # An expected value written in JSON has no index: compare the values only.
    return isinstance(expected.index, pd.RangeIndex) and _pandas_match(
        pd.testing.assert_series_equal, actual, expected, check_names=False, check_index=False
    )


def _frames_equal(actual: Any, expected: Any) -> bool:
    if not isinstance(expected, pd.DataFrame):
        expected = pd.DataFrame(expected)  # a dict of columns or a list of records
    if not isinstance(actual, pd.DataFrame):
        return False
    candidates = [actual]
    if isinstance(expected.index, pd.RangeIndex):  # written in JSON: the index is not part of it
        candidates += [actual.reset_index(drop=True), actual.reset_index()]
    return any(_frame_matches(candidate, expected) for candidate in candidates)


def _frame_matches(actual: Any, expected: Any) -> bool:
    if list(actual.columns) != list(expected.columns):
        if sorted(map(str, actual.columns)) != sorted(map(str, expected.columns)):
            return False
        actual = actual.set_axis([str(c) for c in actual.columns], axis=1)
        expected = expected.set_axis([str(c) for c in expected.columns], axis=1)
        actual = actual[list(expected.columns)]
    return _pandas_match(pd.testing.assert_frame_equal, actual, expected, check_names=False)


def _pandas_match(assertion: Any, actual: Any, expected: Any, **options: Any) -> bool:
    try:
        assertion(
            actual,
            expected,
            check_dtype=False,
            check_index_type=False,
            check_exact=False,
            rtol=REL_TOL,
            atol=ABS_TOL,
            **options,
        )
    except (AssertionError, TypeError, ValueError):
        return False
    return True


def report_value(value: Any) -> Any:
    """`value` as short JSON for the results: tagged like test values, else its repr."""
    try:
        encoded = _encode(value, 0)
        if len(json.dumps(encoded, allow_nan=False)) <= REPORT_CHARS:
            return encoded
    except Exception:
        pass
    try:
        return {"$repr": repr(value)[:REPORT_CHARS]}
    except Exception:
        return {"$repr": "<a value that cannot be shown>"}


def _encode(value: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise ValueError("too deep")
    if isinstance(value, pd.DataFrame):
        return {"$dataframe": _encode(value.head(50).to_dict(orient="list"), depth + 1)}
    if isinstance(value, pd.Series):
        return {"$series": _encode(value.head(50).tolist(), depth + 1)}
    if isinstance(value, np.ndarray):
        return {"$ndarray": _encode(value.tolist(), depth + 1)}
    value = _plain(value)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, tuple):
        return {"$tuple": [_encode(item, depth + 1) for item in value]}
    if isinstance(value, set | frozenset):
        return {"$set": [_encode(item, depth + 1) for item in value]}
    if isinstance(value, list):
        return [_encode(item, depth + 1) for item in value]
    if isinstance(value, dict):
        return {str(key): _encode(item, depth + 1) for key, item in value.items()}
    raise TypeError("not JSON")

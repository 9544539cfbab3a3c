"""Spec-first generation: the question's words settle what they can, the model the rest."""

from __future__ import annotations

import contextlib
import io

import duckdb
import pandas as pd
import pytest

from backend.files import FileMetadata
from backend.tools.python_coder.analysis_spec import plan_analysis, render_code
from tests.support.scripted_llm import scripted_llm

SALES = FileMetadata(
    name="uploads/sales.csv",
    extension="csv",
    size=100,
    kind="tabular",
    details={
        "columns": [
            {"name": "region", "dtype": "str"},
            {"name": "unit_price", "dtype": "float64"},
            {"name": "units", "dtype": "int64"},
        ]
    },
)
MAPPING = {"uploads/sales.csv": "df1"}
FRAME = pd.DataFrame({"region": ["n", "s", "n"], "unit_price": [1.0, 2.0, 4.0], "units": [1, 2, 3]})


def run(code: str) -> str:
    """Run rendered code (ours, built from a validated spec) against FRAME."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, {"df1": FRAME.copy()})  # our own template, never model output
    return out.getvalue()


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("what is the mean of column unit price?", "2.333333"),
        ("What is the total units sold?", "6"),
        ("the highest unit_price per region", "n    4.0"),
        ("How many rows are there?", "3"),
        ("how many distinct region values?", "2"),
        ("How many different regions are there?", "2"),
        ("correlation between unit_price and units", "0.9819"),
        ("number of rows per region", "n    2"),
        # Issue 39's question: the totals per region, to compare (not a free-form run).
        ("Which region had the highest total units?", "n    4"),
    ],
)
async def test_questions_the_words_settle_need_no_model(question: str, expected: str) -> None:
    llm, _ = scripted_llm([])  # no reply: any model call would fail
    spec = await plan_analysis(question, [SALES], MAPPING, llm)
    assert spec is not None
    assert expected in run(render_code(spec))
    assert llm.usage.calls == 0
    assert set(spec.sources.values()) <= {"question"}


async def test_the_model_fills_only_what_the_words_leave_open() -> None:
    llm, model = scripted_llm(['{"operation": "max", "column": "units"}'])
    spec = await plan_analysis("what is the average?", [SALES], MAPPING, llm)
    assert spec is not None
    assert (spec.operation, spec.column) == ("mean", "units")
    assert spec.sources == {"operation": "question", "column": "model"}
    assert "[stage: analysis_spec]" in model.prompts[0]
    assert "region, unit_price, units" in model.prompts[0]


@pytest.mark.parametrize(
    "question",
    [
        "What is the mean unit price of the sales with more than 10 units?",
        "mean unit_price where units is above 2",
        "What share of units comes from region n, in percent?",
        "the mean unit_price in the n region",  # a value of the data: a filter
        "the mean unit_price of the rows with units",  # a second column
        "the top 5 unit prices",
    ],
)
async def test_filters_shares_and_rankings_go_to_free_form(question: str) -> None:
    sales = FileMetadata(
        **{**SALES.to_dict(), "details": {**SALES.details, "sample_rows": [["n", 1.0, 1]]}}
    )
    llm, _ = scripted_llm([])
    assert await plan_analysis(question, [sales], MAPPING, llm) is None
    assert llm.usage.calls == 0


async def test_what_the_form_cannot_express_goes_to_free_form() -> None:
    llm, _ = scripted_llm(['{"operation": "other", "column": "none"}'])
    assert await plan_analysis("plot something nice", [SALES], MAPPING, llm) is None
    # A numeric operation on a text column is not a valid spec either.
    llm, _ = scripted_llm([])
    assert await plan_analysis("the mean of region", [SALES], MAPPING, llm) is None


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("what is the mean of column unit price?", "2.333333"),
        ("What is the total units sold?", "6"),
        ("the highest unit_price per region", "n     4.0"),
        ("How many rows are there?", "rows:\n3"),
        ("how many distinct region values?", "2"),
        ("correlation between unit_price and units", "0.9819"),
        ("number of rows per region", "n       2"),
        ("describe the units", "mean    2.0"),
    ],
)
async def test_a_large_table_is_answered_in_duckdb_sql(question: str, expected: str) -> None:
    """A file too large for pandas is a DuckDB relation: the same answers, through SQL."""
    llm, _ = scripted_llm([])
    spec = await plan_analysis(question, [SALES], MAPPING, llm)
    assert spec is not None
    code = render_code(spec, relation=True)
    assert "groupby" not in code and ".df()" in code  # only the (small) result reaches pandas
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, {"df1": duckdb.from_df(FRAME)})  # our own template, never model output
    assert expected in out.getvalue()

"""The starter evaluation set: its files and questions, and every answer computed again by
another route (pandas over the small files, DuckDB SQL over the large one)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from backend.core.evals.questions import ANSWER_NAME, QUESTION_ID, EvalQuestion, Expected
from backend.core.evals.starter import STARTER_SET_NAME, write_starter
from backend.files.model import LARGE_FILE_BYTES

MINIMUM = {
    "aggregate": 6, "multi-step": 5, "join": 4, "dates": 5, "dirty": 5, "excel": 4, "large": 3,
}  # fmt: skip
MISSING = ("n/a", "N/A", "-", "")
Answer = float | str


@pytest.fixture(scope="module")
def starter(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[EvalQuestion]]:
    folder = tmp_path_factory.mktemp("starter")
    return folder, write_starter(folder)


# Reading the files, with pandas


def _sales(folder: Path) -> Any:
    sales = pd.read_csv(folder / "sales.csv", parse_dates=["order_date"])
    sales["revenue"] = sales["units"] * sales["unit_price"]
    return sales


def _joined(folder: Path) -> Any:
    stores = pd.read_csv(folder / "stores.csv", parse_dates=["opened"])
    return _sales(folder).merge(stores, on="store_id", how="left", validate="many_to_one")


def _events(folder: Path) -> Any:
    return pd.read_csv(folder / "events.csv", parse_dates=["timestamp"])


def _customers(folder: Path) -> Any:
    raw = pd.read_csv(folder / "customers_dirty.csv", dtype=str, keep_default_na=False)
    clean = raw.drop_duplicates().copy()
    clean["segment"] = clean["segment"].str.strip().str.lower()
    clean["city"] = clean["city"].str.strip().str.title()
    for column in ("annual_spend", "age"):
        text = clean[column].str.strip()
        text = text.where(~text.isin(MISSING)).str.replace(r"[$,]", "", regex=True)
        clean[column] = pd.to_numeric(text)
    return clean


def _sheet(folder: Path, name: str) -> Any:
    return pd.read_excel(folder / "inventory.xlsx", sheet_name=name)


def _stock(folder: Path) -> Any:
    products = _sheet(folder, "Products")
    return _sheet(folder, "Stock").merge(products, on="sku", how="left", validate="many_to_one")


def _top(series: Any) -> Any:
    """The label of the largest value, which must be the only one that large."""
    ranked = series.sort_values(ascending=False)
    assert ranked.iloc[0] > ranked.iloc[1], f"a tie for the top: {ranked.head(2).to_dict()}"
    return ranked.index[0]


def _sql(folder: Path, query: str) -> tuple[Any, ...]:
    log = (folder / "sensor_log.csv").as_posix()
    with duckdb.connect() as connection:
        row = connection.execute(query.replace("LOG", f"read_csv('{log}')")).fetchone()
    assert row is not None
    return tuple(row)


# One function a question: its answers, in the order of its expected values


def _s03(f: Path) -> tuple[Answer, ...]:
    top = _top(_sales(f)["category"].value_counts())
    return top, _sales(f)["category"].value_counts()[top]


def _s09(f: Path) -> tuple[Answer, ...]:
    sales = _sales(f)
    return (_top(sales[sales["category"] == "Grocery"].groupby("store_id")["revenue"].sum()),)


def _s11(f: Path) -> tuple[Answer, ...]:
    means = _sales(f).groupby("category")["revenue"].mean()
    return _top(means), means[_top(means)]


def _s12(f: Path) -> tuple[Answer, ...]:
    sales = _sales(f)
    return (_top(sales[sales["units"] >= 5]["product"].value_counts()),)


def _s13(f: Path) -> tuple[Answer, ...]:
    counts = _events(f)["event_type"].value_counts()
    return (counts["purchase"] / counts["view"],)


def _s14(f: Path) -> tuple[Answer, ...]:
    regions = _joined(f).groupby("region")["revenue"].sum()
    return _top(regions), regions[_top(regions)]


def _s16(f: Path) -> tuple[Answer, ...]:
    joined = _joined(f)
    return (joined[joined["opened"] < pd.Timestamp("2015-01-01")]["units"].mean(),)


def _s17(f: Path) -> tuple[Answer, ...]:
    joined = _joined(f)
    return (_top(joined[joined["category"] == "Toys"].groupby("city")["units"].sum()),)


def _s19(f: Path) -> tuple[Answer, ...]:
    events = _events(f)
    purchases = events[events["event_type"] == "purchase"]
    return (_top(purchases["timestamp"].dt.day_name().value_counts()),)


def _s20(f: Path) -> tuple[Answer, ...]:
    events = _events(f)
    days = events[events["user_id"] == "U007"]["timestamp"].dt.normalize()
    return ((days.max() - days.min()).days,)


def _s21(f: Path) -> tuple[Answer, ...]:
    stamps = _events(f)["timestamp"]
    return (((stamps.dt.year == 2024) & (stamps.dt.quarter == 3)).sum(),)


def _s23(f: Path) -> tuple[Answer, ...]:
    sales = _sales(f)
    march = (sales["order_date"].dt.year == 2024) & (sales["order_date"].dt.month == 3)
    return (sales[march]["units"].sum(),)


def _s24(f: Path) -> tuple[Answer, ...]:
    raw = pd.read_csv(f / "customers_dirty.csv", dtype=str, keep_default_na=False)
    unique = raw.drop_duplicates()
    assert unique["customer_id"].is_unique
    return len(unique), len(raw) - len(unique)


def _s27(f: Path) -> tuple[Answer, ...]:
    customers = _customers(f)
    return (customers[customers["segment"] == "silver"]["annual_spend"].sum(),)


def _s33(f: Path) -> tuple[Answer, ...]:
    totals = _sheet(f, "Stock").groupby("warehouse")["quantity"].sum()
    return _top(totals), totals[_top(totals)]


def _s34(f: Path) -> tuple[Answer, ...]:
    stock = _stock(f)
    assert stock["unit_cost"].notna().all()
    return ((stock["quantity"] * stock["unit_cost"]).sum(),)


CHECKS: dict[str, Callable[[Path], tuple[Answer, ...]]] = {
    "s01": lambda f: (_sales(f)["unit_price"].mean(),),
    "s02": lambda f: (_sales(f)["units"].sum(),),
    "s03": _s03,
    "s04": lambda f: (_sales(f)["unit_price"].max(),),
    "s05": lambda f: (_sales(f)["unit_price"].median(),),
    "s06": lambda f: ((_sales(f)["store_id"] == "ST05").sum(),),
    "s07": lambda f: ((_events(f)["event_type"] == "purchase").sum(),),
    "s08": lambda f: (
        _sales(f)
        .groupby("category")["revenue"]
        .sum()
        .pipe(lambda s: 100 * s["Electronics"] / s.sum()),
    ),
    "s09": _s09,
    "s10": lambda f: (_sales(f)["revenue"].nlargest(5).sum(),),
    "s11": _s11,
    "s12": _s12,
    "s13": _s13,
    "s14": _s14,
    "s15": lambda f: ((_joined(f)["city"] == "Lyon").sum(),),
    "s16": _s16,
    "s17": _s17,
    "s18": lambda f: (_top(_events(f)["timestamp"].dt.month_name().value_counts()),),
    "s19": _s19,
    "s20": _s20,
    "s21": _s21,
    "s22": lambda f: ((_events(f)["timestamp"].dt.day_of_week >= 5).sum(),),
    "s23": _s23,
    "s24": _s24,
    "s25": lambda f: (_customers(f)["annual_spend"].mean(),),
    "s26": lambda f: ((_customers(f)["segment"] == "gold").sum(),),
    "s27": _s27,
    "s28": lambda f: (_customers(f)["annual_spend"].isna().sum(),),
    "s29": lambda f: (_customers(f)["age"].median(),),
    "s30": lambda f: (_top(_customers(f)["city"].value_counts()),),
    "s31": lambda f: (_sheet(f, "Products")["unit_cost"].mean(),),
    "s32": lambda f: (_sheet(f, "Stock").query("warehouse == 'Madrid'")["quantity"].sum(),),
    "s33": _s33,
    "s34": _s34,
    "s35": lambda f: (_top(_stock(f).groupby("category")["quantity"].sum()),),
    "s36": lambda f: _sql(f, "SELECT count(*) FROM LOG WHERE temperature > 30.0"),
    "s37": lambda f: _sql(f, "SELECT avg(temperature) FROM LOG WHERE sensor_id = 'S07'"),
    "s38": lambda f: _sql(
        f,
        "SELECT max(temperature), count(*) FILTER (WHERE temperature = "
        "(SELECT max(temperature) FROM LOG)) FROM LOG",
    ),
    "s39": lambda f: _sql(
        f, "SELECT avg(humidity) FROM LOG WHERE CAST(timestamp AS DATE) = DATE '2024-01-15'"
    ),
}


def _agrees(expected: Expected, got: Answer) -> bool:
    try:
        wanted = float(expected.value)
    except ValueError:
        return str(got) == expected.value
    return abs(float(got) - wanted) <= expected.tolerance + 1e-9


def test_the_set_has_every_kind_and_its_files(starter: tuple[Path, list[EvalQuestion]]) -> None:
    folder, questions = starter
    assert STARTER_SET_NAME == "Starter set"
    assert len(questions) >= 32
    ids = [q.id for q in questions]
    assert len(set(ids)) == len(ids)
    assert all(QUESTION_ID.match(i) for i in ids)
    kinds = {kind: sum(q.kind == kind for q in questions) for kind in MINIMUM}
    assert all(kinds[kind] >= least for kind, least in MINIMUM.items()), kinds
    assert {q.kind for q in questions} == set(MINIMUM)
    for question in questions:
        assert question.files and question.expected and question.question
        assert all((folder / name).is_file() and "/" not in name for name in question.files)
        assert all(ANSWER_NAME.match(e.name) for e in question.expected)
        assert len({e.name for e in question.expected}) == len(question.expected)
    assert any(len(q.expected) == 2 for q in questions)


def test_the_large_file_is_a_duckdb_relation(starter: tuple[Path, list[EvalQuestion]]) -> None:
    folder, questions = starter
    assert (folder / "sensor_log.csv").stat().st_size > LARGE_FILE_BYTES
    assert all(q.files == ("sensor_log.csv",) for q in questions if q.kind == "large")


def test_the_workbook_has_two_named_sheets(starter: tuple[Path, list[EvalQuestion]]) -> None:
    folder, _ = starter
    with pd.ExcelFile(folder / "inventory.xlsx") as book:
        assert book.sheet_names == ["Products", "Stock"]


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def test_writing_again_gives_the_same_bytes_and_questions(
    starter: tuple[Path, list[EvalQuestion]], tmp_path: Path
) -> None:
    folder, questions = starter
    assert write_starter(tmp_path) == questions
    names = sorted(p.name for p in folder.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == names
    for name in names:
        first, second = folder / name, tmp_path / name
        assert first.stat().st_size == second.stat().st_size, name
        if name == "sensor_log.csv":
            assert _digest(first) == _digest(second)
        else:
            assert first.read_bytes() == second.read_bytes(), name


def test_every_question_has_a_check(starter: tuple[Path, list[EvalQuestion]]) -> None:
    _, questions = starter
    assert sorted(CHECKS) == sorted(q.id for q in questions)


@pytest.mark.parametrize("question_id", sorted(CHECKS))
def test_the_answer_computed_again_agrees(
    starter: tuple[Path, list[EvalQuestion]], question_id: str
) -> None:
    folder, questions = starter
    question = next(q for q in questions if q.id == question_id)
    got = CHECKS[question_id](folder)
    assert len(got) == len(question.expected)
    for expected, value in zip(question.expected, got, strict=True):
        assert _agrees(expected, value), (question_id, expected, value)

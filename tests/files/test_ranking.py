"""Lexical pre-ranking picks the right file among twenty."""

from __future__ import annotations

from typing import Any

import pytest

from backend.files import FileMetadata, rank_files
from backend.files.ranking import tokens


def _file(name: str, columns: list[str], **details: Any) -> FileMetadata:
    return FileMetadata(
        name=f"uploads/{name}",
        extension=name.rsplit(".", 1)[-1],
        size=100,
        kind="tabular",
        summary="table",
        details={"columns": [{"name": c, "dtype": "str"} for c in columns], **details},
    )


FILES = [
    _file("monthlySales_2023.csv", ["month", "units", "revenue"]),
    _file("employees.csv", ["employee_id", "name", "department", "salary"]),
    _file("customers_eu.csv", ["customer_id", "country", "signup_date"]),
    _file("customers_us.csv", ["customer_id", "state", "signup_date"]),
    _file("inventory.parquet", ["sku", "warehouse", "stock_level"]),
    _file("weather_daily.csv", ["date", "temperature", "precipitation"]),
    _file("web-traffic.jsonl", ["timestamp", "page", "sessionDuration"]),
    _file("budget.xlsx", ["category", "planned", "actual"], sheet_names=["Q1", "Q2", "Forecast"]),
    _file("churn_model_features.feather", ["customer_id", "tenure", "churned"]),
    _file("shipping_routes.csv", ["origin", "destination", "distance_km"]),
    _file("product_catalog.json", ["sku", "title", "price"]),
    _file("support_tickets.csv", ["ticket_id", "priority", "resolution_hours"]),
    _file("marketing_spend.csv", ["channel", "spend", "month"]),
    _file("energy_usage.parquet", ["meter_id", "kwh", "reading_time"]),
    _file("exam_scores.csv", ["student", "subject", "score"]),
    _file("flights.csv", ["carrier", "departure_delay", "arrival_delay"]),
    _file("stock_prices.csv", ["ticker", "close", "volume"]),
    _file("survey_results.xlsx", ["respondent", "satisfaction", "nps"], sheet_names=["Responses"]),
    _file("hospital_admissions.csv", ["patient_id", "ward", "length_of_stay"]),
    _file("regional_revenue.csv", ["region", "quarter", "revenue"]),
]


def test_tokens_split_names_like_people_write_them() -> None:
    assert tokens("monthlySales_2023.csv") == {"monthly", "sale", "2023", "csv"}
    assert tokens("web-traffic.JSONL sessionDuration") == {
        "web",
        "traffic",
        "jsonl",
        "session",
        "duration",
    }


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What were the monthly sales in 2023?", "monthlySales_2023.csv"),
        ("Average salary per department", "employees.csv"),
        ("Which warehouse has the lowest stock level?", "inventory.parquet"),
        ("Plot temperature against precipitation", "weather_daily.csv"),
        ("How long are sessions on each page?", "web-traffic.jsonl"),
        ("Compare the Q2 forecast with planned spending", "budget.xlsx"),
        ("Mean departure delay by carrier", "flights.csv"),
        ("Revenue by region and quarter", "regional_revenue.csv"),
        ("Median length of stay per ward", "hospital_admissions.csv"),
        ("Look at customers_us.csv: signups per state", "customers_us.csv"),
        ("Use customers_eu for the country breakdown", "customers_eu.csv"),
    ],
)
def test_the_right_file_ranks_first(query: str, expected: str) -> None:
    best_score, best = rank_files(query, FILES)[0]
    assert best.name == f"uploads/{expected}"
    assert best_score > 0


def test_naming_the_file_beats_column_overlap() -> None:
    ranked = rank_files("show revenue per month from marketing_spend.csv", FILES)
    assert ranked[0][1].name == "uploads/marketing_spend.csv"


def test_ties_keep_the_given_order() -> None:
    ranked = rank_files("zzz qqq", FILES)
    assert [score for score, _ in ranked] == [0.0] * len(FILES)
    assert [metadata.name for _, metadata in ranked] == [f.name for f in FILES]
    two = rank_files("customer_id", FILES)
    assert [m.name for _, m in two[:3]] == [
        "uploads/customers_eu.csv",
        "uploads/customers_us.csv",
        "uploads/churn_model_features.feather",
    ]

"""What the agents read about a data source: the tables a question needs, their schemas
with the owner's notes, the nearest names to an unknown one, and verified answers as
worked examples (issue 43)."""

from __future__ import annotations

from backend.tools.data_sources.catalog import (
    Catalog,
    Column,
    Table,
    describe,
    nearest,
    pick_tables,
)
from backend.tools.data_sources.examples import (
    Example,
    most_similar,
    queries_in,
    reuse_note,
    reused,
)

CATALOG = Catalog(
    tables=[
        Table("customers", [Column("id", "integer", key="primary"), Column("name", "text")], 2),
        Table(
            "orders",
            [
                Column("id", "integer", key="primary"),
                Column("customer_id", "integer", references="customers.id"),
                Column("amount", "numeric", samples=["10.5", "20"]),
            ],
            3,
        ),
        *(Table(f"audit_log_{n}", [Column("entry", "text")], 10) for n in range(40)),
        Table("inventory_items", [Column("sku", "text"), Column("quantity", "integer")], 9),
    ]
)


def test_a_question_gets_the_tables_it_names_and_those_their_keys_join_to() -> None:
    picked = pick_tables(CATALOG, "total order amount per customer name", {})
    assert [t.name for t in picked][:2] == ["orders", "customers"]
    assert all(not t.name.startswith("audit_log") for t in picked)
    stock = pick_tables(CATALOG, "how many items are in inventory?", {})
    assert [t.name for t in stock] == ["inventory_items"]


def test_a_note_makes_a_table_findable_by_its_meaning() -> None:
    notes = {"inventory_items.quantity": "units in the warehouse (stock)"}
    assert [t.name for t in pick_tables(CATALOG, "what is in stock?", notes)] == ["inventory_items"]


def test_the_prompt_shows_types_keys_samples_and_notes() -> None:
    text = describe([CATALOG.tables[1]], {"orders": "one row per order", "orders.amount": "EUR"})
    assert text.splitlines() == [
        "table orders, ~3 rows: one row per order",
        "  - id (integer; primary key)",
        "  - customer_id (integer; references customers.id)",
        "  - amount (numeric; e.g. 10.5, 20): EUR",
    ]


def test_an_unknown_name_gets_the_catalogs_nearest() -> None:
    assert nearest(CATALOG, "amont", "orders") == ["orders.amount"]
    assert nearest(CATALOG, "order")[0] == "orders"
    assert nearest(CATALOG, "zzzz") == []


def test_a_run_reuses_a_verified_answers_query_whatever_its_spacing() -> None:
    join = "SELECT c.name, SUM(o.amount) FROM orders o JOIN customers c ON c.id = o.customer_id"
    example = Example("va_1", "shop", "total spent per customer", "df = sql('shop', ...)", [join])
    code = f"df = sql('shop', {join.lower().replace(' ', '  ')!r})\nprint(df)"
    assert queries_in(code) == [("shop", join.lower().replace(" ", "  "))]
    assert reused(code, [example]) == [example]
    assert reused(code.replace("'shop'", "'other'"), [example]) == []
    assert "“total spent per customer”" in reuse_note([example])


def test_a_small_source_is_shown_whole() -> None:
    small = Catalog(tables=CATALOG.tables[:2])
    assert pick_tables(small, "how much did each customer spend?", {}) == small.tables


def test_only_similar_verified_answers_are_offered() -> None:
    examples = [
        Example("a", "shop", "total spent per customer", "", []),
        Example("b", "shop", "number of items in stock", "", []),
    ]
    assert [e.id for e in most_similar("total spent by each customer", examples)] == ["a"]
    assert most_similar("weather tomorrow", examples) == []


def test_a_wide_table_is_described_within_the_prompts_budget() -> None:
    wide = Table("wide", [Column(f"c{n}", "integer", samples=["1", "2", "3"]) for n in range(300)])
    text = describe([wide, CATALOG.tables[0]], {}, max_chars=2000)
    assert len(text) <= 2100
    assert "e.g." not in text and "more columns" in text
    assert "table customers" in text  # the other table keeps its place

"""Issue 27: a 1,000,000-row table in the browser: first rows, sort, filter, page 5,000, CSV."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from playwright.sync_api import Locator, Page, expect

from tests.support.table_script import ROWS, expected_frame
from tests.ui.browser import Person, last_answer, login, screenshot, send
from tests.ui.conftest import OpenPage


def first_row(table: Locator) -> list[object]:
    """The first row the page shows, its numbers read back as numbers."""
    cells = table.locator("tbody tr").first.locator("td").all_inner_texts()
    return [_number(text) for text in cells]


def _number(text: str) -> object:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def as_texts(row: pd.Series) -> list[object]:
    """A row of the frame as plain Python values."""
    return [value.item() if hasattr(value, "item") else value for value in row.tolist()]


def open_table(page: Page) -> Locator:
    send(page, "Q-UI-TABLE use pandas to show me the cities table")
    answer = last_answer(page)
    expect(answer).to_have_attribute("data-run-state", "done", timeout=120_000)
    table = answer.get_by_test_id("table")
    expect(table).to_be_visible()
    return table


def test_a_million_rows_sort_filter_page_and_download(
    open_page: OpenPage, person: Person, tmp_path: Path
) -> None:
    frame = expected_frame()
    page = open_page()
    login(page, person)
    table = open_table(page)
    status = table.get_by_test_id("table-status")
    expect(status).to_have_text(f"Rows 1–20 of {ROWS:,}")
    assert first_row(table) == as_texts(frame.iloc[0])  # from the event, before any request
    expect(table.locator("th").first).to_contain_text("int64")
    expect(table.locator(".table-summary").nth(3)).to_contain_text("0 – 999")  # k's summary

    # Sort by x, descending (a second click), as pandas does.
    sort_x = table.get_by_test_id("table-sort").nth(1)
    sort_x.click()
    expect(table.locator("th").nth(1)).to_have_attribute("aria-sort", "ascending")
    sort_x.click()
    expect(table.locator("th").nth(1)).to_have_attribute("aria-sort", "descending")
    by_x = frame.sort_values("x", ascending=False, kind="stable")
    expect(table.locator("tbody tr").first.locator("td").first).to_have_text(str(by_x.iloc[0, 0]))
    assert first_row(table) == as_texts(by_x.iloc[0])

    # Filter the city (part of it, any case) and k (a comparison): both hold.
    table.get_by_test_id("table-filter").nth(2).fill("PARIS")
    table.get_by_test_id("table-filter").nth(2).press("Enter")
    table.get_by_test_id("table-filter").nth(3).fill("> 900")
    table.get_by_test_id("table-filter").nth(3).press("Enter")
    chosen = by_x[by_x["city"].str.lower().str.contains("paris") & (by_x["k"] > 900)]
    expect(status).to_have_text(f"Rows 1–20 of {len(chosen):,}")
    assert first_row(table) == as_texts(chosen.iloc[0])
    screenshot(page, "table-sorted-filtered")

    # The CSV download is the filtered, sorted table.
    with page.expect_download() as download:
        table.get_by_test_id("table-download-csv").click()
    saved = tmp_path / "filtered.csv"
    download.value.save_as(saved)
    pd.testing.assert_frame_equal(pd.read_csv(saved), chosen.reset_index(drop=True))

    # Clear both filters and the sort; page 5,000 is rows 99,981 to 100,000.
    for column in (2, 3):
        table.get_by_test_id("table-filter").nth(column).fill("")
        table.get_by_test_id("table-filter").nth(column).press("Enter")
    sort_x.click()
    expect(table.locator("th").nth(1)).to_have_attribute("aria-sort", "none")
    expect(status).to_have_text(f"Rows 1–20 of {ROWS:,}")
    page_input = table.get_by_test_id("table-page")
    page_input.fill("5000")
    page_input.press("Enter")
    expect(status).to_have_text(f"Rows 99,981–100,000 of {ROWS:,}")
    assert first_row(table) == as_texts(frame.iloc[99_980])
    assert table.locator("tbody tr").count() == 20  # the page, never more
    table.get_by_test_id("table-next").click()
    expect(status).to_have_text(f"Rows 100,001–100,020 of {ROWS:,}")

    # The whole table as CSV matches pandas' own.
    with page.expect_download() as download:
        table.get_by_test_id("table-download-csv").click()
    whole = tmp_path / "whole.csv"
    download.value.save_as(whole)
    pd.testing.assert_frame_equal(pd.read_csv(whole), frame)

    # A stored turn draws the table again after a reload; a phone's width fits it.
    page.reload()
    table = last_answer(page).get_by_test_id("table")
    expect(table.get_by_test_id("table-status")).to_have_text(f"Rows 1–20 of {ROWS:,}")
    page.set_viewport_size({"width": 375, "height": 740})
    table.scroll_into_view_if_needed()
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    screenshot(page, "table-375")


def test_saved_dataframes_stay_folded_unless_the_answer_names_them(
    open_page: OpenPage, person: Person
) -> None:
    page = open_page()
    login(page, person)
    send(page, "Q-UI-TABLE-VARS use pandas to sum the sales")
    answer = last_answer(page)
    expect(answer).to_have_attribute("data-run-state", "done", timeout=120_000)
    expect(answer).to_contain_text("The sales total is 40.")
    sales, costs = answer.get_by_test_id("table-details").all()
    expect(sales).to_have_attribute("open", "")  # named by the answer
    expect(sales.get_by_test_id("table-status")).to_have_text("Rows 1–2 of 2")
    assert costs.get_attribute("open") is None
    expect(costs.get_by_test_id("table")).to_be_hidden()
    costs.locator("summary").click()  # the keyboard's Enter does the same
    expect(costs.get_by_test_id("table-status")).to_have_text("Rows 1–3 of 3")

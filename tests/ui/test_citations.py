"""Issue 14 in the browser: cited numbers link to the code and output line that printed
them, and a conversation exports as a notebook or a script."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.support.agent_script import SALES
from tests.ui.browser import Person, ask, drop_file, login
from tests.ui.conftest import OpenPage
from tests.ui.test_turns import ready_with_sales

QUESTION = "Q-UI-CITE-{} what is the mean price of the 2 regions?"  # a tag per test


def _cite(answer: Locator, kind: str, text: str) -> Locator:
    return answer.locator(f".answer .cite-{kind}").filter(
        has_text=re.compile(rf"^{re.escape(text)}$")
    )


def _scroll_messages(page: Page, pixels: int) -> int:
    """Scroll the message list by up to `pixels`, in whichever direction it has room, and
    return how far it moved once the page has handled the scroll event (0: it cannot)."""
    return int(
        page.evaluate(
            """(pixels) => new Promise((resolve) => {
                const scroller = document.getElementById("scroller");
                const before = scroller.scrollTop;
                const down = scroller.scrollHeight - scroller.clientHeight - before;
                const step = down >= pixels ? pixels : -Math.min(pixels, before);
                if (step === 0) { resolve(0); return; }
                window.addEventListener("scroll", () => requestAnimationFrame(() =>
                    resolve(scroller.scrollTop - before)), { capture: true, once: true });
                scroller.scrollBy(0, step);
            })""",
            pixels,
        )
    )


def _answered(page: Page, person: Person, tag: str) -> Locator:
    ready_with_sales(page, person)
    answer = ask(page, QUESTION.format(tag), agent="react")
    expect(answer).to_have_attribute("data-run-state", "done", timeout=60_000)
    return answer


def _expect_traced(page: Page, answer: Locator) -> None:
    """The numbers' links, as drawn from the server's citations."""
    popover = page.get_by_test_id("cite-popover")
    mean = _cite(answer, "computed", "20.0")
    expect(mean).to_be_visible()
    mean.hover()
    expect(popover).to_be_visible()
    expect(popover.get_by_test_id("cite-code")).to_contain_text("print('mean price:'")
    expect(popover.get_by_test_id("cite-output")).to_have_text("mean price: 20.0")
    expect(popover).to_contain_text("Output line 4")
    # Each table cell and list item cites its own region's line.
    expect(answer.locator(".answer table .cite-computed")).to_have_text(["10", "30"])
    expect(answer.locator(".answer li .cite-computed")).to_have_text(["10", "30"])
    _cite(answer, "computed", "30").first.hover()
    expect(popover.get_by_test_id("cite-output")).to_have_text(re.compile(r"^south\s+30$"))
    # The question's number is told apart; the untraced one is not shown as traced.
    asked = _cite(answer, "question", "2")
    asked.hover()
    expect(popover).to_contain_text("From your question")
    expect(answer.locator(".answer")).to_contain_text("7 is lucky")
    expect(answer.locator(".answer .cite").filter(has_text=re.compile(r"^7$"))).to_have_count(0)


def test_cited_numbers_show_their_code_and_output_line_and_lead_to_the_step(
    open_page: OpenPage, person: Person
) -> None:
    page = open_page()
    answer = _answered(page, person, "A")
    _expect_traced(page, answer)
    popover = page.get_by_test_id("cite-popover")

    # Keyboard: focus shows the same popover, Escape closes it, Enter opens the step.
    card = answer.locator("details.tool-card").first
    card.locator("summary").click()
    expect(card).not_to_have_attribute("open", "")
    mean = _cite(answer, "computed", "20.0")
    page.set_viewport_size({"width": 1280, "height": 520})  # a list taller than its view
    mean.evaluate("(el) => el.scrollIntoView({ block: 'center' })")
    mean.focus()
    expect(popover).to_be_visible()
    expect(popover.get_by_test_id("cite-output")).to_have_text("mean price: 20.0")
    # The list scrolls a little (the card closing does too): the popover follows its number.
    before = (mean.bounding_box() or {})["y"] - (popover.bounding_box() or {})["y"]
    assert _scroll_messages(page, 30) != 0
    expect(popover).to_be_visible()
    after = (mean.bounding_box() or {})["y"] - (popover.bounding_box() or {})["y"]
    assert after == pytest.approx(before, abs=1)
    mean.press("Escape")
    expect(popover).to_be_hidden()
    mean.press("Enter")
    expect(card).to_have_attribute("open", "")
    step = answer.locator("[data-run-id]")
    expect(step).to_have_count(1)
    expect(step).to_be_in_viewport()
    expect(step).to_have_class(re.compile(r"\bcite-target\b"))
    # The click does the same, once the card is closed again.
    card.locator("summary").click()
    expect(card).not_to_have_attribute("open", "")
    _cite(answer, "computed", "10").first.click()
    expect(card).to_have_attribute("open", "")


def test_a_reopened_conversation_links_its_numbers_from_the_stored_answer(
    open_page: OpenPage, person: Person
) -> None:
    page = open_page()
    _answered(page, person, "B")
    page.reload()
    answer = page.get_by_test_id("message-assistant").last
    expect(answer).to_contain_text("7 is lucky")
    _expect_traced(page, answer)


def test_the_export_menu_downloads_the_conversation_as_a_notebook_and_a_script(
    open_page: OpenPage, person: Person
) -> None:
    page = open_page()
    login(page, person)
    expect(page.get_by_test_id("export")).to_be_hidden()  # a new chat has nothing to export
    drop_file(page, "sales.csv", SALES)
    expect(page.get_by_test_id("file-card")).to_contain_text("2 rows")
    answer = ask(page, QUESTION.format("C"), agent="react")
    expect(answer).to_have_attribute("data-run-state", "done", timeout=60_000)

    toggle = page.get_by_test_id("export")
    toggle.click()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    with page.expect_download() as notebook_download:
        page.get_by_test_id("export-ipynb").click()
    download = notebook_download.value
    assert download.suggested_filename.endswith(".ipynb")
    notebook = json.loads(download.path().read_text(encoding="utf-8"))
    assert notebook["nbformat"] == 4
    sources = ["".join(cell["source"]) for cell in notebook["cells"]]
    assert any("print('mean price:', df1['price'].mean())" in source for source in sources)
    assert any(source.startswith("df1 = pd.read_csv('uploads/sales.csv'") for source in sources)
    expect(page.get_by_test_id("export-ipynb")).to_be_hidden()  # the menu closed

    toggle.click()
    with page.expect_download() as script_download:
        page.get_by_test_id("export-py").click()
    script = script_download.value.path().read_text(encoding="utf-8")
    assert script_download.value.suggested_filename.endswith(".py")
    assert script.startswith("# %% [markdown]") and "print('ids:', 7, 9, 11)" in script

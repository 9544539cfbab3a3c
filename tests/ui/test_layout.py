"""Long lines stay in their own boxes: a 400-character word never widens a message or the page."""

from __future__ import annotations

from playwright.sync_api import Locator, Page, expect

from tests.support.agent_script import SALES
from tests.ui.browser import Person, ask, drop_file, login, screenshot
from tests.ui.conftest import OpenPage
from tests.ui.script import WIDE_WORD

# Sub-pixel rounding between layout and the bounding boxes Playwright reports.
SLACK = 1.0
# Scrolls the block's <pre> (or the highlighted <code> in it, which the theme makes the
# scroller) to its far right; how far it went.
SCROLL_SIDEWAYS = """(block) => {
    for (const el of block.querySelectorAll("pre, pre > code")) {
        if (el.scrollWidth <= el.clientWidth) continue;
        if (!["auto", "scroll"].includes(getComputedStyle(el).overflowX)) continue;
        el.scrollLeft = el.scrollWidth;
        return el.scrollLeft;
    }
    return 0;
}"""


def box(locator: Locator) -> tuple[float, float]:
    """The left and right edges of `locator` on the page."""
    found = locator.bounding_box()
    assert found is not None, f"{locator} is not laid out"
    return found["x"], found["x"] + found["width"]


def assert_inside(inner: Locator, outer: Locator, what: str) -> None:
    left, right = box(inner)
    outer_left, outer_right = box(outer)
    assert left >= outer_left - SLACK and right <= outer_right + SLACK, (
        f"{what} spans {left:.0f}..{right:.0f}, outside {outer_left:.0f}..{outer_right:.0f}"
    )


def assert_fits(page: Page, answer: Locator) -> None:
    width = page.evaluate("window.innerWidth")
    column = page.locator(".messages")
    assert_inside(answer, column, "the answer")
    assert_inside(answer.locator(".message-body"), column, "the answer's body")
    assert box(answer)[1] <= width + SLACK, "the answer reaches past the window"

    # The code, and the code block in the answer's text, scroll inside their own boxes.
    for code, what in (
        (answer.get_by_test_id("step-code"), "the step's code"),
        (answer.locator(".markdown .codeblock"), "the answer's code block"),
    ):
        assert_inside(code, answer, what)
        assert code.evaluate(SCROLL_SIDEWAYS) > 0, f"{what} cannot be scrolled sideways"

    # The output and the tool's input stay in the message, wrapped or scrolled.
    assert_inside(answer.get_by_test_id("step-output"), answer, "the output")
    assert_inside(answer.locator(".tool-input p"), answer, "the tool input")
    assert_inside(answer.locator(".tool-card > summary"), answer, "the tool card's summary")

    # Neither the page nor the conversation's scroller scrolls sideways.
    page_width = page.evaluate("document.documentElement.scrollWidth")
    assert page_width <= width, f"the page is {page_width}px wide in a {width}px window"
    scroller = page.locator(".scroller").evaluate("(el) => [el.scrollWidth, el.clientWidth]")
    assert scroller[0] <= scroller[1], f"the conversation scrolls sideways: {scroller}"


def test_a_long_code_line_scrolls_in_its_block_and_never_widens_the_page(
    open_page: OpenPage, person: Person
) -> None:
    page = open_page()
    login(page, person)
    drop_file(page, "sales.csv", SALES)
    expect(page.get_by_test_id("file-card")).to_contain_text("2 rows")
    answer = ask(page, "Q-UI-WIDE print a long line", "react")
    expect(answer).to_have_attribute("data-run-state", "done", timeout=60_000)
    expect(answer.get_by_test_id("step-code")).to_contain_text(WIDE_WORD)
    expect(answer.get_by_test_id("step-output")).to_contain_text(WIDE_WORD)
    expect(answer.locator(".tool-input")).to_contain_text(WIDE_WORD)
    expect(answer.locator(".markdown")).to_contain_text("It printed one long line:")
    expect(answer.locator(".markdown .codeblock")).to_contain_text(WIDE_WORD)

    assert_fits(page, answer)
    screenshot(page, "wide-line")

    # On a phone's width too.
    page.set_viewport_size({"width": 390, "height": 844})
    expect(page.locator(".sidebar")).to_be_hidden()  # slid away, out of the screenshot
    assert_fits(page, answer)
    screenshot(page, "wide-line-phone")

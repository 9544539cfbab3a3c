"""Edit a message, regenerate an answer, and move between branches, in the browser; each
branch keeps its own data (issue 27)."""

from __future__ import annotations

from playwright.sync_api import Locator, Page, expect

from tests.ui.browser import Person, ask, login
from tests.ui.conftest import OpenPage

DONE = 60_000


def turn(page: Page, tag: str, what: str = "run it") -> Locator:
    answer = ask(page, f"{tag}: {what}", agent="react")
    expect(answer).to_have_attribute("data-run-state", "done", timeout=DONE)
    return answer


def output_of(answer: Locator) -> Locator:
    return answer.get_by_test_id("step-output")


def ready(answer: Locator) -> None:
    """The turn's stored ids have reached the view: its answer can be regenerated."""
    expect(answer.get_by_test_id("regenerate")).to_be_enabled(timeout=DONE)


def test_edit_regenerate_and_switch_branches_with_their_own_data(
    open_page: OpenPage, person: Person
) -> None:
    page = open_page()
    login(page, person)
    for tag in ("Q-UI-BR-ONE", "Q-UI-BR-TWO"):
        ready(turn(page, tag))
    third = turn(page, "Q-UI-BR-THREE")
    expect(output_of(third)).to_contain_text("x is 2")
    ready(third)

    # Edit the second question: the answers after it go, and x is rolled back to 1 first.
    second = page.get_by_test_id("message-user").nth(1)
    second.get_by_test_id("edit-message").click()
    editor = second.get_by_test_id("edit-input")
    expect(editor).to_have_value("Q-UI-BR-TWO: run it")
    editor.fill("Q-UI-BR-FIVE: run it")
    editor.press("Enter")
    answer = page.get_by_test_id("message-assistant").last
    expect(answer).to_have_attribute("data-run-state", "done", timeout=DONE)
    expect(output_of(answer)).to_contain_text("x is 5")
    expect(page.get_by_test_id("message-user")).to_have_count(2)
    ready(answer)
    fourth = turn(page, "Q-UI-BR-FOUR")
    expect(output_of(fourth)).to_contain_text("x is 5")
    ready(fourth)
    edited = page.get_by_test_id("message-user").nth(1)
    expect(edited.get_by_test_id("branch-position")).to_have_text("2 / 2")

    # Back to the first branch: its messages, and its x.
    edited.get_by_test_id("branch-previous").click()
    expect(page.get_by_test_id("message-user").nth(2)).to_contain_text("Q-UI-BR-THREE")
    expect(
        page.get_by_test_id("message-user").nth(1).get_by_test_id("branch-position")
    ).to_have_text("1 / 2")
    sixth = turn(page, "Q-UI-BR-SIX")
    expect(output_of(sixth)).to_contain_text("x is 2")
    ready(sixth)

    # Regenerate that answer: a sibling; both stay, and a reload shows the same branches.
    sixth.get_by_test_id("regenerate").click()
    again = page.get_by_test_id("message-assistant").last
    expect(again).to_have_attribute("data-run-state", "done", timeout=DONE)
    expect(again.get_by_test_id("branch-position")).to_have_text("2 / 2", timeout=DONE)
    expect(output_of(again)).to_contain_text("x is 2")
    page.reload()
    expect(page.get_by_test_id("message-user")).to_have_count(4, timeout=DONE)
    last = page.get_by_test_id("message-assistant").last
    expect(last.get_by_test_id("branch-position")).to_have_text("2 / 2")
    expect(
        page.get_by_test_id("message-user").nth(1).get_by_test_id("branch-position")
    ).to_have_text("1 / 2")
    last.get_by_test_id("branch-previous").click()
    expect(
        page.get_by_test_id("message-assistant").last.get_by_test_id("branch-position")
    ).to_have_text("1 / 2")
    # The export follows the branch on view.
    href = page.get_by_test_id("export-ipynb").get_attribute("href") or ""
    assert "leaf=" in href

"""The sidebar's conversations, the composer's keys, and the layout on a phone."""

from __future__ import annotations

import re

from playwright.sync_api import Dialog, Page, Route, expect

from tests.support.agent_script import SALES
from tests.ui.browser import Person, drop_file, last_answer, login, screenshot, send
from tests.ui.conftest import OpenPage


def test_conversations_are_listed_newest_first_opened_and_deleted_after_confirming(
    open_page: OpenPage,
    person: Person,
) -> None:
    page = open_page()
    login(page, person)
    composer = page.get_by_test_id("composer")
    composer.fill("Q-UI-HELLO first")
    composer.press("Shift+Enter")  # a new line, not a send
    composer.type("question")
    expect(composer).to_have_value("Q-UI-HELLO first\nquestion")
    composer.press("Enter")
    expect(last_answer(page)).to_contain_text("Hello! Ask me about your data.")
    expect(composer).to_have_value("")

    page.get_by_test_id("new-chat").click()
    expect(page.get_by_test_id("message-user")).to_have_count(0)
    send(page, "Q-UI-HELLO second one")
    expect(last_answer(page)).to_have_attribute("data-run-state", "done")

    items = page.get_by_test_id("conversation-item")
    expect(items).to_have_count(2)
    expect(items.nth(0)).to_contain_text("Q-UI-HELLO second one")  # newest first
    expect(items.nth(1)).to_have_text("Q-UI-HELLO first question×")  # titled on one line

    items.nth(1).get_by_role("button", name="Q-UI-HELLO first question", exact=True).click()
    expect(page.get_by_test_id("message-user")).to_contain_text("question")

    answers: list[str] = []

    def answer(dialog: Dialog, accept: bool) -> None:
        answers.append(dialog.message)
        if accept:
            dialog.accept()
        else:
            dialog.dismiss()

    page.once("dialog", lambda dialog: answer(dialog, accept=False))
    items.nth(1).get_by_test_id("delete-conversation").click()
    expect(items).to_have_count(2)  # dismissed: nothing is deleted
    page.once("dialog", lambda dialog: answer(dialog, accept=True))
    items.nth(1).get_by_test_id("delete-conversation").click()
    expect(items).to_have_count(1)
    expect(items.first).to_contain_text("Q-UI-HELLO second one")
    expect(page.get_by_test_id("message-user")).to_have_count(0)  # the open one went with it
    assert len(answers) == 2 and "Delete" in answers[0]

    page.reload()
    expect(page.get_by_test_id("conversation-item")).to_have_count(1)


class HeldList:
    """The sign-in's GET /api/conversations, held until `release`: a busy server's slow answer."""

    PATTERN = "**/api/conversations"

    def __init__(self, page: Page) -> None:
        self.page = page
        self.held: list[Route] = []
        page.route(self.PATTERN, self.hold)

    def hold(self, route: Route) -> None:
        self.held.append(route)

    def release(self) -> None:
        assert len(self.held) == 1
        self.held[0].continue_()
        self.page.unroute(self.PATTERN, self.hold)


def test_a_message_sent_while_the_conversations_load_waits_and_is_not_lost(
    open_page: OpenPage, person: Person
) -> None:
    """On a busy server the composer shows before the list of conversations has come: a
    message sent then used to be wiped from view when the list arrived (CI saw it twice)."""
    page = open_page()
    conversations = HeldList(page)
    login(page, person)
    send(page, "Q-UI-HELLO typed at once")
    hint = page.get_by_test_id("composer-hint")
    expect(hint).to_have_text("Sends once the conversation has loaded…")
    expect(page.get_by_test_id("composer")).to_have_value("Q-UI-HELLO typed at once")
    expect(page.get_by_test_id("message-user")).to_have_count(0)

    conversations.release()
    answer = last_answer(page)
    expect(answer).to_contain_text("Hello! Ask me about your data.")
    expect(answer).to_have_attribute("data-run-state", "done")
    expect(page.get_by_test_id("message-user")).to_contain_text("Q-UI-HELLO typed at once")
    expect(page.get_by_test_id("message-user")).to_have_count(1)
    expect(page.get_by_test_id("composer")).to_have_value("")
    expect(hint).to_have_text("Enter to send · Shift+Enter for a new line")
    expect(page.get_by_test_id("conversation-item")).to_have_count(1)


def test_a_file_dropped_while_the_conversations_load_is_uploaded_once_they_are_shown(
    open_page: OpenPage, person: Person
) -> None:
    page = open_page()
    conversations = HeldList(page)
    login(page, person)
    drop_file(page, "sales.csv", SALES)
    expect(page.get_by_test_id("file-card")).to_have_count(0)

    conversations.release()
    card = page.get_by_test_id("file-card")
    expect(card).to_contain_text("sales.csv")
    expect(card).to_contain_text("2 rows")
    expect(page.get_by_test_id("files-panel").get_by_role("link", name="sales.csv")).to_be_visible()
    expect(page.get_by_test_id("conversation-item")).to_have_count(1)


def test_the_ui_fits_a_375_px_phone(open_page: OpenPage, person: Person) -> None:
    page = open_page(width=375, height=740)
    login(page, person)
    send(page, "Q-UI-HELLO on a phone")
    expect(last_answer(page)).to_contain_text("Hello! Ask me about your data.")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    expect(page.get_by_test_id("send")).to_be_in_viewport()
    expect(page.get_by_test_id("agent-select")).to_be_in_viewport()
    expect(page.get_by_test_id("model-select")).to_be_in_viewport()
    expect(page.get_by_test_id("status-line")).to_be_visible()
    screenshot(page, "phone-375")

    toggle = page.get_by_test_id("sidebar-toggle")
    toggle.click()
    expect(page.get_by_test_id("conversation-list")).to_be_in_viewport()
    screenshot(page, "phone-375-sidebar")
    page.keyboard.press("Escape")
    expect(toggle).to_have_attribute("aria-expanded", "false")


def test_everything_works_from_the_keyboard(open_page: OpenPage, person: Person) -> None:
    page = open_page()
    keys = page.keyboard
    expect(page.get_by_test_id("login-username")).to_be_focused()
    keys.type(person.username)
    keys.press("Tab")
    keys.type(person.password)
    keys.press("Enter")
    composer = page.get_by_test_id("composer")
    expect(composer).to_be_focused()
    keys.type("Q-UI-HELLO typed only")
    keys.press("Enter")
    expect(last_answer(page)).to_contain_text("Hello! Ask me about your data.")

    # Tab reaches the agent selector, and arrow keys choose an agent.
    composer.focus()
    for _ in range(10):
        keys.press("Tab")
        if page.evaluate("document.activeElement.dataset.testid") == "agent-select":
            break
    expect(page.get_by_test_id("agent-select")).to_be_focused()
    keys.press("ArrowDown")
    expect(page.get_by_test_id("agent-select")).to_have_value("chat")

    # New chat, then Tab to the conversation below it, opened with Enter.
    page.get_by_test_id("new-chat").focus()
    keys.press("Enter")
    expect(page.get_by_test_id("message-user")).to_have_count(0)
    expect(composer).to_be_focused()  # ready to type
    page.get_by_test_id("new-chat").focus()
    keys.press("Tab")
    opener = page.get_by_role("button", name="Q-UI-HELLO typed only", exact=True)
    expect(opener).to_be_focused()
    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") != "none"
    keys.press("Enter")
    expect(page.get_by_test_id("message-user")).to_contain_text("Q-UI-HELLO typed only")


def test_dark_mode_follows_the_os(open_page: OpenPage, person: Person) -> None:
    def background(page: Page) -> int:
        color = page.evaluate("getComputedStyle(document.body).backgroundColor")
        return sum(int(part) for part in re.findall(r"\d+", color)[:3])

    light, dark = open_page(), open_page(dark=True)
    for page in (light, dark):
        login(page, person)
    assert background(light) > 600 and background(dark) < 150
    screenshot(dark, "dark")

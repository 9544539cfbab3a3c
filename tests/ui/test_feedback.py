"""Issue 41: thumbs on an answer in the browser, a note on a thumb down, kept and shown
again when the conversation is opened again, and taken back."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.support.live_server import LiveServer
from tests.ui.browser import Person, ask, login
from tests.ui.conftest import OpenPage

DONE = 60_000


def test_a_thumb_down_with_a_note_is_kept_and_can_be_taken_back(
    open_page: OpenPage, person: Person, ui_server: LiveServer
) -> None:
    page = open_page()
    login(page, person)
    answer = ask(page, "Q-UI-HELLO: rate me", agent="chat")
    expect(answer).to_have_attribute("data-run-state", "done", timeout=DONE)
    down = answer.get_by_test_id("thumb-down")
    expect(down).to_be_visible(timeout=DONE)  # once the answer's stored id is known
    expect(down).to_have_attribute("aria-pressed", "false")

    down.click()
    expect(answer.get_by_test_id("thumb-down")).to_have_attribute("aria-pressed", "true")
    note = answer.get_by_test_id("feedback-note")
    note.fill("It did not look at my file.")
    note.press("Enter")
    expect(answer.get_by_test_id("feedback-saved-note")).to_have_text("It did not look at my file.")

    page.reload()  # the conversation opens again, with the feedback stored on the answer
    answer = page.get_by_test_id("message-assistant").last
    expect(answer.get_by_test_id("thumb-down")).to_have_attribute("aria-pressed", "true")
    expect(answer.get_by_test_id("feedback-saved-note")).to_have_text("It did not look at my file.")
    with ui_server.client(ui_server.token(person.username, person.password)) as http:
        assert http.get("/api/users/me/usage").json()["feedback"] == {
            "scripted": {"up": 0, "down": 1}
        }

    answer.get_by_test_id("thumb-down").click()  # pressed again: taken back
    expect(answer.get_by_test_id("thumb-down")).to_have_attribute("aria-pressed", "false")
    expect(answer.get_by_test_id("feedback-note")).to_have_count(0)
    answer.get_by_test_id("thumb-up").click()
    expect(answer.get_by_test_id("thumb-up")).to_have_attribute("aria-pressed", "true")
    with ui_server.client(ui_server.token(person.username, person.password)) as http:
        assert http.get("/api/users/me/usage").json()["feedback"] == {
            "scripted": {"up": 1, "down": 0}
        }

"""The status line: which LLM and sandbox answer, and the demo model's note."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.conftest import ADMIN_PASSWORD, StartServer
from tests.ui.browser import Person, login
from tests.ui.conftest import OpenPage


def test_on_the_embedded_model_a_note_says_it_is_a_demo_and_how_to_connect_ollama(
    open_page: OpenPage, start_server: StartServer
) -> None:
    server = start_server(LLM_BACKEND="embedded")
    page = open_page(server=server)
    login(page, Person("admin", ADMIN_PASSWORD))
    status = page.get_by_test_id("status-line")
    expect(status).to_contain_text("LLM: embedded")
    note = status.get_by_role("note")
    expect(note).to_contain_text("Demo model")
    expect(note).to_contain_text("ollama serve")
    expect(note).to_contain_text("OLLAMA_MODEL=")


def test_on_a_real_backend_there_is_no_demo_note(open_page: OpenPage, person: Person) -> None:
    page = open_page()
    login(page, person)
    status = page.get_by_test_id("status-line")
    expect(status).to_contain_text("LLM: scripted")
    expect(status.get_by_role("note")).to_have_count(0)

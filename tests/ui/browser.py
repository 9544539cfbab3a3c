"""Driving the UI in Debian's Chromium: console watching and the steps a person takes."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from playwright.sync_api import ConsoleMessage, Locator, Page, expect

from backend.storage import open_store
from backend.storage.sessions import session_key
from tests.support.live_server import ROOT, LiveServer

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps dialling Google's hosts.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
SCREENSHOTS = ROOT / "data" / "ui-screenshots"
# Records Content-Security-Policy violations before any of the page's scripts run.
CSP_WATCH = (
    "window.__csp = [];"
    "document.addEventListener('securitypolicyviolation',"
    " (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));"
)


@dataclass
class ConsoleWatch:
    """What the pages complained about; HTTP statuses a test provokes on purpose are fine."""

    errors: list[str] = field(default_factory=list)
    expected_statuses: set[int] = field(default_factory=set)
    expected_failures: set[str] = field(default_factory=set)  # e.g. net::ERR_CONNECTION_RESET

    def expect_status(self, status: int) -> None:
        self.expected_statuses.add(status)

    def expect_failure(self, reason: str) -> None:
        self.expected_failures.add(reason)

    def on_console(self, message: ConsoleMessage) -> None:
        if message.type == "error" or "Content Security Policy" in message.text:
            self.errors.append(message.text)

    def on_page_error(self, error: Exception) -> None:
        self.errors.append(f"uncaught: {error}")

    def unexpected(self) -> list[str]:
        def expected(text: str) -> bool:
            status = re.search(r"Failed to load resource: .*status of (\d{3})", text)
            if status is not None and int(status.group(1)) in self.expected_statuses:
                return True
            failure = text.removeprefix("Failed to load resource: ")
            return failure != text and failure in self.expected_failures

        return [text for text in self.errors if not expected(text)]


class Person(NamedTuple):
    username: str
    password: str


def login(page: Page, person: Person, password: str | None = None) -> None:
    """Sign in through the form; with the right password, wait for the composer."""
    page.get_by_test_id("login-username").fill(person.username)
    page.get_by_test_id("login-password").fill(password or person.password)
    page.get_by_test_id("login-submit").click()
    if password is None:
        expect(page.get_by_test_id("composer")).to_be_visible()


def screenshot(page: Page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def drop_file(page: Page, name: str, data: bytes, mime: str = "text/csv") -> None:
    """Drag a file onto the page and drop it, as a person would from their desktop."""
    transfer = page.evaluate_handle(
        """([name, bytes, mime]) => {
            const transfer = new DataTransfer();
            transfer.items.add(new File([new Uint8Array(bytes)], name, {type: mime}));
            return transfer;
        }""",
        [name, list(data), mime],
    )
    for kind in ("dragenter", "dragover", "drop"):
        page.dispatch_event("body", kind, {"dataTransfer": transfer})


def send(page: Page, text: str) -> None:
    composer = page.get_by_test_id("composer")
    composer.fill(text)
    composer.press("Enter")


def last_answer(page: Page) -> Locator:
    return page.get_by_test_id("message-assistant").last


def ask(page: Page, text: str, agent: str | None = None) -> Locator:
    """Send `text` (to `agent`, if given) and return its answer's message."""
    if agent:
        page.get_by_test_id("agent-select").select_option(agent)
    send(page, text)
    return last_answer(page)


def store_conversation(
    server: LiveServer, person: Person, title: str, turns: list[tuple[str, str, dict[str, Any]]]
) -> None:
    """Store a conversation of `person`'s straight into the server's database: each turn is
    (question, answer, the answer's metadata), as a finished turn leaves them."""
    store = open_store(
        server.env.get("DATABASE_URL", os.environ.get("DATABASE_URL", "")), server.data_dir
    )
    try:
        user = store.get_user(person.username)
        assert user is not None
        key = session_key(user.id, os.urandom(8).hex())
        conversation = store.conversation_for_session(user.id, key, title)
        for question, answer, metadata in turns:
            store.add_message(conversation.id, "user", question)
            store.add_message(conversation.id, "assistant", answer, metadata)
    finally:
        store.close()

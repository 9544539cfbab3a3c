"""The browser UI in real Chromium: Debian's, driven by Playwright (never a downloaded one).

One live server with the scripted model serves every UI test; each test tags its
messages so the script answers it alone. Every page fails its test on a console
error, an uncaught exception or a Content-Security-Policy violation; a test that
provokes an HTTP error on purpose names the status it expects.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from tests.conftest import scripted_server
from tests.support.live_server import LiveServer
from tests.ui.browser import CHROMIUM, CHROMIUM_ARGS, CSP_WATCH, ConsoleWatch, Person
from tests.ui.script import replies

OpenPage = Callable[..., Page]


@pytest.fixture(scope="session")
def ui_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # Uploads over 1 MB are refused, so the UI's "too large" message can be shown; tables
    # over 20 KB get a Parquet copy, so its progress can be.
    with scripted_server(
        tmp_path_factory.mktemp("ui"),
        replies(),
        MAX_UPLOAD_SIZE_MB="1",
        PARQUET_CONVERSION_MB="0.02",
        SANDBOX_SELF_CHECK="true",  # the status line shows the check, as a user sees it
    ) as live:
        yield live


# Package-scoped: Playwright's sync API keeps its event loop running in this thread while
# it is open, and an async test that ran after a UI test in the same process (the
# suite runs in several processes) would find it and fail.
@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def person(ui_server: LiveServer) -> Person:
    """A user of its own for each test, so no test sees another's conversations."""
    name = f"user-{secrets.token_hex(4)}"
    password = secrets.token_urlsafe(12)
    with ui_server.client() as http:
        response = http.post("/api/users", json={"username": name, "password": password})
    assert response.status_code == 201, response.text
    return Person(name, password)


@pytest.fixture
def watch() -> ConsoleWatch:
    return ConsoleWatch()


@pytest.fixture
def open_page(browser: Browser, ui_server: LiveServer, watch: ConsoleWatch) -> Iterator[OpenPage]:
    """A fresh browser context on the UI; fails the test on console errors or CSP reports."""
    pages: list[Page] = []

    def open_(
        width: int = 1440, height: int = 900, server: LiveServer = ui_server, dark: bool = False
    ) -> Page:
        context = browser.new_context(
            viewport={"width": width, "height": height},
            color_scheme="dark" if dark else "light",
        )
        context.add_init_script(CSP_WATCH)
        page = context.new_page()
        page.on("console", watch.on_console)
        page.on("pageerror", watch.on_page_error)
        page.goto(server.url + "/")
        pages.append(page)
        return page

    yield open_
    violations = [
        v for page in pages if not page.is_closed() for v in page.evaluate("window.__csp")
    ]
    for page in pages:
        page.context.close()
    assert not violations, f"CSP violations: {violations}"
    assert not watch.unexpected(), f"console errors: {watch.unexpected()}"

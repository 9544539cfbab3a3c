"""The status line's sandbox part: broken, with bubblewrap's reason, when no sandbox starts."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.conftest import ADMIN_PASSWORD, StartServer, write_replies
from tests.support.broken_bwrap import MISSING, broken_bwrap_path
from tests.ui.browser import Person, login, screenshot
from tests.ui.conftest import OpenPage

CHECK_SECONDS = 120  # the start-up check's first sandbox imports pandas and matplotlib

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")


def test_a_sandbox_that_cannot_start_shows_as_broken_with_the_reason(
    open_page: OpenPage, start_server: StartServer, tmp_path: Path
) -> None:
    server = start_server(
        PATH=broken_bwrap_path(tmp_path / "bin", os.environ["PATH"]),
        SCRIPTED_REPLIES=write_replies(tmp_path / "replies.json", []),
        SANDBOX_SELF_CHECK="true",
    )
    page = open_page(server=server)
    login(page, Person("admin", ADMIN_PASSWORD))
    sandbox = page.get_by_test_id("sandbox-status")
    # The line asks again while the server's check runs, and then says what it found.
    expect(sandbox).to_contain_text("Sandbox: broken", timeout=CHECK_SECONDS * 1000)
    expect(sandbox).to_contain_text("Can't find source path")
    expect(sandbox).not_to_contain_text(MISSING)
    expect(sandbox).not_to_contain_text("isolated")
    expect(sandbox).to_have_class(re.compile(r"\bstatus-bad\b"))
    screenshot(page, "sandbox-broken")


def test_a_working_sandbox_shows_as_isolated_once_checked(
    open_page: OpenPage, person: Person
) -> None:
    page = open_page()
    login(page, person)
    sandbox = page.get_by_test_id("sandbox-status")
    expect(sandbox).to_have_text("Sandbox: bwrap · isolated", timeout=CHECK_SECONDS * 1000)
    expect(sandbox).not_to_have_class(re.compile(r"\bstatus-(bad|warn)\b"))

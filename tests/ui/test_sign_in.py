"""Signing in and out, and the status line the signed-in page shows."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.ui.browser import ConsoleWatch, Person, login, screenshot
from tests.ui.conftest import OpenPage


def test_a_bad_password_gets_a_clear_message_and_the_right_one_signs_in(
    open_page: OpenPage, person: Person, watch: ConsoleWatch
) -> None:
    watch.expect_status(401)
    page = open_page()
    login(page, person, password="not-the-password")
    error = page.locator("#login-error")
    expect(error).to_be_visible()
    expect(error).to_contain_text("password")
    expect(page.get_by_test_id("composer")).to_be_hidden()
    screenshot(page, "login-error")

    login(page, person)
    expect(error).to_be_hidden()
    status = page.get_by_test_id("status-line")
    expect(status).to_contain_text("scripted")
    expect(status).to_contain_text("Sandbox: bwrap")

    page.reload()  # the token survives a reload
    expect(page.get_by_test_id("composer")).to_be_visible()

    page.get_by_test_id("logout").click()
    expect(page.get_by_test_id("login-submit")).to_be_visible()
    page.reload()  # and signing out forgets it
    expect(page.get_by_test_id("login-submit")).to_be_visible()
    cookies = page.context.cookies()
    assert not [cookie for cookie in cookies if cookie["name"] == "pda_token"]


def test_sign_in_sets_an_http_only_strict_cookie_for_session_files(
    open_page: OpenPage, person: Person
) -> None:
    page = open_page()
    login(page, person)
    (cookie,) = [c for c in page.context.cookies() if c["name"] == "pda_token"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/api"
    assert page.evaluate("document.cookie") == ""  # scripts cannot read it

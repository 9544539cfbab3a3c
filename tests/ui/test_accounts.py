"""The Account and Users dialogs in Chromium: an admin creates, limits and disables a
user; a user creates an API key (shown once), uses it, revokes it, changes their
password without being signed out, and signs out everywhere."""

from __future__ import annotations

import re
import secrets

import httpx
from playwright.sync_api import Dialog, expect

from tests.conftest import ADMIN_PASSWORD
from tests.support.live_server import LiveServer
from tests.ui.browser import ConsoleWatch, Person, login, screenshot
from tests.ui.conftest import OpenPage


def me(server: LiveServer, credential: str) -> httpx.Response:
    return httpx.get(
        f"{server.url}/api/users/me", headers={"Authorization": f"Bearer {credential}"}
    )


def test_the_admin_creates_limits_disables_resets_and_deletes_a_user(
    open_page: OpenPage, ui_server: LiveServer
) -> None:
    page = open_page()
    login(page, Person("admin", ADMIN_PASSWORD))
    page.get_by_test_id("admin-open").click()
    dialog = page.get_by_test_id("admin-dialog")
    expect(dialog).to_be_visible()

    name, password = f"new-{secrets.token_hex(4)}", secrets.token_urlsafe(12)
    page.get_by_test_id("user-username").fill(name)
    page.get_by_test_id("user-password").fill(password)
    page.get_by_test_id("user-create").click()
    expect(dialog.get_by_role("status")).to_contain_text(f"{name} can sign in now")
    row = page.get_by_test_id("user-row").filter(has_text=name)
    expect(row).to_have_count(1)
    token = ui_server.token(name, password)  # the new user signs in
    assert me(ui_server, token).json()["limits"]["max_runs"] is None

    row.get_by_label(f"Runs for {name}").fill("2")
    row.get_by_test_id("row-limits").click()
    expect(dialog.get_by_role("status")).to_contain_text(f"Limits of {name} saved")
    assert me(ui_server, token).json()["limits"] == {
        "max_sandboxes": None,
        "max_runs": 2,
        "max_disk_mb": None,
        "max_tokens_per_day": None,
        "max_sandbox_seconds_per_day": None,
    }

    row.get_by_test_id("row-disable").click()
    expect(row).to_contain_text("disabled")
    screenshot(page, "admin-users")
    assert me(ui_server, token).status_code == 401
    row.get_by_test_id("row-enable").click()
    expect(row).not_to_contain_text("disabled")
    assert me(ui_server, token).status_code == 200

    row.get_by_text("Password…").click()
    row.get_by_label(f"New password for {name}").fill("reset-by-the-admin")
    row.get_by_test_id("row-password").click()
    expect(dialog.get_by_role("status")).to_contain_text(f"Password of {name} set")
    assert me(ui_server, token).status_code == 401
    token = ui_server.token(name, "reset-by-the-admin")

    page.once("dialog", lambda confirm: confirm.accept())
    row.get_by_test_id("row-delete").click()
    expect(dialog.get_by_role("status")).to_contain_text(f"{name} is deleted")
    expect(row).to_have_count(0)
    assert me(ui_server, token).status_code == 401
    gone = httpx.post(
        f"{ui_server.url}/api/auth/login",
        json={"username": name, "password": "reset-by-the-admin"},
    )
    assert gone.status_code == 401

    # The admin's own row offers neither Disable nor Delete.
    own = page.get_by_test_id("user-row").filter(has_text="(you)")
    expect(own.get_by_test_id("row-limits")).to_be_visible()
    expect(own.get_by_test_id("row-disable")).to_have_count(0)
    expect(own.get_by_test_id("row-delete")).to_have_count(0)


def test_an_ordinary_user_sees_no_users_page(open_page: OpenPage, person: Person) -> None:
    page = open_page()
    login(page, person)
    expect(page.get_by_test_id("account-open")).to_be_visible()
    expect(page.get_by_test_id("admin-open")).to_be_hidden()


def test_a_user_creates_an_api_key_shown_once_and_revokes_it(
    open_page: OpenPage, person: Person, ui_server: LiveServer
) -> None:
    page = open_page()
    login(page, person)
    page.get_by_test_id("account-open").click()
    dialog = page.get_by_test_id("account-dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("No API keys yet")

    page.get_by_test_id("key-name").fill("notebook")
    page.get_by_test_id("key-create").click()
    secret = page.get_by_test_id("key-secret")
    expect(secret).to_have_value(re.compile(r"^pda-[A-Za-z0-9_-]{43}$"))
    key = secret.input_value()
    item = page.get_by_test_id("key-item")
    expect(item).to_have_count(1)
    expect(item).to_contain_text("notebook")
    expect(item).to_contain_text("last used never")
    screenshot(page, "account-api-key")
    assert me(ui_server, key).json()["username"] == person.username

    # Shown once: closed and opened again, the key is nowhere on the page.
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    page.get_by_test_id("account-open").click()
    expect(item).to_have_count(1)
    expect(secret).to_be_hidden()
    assert key not in page.content()
    assert key not in page.evaluate("document.getElementById('key-secret').value")
    expect(item).not_to_contain_text("last used never")  # it was used above

    page.once("dialog", lambda confirm: confirm.accept())
    item.get_by_test_id("key-revoke").click()
    expect(item).to_have_count(0)
    expect(dialog).to_contain_text("No API keys yet")
    assert me(ui_server, key).status_code == 401


def test_a_user_changes_their_password_and_stays_signed_in(
    open_page: OpenPage, person: Person, ui_server: LiveServer, watch: ConsoleWatch
) -> None:
    watch.expect_status(400)  # the wrong current password, on purpose
    elsewhere = ui_server.token(person.username, person.password)
    page = open_page()
    login(page, person)
    page.get_by_test_id("account-open").click()
    page.get_by_test_id("password-current").fill("not-my-password")
    page.get_by_test_id("password-new").fill("a-brand-new-password")
    page.get_by_test_id("password-submit").click()
    expect(page.locator("#password-error")).to_contain_text("current password")

    page.get_by_test_id("password-current").fill(person.password)
    page.get_by_test_id("password-new").fill("a-brand-new-password")
    page.get_by_test_id("password-submit").click()
    expect(page.locator("#password-done")).to_contain_text("Password changed")
    assert me(ui_server, elsewhere).status_code == 401  # signed out everywhere else

    page.reload()  # this page goes on with its new token
    expect(page.get_by_test_id("composer")).to_be_visible()
    assert ui_server.token(person.username, "a-brand-new-password")


def test_sign_out_everywhere_ends_every_session_and_key_and_shows_the_login(
    open_page: OpenPage, person: Person, ui_server: LiveServer
) -> None:
    elsewhere = ui_server.token(person.username, person.password)  # another device
    with ui_server.client(elsewhere) as http:
        key = http.post("/api/keys", json={"name": "script"}).json()["key"]
    other = f"other-{secrets.token_hex(4)}"
    with ui_server.client() as admin:
        made = admin.post("/api/users", json={"username": other, "password": "o" * 12})
        assert made.status_code == 201, made.text
    with ui_server.client(ui_server.token(other, "o" * 12)) as http:
        others_key = http.post("/api/keys", json={"name": "theirs"}).json()["key"]

    page = open_page()
    login(page, person)
    here = page.evaluate("localStorage.getItem('pda.token')")
    assert me(ui_server, here).status_code == 200
    page.get_by_test_id("account-open").click()
    expect(page.get_by_test_id("account-dialog")).to_contain_text("Sign out everywhere")
    screenshot(page, "account-sign-out-everywhere")
    questions: list[str] = []

    def accept(confirm: Dialog) -> None:
        questions.append(confirm.message)
        confirm.accept()

    page.once("dialog", accept)
    page.get_by_test_id("sign-out-everywhere").click()
    expect(page.get_by_test_id("login-username")).to_be_visible()
    expect(page.locator("#login-error")).to_contain_text("signed out everywhere")
    expect(page.get_by_test_id("account-dialog")).to_be_hidden()
    assert "API key" in questions[0]
    assert page.evaluate("localStorage.getItem('pda.token')") is None

    for credential in (here, elsewhere, key):
        assert me(ui_server, credential).status_code == 401
    assert me(ui_server, others_key).json()["username"] == other  # another user's: untouched
    login(page, person)  # the password still signs in
    expect(page.get_by_test_id("composer")).to_be_visible()

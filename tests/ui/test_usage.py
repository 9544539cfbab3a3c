"""Usage in Chromium (issue 30): a user opens Usage from the sidebar and sees today's
sandbox runs, tokens and disk against their limits and the last 14 days; the admin's
Users dialog shows what each user used today and sets their two daily limits."""

from __future__ import annotations

from datetime import UTC, datetime

from playwright.sync_api import expect

from tests.conftest import ADMIN_PASSWORD
from tests.support.live_server import LiveServer
from tests.ui.browser import Person, login, screenshot
from tests.ui.conftest import OpenPage


def test_a_user_sees_their_usage_and_the_admin_sets_daily_limits(
    open_page: OpenPage, ui_server: LiveServer, person: Person
) -> None:
    with ui_server.client(ui_server.token(person.username, person.password)) as http:
        for code in ("x = 1", "print(x + 1)"):
            ran = http.post("/api/tools/python_coder", json={"session_id": "use", "code": code})
            assert ran.status_code == 200 and ran.json()["success"], ran.text
        me = http.get("/api/users/me").json()

    page = open_page()
    login(page, person)
    page.get_by_test_id("usage-open").click()
    dialog = page.get_by_test_id("usage-dialog")
    expect(dialog).to_be_visible()
    expect(page.get_by_test_id("usage-tokens-text")).to_have_text("0 (no limit)")
    expect(page.get_by_test_id("usage-sandbox-text")).to_contain_text("s (no limit)")
    expect(page.get_by_test_id("usage-disk-text")).to_contain_text(" of 20 GB")
    days = page.get_by_test_id("usage-day")
    expect(days).to_have_count(14)
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    expect(days.first).to_have_attribute("data-day", today)  # newest first
    expect(days.first.locator("td").nth(2)).to_have_text("2")  # sandbox runs
    screenshot(page, "usage-dialog")
    dialog.get_by_role("button", name="Close").click()
    expect(dialog).to_be_hidden()
    expect(page.get_by_test_id("admin-open")).to_be_hidden()  # not an admin

    admin = open_page()
    login(admin, Person("admin", ADMIN_PASSWORD))
    admin.get_by_test_id("admin-open").click()
    row = admin.get_by_test_id("user-row").filter(has_text=person.username)
    expect(row.get_by_test_id("user-usage")).to_contain_text("0 tokens")
    expect(row.get_by_test_id("user-usage")).to_contain_text("2 runs")
    row.get_by_label(f"Tokens per day for {person.username}").fill("5000")
    row.get_by_label(f"Sandbox seconds per day for {person.username}").fill("60")
    row.get_by_test_id("row-limits").click()
    expect(admin.get_by_test_id("admin-dialog").get_by_role("status")).to_contain_text(
        f"Limits of {person.username} saved."
    )
    screenshot(admin, "usage-admin-users")
    with ui_server.client() as http:
        limits = http.get(f"/api/users/{me['id']}/usage").json()["limits"]
    assert limits["max_tokens_per_day"] == 5000 and limits["max_sandbox_seconds_per_day"] == 60

    page.get_by_test_id("usage-open").click()
    expect(page.get_by_test_id("usage-tokens-text")).to_have_text("0 of 5,000")
    expect(page.get_by_test_id("usage-sandbox-text")).to_contain_text(" of 60.0 s")
    expect(page.get_by_test_id("usage-today").locator("meter")).to_have_count(3)

"""The MCP servers dialog in Chromium: an admin registers our own /mcp endpoint as an HTTP
MCP server, with an API key as its sealed secret (named on the page, its value never),
allows one of its tools, lets one user use it, disables and deletes it. An ordinary user
sees no button, and the API refuses them."""

from __future__ import annotations

import secrets
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.conftest import ADMIN_PASSWORD
from tests.support.live_server import LiveServer
from tests.support.mcp_keys import api_key
from tests.ui.browser import Person, login, screenshot
from tests.ui.conftest import OpenPage

OUR_TOOLS = ("run_python", "ask", "list_files", "describe_file", "list_sessions")


def registered(server: LiveServer, name: str) -> dict[str, Any] | None:
    """The MCP server `name` as the API lists it to the admin; None once it is gone."""
    with server.client() as admin:
        response = admin.get("/api/mcp-servers")
    assert response.status_code == 200, response.text
    return next((s for s in response.json() if s["name"] == name), None)


def user_id(server: LiveServer, username: str) -> int:
    with server.client() as admin:
        return next(u["id"] for u in admin.get("/api/users").json() if u["username"] == username)


def test_the_admin_registers_an_mcp_server_picks_its_tools_and_users_and_deletes_it(
    open_page: OpenPage, ui_server: LiveServer, person: Person
) -> None:
    key = api_key(ui_server, f"mcp-{secrets.token_hex(4)}")
    name = f"self_{secrets.token_hex(3)}"
    page = open_page()
    login(page, Person("admin", ADMIN_PASSWORD))
    page.get_by_test_id("mcp-open").click()
    dialog = page.get_by_test_id("mcp-dialog")
    expect(dialog).to_be_visible()

    page.get_by_test_id("mcp-name").fill(name)
    page.get_by_test_id("mcp-transport").select_option("http")
    page.get_by_test_id("mcp-url").fill(f"{ui_server.url}/mcp")
    page.get_by_test_id("mcp-secrets").fill(f"Authorization: Bearer {key}")
    page.get_by_test_id("mcp-create").click()
    expect(dialog.get_by_role("status")).to_contain_text(f"{name} is registered")
    row = page.get_by_test_id("mcp-server").filter(has_text=name)
    expect(row).to_have_count(1)
    expect(row.get_by_test_id("mcp-address")).to_have_text(f"{ui_server.url}/mcp")
    expect(row.get_by_test_id("mcp-secret-names")).to_have_text("Secrets: Authorization")
    expect(row.get_by_test_id("mcp-allowed")).to_have_text("Tools allowed: none")
    expect(row.get_by_test_id("mcp-used-by")).to_have_text("Used by: everyone")
    expect(page.get_by_test_id("mcp-secrets")).to_have_value("")
    assert key not in page.content()

    # Saved with its secret left empty, the server keeps it (the tools below need it).
    row.get_by_text("Change…").click()
    secret = row.get_by_label(f"New value of Authorization for {name}")
    expect(secret).to_have_attribute("type", "password")
    expect(secret).to_have_value("")
    row.get_by_test_id("mcp-change").click()
    saved = dialog.get_by_role("status")
    expect(saved).to_contain_text(f"{name} saved; its secrets: Authorization")

    row.get_by_test_id("mcp-tools").click()
    tools = row.get_by_test_id("mcp-tool-list")
    for tool in OUR_TOOLS:
        expect(tools.get_by_role("checkbox", name=f"Allow {tool}", exact=True)).not_to_be_checked()
    tools.get_by_role("checkbox", name="Allow list_files", exact=True).check()
    screenshot(page, "admin-mcp-tools")
    row.get_by_test_id("mcp-tools-save").click()
    expect(row.get_by_test_id("mcp-allowed")).to_have_text("Tools allowed: list_files")
    assert (registered(ui_server, name) or {})["allowed_tools"] == ["list_files"]

    row.get_by_text("Users…").click()
    row.get_by_test_id("mcp-access-some").check()
    row.get_by_role("checkbox", name=person.username, exact=True).check()
    screenshot(page, "admin-mcp-users")
    row.get_by_test_id("mcp-users").click()
    expect(row.get_by_test_id("mcp-used-by")).to_have_text(f"Used by: {person.username}")
    assert (registered(ui_server, name) or {})["user_ids"] == [user_id(ui_server, person.username)]

    row.get_by_text("Users…").click()
    row.get_by_test_id("mcp-access-everyone").check()
    expect(row.get_by_role("checkbox", name=person.username, exact=True)).to_be_disabled()
    row.get_by_test_id("mcp-users").click()
    expect(row.get_by_test_id("mcp-used-by")).to_have_text("Used by: everyone")
    assert (registered(ui_server, name) or {})["user_ids"] is None

    row.get_by_test_id("mcp-disable").click()
    expect(row).to_contain_text("disabled")
    assert (registered(ui_server, name) or {})["enabled"] is False
    assert key not in page.content()

    page.once("dialog", lambda confirm: confirm.accept())
    row.get_by_test_id("mcp-delete").click()
    expect(dialog.get_by_role("status")).to_contain_text(f"{name} is deleted")
    expect(row).to_have_count(0)
    assert registered(ui_server, name) is None


def test_an_ordinary_user_sees_no_mcp_servers_page(
    open_page: OpenPage, person: Person, ui_server: LiveServer
) -> None:
    page = open_page()
    login(page, person)
    expect(page.get_by_test_id("account-open")).to_be_visible()
    expect(page.get_by_test_id("mcp-open")).to_be_hidden()
    token = ui_server.token(person.username, person.password)
    refused = httpx.get(
        f"{ui_server.url}/api/mcp-servers", headers={"Authorization": f"Bearer {token}"}
    )
    assert refused.status_code == 403

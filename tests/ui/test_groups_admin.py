"""The Groups dialog in Chromium: an admin creates a group, gives it limits and one model,
adds a user to it from the Users dialog (a badge in their row), takes them out again with
the badge's remove button, and deletes the group. An ordinary user sees no Groups button."""

from __future__ import annotations

import os
import re
import secrets
from typing import Any

from playwright.sync_api import Dialog, expect

from backend.storage import open_store
from tests.conftest import ADMIN_PASSWORD
from tests.support.live_server import LiveServer
from tests.ui.browser import ConsoleWatch, Person, login, screenshot
from tests.ui.conftest import OpenPage


def stored(server: LiveServer, name: str) -> dict[str, Any] | None:
    """The group `name` as the API lists it to the admin; None once it is gone."""
    with server.client() as admin:
        response = admin.get("/api/groups")
    assert response.status_code == 200, response.text
    return next((g for g in response.json() if g["name"] == name), None)


def groups_of(server: LiveServer, username: str) -> list[dict[str, Any]]:
    with server.client() as admin:
        users = admin.get("/api/users").json()
    return next(u["groups"] for u in users if u["username"] == username)


def test_the_admin_creates_a_group_gives_it_limits_and_a_model_and_its_members(
    open_page: OpenPage, ui_server: LiveServer, person: Person
) -> None:
    name = f"analysts {secrets.token_hex(3)}"
    page = open_page()
    login(page, Person("admin", ADMIN_PASSWORD))
    page.get_by_test_id("groups-open").click()
    dialog = page.get_by_test_id("groups-dialog")
    expect(dialog).to_be_visible()

    page.get_by_test_id("group-name").fill(name)
    page.get_by_test_id("group-description").fill("The data team")
    page.get_by_test_id("group-create").click()
    expect(dialog.get_by_role("status")).to_contain_text(f"{name} is created")
    card = page.get_by_test_id("group").filter(has=page.get_by_label(f"Name of {name}"))
    expect(card).to_have_count(1)
    expect(card.get_by_label(f"Description of {name}")).to_have_value("The data team")
    expect(card.get_by_label(f"Runs for {name}")).to_have_attribute("placeholder", "no say")
    expect(card.get_by_test_id("group-models-say")).to_have_text("No say: none checked.")
    expect(card.get_by_test_id("group-servers")).to_contain_text("no say", ignore_case=True)
    expect(card.get_by_test_id("group-members")).to_have_text("No members yet.")

    card.get_by_label(f"Runs for {name}").fill("3")
    card.get_by_label(f"Tokens per day for {name}").fill("0")
    models = card.get_by_test_id("group-models")
    # "Every model" greys out the single ones; unchecked again, they come back.
    models.get_by_role("checkbox", name="Every model (*)").check()
    expect(models.get_by_role("checkbox", name="scripted", exact=True)).to_be_disabled()
    expect(card.get_by_test_id("group-models-say")).to_have_text("Members may use every model.")
    models.get_by_role("checkbox", name="Every model (*)").uncheck()
    models.get_by_role("checkbox", name="scripted", exact=True).check()
    expect(card.get_by_test_id("group-models-say")).to_have_text("Members may use scripted.")
    card.get_by_test_id("group-save").click()
    expect(dialog.get_by_role("status")).to_contain_text(f"{name} saved")
    group = stored(ui_server, name)
    assert group is not None
    assert group["description"] == "The data team"
    assert group["limits"] == {
        "max_sandboxes": None,
        "max_runs": 3,
        "max_disk_mb": None,
        "max_tokens_per_day": 0,
        "max_sandbox_seconds_per_day": None,
    }
    assert group["models"] == ["scripted"]
    assert group["mcp_server_ids"] is None
    # Drawn again from the server, the card shows what was stored.
    expect(card.get_by_label(f"Runs for {name}")).to_have_value("3")
    expect(models.get_by_role("checkbox", name="scripted", exact=True)).to_be_checked()
    screenshot(page, "admin-groups")

    # The Users dialog: add the person to the group, see its badge, take them out again.
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    page.get_by_test_id("admin-open").click()
    users = page.get_by_test_id("admin-dialog")
    row = page.get_by_test_id("user-row").filter(has_text=person.username)
    expect(row.get_by_test_id("user-group")).to_have_count(0)
    row.get_by_label(f"Group to add {person.username} to").select_option(label=name)
    row.get_by_test_id("row-group-add").click()
    expect(users.get_by_role("status")).to_contain_text(f"{person.username} is in {name} now")
    badge = row.get_by_test_id("user-group")
    expect(badge).to_have_count(1)
    expect(badge).to_contain_text(name)
    expect(badge).to_have_attribute("data-origin", "admin")
    # A group they are in is no longer offered to add them to.
    choice = row.get_by_label(f"Group to add {person.username} to")
    expect(choice.locator("option", has_text=name)).to_have_count(0)
    assert [(g["name"], g["origin"]) for g in groups_of(ui_server, person.username)] == [
        (name, "admin")
    ]
    screenshot(page, "admin-users-groups")

    row.get_by_role("button", name=f"Remove {person.username} from {name}").click()
    expect(users.get_by_role("status")).to_contain_text(f"{person.username} is no longer in {name}")
    expect(row.get_by_test_id("user-group")).to_have_count(0)
    assert groups_of(ui_server, person.username) == []

    # Back in the Groups dialog: a member, then deleting the group after confirming.
    row.get_by_label(f"Group to add {person.username} to").select_option(label=name)
    row.get_by_test_id("row-group-add").click()
    expect(row.get_by_test_id("user-group")).to_have_count(1)
    page.keyboard.press("Escape")
    page.get_by_test_id("groups-open").click()
    expect(card.get_by_test_id("group-member")).to_have_text(person.username)
    questions: list[str] = []

    def accept(confirm: Dialog) -> None:
        questions.append(confirm.message)
        confirm.accept()

    page.once("dialog", accept)
    card.get_by_test_id("group-delete").click()
    expect(dialog.get_by_role("status")).to_contain_text(f"{name} is deleted")
    expect(card).to_have_count(0)
    assert "1 member(s)" in questions[0]
    assert stored(ui_server, name) is None
    assert groups_of(ui_server, person.username) == []


def signed_in_by_sso(server: LiveServer, person: Person, group: str) -> None:
    """What a single sign-on leaves behind, written straight into the server's database:
    the person's name and email from the identity provider, and its group claim."""
    store = open_store(
        server.env.get("DATABASE_URL", os.environ.get("DATABASE_URL", "")), server.data_dir
    )
    try:
        user = store.get_user(person.username)
        assert user is not None
        store.update_user(
            user.id, email=f"{person.username}@example.org", display_name="Ada Lovelace"
        )
        store.sync_claimed_groups(user.id, [group])
    finally:
        store.close()


def test_a_group_from_sign_in_is_marked_and_removing_it_warns_it_comes_back(
    open_page: OpenPage, ui_server: LiveServer, person: Person
) -> None:
    name = f"claimed-{secrets.token_hex(3)}"
    signed_in_by_sso(ui_server, person, name)
    page = open_page()
    login(page, Person("admin", ADMIN_PASSWORD))
    page.get_by_test_id("admin-open").click()
    users = page.get_by_test_id("admin-dialog")
    row = page.get_by_test_id("user-row").filter(has_text=person.username)
    identity = row.get_by_test_id("user-identity")
    expect(identity).to_contain_text("Ada Lovelace")
    expect(identity).to_contain_text(f"{person.username}@example.org")
    badge = row.get_by_test_id("user-group")
    expect(badge).to_have_attribute("data-origin", "claim")
    expect(badge).to_have_attribute("title", re.compile("From sign-in"))
    expect(badge).to_contain_text(f"{name} (from sign-in)")
    screenshot(page, "admin-users-sign-in-group")

    page.keyboard.press("Escape")
    page.get_by_test_id("groups-open").click()
    card = page.get_by_test_id("group").filter(has=page.get_by_label(f"Name of {name}"))
    expect(card.get_by_test_id("group-member")).to_have_text(f"{person.username} from sign-in")
    expect(card.get_by_test_id("group-models-say")).to_have_text("No say: none checked.")
    card.scroll_into_view_if_needed()
    screenshot(page, "admin-groups-sign-in-member")
    page.keyboard.press("Escape")

    page.get_by_test_id("admin-open").click()
    questions: list[str] = []

    def accept(confirm: Dialog) -> None:
        questions.append(confirm.message)
        confirm.accept()

    page.once("dialog", accept)
    row.get_by_role("button", name=f"Remove {person.username} from {name}").click()
    expect(users.get_by_role("status")).to_contain_text("comes back at their next sign-in")
    expect(row.get_by_test_id("user-group")).to_have_count(0)
    assert "comes back at their next sign-in" in questions[0]
    assert groups_of(ui_server, person.username) == []
    with ui_server.client() as admin:
        group = stored(ui_server, name)
        assert group is not None
        assert admin.delete(f"/api/groups/{group['id']}").status_code == 204


def test_the_admin_is_told_why_a_group_is_refused(open_page: OpenPage, watch: ConsoleWatch) -> None:
    watch.expect_status(422)  # a name the server refuses, on purpose
    page = open_page()
    login(page, Person("admin", ADMIN_PASSWORD))
    page.get_by_test_id("groups-open").click()
    dialog = page.get_by_test_id("groups-dialog")
    page.get_by_test_id("group-create").click()
    expect(dialog.get_by_role("alert")).to_have_text("Enter a name for the group.")
    page.get_by_test_id("group-name").fill("-not a name")
    page.get_by_test_id("group-create").click()
    expect(dialog.get_by_role("alert")).to_contain_text("pattern")
    expect(dialog.get_by_role("status")).to_be_hidden()


def test_an_ordinary_user_sees_no_groups_page(open_page: OpenPage, person: Person) -> None:
    page = open_page()
    login(page, person)
    expect(page.get_by_test_id("account-open")).to_be_visible()
    expect(page.get_by_test_id("groups-open")).to_be_hidden()

"""Issue 43's Data dialog and data sources in Chromium, against a real PostgreSQL: a source
added through the dialog (a superuser refused in the server's words) shows its catalog; a
column note is kept; a query's rows are shown; a second user sees the source only once it
is shared, read-only, and proposes a note its owner accepts; only an admin may share with
everyone; a source attached to a new conversation from the Files panel, and an answer that
queried it marked verified and withdrawn; a SQLite file added through the file input."""

from __future__ import annotations

import secrets
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Dialog, Locator, Page, expect

from tests.conftest import ADMIN_PASSWORD
from tests.support.live_server import LiveServer
from tests.support.postgres import PostgresServer
from tests.support.shop_database import shop_database
from tests.ui.browser import ConsoleWatch, Person, ask, login, screenshot
from tests.ui.conftest import OpenPage

DONE = 60_000
JOIN = (
    "SELECT c.name, SUM(o.amount) AS total FROM orders o"
    " JOIN customers c ON c.id = o.customer_id GROUP BY c.name ORDER BY c.name"
)


@pytest.fixture(scope="module")
def shop(postgres_server: PostgresServer) -> dict[str, Any]:
    """A shop database and a role that may only read it, shared by the module's tests."""
    return shop_database(postgres_server)


def new_person(server: LiveServer) -> Person:
    name, password = f"user-{secrets.token_hex(4)}", secrets.token_urlsafe(12)
    with server.client() as admin:
        response = admin.post("/api/users", json={"username": name, "password": password})
    assert response.status_code == 201, response.text
    return Person(name, password)


@pytest.fixture
def other(ui_server: LiveServer) -> Person:
    return new_person(ui_server)


def api(server: LiveServer, person: Person) -> Any:
    return server.client(server.token(person.username, person.password), timeout=60)


def register(server: LiveServer, person: Person, shop: dict[str, Any]) -> dict[str, Any]:
    """The shop source of `person`'s, made through the API (where the dialog is not the test)."""
    body = {
        "name": "shop",
        "kind": "postgresql",
        **{k: shop[k] for k in ("host", "port", "database", "username", "password")},
    }
    with api(server, person) as http:
        made = http.post("/api/data-sources", json=body)
    assert made.status_code == 201, made.text
    return dict(made.json())


def open_data(page: Page) -> Locator:
    page.get_by_test_id("data-open").click()
    dialog = page.get_by_test_id("data-dialog")
    expect(dialog).to_be_visible()
    return dialog


def fill_server(dialog: Locator, shop: dict[str, Any], username: str, password: str) -> None:
    dialog.get_by_test_id("data-host").fill(shop["host"])
    dialog.get_by_test_id("data-port").fill(str(shop["port"]))
    dialog.get_by_test_id("data-database").fill(shop["database"])
    dialog.get_by_test_id("data-username").fill(username)
    dialog.get_by_test_id("data-password").fill(password)


def source_row(dialog: Locator, name: str) -> Locator:
    return dialog.locator(f'[data-testid="data-source"][data-name="{name}"]')


def column(dialog: Locator, table: str, name: str) -> Locator:
    card = dialog.locator(f'[data-testid="catalog-table"][data-name="{table}"]')
    return card.locator(f'[data-testid="catalog-column"][data-name="{name}"]')


def test_a_source_added_in_the_dialog_shows_its_catalog_keeps_a_note_and_answers_a_query(
    open_page: OpenPage, person: Person, shop: dict[str, Any], watch: ConsoleWatch
) -> None:
    watch.expect_status(422)  # the superuser, refused
    watch.expect_status(400)  # a query the database refuses
    page = open_page()
    login(page, person)
    dialog = open_data(page)
    expect(dialog.get_by_test_id("data-add")).to_be_visible()
    expect(dialog.get_by_test_id("data-list").get_by_test_id("data-source")).to_have_count(0)

    # A name code cannot call is refused before anything is sent.
    dialog.get_by_test_id("data-name").fill("1shop")
    dialog.get_by_test_id("data-create").click()
    expect(dialog.get_by_test_id("data-error")).to_contain_text("a letter, then letters")

    # A superuser may do more than read: the server says so, and nothing is added.
    dialog.get_by_test_id("data-name").fill("shop")
    fill_server(dialog, shop, shop["superuser"], shop["superuser_password"])
    dialog.get_by_test_id("data-create").click()
    error = dialog.get_by_role("alert")
    expect(error).to_be_visible()
    expect(error).to_contain_text("super", ignore_case=True)
    expect(dialog.get_by_test_id("data-source")).to_have_count(0)

    fill_server(dialog, shop, shop["username"], shop["password"])
    dialog.get_by_test_id("data-description").fill("Orders and customers")
    dialog.get_by_test_id("data-create").click()
    detail = dialog.get_by_test_id("data-detail")
    expect(detail.get_by_test_id("data-detail-name")).to_have_text("shop")
    expect(dialog.get_by_test_id("data-done")).to_contain_text("shop is added (2 tables)")
    expect(dialog.get_by_test_id("data-error")).to_be_hidden()
    expect(detail.get_by_test_id("data-detail-owner")).to_have_text("yours")
    expect(source_row(dialog, "shop").get_by_test_id("data-source-facts")).to_have_text(
        "yours · 2 tables · private"
    )

    # The catalog: tables, columns with their types, keys, references and samples.
    tables = detail.get_by_test_id("catalog-table")
    expect(tables).to_have_count(2)
    customer = column(detail, "orders", "customer_id")
    expect(customer.get_by_test_id("data-column-type")).to_contain_text("int")
    expect(customer.get_by_test_id("data-column-references")).to_contain_text("customers")
    expect(column(detail, "customers", "id").get_by_test_id("data-column-key")).not_to_have_text("")
    expect(
        column(detail, "customers", "name").get_by_test_id("data-column-samples")
    ).to_contain_text("Ada")
    screenshot(page, "data-source-catalog")

    # A column note, saved, is there again in a page loaded afresh (not the typed text).
    amount = column(detail, "orders", "amount")
    amount.get_by_label("Note on orders.amount", exact=True).fill("In euros, tax included")
    amount.get_by_test_id("note-save").click()
    expect(dialog.get_by_test_id("data-done")).to_have_text("The note on orders.amount is saved.")
    page.reload()
    dialog = open_data(page)
    source_row(dialog, "shop").click()
    expect(
        column(dialog, "orders", "amount").get_by_label("Note on orders.amount", exact=True)
    ).to_have_value("In euros, tax included")

    # Closed and opened again: the source is drawn afresh, and a query being written then
    # stays. The query box: the rows as a table; a query the database refuses, in its words.
    query = dialog.get_by_test_id("data-query")
    query.get_by_test_id("data-sql").fill("SELECT 1")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    dialog = open_data(page)
    query = dialog.get_by_test_id("data-query")
    expect(query.get_by_test_id("data-sql")).to_have_value("SELECT 1")
    query.get_by_test_id("data-sql").fill(JOIN)
    query.get_by_test_id("data-run-query").click()
    expect(query.get_by_test_id("data-query-count")).to_have_text("2 rows.")
    rows = query.get_by_test_id("data-query-row")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("Ada")
    expect(rows.nth(0)).to_contain_text("30.5")
    expect(query.locator("thead")).to_contain_text("total")
    query.get_by_test_id("data-max-rows").fill("1")
    query.get_by_test_id("data-sql").press("Control+Enter")
    expect(query.get_by_test_id("data-query-count")).to_have_text(
        "1 row: the first 1; there are more."
    )
    query.get_by_test_id("data-sql").fill("SELECT nope FROM orders")
    query.get_by_test_id("data-run-query").click()
    expect(query.get_by_test_id("data-query-error")).to_contain_text("nope")
    expect(query.get_by_test_id("data-query-row")).to_have_count(0)
    screenshot(page, "data-source-query")


def test_a_second_user_sees_a_source_once_shared_read_only_and_proposes_a_note(
    open_page: OpenPage, ui_server: LiveServer, person: Person, other: Person, shop: dict[str, Any]
) -> None:
    source = register(ui_server, person, shop)
    theirs = open_page()
    login(theirs, other)
    their_dialog = open_data(theirs)
    expect(their_dialog.get_by_test_id("data-source")).to_have_count(0)
    theirs.keyboard.press("Escape")

    # The owner shares it (no "everyone" for a user who is not an admin).
    mine = open_page()
    login(mine, person)
    dialog = open_data(mine)
    source_row(dialog, "shop").click()
    sharing = dialog.get_by_test_id("data-sharing")
    expect(sharing.get_by_test_id("data-shared-state")).to_have_text("Now private.")
    expect(sharing.get_by_test_id("data-share-everyone")).to_have_count(0)
    sharing.get_by_test_id("data-share-users").fill(other.username)
    sharing.get_by_test_id("data-share").click()
    expect(dialog.get_by_test_id("data-done")).to_have_text("shop is shared with 1 user.")
    expect(dialog.get_by_test_id("data-shared-state")).to_have_text(
        f"Now shared with 1 user: {other.username}."
    )

    # The other user sees it, read-only: no sharing, no delete; their note is a proposal.
    their_dialog = open_data(theirs)
    row = source_row(their_dialog, "shop")
    expect(row.get_by_test_id("data-source-facts")).to_have_text(
        f"by {person.username} · 2 tables · shared with you"
    )
    row.click()
    detail = their_dialog.get_by_test_id("data-detail")
    expect(detail.get_by_test_id("data-read-only")).to_contain_text(person.username)
    expect(detail.get_by_test_id("data-delete")).to_have_count(0)
    expect(detail.get_by_test_id("data-sharing")).to_have_count(0)
    region = column(detail, "customers", "region")
    expect(region.get_by_test_id("note-save")).to_have_text("Propose")
    region.get_by_label("Note on customers.region", exact=True).fill("north or south")
    region.get_by_label("Note on customers.region", exact=True).press("Enter")
    expect(their_dialog.get_by_test_id("data-done")).to_contain_text(
        f"Your note on customers.region is proposed to {person.username}"
    )

    # The owner sees the proposal and accepts it.
    source_row(dialog, "shop").click()
    region = column(dialog, "customers", "region")
    expect(region.get_by_test_id("note-proposed-text")).to_have_text("north or south")
    expect(region.get_by_label("Note on customers.region", exact=True)).to_have_value("")
    region.get_by_test_id("note-accept").click()
    expect(dialog.get_by_test_id("data-done")).to_have_text(
        "The note proposed on customers.region is accepted."
    )
    expect(region.get_by_label("Note on customers.region", exact=True)).to_have_value(
        "north or south"
    )
    expect(region.get_by_test_id("note-proposed")).to_have_count(0)
    with api(ui_server, other) as http:
        seen = http.get(f"/api/data-sources/{source['id']}").json()
    accepted = {"target": "customers.region", "note": "north or south", "status": "accepted"}
    assert accepted in seen["notes"]
    screenshot(mine, "data-source-owner")


def test_only_an_admin_shares_a_source_with_everyone(
    open_page: OpenPage, ui_server: LiveServer, shop: dict[str, Any], other: Person
) -> None:
    admin = Person("admin", ADMIN_PASSWORD)
    body = {"name": f"everyones_{secrets.token_hex(3)}", "kind": "postgresql"}
    body |= {k: shop[k] for k in ("host", "port", "database", "username", "password")}
    with api(ui_server, admin) as http:
        made = http.post("/api/data-sources", json=body)
    assert made.status_code == 201, made.text
    try:
        page = open_page()
        login(page, admin)
        dialog = open_data(page)
        source_row(dialog, body["name"]).click()
        sharing = dialog.get_by_test_id("data-sharing")
        sharing.get_by_test_id("data-share-everyone").check()
        sharing.get_by_test_id("data-share").click()
        expect(dialog.get_by_test_id("data-done")).to_have_text(
            f"{body['name']} is shared with everyone."
        )
        with api(ui_server, other) as http:
            names = [s["name"] for s in http.get("/api/data-sources").json()]
        assert body["name"] in names
    finally:
        with api(ui_server, admin) as http:
            assert http.delete(f"/api/data-sources/{made.json()['id']}").status_code == 204


def test_a_source_attached_from_the_files_panel_and_an_answer_on_it_marked_verified(
    open_page: OpenPage,
    ui_server: LiveServer,
    person: Person,
    shop: dict[str, Any],
    watch: ConsoleWatch,
) -> None:
    watch.expect_status(422)  # an answer that queried no source, refused as verified
    source = register(ui_server, person, shop)
    page = open_page()
    login(page, person)
    panel = page.get_by_test_id("session-sources")
    check = panel.get_by_label("Attach shop to this conversation")
    expect(check).not_to_be_checked()

    # A new chat: attaching starts its conversation, which becomes the open one.
    check.check()
    expect(panel.get_by_test_id("session-sources-done")).to_have_text(
        "shop is attached to this conversation."
    )
    expect(page.get_by_test_id("conversation-list").locator("li")).to_have_count(1)
    with api(ui_server, person) as http:
        (conversation,) = http.get("/api/conversations").json()
        attached = http.get(f"/api/sessions/{conversation['session_id']}/data-sources").json()
    assert [s["id"] for s in attached] == [source["id"]]

    page.reload()  # the conversation opens again, its source checked
    expect(panel.get_by_label("Attach shop to this conversation")).to_be_checked()

    # An answer whose code queried nothing is refused, in the server's words.
    answer = ask(page, "Q-UI-DS-NONE print something", agent="react")
    expect(answer).to_have_attribute("data-run-state", "done", timeout=DONE)
    answer.get_by_test_id("mark-verified").click()
    expect(answer.get_by_test_id("verified-error")).to_contain_text("ran no query")

    answer = ask(page, "Q-UI-DS-QUERY who are the customers?", agent="react")
    expect(answer).to_have_attribute("data-run-state", "done", timeout=DONE)
    expect(answer).to_contain_text("customers: Ada, Bo")
    answer.get_by_test_id("mark-verified").click()
    expect(answer.get_by_test_id("verified")).to_have_text("✓ Verified")
    screenshot(page, "data-source-verified")

    # The source lists the verified answer; withdrawn, it is gone.
    dialog = open_data(page)
    source_row(dialog, "shop").click()
    verified = dialog.get_by_test_id("data-verified-answer")
    expect(verified).to_have_count(1)
    expect(verified.get_by_test_id("data-verified-question")).to_have_text(
        "Q-UI-DS-QUERY who are the customers?"
    )
    expect(verified.get_by_test_id("data-verified-query")).to_have_text(
        "SELECT name FROM customers ORDER BY id"
    )
    page.once("dialog", lambda d: d.accept())
    verified.get_by_test_id("data-withdraw").click()
    expect(dialog.get_by_test_id("data-verified-answer")).to_have_count(0)
    expect(dialog.get_by_test_id("data-done")).to_have_text("The verified answer is withdrawn.")
    page.keyboard.press("Escape")

    # Taken off again from the panel.
    panel.get_by_label("Attach shop to this conversation").uncheck()
    expect(panel.get_by_test_id("session-sources-done")).to_have_text(
        "shop is taken off this conversation."
    )
    with api(ui_server, person) as http:
        assert http.get(f"/api/sessions/{conversation['session_id']}/data-sources").json() == []


def test_a_sqlite_file_is_added_through_the_file_input_and_deleted(
    open_page: OpenPage, person: Person, tmp_path: Path
) -> None:
    path = tmp_path / "shop.sqlite"
    with sqlite3.connect(path) as connection:
        connection.executescript(
            "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT);"
            "INSERT INTO customers VALUES (1, 'Ada'), (2, 'Bo');"
        )
    connection.close()
    page = open_page()
    login(page, person)
    dialog = open_data(page)
    dialog.get_by_test_id("data-name").fill("shopfile")
    dialog.get_by_test_id("data-kind").select_option("sqlite")
    expect(dialog.get_by_test_id("data-host")).to_be_hidden()
    dialog.get_by_test_id("data-file").set_input_files(str(path))
    dialog.get_by_test_id("data-create").click()
    detail = dialog.get_by_test_id("data-detail")
    expect(detail.get_by_test_id("data-detail-name")).to_have_text("shopfile")
    expect(detail.get_by_test_id("data-detail-facts")).to_contain_text("sqlite file · 1 table")
    expect(
        column(detail, "customers", "name").get_by_test_id("data-column-samples")
    ).to_contain_text("Ada")
    query = detail.get_by_test_id("data-query")
    query.get_by_test_id("data-sql").fill("SELECT name FROM customers ORDER BY id")
    query.get_by_test_id("data-run-query").click()
    expect(query.get_by_test_id("data-query-row")).to_have_count(2)

    # Deleted, after a confirmation: gone from the list, the form back.
    questions: list[str] = []

    def accept(confirm: Dialog) -> None:
        questions.append(confirm.message)
        confirm.accept()

    page.once("dialog", accept)
    detail.get_by_test_id("data-delete").click()
    expect(dialog.get_by_test_id("data-done")).to_have_text("shopfile is deleted.")
    expect(dialog.get_by_test_id("data-source")).to_have_count(0)
    expect(dialog.get_by_test_id("data-add")).to_be_visible()
    assert questions and "shopfile" in questions[0]


def test_a_dataset_is_made_of_files_chosen_in_the_form(
    open_page: OpenPage, person: Person, tmp_path: Path
) -> None:
    customers = tmp_path / "customers.csv"
    customers.write_text("id,name\n1,Ada\n2,Bo\n")
    orders = tmp_path / "orders.csv"
    orders.write_text("id,customer_id,amount\n1,1,10.5\n2,1,20\n3,2,7\n")
    page = open_page()
    login(page, person)
    dialog = open_data(page)
    dialog.get_by_test_id("data-name").fill("sales")
    dialog.get_by_test_id("data-kind").select_option("dataset")
    expect(dialog.get_by_test_id("data-host")).to_be_hidden()
    expect(dialog.get_by_test_id("data-file")).to_be_hidden()
    dialog.get_by_test_id("data-files").set_input_files([str(customers), str(orders)])
    dialog.get_by_test_id("data-create").click()
    detail = dialog.get_by_test_id("data-detail")
    expect(detail.get_by_test_id("data-detail-name")).to_have_text("sales")
    expect(detail.get_by_test_id("data-detail-facts")).to_contain_text("2 tables")
    query = detail.get_by_test_id("data-query")
    query.get_by_test_id("data-sql").fill(
        "SELECT c.name, SUM(o.amount) AS total FROM orders o JOIN customers c"
        " ON c.id = o.customer_id GROUP BY c.name ORDER BY c.name"
    )
    query.get_by_test_id("data-run-query").click()
    expect(query.get_by_test_id("data-query-row")).to_have_count(2)
    expect(query.get_by_test_id("data-query-row").first).to_contain_text("30.5")

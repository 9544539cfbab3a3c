"""Uploads: drag and drop, the metadata card, the files panel and clear refusals."""

from __future__ import annotations

import httpx
from playwright.sync_api import Route, expect

from tests.support.agent_script import SALES
from tests.support.live_server import LiveServer
from tests.ui.browser import ConsoleWatch, Person, drop_file, login, screenshot
from tests.ui.conftest import OpenPage


def test_a_dropped_csv_gets_a_metadata_card_and_a_download_in_the_files_panel(
    open_page: OpenPage,
    person: Person,
) -> None:
    page = open_page()
    login(page, person)
    drop_file(page, "sales.csv", SALES)

    card = page.get_by_test_id("file-card")
    expect(card).to_contain_text("sales.csv")
    expect(card).to_contain_text("2 rows")
    expect(card).to_contain_text("region")
    expect(card).to_contain_text("price")
    expect(card).to_contain_text("int")  # each column's type

    panel = page.get_by_test_id("files-panel")
    link = panel.get_by_role("link", name="sales.csv")
    expect(link).to_be_visible()
    expect(panel).to_contain_text("B")  # its size
    screenshot(page, "upload")

    # The link works through the HttpOnly cookie: no header, as a click would send.
    href = link.get_attribute("href")
    assert href and href.startswith("/api/sessions/")
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    download = httpx.get(page.url.rstrip("/") + href, cookies=cookies)
    assert download.status_code == 200 and download.content == SALES
    assert httpx.get(page.url.rstrip("/") + href).status_code == 401


def test_a_large_table_shows_its_parquet_copy_until_it_is_ready(
    open_page: OpenPage, person: Person
) -> None:
    page = open_page()
    login(page, person)
    rows = "".join(f"{i},north,{i * 3}\n" for i in range(4000))  # about 60 KB
    drop_file(page, "orders.csv", ("id,region,units\n" + rows).encode())
    card = page.get_by_test_id("file-card")
    expect(card).to_contain_text("orders.csv")
    # Polled by the page once a second while the copy is made; then the exact row count.
    expect(card.get_by_test_id("file-conversion")).to_have_text(
        "Parquet copy ready: queries on this file run faster", timeout=60_000
    )
    expect(card).to_contain_text("4,000 rows")
    expect(card).not_to_contain_text("≈")


def test_an_upload_cut_off_mid_way_resumes_from_the_servers_offset(
    open_page: OpenPage, person: Person, watch: ConsoleWatch
) -> None:
    watch.expect_failure("net::ERR_CONNECTION_RESET")  # the cut this test makes
    page = open_page()
    login(page, person)
    methods: list[str] = []
    cut: list[str] = []

    def cut_the_first_patch(route: Route) -> None:
        methods.append(route.request.method)
        if route.request.method == "PATCH" and not cut:
            cut.append(route.request.url)
            route.abort("connectionreset")  # the network drops: tus-js-client retries
        else:
            route.continue_()

    page.route("**/api/tus/**", cut_the_first_patch)
    body = ("id,kind\n" + "".join(f"{i},cut\n" for i in range(3000))).encode()
    drop_file(page, "resumed.csv", body)
    card = page.get_by_test_id("file-card")
    expect(card).to_contain_text("resumed.csv")
    expect(card).to_contain_text("3,000 rows", timeout=60_000)
    assert cut, methods
    # After the cut it asked the server how much had arrived (HEAD), then sent the rest.
    after = methods[methods.index("PATCH") + 1 :]
    assert after[:2] == ["HEAD", "PATCH"], methods
    link = page.get_by_test_id("files-panel").get_by_role("link", name="resumed.csv")
    href = link.get_attribute("href")
    assert href and href.startswith("/api/sessions/")
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    assert httpx.get(page.url.rstrip("/") + href, cookies=cookies).content == body


def test_unsupported_and_too_large_files_get_a_clear_message(
    open_page: OpenPage, person: Person
) -> None:
    page = open_page()
    login(page, person)
    drop_file(page, "tool.exe", b"MZ", mime="application/octet-stream")
    errors = page.get_by_test_id("upload-error")
    expect(errors.first).to_contain_text(".exe files are not supported")

    big = b"a,b\n" + b"1,2\n" * 300_000  # 1.2 MB, over the server's 1 MB limit
    drop_file(page, "big.csv", big)
    expect(errors.last).to_contain_text("over the 1")
    expect(page.get_by_test_id("file-card")).to_have_count(0)
    screenshot(page, "upload-refused")


def test_an_upload_past_the_users_disk_quota_says_so(
    open_page: OpenPage, person: Person, ui_server: LiveServer, watch: ConsoleWatch
) -> None:
    """A 507 for the user's quota reads as the quota, not as a broken upload."""
    with ui_server.client() as admin:
        (user,) = [u for u in admin.get("/api/users").json() if u["username"] == person.username]
        limits = {"max_sandboxes": None, "max_runs": None, "max_disk_mb": 1}
        assert admin.patch(f"/api/users/{user['id']}", json={"limits": limits}).status_code == 200
    watch.expect_status(507)
    page = open_page()
    login(page, person)
    table = b"a,b\n" + b"1,2\n" * 150_000  # 0.6 MB: under the upload cap, twice over the quota
    drop_file(page, "first.csv", table)
    expect(page.get_by_test_id("file-card")).to_contain_text("first.csv")
    drop_file(page, "second.csv", table)
    error = page.get_by_test_id("upload-error")
    expect(error).to_contain_text("disk quota")
    expect(error).to_contain_text("1 MB")
    screenshot(page, "upload-over-quota")

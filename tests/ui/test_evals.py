"""Issue 41: evaluations in the browser. A set in DABench's format is imported through the
form (a mistake shown in the server's words first), a `react` run is followed to its score
of 7/10 with each question's row, code and conversation, a second run is compared side by
side, the dialog fits a phone, and another user's page shows none of it."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.conftest import scripted_server
from tests.support.eval_set import COUNT, RIGHT, replies, write_dabench
from tests.support.live_server import LiveServer
from tests.ui.browser import ConsoleWatch, Person, login, screenshot
from tests.ui.conftest import OpenPage

DONE = 240_000  # ms: ten questions, each a ReAct turn with a sandbox run
SCORE = f"{RIGHT}/{COUNT} right (70%, 95% CI 40–89%)"


@pytest.fixture(scope="module")
def eval_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with scripted_server(tmp_path_factory.mktemp("ui-evals"), replies()) as live:
        yield live


def _person(server: LiveServer) -> Person:
    name, password = f"evals-{secrets.token_hex(4)}", secrets.token_urlsafe(12)
    with server.client() as admin:
        made = admin.post("/api/users", json={"username": name, "password": password})
    assert made.status_code == 201, made.text
    return Person(name, password)


def _open_evals(page: Page) -> Locator:
    page.get_by_role("button", name="Evaluations", exact=True).click()
    dialog = page.get_by_role("dialog", name="Evaluations")
    expect(dialog).to_be_visible()
    return dialog


def _row(dialog: Locator, question: int) -> Locator:
    return dialog.locator(f'[data-testid="eval-result"][data-question="{question}"]')


def _import(dialog: Locator, folder: Path, watch: ConsoleWatch) -> None:
    dialog.get_by_text("Import a set in DABench's format").click()
    dialog.get_by_test_id("eval-import-name").fill("ten")
    dialog.get_by_test_id("eval-import-questions").set_input_files(folder / "questions.jsonl")
    dialog.get_by_test_id("eval-import-tables").set_input_files(
        sorted((folder / "tables").iterdir())
    )
    # The questions given as the labels: refused, in the server's words.
    watch.expect_status(422)
    dialog.get_by_test_id("eval-import-labels").set_input_files(folder / "questions.jsonl")
    dialog.get_by_test_id("eval-import-submit").click()
    expect(dialog.get_by_test_id("eval-sets-error")).to_have_text(
        "Line 1 of the labels file has no `common_answers`."
    )
    expect(dialog.get_by_test_id("eval-set-item")).to_have_count(0)

    dialog.get_by_test_id("eval-import-labels").set_input_files(folder / "labels.jsonl")
    dialog.get_by_test_id("eval-import-submit").click()
    expect(dialog.get_by_test_id("eval-sets-error")).to_be_hidden()
    item = dialog.get_by_test_id("eval-set-item")
    expect(item).to_have_count(1)
    expect(item).to_contain_text("tenDABench")
    expect(item.get_by_test_id("eval-set-count")).to_have_text("10 questions · easy 5 · hard 5")


def _run(dialog: Locator) -> Locator:
    """Start a `react` run of the set; its item in the list, once it has finished."""
    before = dialog.get_by_test_id("eval-run-item").count()
    dialog.get_by_test_id("eval-run-agent").select_option("react")
    dialog.get_by_test_id("eval-run-submit").click()
    items = dialog.get_by_test_id("eval-run-item")
    expect(items).to_have_count(before + 1)
    run = items.first  # newest first
    expect(run).to_contain_text("ten · scripted · ReAct")
    expect(run.get_by_test_id("eval-run-progress")).to_contain_text(f"/{COUNT} asked")
    expect(run.get_by_test_id("eval-run-progress")).to_have_text(
        f"Finished · {COUNT}/{COUNT} asked", timeout=DONE
    )
    expect(run.get_by_test_id("eval-run-stop")).to_have_count(0)
    return run


def test_a_set_is_imported_run_scored_compared_and_kept_from_others(
    eval_server: LiveServer, open_page: OpenPage, watch: ConsoleWatch, tmp_path: Path
) -> None:
    page = open_page(server=eval_server)
    login(page, _person(eval_server))
    dialog = _open_evals(page)
    expect(dialog.get_by_test_id("eval-set-empty")).to_be_visible()
    _import(dialog, write_dabench(tmp_path / "ten"), watch)

    first = _run(dialog)
    score = dialog.get_by_test_id("eval-score")
    expect(score).to_have_text(SCORE)  # the run just started is the one shown
    expect(first.get_by_test_id("eval-run-score")).to_have_text(SCORE)
    expect(dialog.get_by_test_id("eval-results-progress")).to_have_text(
        f"Finished · {COUNT}/{COUNT} asked"
    )
    kinds = dialog.get_by_test_id("eval-kind")
    expect(kinds).to_have_count(2)
    expect(kinds.nth(0)).to_contain_text("easy 5/5 right")
    expect(kinds.nth(1)).to_contain_text("hard 2/5 right")
    expect(dialog.get_by_test_id("eval-result")).to_have_count(COUNT)
    one = _row(dialog, 1)
    expect(one.get_by_test_id("eval-verdict")).to_have_text("Right")
    expect(one.get_by_test_id("eval-values")).to_have_text("total: 4 (expected 4)")
    for wrong in (8, 9, 10):
        expect(_row(dialog, wrong).get_by_test_id("eval-verdict")).to_have_text("Wrong")
    expect(_row(dialog, 8).get_by_test_id("eval-values")).to_have_text("total: 999 (expected 11)")
    expect(_row(dialog, 10).get_by_test_id("eval-values")).to_have_text(
        "total: none (expected 13)sum: 9 (not asked for)"
    )

    expect(one.get_by_test_id("eval-code")).to_have_count(0)  # shown on demand
    one.get_by_test_id("eval-more").locator("summary").click()
    expect(one.get_by_test_id("eval-code")).to_contain_text("print('EVQ01', len(df1))")
    expect(one.get_by_test_id("eval-answer")).to_contain_text("@total[4]")

    # On a phone the page does not scroll sideways: the wide table scrolls in its own box.
    page.set_viewport_size({"width": 375, "height": 740})
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    assert page.evaluate(
        "(() => { const d = document.getElementById('evals-dialog');"
        " return d.scrollWidth <= d.clientWidth; })()"
    )
    screenshot(page, "evals-phone-375")
    one.scroll_into_view_if_needed()
    screenshot(page, "evals-phone-375-results")
    page.set_viewport_size({"width": 1440, "height": 900})

    second = _run(dialog)
    expect(second.get_by_test_id("eval-run-score")).to_have_text(SCORE)
    dialog.get_by_test_id("eval-compare-submit").click()
    expect(dialog.get_by_test_id("eval-compare-first-score")).to_contain_text(SCORE)
    expect(dialog.get_by_test_id("eval-compare-second-score")).to_contain_text(SCORE)
    pairs = dialog.get_by_test_id("eval-pair")
    expect(pairs).to_have_count(COUNT)
    for number in range(1, COUNT + 1):
        want = "Right" if number <= RIGHT else "Wrong"
        pair = pairs.nth(number - 1)
        expect(pair.get_by_test_id("eval-pair-first")).to_have_text(want)
        expect(pair.get_by_test_id("eval-pair-second")).to_have_text(want)
    screenshot(page, "evals-compared")

    # A question's conversation opens in the chat.
    _row(dialog, 1).get_by_test_id("eval-open-conversation").click()
    expect(dialog).to_be_hidden()
    expect(page.get_by_test_id("message-user").first).to_contain_text("EVQ01")

    other = open_page(server=eval_server)
    login(other, _person(eval_server))
    theirs = _open_evals(other)
    expect(theirs.get_by_test_id("eval-set-empty")).to_be_visible()
    expect(theirs.get_by_test_id("eval-run-empty")).to_be_visible()
    expect(theirs.get_by_test_id("eval-set-item")).to_have_count(0)
    expect(theirs.get_by_test_id("eval-run-item")).to_have_count(0)
    expect(theirs.get_by_test_id("eval-results")).to_be_hidden()

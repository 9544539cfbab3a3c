"""A turn in the browser: the timeline, plots, long output, Stop and reattaching."""

from __future__ import annotations

import re
import time

from playwright.sync_api import Page, expect

from tests.support.agent_script import SALES
from tests.ui.browser import Person, ask, drop_file, last_answer, login, screenshot, send
from tests.ui.conftest import OpenPage


def ready_with_sales(page: Page, person: Person) -> None:
    login(page, person)
    drop_file(page, "sales.csv", SALES)
    expect(page.get_by_test_id("file-card")).to_contain_text("2 rows")


def run_status(page: Page, run_id: str) -> str:
    """The server's own view of a run, asked with the page's token."""
    return str(
        page.evaluate(
            """async (id) => {
                const token = localStorage.getItem("pda.token");
                const response = await fetch(`/api/runs/${id}`,
                    {headers: {Authorization: `Bearer ${token}`}});
                return (await response.json()).status;
            }""",
            run_id,
        )
    )


def test_a_react_turn_shows_router_code_output_plot_files_and_answer(
    open_page: OpenPage,
    person: Person,
) -> None:
    page = open_page()
    ready_with_sales(page, person)
    send(page, "Q-UI-REACT what is the mean price? Plot it.")

    answer = last_answer(page)
    expect(answer).to_have_attribute("data-run-state", "done", timeout=60_000)
    expect(answer.get_by_test_id("step-router")).to_contain_text("ReAct")
    expect(answer.get_by_test_id("step-code")).to_contain_text("plt.plot(df1['price'])")
    expect(answer.get_by_test_id("step-code").locator(".hljs-keyword").first).to_be_visible()
    expect(answer.get_by_test_id("step-output")).to_contain_text("mean price: 20.0")
    expect(answer.locator(".chip", has_text="summary.csv")).to_be_visible()
    expect(answer).to_contain_text("The mean price is 20.0.")

    plot = answer.get_by_test_id("plot")
    expect(plot).to_be_visible()
    plot.scroll_into_view_if_needed()
    page.wait_for_function(
        "(img) => img.complete && img.naturalWidth > 0", arg=plot.element_handle()
    )
    screenshot(page, "react-turn")
    plot.click()
    expect(page.locator("#lightbox")).to_be_visible()
    expect(page.locator("#lightbox-image")).to_have_attribute(
        "src", plot.get_attribute("src") or ""
    )
    page.keyboard.press("Escape")
    expect(page.locator("#lightbox")).to_be_hidden()

    # The files panel lists the upload and what the code wrote, not the server's own files.
    panel = page.get_by_test_id("files-panel")
    expect(panel.get_by_role("link", name="summary.csv")).to_be_visible()
    expect(panel.get_by_role("link", name="notepad.json")).to_have_count(0)

    # A stored turn draws the same way after a reload.
    page.reload()
    answer = last_answer(page)
    expect(answer).to_have_attribute("data-run-state", "done")
    expect(answer.get_by_test_id("step-output")).to_contain_text("mean price: 20.0")
    expect(answer.get_by_test_id("plot")).to_be_visible()


def test_a_plan_and_execute_turn_shows_the_plan_as_a_checklist(
    open_page: OpenPage, person: Person
) -> None:
    page = open_page()
    ready_with_sales(page, person)
    answer = ask(page, "Q-UI-PLAN what is the mean price?", "plan_execute")
    expect(answer).to_have_attribute("data-run-state", "done", timeout=60_000)
    expect(answer.get_by_test_id("step-router")).to_contain_text("Plan & Execute")
    steps = answer.get_by_test_id("step-plan").locator("li")
    expect(steps).to_have_count(2)
    expect(steps.nth(0)).to_contain_text("see which files there are")
    expect(steps.nth(1)).to_contain_text("Q-UI-PLAN mean price")
    for i in range(2):
        expect(steps.nth(i)).to_have_attribute("data-status", "done")
    expect(answer.get_by_test_id("step-output").last).to_contain_text("mean price: 20.0")
    expect(answer.get_by_test_id("plot")).to_be_visible()
    expect(answer).to_contain_text("The mean price is 20.0.")
    screenshot(page, "plan-execute")


def test_each_retry_is_a_numbered_attempt_and_errors_are_red(
    open_page: OpenPage, person: Person
) -> None:
    page = open_page()
    ready_with_sales(page, person)
    answer = ask(page, "Q-UI-FIX the mean price", "react")
    expect(answer).to_have_attribute("data-run-state", "done", timeout=60_000)
    codes = answer.get_by_test_id("step-code")
    expect(codes).to_have_count(2)
    expect(codes.nth(0)).to_contain_text("Attempt 1")
    expect(codes.nth(0)).to_contain_text("df1['cost']")
    expect(codes.nth(1)).to_contain_text("Attempt 2")
    outputs = answer.get_by_test_id("step-output")
    expect(outputs.nth(0)).to_contain_text("KeyError")
    expect(outputs.nth(0)).to_have_class(re.compile(r"\bis-error\b"))
    color = outputs.nth(0).evaluate("(el) => getComputedStyle(el).color")
    red, green, blue = (int(part) for part in re.findall(r"\d+", color)[:3])
    assert red > 150 and red > 2 * green and red > 2 * blue, color
    expect(outputs.nth(1)).to_contain_text("mean price: 20.0")
    expect(outputs.nth(1)).not_to_have_class(re.compile(r"\bis-error\b"))
    screenshot(page, "attempts")


def test_long_output_is_collapsed_past_30_lines_with_show_all(
    open_page: OpenPage, person: Person
) -> None:
    page = open_page()
    ready_with_sales(page, person)
    answer = ask(page, "Q-UI-LONG print many lines", "react")
    expect(answer).to_have_attribute("data-run-state", "done", timeout=60_000)
    output = answer.get_by_test_id("step-output")
    expect(output).to_contain_text("line 29")
    expect(output).not_to_contain_text("line 30")
    answer.get_by_role("button", name="Show all 45 lines").click()
    expect(output).to_contain_text("line 44")


def test_stop_kills_the_run_keeps_the_partial_turn_and_frees_the_composer(
    open_page: OpenPage,
    person: Person,
) -> None:
    page = open_page()
    ready_with_sales(page, person)
    answer = ask(page, "Q-UI-STOP wait a while", "react")
    # The 20-second code is running in the sandbox: its code card is there, without output.
    expect(answer.get_by_test_id("step-code")).to_contain_text("time.sleep(20)", timeout=60_000)
    run_id = answer.get_attribute("data-run-id")
    assert run_id
    expect(page.get_by_test_id("send")).to_be_hidden()

    started = time.monotonic()
    page.get_by_test_id("stop").click()
    expect(answer).to_have_attribute("data-run-state", "stopped", timeout=2_000)
    expect(page.get_by_test_id("send")).to_be_visible(timeout=2_000)
    # On the server too: the run ended as cancelled within 2 s, its code killed.
    while run_status(page, run_id) != "cancelled":
        assert time.monotonic() - started < 2, "the server did not cancel the run in 2 s"
        page.wait_for_timeout(50)
    expect(answer).to_contain_text("Stopped")
    expect(answer.get_by_test_id("step-code")).to_contain_text("time.sleep(20)")
    screenshot(page, "stopped")

    send(page, "Q-UI-AFTER-STOP and now the mean?")
    after = last_answer(page)
    expect(after).to_have_attribute("data-run-state", "done", timeout=60_000)
    expect(after).to_contain_text("The mean price is 20.0.")
    expect(after.get_by_test_id("step-output")).to_contain_text("mean price: 20.0")


def test_leaving_or_reloading_mid_run_reattaches_and_the_answer_completes(
    open_page: OpenPage, person: Person
) -> None:
    page = open_page()
    ready_with_sales(page, person)
    answer = ask(page, "Q-UI-RELOAD the mean, slowly", "react")
    expect(answer.get_by_test_id("step-code")).to_contain_text("go.csv", timeout=60_000)
    expect(answer).to_have_attribute("data-run-state", "running")

    # Leaving the conversation and coming back shows the run going on ...
    page.get_by_test_id("new-chat").click()
    expect(page.get_by_test_id("message-assistant")).to_have_count(0)
    page.get_by_test_id("conversation-item").first.locator(".conversation-open").click()
    expect(answer.get_by_test_id("step-code")).to_contain_text("go.csv")
    expect(answer).to_have_attribute("data-run-state", "running")

    page.reload()  # ... and so does a reload
    answer = last_answer(page)
    # What happened so far is replayed while the code still waits for go.csv ...
    expect(answer.get_by_test_id("step-router")).to_contain_text("ReAct")
    expect(answer.get_by_test_id("step-code")).to_contain_text("go.csv")
    expect(answer).to_have_attribute("data-run-state", "running")
    expect(page.get_by_test_id("stop")).to_be_visible()
    # ... then the run is followed live to its end.
    drop_file(page, "go.csv", b"go\n1\n")
    expect(answer).to_have_attribute("data-run-state", "done", timeout=60_000)
    expect(answer.get_by_test_id("step-output")).to_contain_text("mean price: 20.0")
    expect(answer).to_contain_text("The mean price is 20.0.")
    expect(page.get_by_test_id("send")).to_be_visible()


def test_an_error_card_shows_the_servers_message_and_retry_sends_again(
    open_page: OpenPage, person: Person
) -> None:
    page = open_page()
    login(page, person)
    failed = ask(page, "Q-UI-RETRY say something", "chat")
    expect(failed).to_have_attribute("data-run-state", "error")
    card = failed.get_by_test_id("error-card")
    expect(card).to_contain_text("The upstream model timed out after 120 s.")
    screenshot(page, "error-card")

    card.get_by_role("button", name="Retry").click()
    expect(page.get_by_test_id("message-user")).to_have_count(2)
    retried = last_answer(page)
    expect(retried).to_have_attribute("data-run-state", "done")
    expect(retried).to_contain_text("Second time lucky.")

"""Rendering answers: hostile output runs no script, `$5` is money, streams draw incrementally."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.ui.browser import Person, ask, drop_file, last_answer, login, screenshot
from tests.ui.conftest import OpenPage
from tests.ui.script import XSS_COLUMN, XSS_FILE_NAME, XSS_FLAG

# Anything in the conversation that could run script or leave the page unsafely.
DANGER = """() => {
    const root = document.getElementById("app");
    const found = [];
    for (const el of root.querySelectorAll("*")) {
        for (const attr of el.attributes) {
            if (attr.name.startsWith("on")) found.push(`${el.tagName} ${attr.name}`);
        }
        if (["SCRIPT", "IFRAME", "OBJECT", "EMBED"].includes(el.tagName)) found.push(el.tagName);
    }
    for (const link of root.querySelectorAll("a[href]")) {
        const url = new URL(link.href, location.href);
        if (!["http:", "https:", "mailto:"].includes(url.protocol)) found.push(link.href);
        if (url.origin !== location.origin && link.rel !== "noopener noreferrer")
            found.push(`rel ${link.href}`);
    }
    for (const img of root.querySelectorAll("img[src]")) {
        if (new URL(img.src).origin !== location.origin) found.push(img.src);
    }
    return found;
}"""


def test_an_xss_corpus_in_answers_file_names_and_columns_runs_no_script(
    open_page: OpenPage,
    person: Person,
) -> None:
    page = open_page()
    login(page, person)
    drop_file(page, XSS_FILE_NAME, f"id,{XSS_COLUMN}\n1,2\n".encode())
    card = page.get_by_test_id("file-card")
    expect(card).to_contain_text(XSS_FILE_NAME)  # shown as text, exactly
    expect(card).to_contain_text(XSS_COLUMN)
    expect(page.get_by_test_id("files-panel")).to_contain_text(XSS_FILE_NAME)

    answer = ask(page, "Q-UI-XSS show me some tricks", "chat")
    expect(answer).to_have_attribute("data-run-state", "done", timeout=60_000)
    expect(answer).to_contain_text("A fine link")
    expect(answer).to_contain_text(f"<script>window.{XSS_FLAG}=1</script>")  # as text
    fine = answer.get_by_role("link", name="docs")
    expect(fine).to_have_attribute("href", "https://example.org/docs")
    expect(fine).to_have_attribute("rel", "noopener noreferrer")
    expect(fine).to_have_attribute("target", "_blank")
    for link in answer.locator("a:not([href^='https:'])").all():  # clicking them does nothing
        link.click()

    page.reload()  # the stored answer, rendered again from the server's copy
    expect(last_answer(page)).to_contain_text("A fine link")
    assert page.evaluate(DANGER) == []
    assert page.evaluate(f"window.{XSS_FLAG}") is None
    screenshot(page, "xss-corpus")


def test_single_dollars_are_currency_and_backslash_parens_are_math(
    open_page: OpenPage, person: Person
) -> None:
    page = open_page()
    login(page, person)
    answer = ask(page, "Q-UI-MATH what were the prices?", "chat")
    expect(answer).to_have_attribute("data-run-state", "done", timeout=60_000)
    expect(answer).to_contain_text("Prices were $5 and $10 today")
    expect(answer.locator(".katex")).to_have_count(1)
    expect(answer.locator(".katex annotation")).to_have_text("x^2")


def test_an_unterminated_fence_streams_as_a_plain_code_block(
    open_page: OpenPage, person: Person
) -> None:
    page = open_page()
    login(page, person)
    answer = ask(page, "Q-UI-FENCE show me code", "chat")
    open_block = answer.locator("pre code[data-open]")
    expect(open_block).to_contain_text("x3 = 3")  # mid-stream: the fence is not closed yet
    expect(answer).to_have_attribute("data-run-state", "running")
    intro = answer.locator("p", has_text="Here is the code:")
    expect(intro).to_be_visible()
    assert "```" not in answer.inner_text()
    # Drawn incrementally: the finished paragraph is kept while the code streams on.
    drawn = intro.element_handle()
    expect(open_block).to_contain_text("x20 = 20")
    assert drawn.evaluate("(el) => el.isConnected")
    expect(answer).to_have_attribute("data-run-state", "done", timeout=60_000)
    expect(open_block).to_have_count(0)
    expect(answer.locator("pre code.hljs")).to_contain_text("x39 = 39")
    expect(answer.locator("p", has_text="Done.")).to_be_visible()

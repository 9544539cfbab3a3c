"""A long stored conversation opens at its end at once, and draws the rest above it in slices."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.support.live_server import LiveServer
from tests.ui.browser import Person, login, store_conversation
from tests.ui.conftest import OpenPage

TURNS = 150
ANSWER = '[data-testid="message-assistant"]'
CODE = "import pandas as pd\n" + "".join(f"x{k} = pd.Series(range({k}))\n" for k in range(20))


def seed_conversation(server: LiveServer, person: Person, title: str) -> None:
    """Store `TURNS` turns for `person`: answers with code, some with a step's code and output."""
    turns = []
    for i in range(TURNS):
        steps = []
        if i % 5 == 0:
            steps = [
                {"type": "tool_call", "tool": "python_coder", "input": f"step {i}"},
                {"type": "code", "code": CODE, "attempt": 1},
                {"type": "execution", "ok": True, "stdout": f"out {i}\n", "attempt": 1},
            ]
        meta = {
            "agent_type": "react",
            "route_reason": "test",
            "finish_reason": "stop",
            "steps": steps,
        }
        answer = f"Answer **{i}**:\n\n```python\n{CODE}```\n\n- one\n- two\n\nEND-{i}"
        turns.append((f"Question {i}", answer, meta))
    store_conversation(server, person, title, turns)


def open_seeded(page: Page, person: Person, server: LiveServer) -> None:
    """Sign in, then open the seeded conversation, noting how many answers were drawn
    when its last one first appeared (window.__drawnWhenEndShown)."""
    title = "A long conversation"
    seed_conversation(server, person, title)
    login(page, person)
    page.evaluate(
        """([answer, marker]) => {
            const observer = new MutationObserver(() => {
                const all = document.querySelectorAll(answer);
                if (!all.length || !all[all.length - 1].textContent.includes(marker)) return;
                window.__drawnWhenEndShown = all.length;
                observer.disconnect();
            });
            observer.observe(document.body, {childList: true, subtree: true});
        }""",
        [ANSWER, f"END-{TURNS - 1}"],
    )
    page.get_by_role("button", name=title, exact=True).click()


def test_a_long_conversation_shows_its_end_at_once_then_every_message_in_order(
    open_page: OpenPage, person: Person, ui_server: LiveServer
) -> None:
    page = open_page()
    open_seeded(page, person, ui_server)
    answers = page.get_by_test_id("message-assistant")
    expect(answers.last).to_contain_text(f"END-{TURNS - 1}")
    expect(answers.last).to_be_in_viewport()
    expect(answers).to_have_count(TURNS)
    # The end was shown before the older answers were drawn: not in one long task.
    assert page.evaluate("window.__drawnWhenEndShown") < TURNS
    expect(page.get_by_test_id("message-user").first).to_contain_text("Question 0")
    expect(answers.first).to_contain_text("END-0")
    expect(answers.nth(TURNS // 2)).to_contain_text(f"END-{TURNS // 2}")
    expect(page.get_by_test_id("step-code")).to_have_count(TURNS // 5)
    page.wait_for_function(
        """() => { const s = document.getElementById("scroller");
            return s.scrollHeight - s.scrollTop - s.clientHeight < 80; }"""
    )
    expect(page.locator("#jump-latest")).to_be_hidden()


def test_what_the_user_scrolled_to_stays_put_while_older_messages_are_drawn(
    open_page: OpenPage, person: Person, ui_server: LiveServer
) -> None:
    page = open_page()
    open_seeded(page, person, ui_server)
    expect(page.get_by_test_id("message-assistant").last).to_be_in_viewport()
    # Scroll up a little, and note the message under the middle of the screen.
    before = page.evaluate(
        """() => {
            const scroller = document.getElementById("scroller");
            scroller.scrollBy(0, -400);
            const box = scroller.getBoundingClientRect();
            const middle = box.top + box.height / 2;
            const el = [...document.getElementById("messages").children]
                .find((m) => m.getBoundingClientRect().bottom > middle);
            window.__read = el;
            return el.getBoundingClientRect().top;
        }"""
    )
    expect(page.get_by_test_id("message-assistant")).to_have_count(TURNS)
    after = page.evaluate("window.__read.getBoundingClientRect().top")
    assert abs(after - before) < 2, (before, after)
    expect(page.locator("#jump-latest")).to_be_visible()
    # Up to the top, a screen at a time: messages not drawn yet take their real height as
    # they come near, and what is on screen moves by the scroll alone.
    jumps = page.evaluate(
        """async () => {
            const scroller = document.getElementById("scroller");
            // Past the paint of the frame after the next: one decides that a message is
            // near and should be drawn, the next draws it (its height observed before paint).
            const frame = () => new Promise((resolve) => requestAnimationFrame(resolve));
            const painted = () => new Promise((resolve) => {
                const channel = new MessageChannel();
                channel.port1.onmessage = resolve;
                channel.port2.postMessage(null);
            });
            const frames = async () => {
                for (let k = 0; k < 3; k += 1) await frame();
                await painted();
            };
            const jumps = [];
            while (scroller.scrollTop > 600) {
                const box = scroller.getBoundingClientRect();
                const seen = [...document.getElementById("messages").children]
                    .find((m) => m.getBoundingClientRect().bottom > box.top + box.height / 2);
                const before = seen.getBoundingClientRect().top;
                scroller.scrollBy(0, -600);
                await frames();
                jumps.push(Math.round(seen.getBoundingClientRect().top - before - 600));
            }
            return jumps;
        }"""
    )
    moved = [(i, jump) for i, jump in enumerate(jumps) if jump]
    assert len(jumps) > 10 and not moved, moved

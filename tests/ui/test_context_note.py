"""A turn whose prompt was fitted to the model's window says so above its steps, in plain
words, live or stored (the `context` step of backend/llm/context.py)."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.support.live_server import LiveServer
from tests.ui.browser import Person, login, store_conversation
from tests.ui.conftest import OpenPage

TRIMMED = (
    "To fit the model's context window of 8,192 tokens, 12 older messages were left out "
    "of what the model read."
)
CUT = "The model's server read 4,096 prompt tokens where about 6,900 were sent"


def _seed(server: LiveServer, person: Person, title: str) -> None:
    trimmed = {"type": "context", "stage": "chat", "window": 8192, "prompt_tokens": 6000,
               "dropped_messages": 12, "dropped_parts": 0, "message": TRIMMED}  # fmt: skip
    cut = {"type": "context", "stage": "chat", "window": 8192, "prompt_tokens": 6900,
           "cut_upstream": True, "reported_tokens": 4096, "message": CUT + "."}  # fmt: skip
    meta = {"agent_type": "chat", "route_reason": "test", "finish_reason": "stop"}
    store_conversation(
        server,
        person,
        title,
        [
            ("Q-CONTEXT tell me more", "Fitted.", {**meta, "steps": [trimmed]}),
            ("Q-CUT and more", "Cut.", {**meta, "steps": [cut]}),
        ],
    )


def test_a_fitted_prompt_and_a_cut_one_are_shown_above_the_steps(
    open_page: OpenPage, person: Person, ui_server: LiveServer
) -> None:
    page = open_page()
    _seed(ui_server, person, "A fitted conversation")
    login(page, person)
    page.get_by_role("button", name="A fitted conversation", exact=True).click()
    notes = page.get_by_test_id("step-context")
    expect(notes).to_have_count(2)
    expect(notes.first).to_have_text(f"Context{TRIMMED}", use_inner_text=False)
    expect(notes.first).to_have_attribute("role", "note")
    expect(notes.last).to_contain_text(CUT)
    expect(notes.last).to_have_class("step step-context is-warning")
    expect(notes.first).not_to_have_class("step step-context is-warning")

"""Issue 41: the composer's model picker lists the server's models with what each can do,
and a message goes to the model picked (its profile shown once its first use probed it)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from tests.conftest import ADMIN_PASSWORD, StartServer
from tests.support.live_server import free_port
from tests.support.stand_in_models import StandIn, StandInOllama
from tests.ui.browser import Person, login
from tests.ui.conftest import OpenPage


@pytest.fixture
def ollama() -> Iterator[StandInOllama]:
    models = {"wide:latest": StandIn(window=32_768), "narrow:latest": StandIn(window=2_048)}
    with StandInOllama(free_port(), models) as server:
        yield server


def test_the_picked_model_answers_and_its_profile_is_shown(
    start_server: StartServer, ollama: StandInOllama, open_page: OpenPage
) -> None:
    # open_page last: its pages close before the server stops (their status polls would fail)
    server = start_server(
        LLM_BACKEND="ollama",
        OLLAMA_HOST=ollama.url,
        MODEL_PROBE="true",
        MODEL_PROFILES='{"wide:latest": {"size": "small"}}',
    )
    page = open_page(server=server)
    login(page, Person("admin", ADMIN_PASSWORD))
    picker = page.get_by_test_id("model-select")
    expect(picker).to_be_visible()
    options = picker.locator("option")
    expect(options).to_have_text(["wide:latest · small", "narrow:latest"])
    expect(options.first).to_have_attribute(
        "title", "small (simple paths) · 8,192 tokens · set by the operator"
    )

    picker.select_option("narrow:latest")
    page.get_by_test_id("agent-select").select_option("chat")
    page.get_by_test_id("composer").fill("Hello there")
    page.get_by_test_id("send").click()
    expect(page.get_by_text("Hello from a stand-in.")).to_be_visible()
    expect(options.nth(1)).to_have_text("narrow:latest · capable")  # probed at its first use
    expect(options.nth(1)).to_have_attribute("title", "capable · native tools · 2,048 tokens")
    asked = [
        body["model"]
        for body in ollama.requests
        if body["messages"][-1]["content"] == "Hello there"
    ]
    assert asked == ["narrow:latest"]
    expect(picker).to_have_value("narrow:latest")

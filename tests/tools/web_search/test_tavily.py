"""web_search against a fake Tavily on 127.0.0.1, over real HTTP."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from backend.tools.web_search import WebSearch, web_search_from_settings
from tests.support.fake_tavily import Behaviour, FakeTavily, result
from tests.support.live_server import free_port

KEY = "tvly-test-0123456789abcdef"

StartTavily = Callable[..., FakeTavily]


@pytest.fixture
def tavily() -> Iterator[StartTavily]:
    """Start a fake Tavily; keyword arguments become its `Behaviour`."""
    servers: list[FakeTavily] = []

    def start(**behaviour: Any) -> FakeTavily:
        server = FakeTavily(free_port(), Behaviour(**behaviour))
        servers.append(server.__enter__())
        return server

    yield start
    for server in servers:
        server.__exit__(None, None, None)


def client(server: FakeTavily, key: str = KEY, timeout: float = 5.0) -> WebSearch:
    search = web_search_from_settings(key, base_url=server.base_url, timeout=timeout)
    assert search is not None
    return search


PANDAS = result(
    "pandas.DataFrame.groupby",
    "https://pandas.pydata.org/docs/reference/api/pandas.DataFrame.groupby.html",
    "Group DataFrame using a mapper or by a Series of columns.",
)
POLARS = result("Polars group_by", "https://docs.pola.rs/group_by", "Start a group by operation.")


async def test_results_are_parsed_and_formatted(tavily: StartTavily) -> None:
    server = tavily(api_key=KEY, results=[PANDAS, POLARS], answer="Use DataFrame.groupby.")

    found = await client(server).search("  how to group rows in pandas ")

    assert found.ok and found.error is None
    assert [hit.url for hit in found.results] == [PANDAS["url"], POLARS["url"]]
    assert found.answer == "Use DataFrame.groupby."
    assert found.as_observation() == (
        "web_search results for 'how to group rows in pandas':\n"
        "Summary from the search service: Use DataFrame.groupby.\n"
        "\n"
        f"[1] pandas.DataFrame.groupby — {PANDAS['url']}\n"
        "Group DataFrame using a mapper or by a Series of columns.\n"
        "\n"
        "[2] Polars group_by — https://docs.pola.rs/group_by\n"
        "Start a group by operation."
    )


async def test_the_key_travels_in_the_authorization_header_only(tavily: StartTavily) -> None:
    server = tavily(api_key=KEY, results=[PANDAS])

    await client(server).search("groupby", max_results=3)

    [request] = server.requests
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.json == {
        "query": "groupby",
        "max_results": 3,
        "search_depth": "basic",
        "include_answer": True,
    }
    assert KEY not in repr(client(server))


async def test_max_results_is_respected_and_long_snippets_are_cut(tavily: StartTavily) -> None:
    pages = [result(f"Page {n}", f"https://example.org/{n}", "word " * 400) for n in range(8)]
    server = tavily(results=pages)

    found = await client(server).search("anything", max_results=3)

    assert len(found.results) == 3
    observation = found.as_observation()
    snippet = observation.splitlines()[3]
    assert len(snippet) <= 500 and snippet.endswith("…")


async def test_a_wrong_key_says_check_the_key_without_showing_it(
    tavily: StartTavily, caplog: pytest.LogCaptureFixture
) -> None:
    server = tavily(api_key="tvly-the-right-one-000000")

    with caplog.at_level(logging.DEBUG):
        found = await client(server, key=KEY).search("groupby")

    observation = found.as_observation()
    assert not found.ok and found.results == []
    assert observation == "web_search failed: the search service answered 401: check TAVILY_API_KEY"
    assert KEY not in observation
    assert caplog.text and KEY not in caplog.text


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (500, "the search service answered 500: fake Tavily answers 500"),
        (429, "the search service answered 429: the Tavily rate or usage limit was reached"),
        (400, "the search service answered 400: fake Tavily answers 400"),
    ],
)
async def test_http_errors_become_observations(
    tavily: StartTavily, status: int, expected: str
) -> None:
    server = tavily(status=status, results=[PANDAS])

    found = await client(server).search("groupby")

    assert not found.ok and found.results == []
    assert found.as_observation().startswith(f"web_search failed: {expected}")


async def test_an_error_page_that_is_not_json_gives_only_the_status(tavily: StartTavily) -> None:
    server = tavily(status=502, body=b"<html><body>Bad gateway</body></html>")

    found = await client(server).search("groupby")

    assert found.as_observation() == "web_search failed: the search service answered 502"


async def test_a_slow_service_times_out_quickly(tavily: StartTavily) -> None:
    server = tavily(results=[PANDAS], delay=5.0)

    started = time.monotonic()
    found = await client(server, timeout=0.5).search("groupby")

    assert time.monotonic() - started < 2.0
    assert not found.ok and found.results == []
    assert found.as_observation() == (
        "web_search failed: the search service did not answer within 0.5 s"
    )


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"this is not json", "the search service's answer is not JSON"),
        (b'{"query": "groupby", "answer": "Invented?"}', "has no list of results"),
        (b'{"results": "none"}', "has no list of results"),
        (b"[]", "has no list of results"),
        (
            b'{"answer": "Invented?", "results": [{"title": 3, "url": "https://a.org"}, "text",'
            b' {"title": "t", "url": "javascript:alert(1)"}, {"title": "no url"}]}',
            "none of the 4 results the search service sent was usable",
        ),
    ],
)
async def test_malformed_answers_invent_nothing(
    tavily: StartTavily, body: bytes, error: str
) -> None:
    server = tavily(body=body)

    found = await client(server).search("groupby")

    observation = found.as_observation()
    assert not found.ok and found.results == [] and found.answer is None
    assert observation.startswith("web_search failed: ") and error in observation
    assert "[1]" not in observation and "Invented" not in observation


async def test_malformed_entries_are_skipped(tavily: StartTavily) -> None:
    broken = [{"url": 42}, {"title": "x", "url": "https://bad url.org"}, None]
    server = tavily(results=[*broken, {"url": "https://docs.pola.rs/", "content": None}])

    found = await client(server).search("polars")

    assert found.ok
    assert [(hit.title, hit.url, hit.snippet) for hit in found.results] == [
        ("https://docs.pola.rs/", "https://docs.pola.rs/", "")
    ]


async def test_no_results_says_so_and_drops_the_unsourced_answer(tavily: StartTavily) -> None:
    server = tavily(results=[], answer="Something with no source.")

    found = await client(server).search("zzqx unknown thing")

    assert found.ok and found.results == [] and found.answer is None
    assert found.as_observation() == "web_search found no results for 'zzqx unknown thing'."


async def test_a_refused_connection_becomes_an_observation() -> None:
    search = WebSearch(KEY, base_url=f"http://127.0.0.1:{free_port()}", timeout=2.0)

    found = await search.search("groupby")

    assert not found.ok
    assert found.as_observation().startswith("web_search failed: could not reach the search")
    assert KEY not in found.as_observation()


async def test_an_echoed_key_is_scrubbed(tavily: StartTavily) -> None:
    server = tavily(results=[result("Leak", "https://example.org", f"key={KEY}")])

    observation = (await client(server).search("groupby")).as_observation()

    assert KEY not in observation and "key=[TAVILY_API_KEY]" in observation


async def test_an_empty_query_is_not_sent(tavily: StartTavily) -> None:
    server = tavily(results=[PANDAS])

    found = await client(server).search("   ")

    assert not found.ok and server.requests == []
    assert "query is empty" in found.as_observation()


def test_without_a_key_there_is_no_tool() -> None:
    assert web_search_from_settings("") is None
    assert web_search_from_settings("   ") is None
    search = web_search_from_settings(KEY, base_url="http://127.0.0.1:9/")
    assert search is not None and search.base_url == "http://127.0.0.1:9"


def test_a_key_that_cannot_travel_in_a_header_is_refused_without_quoting_it() -> None:
    with pytest.raises(ValueError, match="TAVILY_API_KEY") as raised:
        web_search_from_settings("tvly-bad key\u00e9")
    assert "bad key" not in str(raised.value)

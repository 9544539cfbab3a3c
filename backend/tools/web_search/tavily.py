"""Tavily's search API over httpx: one POST per query, every failure turned into a result.

The key travels only in the `Authorization` header. Whatever the service sends back
is scrubbed of the key before it reaches an observation or a log line.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Literal

import httpx

from backend.tools.web_search.result import SNIPPET_CHARS, SearchHit, WebSearchResult, shorten

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.tavily.com"
DEFAULT_TIMEOUT = 15.0
_CONNECT_TIMEOUT = 3.0
_MAX_RESULTS = 20  # Tavily's own ceiling
_MAX_RESPONSE_BYTES = 4 * 1024 * 1024
_MAX_URL_CHARS = 2000
_DETAIL_CHARS = 200
_RATE_LIMITED = {429, 432, 433}  # Tavily: too many requests, plan limit, pay-as-you-go limit

SearchDepth = Literal["basic", "advanced"]


class _ResponseTooLarge(Exception):
    pass


class WebSearch:
    """Searches the web through Tavily; `search` returns failures instead of raising them."""

    def __init__(
        self,
        api_key: str,
        base_url: str = DEFAULT_BASE_URL,
        timeout: float = DEFAULT_TIMEOUT,
        search_depth: SearchDepth = "basic",
    ) -> None:
        if not api_key:
            raise ValueError("WebSearch needs an API key; use web_search_from_settings()")
        if not (api_key.isascii() and api_key.isprintable()) or " " in api_key:
            # It could not travel in a header; the message must not quote it.
            raise ValueError("TAVILY_API_KEY contains spaces or characters that are not ASCII")
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self._api_key = api_key
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.search_depth = search_depth

    def __repr__(self) -> str:  # never shows the key
        return f"WebSearch(base_url={self.base_url!r}, timeout={self.timeout:g})"

    async def search(self, query: str, max_results: int = 5) -> WebSearchResult:
        query = query.strip()
        if not query:
            return self._failed(query, "the query is empty; say what to search for")
        max_results = max(1, min(max_results, _MAX_RESULTS))
        payload = {
            "query": query,
            "max_results": max_results,
            "search_depth": self.search_depth,
            "include_answer": True,
        }
        try:
            # httpx's timeouts apply per read; this bounds the whole exchange.
            async with asyncio.timeout(self.timeout):
                status, body = await self._post(payload)
        except httpx.ConnectTimeout:
            connect = min(_CONNECT_TIMEOUT, self.timeout)
            error = f"could not connect to the search service within {connect:g} s"
        except (TimeoutError, httpx.TimeoutException):
            error = f"the search service did not answer within {self.timeout:g} s"
        except _ResponseTooLarge:
            error = f"the search service sent more than {_MAX_RESPONSE_BYTES // 2**20} MiB"
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            detail = shorten(str(exc), _DETAIL_CHARS) or type(exc).__name__
            error = f"could not reach the search service ({detail})"
        else:
            return self._interpret(query, max_results, status, body)
        return self._failed(query, error)

    async def _post(self, payload: dict[str, Any]) -> tuple[int, bytes]:
        timeout = httpx.Timeout(self.timeout, connect=min(_CONNECT_TIMEOUT, self.timeout))
        headers = {"Authorization": f"Bearer {self._api_key}"}
        url = f"{self.base_url}/search"
        async with (
            httpx.AsyncClient(timeout=timeout) as client,
            client.stream("POST", url, json=payload, headers=headers) as response,
        ):
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > _MAX_RESPONSE_BYTES:
                    raise _ResponseTooLarge
            return response.status_code, bytes(body)

    def _interpret(self, query: str, max_results: int, status: int, body: bytes) -> WebSearchResult:
        if status in (401, 403):
            error = f"the search service answered {status}: check TAVILY_API_KEY"
            return self._failed(query, error)
        if status in _RATE_LIMITED:
            return self._failed(
                query,
                f"the search service answered {status}: the Tavily rate or usage limit "
                "was reached; try again later",
            )
        if not 200 <= status < 300:
            detail = _error_detail(body)
            suffix = f": {detail}" if detail else ""
            return self._failed(query, f"the search service answered {status}{suffix}")
        try:
            data = json.loads(body)
        except ValueError:
            return self._failed(query, "the search service's answer is not JSON")
        return self._parse(query, max_results, data)

    def _parse(self, query: str, max_results: int, data: object) -> WebSearchResult:
        if not isinstance(data, dict) or not isinstance(data.get("results"), list):
            return self._failed(query, "the search service's answer has no list of results")
        entries: list[object] = data["results"]
        hits = [hit for hit in map(self._hit, entries) if hit is not None]
        if entries and not hits:
            return self._failed(
                query, f"none of the {len(entries)} results the search service sent was usable"
            )
        if len(hits) < len(entries):
            logger.warning("web_search skipped %d malformed results", len(entries) - len(hits))
        answer = data.get("answer")
        # The service's summary is kept only alongside the sources it came from.
        if not (isinstance(answer, str) and answer.strip() and hits):
            answer = None
        result = WebSearchResult(
            query=query,
            ok=True,
            results=hits[:max_results],
            answer=self._scrub(shorten(answer, SNIPPET_CHARS * 2)) if answer else None,
        )
        logger.debug("web_search got %d results", len(result.results))
        return result

    def _hit(self, entry: object) -> SearchHit | None:
        if not isinstance(entry, dict):
            return None
        url, title, content = (_text(entry, key) for key in ("url", "title", "content"))
        if url is None or title is None or content is None:
            return None
        if not url.startswith(("http://", "https://")) or len(url) > _MAX_URL_CHARS:
            return None
        if any(char.isspace() for char in url):
            return None
        return SearchHit(
            title=self._scrub(shorten(title, SNIPPET_CHARS)) or url,
            url=self._scrub(url),
            snippet=self._scrub(shorten(content, SNIPPET_CHARS)),
        )

    def _failed(self, query: str, error: str) -> WebSearchResult:
        error = self._scrub(error)
        logger.warning("web_search failed: %s", error)
        return WebSearchResult(query=query, ok=False, error=error)

    def _scrub(self, text: str) -> str:
        return text.replace(self._api_key, "[TAVILY_API_KEY]")


def _text(entry: dict[Any, Any], key: str) -> str | None:
    """The entry's text under `key`: "" when absent or null, None when it is not text."""
    value = entry.get(key)
    if value is None:
        return ""
    return value if isinstance(value, str) else None


def _error_detail(body: bytes) -> str | None:
    """Tavily's `{"detail": {"error": ...}}`, or a similar short message; never raw HTML."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    for _ in range(3):
        if isinstance(data, str):
            return shorten(data, _DETAIL_CHARS) or None
        if not isinstance(data, dict):
            return None
        data = data.get("detail", data.get("error", data.get("message")))
    return None


def web_search_from_settings(
    api_key: str, base_url: str = DEFAULT_BASE_URL, timeout: float = DEFAULT_TIMEOUT
) -> WebSearch | None:
    """The web_search tool, or None when no key is set: then the agent is not offered it."""
    api_key = api_key.strip()
    if not api_key:
        return None
    return WebSearch(api_key, base_url or DEFAULT_BASE_URL, timeout)

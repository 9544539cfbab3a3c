"""The web_search tool: Tavily search results as an observation for the agent.

The tool exists only when a Tavily key is configured (`web_search_from_settings`
returns None otherwise), and it never raises on network, HTTP or JSON failures:
those come back as a `WebSearchResult` with `ok=False`, whose observation says
what went wrong.
"""

from __future__ import annotations

from backend.tools.web_search.result import SearchHit, WebSearchResult
from backend.tools.web_search.tavily import (
    DEFAULT_BASE_URL,
    DEFAULT_TIMEOUT,
    WebSearch,
    web_search_from_settings,
)

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_TIMEOUT",
    "SearchHit",
    "WebSearch",
    "WebSearchResult",
    "web_search_from_settings",
]

"""What a web search returns, and the text the agent sees for it."""

from __future__ import annotations

from pydantic import BaseModel, Field

SNIPPET_CHARS = 500
_TITLE_CHARS = 200
_ANSWER_CHARS = 1000
_QUERY_CHARS = 200


def shorten(text: str, limit: int) -> str:
    """Collapse whitespace and cut to `limit` characters, marking the cut with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


class SearchHit(BaseModel):
    title: str
    url: str
    snippet: str = ""


class WebSearchResult(BaseModel):
    """One search: the hits the service sent, or why there are none.

    `ok` is False when the service could not be asked or did not answer sensibly;
    `ok` with no `results` means it answered and found nothing.
    """

    query: str
    ok: bool
    results: list[SearchHit] = Field(default_factory=list)
    answer: str | None = None  # the service's own summary, only alongside results
    error: str | None = None

    def as_observation(self) -> str:
        quoted = repr(shorten(self.query, _QUERY_CHARS))
        if not self.ok:
            return f"web_search failed: {self.error or 'unknown error'}"
        if not self.results:
            return f"web_search found no results for {quoted}."
        lines = [f"web_search results for {quoted}:"]
        if self.answer:
            lines.append(f"Summary from the search service: {shorten(self.answer, _ANSWER_CHARS)}")
        for number, hit in enumerate(self.results, start=1):
            lines.append("")
            lines.append(f"[{number}] {shorten(hit.title, _TITLE_CHARS)} — {hit.url}")
            if hit.snippet:
                lines.append(shorten(hit.snippet, SNIPPET_CHARS))
        return "\n".join(lines)

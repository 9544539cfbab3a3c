"""What stops a turn while it streams, checked between its events: its place's time (a
plain chat reply's `chat_stream` seconds, a 503) and the user's daily tokens (a 429, at
most one model call past them). Both end the turn as an `LLMError` its stream reports."""

from __future__ import annotations

from backend.core.governor import WorkTimedOut
from backend.core.limits import Limits
from backend.core.turn import Turn
from backend.llm.errors import LLMError


def check_turn_bounds(turn: Turn, limits: Limits | None) -> None:
    if turn.stream_place is not None:
        try:
            turn.stream_place.held.check()
        except WorkTimedOut as exc:
            raise LLMError(exc.message, status_code=503, code=exc.code) from None
    if turn.tokens_left is None or limits is None:
        return
    used = turn.counts().tokens  # a chat stream's: estimated until it reports them
    if used >= turn.tokens_left:
        past = limits.tokens_past(turn.tokens_limit - turn.tokens_left + used, turn.tokens_limit)
        raise LLMError(past.message, status_code=429, code=past.code)

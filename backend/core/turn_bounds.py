"""What stops a turn while it streams, checked between its events: its place's time (a
plain chat reply's `chat_stream` seconds, a 503) and the user's daily tokens (a 429, at
most one model call past them). Both end the turn as an `LLMError` its stream reports."""

from __future__ import annotations

from backend.core.governor import Place, WorkTimedOut
from backend.core.limits import Limits
from backend.core.turn import TurnState
from backend.llm.errors import LLMError


def check_turn_bounds(state: TurnState, place: Place | None, limits: Limits | None) -> None:
    if place is not None:
        try:
            place.held.check()
        except WorkTimedOut as exc:
            raise LLMError(exc.message, status_code=503, code=exc.code) from None
    plan = state.plan
    if plan.tokens_left is None or limits is None:
        return
    used = state.counts().tokens  # a chat stream's: estimated until it reports them
    if used >= plan.tokens_left:
        past = limits.tokens_past(plan.tokens_limit - plan.tokens_left + used, plan.tokens_limit)
        raise LLMError(past.message, status_code=429, code=past.code)

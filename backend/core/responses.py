"""OpenAI's Responses API over chat turns: a response's id, and what continuing one means.

A response id carries its conversation's id, so `previous_response_id` finds the
conversation again; the answer it names is a store query (`Store.response_message`).
Any earlier response may be continued: the new turn follows that response's answer, a
branch with that branch's history and data.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from backend.storage import Conversation, Store


class ResponseNotFound(LookupError):
    def __init__(self, response_id: str) -> None:
        super().__init__(response_id)
        self.response_id = response_id


def new_response_id(conversation_id: str) -> str:
    """`resp_` + the conversation's id + a suffix: `previous_response_id` finds it again."""
    return f"resp_{conversation_id}{uuid.uuid4().hex[:16]}"


def conversation_of(response_id: str) -> str | None:
    body = response_id.removeprefix("resp_")
    return body[:32] if response_id.startswith("resp_") and len(body) == 48 else None


@dataclass(frozen=True)
class Continued:
    """Where a turn that continues a response goes."""

    conversation: Conversation
    parent_message_id: int | None  # the response's answer; None: a response from before
    # branches, continued after the latest message


def continued(store: Store, user_id: int, response_id: str) -> Continued:
    """The user's response `response_id` as the place a new turn follows
    (`ResponseNotFound` for another user's, a deleted one, or no response at all)."""
    conversation = store.get_conversation(user_id, conversation_of(response_id) or "")
    if conversation is None:
        raise ResponseNotFound(response_id)
    return Continued(conversation, store.response_message(conversation.id, response_id))

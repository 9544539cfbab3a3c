"""Types shared by several schema families."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, StringConstraints

from backend.storage.sessions import SESSION_ID_PATTERN


def _encodable(value: str) -> str:
    # JSON can carry lone surrogates ("\\udc80") that no database or response can encode.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text must be valid Unicode (it contains a lone surrogate)") from None
    return value


Text = Annotated[str, AfterValidator(_encodable)]
# A session id becomes part of a directory name (backend/storage/sessions.py).
SessionId = Annotated[str, StringConstraints(pattern=SESSION_ID_PATTERN)]

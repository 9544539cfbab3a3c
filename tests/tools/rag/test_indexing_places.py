"""Indexing a session's documents takes the governor's `rag_index` place (issue 40): one
user's indexing at a time, a bounded number on the server, and a time limit. Refused or
stopped, the search still answers from what was indexed before, and says so."""

from __future__ import annotations

import asyncio
import functools

from backend.config import load_settings
from backend.core.agents.runner import _indexing
from backend.core.governor import Governor
from backend.tools.rag import RagIndex, rag_retrieval
from tests.tools.rag.conftest import MakeIndex, Upload

SESSION, OTHER = "u1-placed", "u2-placed"
FACT = "The warehouse in Leeds ships 300 parcels a day."


def _governor(seconds: float = 300) -> Governor:
    share = {"total": 2, "per_user": 1, "seconds": seconds}
    return Governor(load_settings(WORK_LIMITS={"rag_index": share}, WORK_WAIT_SECONDS=0.2))


def _placed(make_index: MakeIndex, governor: Governor) -> RagIndex:
    index = make_index()
    index.place = functools.partial(_indexing, governor)
    return index


async def test_a_users_second_indexing_waits_then_searches_what_was_indexed(
    make_index: MakeIndex, upload: Upload
) -> None:
    governor = _governor()
    index = _placed(make_index, governor)
    upload(SESSION, "depots.md", f"# Depots\n\n{FACT}\n")
    first = await rag_retrieval("parcels Leeds", user_id=1, session_id=SESSION, index=index)
    assert [p.source for p in first.passages] == ["uploads/depots.md"] and not first.notes

    upload(SESSION, "later.md", "# Later\n\nThe Leeds depot opens at six.\n")
    async with governor.hold("rag_index", 1):  # the user's one place is taken
        held = await rag_retrieval("Leeds", user_id=1, session_id=SESSION, index=index)
        upload(OTHER, "own.md", "# Own\n\nLeeds has a second depot.\n")
        other = await rag_retrieval("Leeds", user_id=2, session_id=OTHER, index=index)
    assert [p.source for p in held.passages] == ["uploads/depots.md"]  # not later.md yet
    (note,) = held.notes
    assert note.startswith("The documents could not be brought up to date now (You already")
    assert note.endswith("the passages come from what was indexed before.")
    assert [p.source for p in other.passages] == ["uploads/own.md"] and not other.notes
    assert governor.held("rag_index", 1) == 0

    again = await rag_retrieval("Leeds", user_id=1, session_id=SESSION, index=index)
    assert {p.source for p in again.passages} == {"uploads/depots.md", "uploads/later.md"}


async def test_indexing_past_its_time_is_stopped(make_index: MakeIndex, upload: Upload) -> None:
    governor = _governor(seconds=0.2)
    index = _placed(make_index, governor)
    gate = asyncio.Event()
    original = index._index_session  # a slow indexing

    async def slow(user_id: int, session_id: str) -> list[object]:
        await gate.wait()  # never set: only the time limit ends it
        return list(await original(user_id, session_id))

    index._index_session = slow  # type: ignore[method-assign]
    upload(SESSION, "depots.md", f"# Depots\n\n{FACT}\n")
    result = await rag_retrieval("Leeds", user_id=1, session_id=SESSION, index=index)
    (note,) = result.notes
    assert "indexing took longer than the 0.2 s the server gives it" in note
    assert governor.held("rag_index", 1) == 0

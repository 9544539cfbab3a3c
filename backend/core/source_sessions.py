"""The data sources a session attached: what the agents' prompts say of them (the tables
a question needs, verified answers like it), a run's `sql()`, the notes agents propose,
and the answers users verify on them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from backend.core.limits import LimitReached
from backend.core.source_access import SourceInvalid, SourceNotFound
from backend.core.source_notes import SourceNotes
from backend.core.source_queries import SourceQueries
from backend.storage import DataSource
from backend.storage.data_sources import VerifiedAnswer
from backend.storage.sessions import SessionKey, owner_of
from backend.tools.data_sources.catalog import describe, pick_tables
from backend.tools.data_sources.examples import Example, SourcesPrompt, most_similar, queries_in
from backend.tools.data_sources.examples import describe as describe_examples
from backend.tools.sandbox.data_channel import QueryRefused, SocketSink

LISTED_TABLES = 30  # a session's listing names at most this many tables of a source


class SessionSources(SourceQueries, SourceNotes):
    def attach(self, user_id: int, key: SessionKey, source_ids: Sequence[str]) -> list[DataSource]:
        sources = [self.get(user_id, source_id) for source_id in source_ids]
        self.store.attach_sources(key, [source.id for source in sources])
        return self.attached(key)

    def attached(self, key: SessionKey) -> list[DataSource]:
        """The session's sources that still exist and its owner may still see."""
        owner = owner_of(key)
        groups = self._groups(owner)
        return [s for s in self.store.attached_sources(key) if s.visible_to(owner, groups)]

    def listing(self, key: SessionKey) -> str:
        """The session's attached sources in a few lines: names, kinds and tables."""
        lines = []
        for source in self.attached(key):
            names = [table.name for table in self.catalog(source).tables]
            shown = ", ".join(names[:LISTED_TABLES])
            if len(names) > LISTED_TABLES:
                shown += f", … ({len(names)} tables)"
            lines.append(f"- data source {source.name!r} ({source.kind}): {shown or 'no tables'}")
        if not lines:
            return ""
        return "Attached data sources, queried with SQL from Python code:\n" + "\n".join(lines)

    def prompt_context(self, key: SessionKey, question: str) -> SourcesPrompt:
        """For the coder's prompt: each attached source's tables the question needs, with
        their notes, how to query them, and the verified answers most like the question."""
        attached = self.attached(key)
        parts = []
        for source in attached:
            notes = self.notes(source)
            picked = pick_tables(self.catalog(source), question, notes)
            header = f"Data source {source.name!r} ({source.kind}, read-only SQL)"
            if note := notes.get(""):
                header += f": {note}"
            body = describe(picked, notes) if picked else "(no table matches the question by name)"
            parts.append(f"{header}\n{body}")
        if not parts:
            return SourcesPrompt()
        usage = (
            "Query attached data sources with sql(source, query), which returns a pandas"
            " DataFrame; use only the tables and columns listed, and let the database"
            " filter, join and aggregate."
        )
        names = {source.id: source.name for source in attached}
        examples = most_similar(
            question,
            [
                Example(
                    id=answer.id,
                    source=names[answer.source_id],
                    question=answer.question,
                    code=answer.code,
                    queries=answer.queries,
                )
                for answer in self.store.verified_answers(list(names))
            ],
        )
        if examples:
            parts.append(describe_examples(examples))
        return SourcesPrompt(text=usage + "\n\n" + "\n\n".join(parts), examples=examples)

    def propose_note(self, key: SessionKey, proposal: str) -> str:
        """An agent's note, "<source> <table>[.<column>]: <note>", on a source its session
        attached: kept as proposed, whoever owns the session; the answer is for the agent."""
        head, _, note = proposal.partition(":")
        name, _, target = head.strip().partition(" ")
        source = next((s for s in self.attached(key) if s.name == name), None)
        if source is None or not note.strip():
            names = ", ".join(s.name for s in self.attached(key))
            return f"Error: give <source> <table>[.<column>]: <note>, the source one of: {names}"
        try:
            self._check_target(source, target.strip())
        except SourceInvalid as exc:
            return f"Error: {exc}"
        self.store.set_note(source.id, target.strip(), "proposed", note.strip(), owner_of(key))
        return f"Proposed to the owner of {source.name}: a note on {target.strip() or 'it'}."

    async def answer_run(
        self, key: SessionKey, name: str, sql: str, sink: SocketSink
    ) -> dict[str, Any]:
        """A run's `sql(name, query)`: on the source of that name its session attached."""
        attached = self.attached(key)
        source = next((s for s in attached if s.name == name), None)
        if source is None:
            names = ", ".join(repr(s.name) for s in attached) or "none"
            raise QueryRefused(
                f"no data source {name!r} is attached to this conversation (attached: {names})"
            )
        try:
            answer = await self.query(owner_of(key), source, sql, sink)
        except LimitReached as refused:
            raise QueryRefused(refused.message) from None
        return {"rows": answer.rows, "truncated": answer.truncated, "columns": answer.columns}

    def verify(
        self, user_id: int, key: SessionKey, question: str, answer: str, code: Sequence[str]
    ) -> list[VerifiedAnswer]:
        """Keep a checked answer on each attached source its code queried: its question,
        its code and those queries."""
        written = "\n\n".join(code)
        queried: dict[str, list[str]] = {}
        for name, sql in queries_in(written):
            queried.setdefault(name, []).append(sql)
        kept = []
        for source in self.attached(key):
            if source.name not in queried:
                continue
            same = [  # marked again: the one kept already
                found
                for found in self.store.verified_answers([source.id])
                if (found.question, found.code) == (question, written)
            ]
            kept.append(
                same[0]
                if same
                else self.store.add_verified_answer(
                    source.id, user_id, question, answer, written, queried[source.name]
                )
            )
        if not kept:
            raise SourceInvalid(
                "this answer ran no query on a data source of this conversation", "message_id"
            )
        return kept

    def verified(self, user_id: int, source_id: str) -> list[VerifiedAnswer]:
        """The source's verified answers: all of them for its owner, one's own for others."""
        source = self.get(user_id, source_id)
        answers = self.store.verified_answers([source.id])
        if source.user_id == user_id:
            return answers
        return [answer for answer in answers if answer.user_id == user_id]

    def withdraw(self, user_id: int, source_id: str, answer_id: str) -> None:
        """The owner withdraws any; whoever verified an answer, their own."""
        if not any(answer.id == answer_id for answer in self.verified(user_id, source_id)):
            raise SourceNotFound(answer_id)
        self.store.delete_verified_answer(source_id, answer_id)

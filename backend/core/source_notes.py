"""Notes on a data source, its tables and columns: the owner's are kept as given, anyone
else's are proposed until the owner accepts them."""

from __future__ import annotations

from typing import Literal

from backend.core.source_access import SourceAccess, SourceInvalid
from backend.storage import DataSource


class SourceNotes(SourceAccess):
    def write_note(self, user_id: int, source_id: str, target: str, note: str) -> str:
        """The owner's note is kept as given; anyone else's (an agent's too) is proposed
        until the owner accepts it. Returns the note's status."""
        source = self.get(user_id, source_id)
        self._check_target(source, target)
        status: Literal["accepted", "proposed"] = (
            "accepted" if source.user_id == user_id else "proposed"
        )
        self.store.set_note(source.id, target, status, note.strip(), user_id)
        return status

    def accept_note(self, user_id: int, source_id: str, target: str) -> None:
        source = self.owned(user_id, source_id)
        proposed = self.notes(source, "proposed")
        if target not in proposed:
            raise SourceInvalid("no note is proposed there", "target")
        self.store.set_note(source.id, target, "accepted", proposed[target], user_id)
        self.store.set_note(source.id, target, "proposed", "", user_id)

    def _check_target(self, source: DataSource, target: str) -> None:
        if not target:
            return
        catalog = self.catalog(source)
        table_name, _, column = (
            target.partition(".") if catalog.table(target) is None else (target, "", "")
        )
        table = catalog.table(table_name)
        if table is None or (column and all(c.name != column for c in table.columns)):
            raise SourceInvalid(f"{target!r} is no table or table.column of this source", "target")

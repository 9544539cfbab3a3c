"""What a data source holds: its tables, their columns, keys, row estimates and samples.

The catalog is read from the database on demand (`refresh`) and kept as JSON on the
source. The agents read it in two ways: `pick_tables` chooses the few tables a question
needs (lexically, then the tables their keys join to), and `describe` writes those
tables' schemas, with the owner's notes, for the prompt. `nearest` turns a name the
database did not know into the catalog's closest names, for the fix step.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from backend.files.ranking import tokens

MAX_SAMPLES = 3
SAMPLE_CHARS = 40
MAX_PICKED = 6  # tables a question's prompt carries at most
NAME_WEIGHT = 3.0
COLUMN_WEIGHT = 1.0
NOTE_WEIGHT = 1.0


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    key: str = ""  # "primary", or ""
    references: str = ""  # "table.column" a foreign key points at
    samples: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Table:
    name: str  # as SQL names it: "orders", or "sales.orders" outside the default schema
    columns: list[Column]
    rows: int | None = None  # the database's estimate
    kind: str = "table"  # or "view"


@dataclass(frozen=True)
class Catalog:
    tables: list[Table]

    def to_json(self) -> str:
        return json.dumps({"tables": [asdict(table) for table in self.tables]})

    @classmethod
    def from_json(cls, text: str) -> Catalog:
        if not text:
            return cls(tables=[])
        data = json.loads(text)
        return cls(
            tables=[
                Table(
                    name=t["name"],
                    columns=[Column(**c) for c in t["columns"]],
                    rows=t.get("rows"),
                    kind=t.get("kind", "table"),
                )
                for t in data.get("tables", [])
            ]
        )

    def table(self, name: str) -> Table | None:
        wanted = name.lower()
        return next((t for t in self.tables if t.name.lower() == wanted), None)


def sample_text(value: object) -> str:
    text = str(value)
    return text if len(text) <= SAMPLE_CHARS else text[: SAMPLE_CHARS - 1] + "…"


def _table_words(table: Table, notes: Mapping[str, str]) -> list[tuple[float, set[str]]]:
    column_notes = [notes.get(f"{table.name}.{c.name}", "") for c in table.columns]
    return [
        (NAME_WEIGHT, tokens(table.name)),
        (COLUMN_WEIGHT, tokens(" ".join(c.name for c in table.columns))),
        (NOTE_WEIGHT, tokens(" ".join([notes.get(table.name, ""), *column_notes]))),
    ]


def pick_tables(
    catalog: Catalog, question: str, notes: Mapping[str, str], limit: int = MAX_PICKED
) -> list[Table]:
    """The tables `question` needs: those its words name (table names count most, then
    columns and notes), then the tables their foreign keys join to, at most `limit`. A
    question that names no table gets the first tables when the source is small."""
    wanted = tokens(question)
    scored = []
    for position, table in enumerate(catalog.tables):
        words = _table_words(table, notes)
        score = sum(
            max((w for w, found in words if token in found), default=0.0) for token in wanted
        )
        if table.name.lower() in question.lower():
            score += NAME_WEIGHT * 10
        if score > 0:
            scored.append((-score, position, table))
    picked = [table for _, _, table in sorted(scored, key=lambda item: item[:2])][:limit]
    if not picked:
        return catalog.tables[:limit] if len(catalog.tables) <= limit else []
    for table in list(picked):
        for column in table.columns:
            joined = (
                catalog.table(column.references.rsplit(".", 1)[0]) if column.references else None
            )
            if joined is not None and joined not in picked and len(picked) < limit:
                picked.append(joined)
    return picked


def describe(tables: Iterable[Table], notes: Mapping[str, str]) -> str:
    """Tables as the prompt shows them: one line per column, with type, key, samples and
    the owner's note."""
    lines = []
    for table in tables:
        size = f", ~{table.rows:,} rows" if table.rows is not None and table.rows >= 0 else ""
        note = notes.get(table.name, "")
        lines.append(f"{table.kind} {table.name}{size}" + (f": {note}" if note else ""))
        for column in table.columns:
            details = [column.type]
            if column.key:
                details.append(f"{column.key} key")
            if column.references:
                details.append(f"references {column.references}")
            if column.samples:
                details.append("e.g. " + ", ".join(column.samples))
            line = f"  - {column.name} ({'; '.join(details)})"
            if column_note := notes.get(f"{table.name}.{column.name}", ""):
                line += f": {column_note}"
            lines.append(line)
    return "\n".join(lines)


def nearest(catalog: Catalog, name: str, table: str = "", count: int = 3) -> list[str]:
    """The catalog's names closest to `name`, a table or (within `table` if given, else
    anywhere) a column, as "table" or "table.column"."""
    lowered = name.lower().rsplit(".", 1)[-1]
    candidates: dict[str, str] = {}
    for entry in catalog.tables:
        candidates.setdefault(entry.name.lower().rsplit(".", 1)[-1], entry.name)
        if table and entry.name.lower() != table.lower():
            continue
        for column in entry.columns:
            candidates.setdefault(column.name.lower(), f"{entry.name}.{column.name}")
    close = difflib.get_close_matches(lowered, list(candidates), n=count, cutoff=0.5)
    return [candidates[match] for match in close]


def note_map(notes: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Accepted notes as {target: text}: "" the source, "table", or "table.column"."""
    return {target: text for target, text in notes}

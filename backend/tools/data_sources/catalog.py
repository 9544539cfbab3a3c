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
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from backend.files.databases import sample_text
from backend.files.ranking import tokens

MAX_PICKED = 6  # tables a question's prompt carries at most
MAX_DESCRIBED_CHARS = 6000  # their description, about 1,500 tokens
NAME_WEIGHT = 3.0
COLUMN_WEIGHT = 1.0  # a word found among the columns or the notes
UNSAID_WEIGHT = 2.0  # a word of the table's name that the question does not say
KEEP_SHARE = 0.75  # of the best table's score, that another table must reach


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


def with_samples(table: Table, rows: Sequence[Mapping[str, object]]) -> Table:
    """`table` with each column's values in `rows` (a few of its rows) as its samples."""
    columns = [
        Column(
            name=c.name,
            type=c.type,
            key=c.key,
            references=c.references,
            samples=[sample_text(row[c.name]) for row in rows if row.get(c.name) is not None],
        )
        for c in table.columns
    ]
    return Table(name=table.name, columns=columns, rows=table.rows, kind=table.kind)


def _score(table: Table, wanted: set[str], notes: Mapping[str, str]) -> float:
    """How well `wanted` (a question's words) names `table`: each word counts where it is
    found best (the table's name, then its columns and notes), and each word of the
    table's name the question does not say counts against it (`sales_2023` is not what a
    question about `sales` in 2024 needs)."""
    name = tokens(table.name)
    columns = tokens(" ".join(c.name for c in table.columns))
    column_notes = [notes.get(f"{table.name}.{c.name}", "") for c in table.columns]
    noted = tokens(" ".join([notes.get(table.name, ""), *column_notes]))
    found = 0.0
    for word in wanted:
        if word in name:
            found += NAME_WEIGHT
        elif word in columns or word in noted:
            found += COLUMN_WEIGHT
    if not name & wanted:
        return found / 2  # only its columns match: a weak candidate
    return found - UNSAID_WEIGHT * len(name - wanted)


def _named(question: str, table: Table) -> bool:
    """Whether the question writes the table's name out."""
    bare = table.name.lower().rsplit(".", 1)[-1]
    return re.search(rf"(?<![\w.]){re.escape(bare)}(?!\w)", question.lower()) is not None


def pick_tables(
    catalog: Catalog, question: str, notes: Mapping[str, str], limit: int = MAX_PICKED
) -> list[Table]:
    """The tables `question` needs, at most `limit`: those it writes out by name if any,
    else those its words name best (within KEEP_SHARE of the best), each followed by the
    tables its foreign keys join to that the question's words name too. A source of at
    most `limit` tables is shown whole: words cannot say which table holds what a question
    means ("spent" is in `orders.amount`), and a few tables cost the prompt little."""
    if len(catalog.tables) <= limit:
        return list(catalog.tables)
    wanted = tokens(question)
    named = [table for table in catalog.tables if _named(question, table)]
    if named:
        ranked = named
    else:
        scored = [(_score(t, wanted, notes), i, t) for i, t in enumerate(catalog.tables)]
        best = max((score for score, _, _ in scored), default=0.0)
        kept = [item for item in scored if item[0] > 0 and item[0] >= best * KEEP_SHARE]
        ranked = [table for _, _, table in sorted(kept, key=lambda item: (-item[0], item[1]))]
    if not ranked:
        return []
    picked: list[Table] = []
    for table in ranked:
        joined = [t for t in _joined(catalog, table) if _score(t, wanted, notes) >= NAME_WEIGHT]
        for candidate in (table, *joined):
            if candidate not in picked and len(picked) < limit:
                picked.append(candidate)
    return picked


def _joined(catalog: Catalog, table: Table) -> list[Table]:
    """The tables `table`'s foreign keys point at."""
    found = []
    for column in table.columns:
        if column.references:
            joined = catalog.table(column.references.rsplit(".", 1)[0])
            if joined is not None and joined is not table:
                found.append(joined)
    return found


def describe(
    tables: Iterable[Table], notes: Mapping[str, str], max_chars: int = MAX_DESCRIBED_CHARS
) -> str:
    """Tables as the prompt shows them: one line per column, with type, key, samples and
    the owner's note; past `max_chars`, without samples, then with each table's columns
    cut to what fits (the rest counted), so a wide table never crowds out the prompt."""
    tables = list(tables)
    text = _described(tables, notes, samples=True)
    if len(text) <= max_chars:
        return text
    text = _described(tables, notes, samples=False)
    if len(text) <= max_chars:
        return text
    share = max_chars // max(len(tables), 1)
    return "\n".join(_described([t], notes, samples=False, max_chars=share) for t in tables)


def _described(
    tables: list[Table], notes: Mapping[str, str], samples: bool, max_chars: int = 0
) -> str:
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
            if column.samples and samples:
                details.append("e.g. " + ", ".join(column.samples))
            line = f"  - {column.name} ({'; '.join(details)})"
            if column_note := notes.get(f"{table.name}.{column.name}", ""):
                line += f": {column_note}"
            if max_chars and sum(len(kept) + 1 for kept in lines) + len(line) > max_chars:
                left = len(table.columns) - (len(lines) - 1)
                lines.append(f"  - … {left} more columns")
                break
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

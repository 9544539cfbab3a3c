"""Spec-first generation for models too small to write code freely.

A 135M model copies examples and invents columns when asked for code, but it
can fill a small form whose choices are fixed by a JSON-schema grammar. So for
small models the question becomes an `AnalysisSpec` (operation, column,
group-by, frame): what the question's own words settle (a column it names, an
operation word such as "average") is taken from them; the model fills only
the rest, choosing among the real column names; the code is rendered from the
spec. A question the form cannot express returns None and goes to free-form
generation. The result records which fields came from where.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, create_model

from backend.files import FileMetadata
from backend.llm.turn import StructuredReplyError, TurnLLM

# Earlier entries win: "how many unique regions" is nunique, not count.
_OPERATION_WORDS: list[tuple[str, tuple[str, ...]]] = [
    ("nunique", ("distinct", "unique", "different")),
    ("correlation", ("correlation", "correlate", "correlated", "corr")),
    ("median", ("median",)),
    ("std", ("standard deviation", "std", "stdev")),
    ("mean", ("mean", "average", "avg")),
    ("sum", ("sum", "total")),
    ("max", ("maximum", "max", "highest", "largest", "biggest")),
    ("min", ("minimum", "min", "lowest", "smallest")),
    ("count", ("how many", "number of", "count")),
    ("describe", ("describe", "summary", "summarize", "statistics")),
]
OPERATIONS = [name for name, _ in _OPERATION_WORDS]
_NUMERIC_OPERATIONS = {"mean", "sum", "max", "min", "median", "std", "correlation"}
_GROUP_CUES = ("per", "by", "for each", "in each", "for every", "grouped by")
_WHICH = ("which", "what")  # group cues too, before a text column
# Filters, shares and rankings: the spec has no field for them, so such questions go free-form.
_UNEXPRESSIBLE = (
    "more than", "less than", "greater than", "fewer than", "higher than", "lower than",
    "above", "below", "at least", "at most", "where", "whose", "only",
    "except", "excluding", "without", "percent", "percentage", "share", "ratio",
    "proportion", "top", "bottom", "rank", "before", "after", "equal to", "%", ">", "<", "=",
)  # fmt: skip
_NONE = "none"
_NUMBER = re.compile(r"(?<![a-z_])\d+(\.\d+)?(?![a-z_])")


@dataclass
class AnalysisSpec:
    frame: str
    operation: str
    column: str = ""
    other_column: str = ""  # correlation's second column
    group_by: str = ""
    sources: dict[str, str] = field(default_factory=dict)  # field -> "question" | "model"

    def to_dict(self) -> dict[str, Any]:
        return {
            "frame": self.frame,
            "operation": self.operation,
            "column": self.column,
            "other_column": self.other_column,
            "group_by": self.group_by,
            "sources": self.sources,
        }


def _mentions(text: str, phrase: str) -> int:
    """Where `phrase` occurs in `text` as whole words, or -1."""
    pattern = r"(?<![a-z0-9_])" + re.escape(phrase.lower()) + r"(?![a-z0-9_])"
    match = re.search(pattern, text)
    return match.start() if match else -1


def _operation(question: str) -> str | None:
    for name, words in _OPERATION_WORDS:
        if any(_mentions(question, word) >= 0 for word in words):
            return name
    return None


def _unexpressible(question: str) -> bool:
    if _NUMBER.search(question):  # "more than 10", "in 2023", "top 5": a filter or a ranking
        return True
    return any(
        (_mentions(question, phrase) >= 0) if phrase[0].isalpha() else (phrase in question)
        for phrase in _UNEXPRESSIBLE
    )


def _spellings(column: str) -> set[str]:
    """How a question may name a column: as is, with spaces, singular or plural."""
    base = {column.lower(), column.lower().replace("_", " ")}
    forms = set(base)
    for name in base:
        forms.update({name + "s", name + "es"})
        if name.endswith("s") and len(name) > 3:
            forms.add(name[:-1])
    return forms


def _columns_named(question: str, columns: list[str]) -> list[str]:
    """Columns the question names, in order; "unit price" names unit_price, not units."""
    spans = []
    for column in columns:
        for spelling in _spellings(column):
            start = _mentions(question, spelling)
            if start >= 0:
                spans.append((start, start + len(spelling), column))
    kept = {
        column
        for start, end, column in spans
        if not any(s <= start and end <= e and (e - s) > (end - start) for s, e, _ in spans)
    }
    ordered = [column for _, _, column in sorted(spans) if column in kept]
    return list(dict.fromkeys(ordered))


def _names_a_value(question: str, metadata: FileMetadata) -> bool:
    """The question mentions a text value of the data ("north"): a filter, most likely."""
    words = set(re.findall(r"[a-z][a-z0-9_]{2,}", question))
    for row in metadata.details.get("sample_rows", []):
        for cell in row if isinstance(row, list) else []:
            if isinstance(cell, str) and cell.lower() in words:
                return True
    return False


def _group_column(question: str, named: list[str], dtypes: dict[str, str]) -> str:
    for column in named:
        # "Which region had the highest total revenue?": the totals per region, to compare.
        cues = _GROUP_CUES if _is_numeric(dtypes.get(column, "")) else _GROUP_CUES + _WHICH
        for cue in cues:
            for spelling in (column.lower(), column.lower().replace("_", " ")):
                if _mentions(question, f"{cue} {spelling}") >= 0:
                    return column
    return ""


def _dtypes(metadata: FileMetadata) -> dict[str, str]:
    return {str(c["name"]): str(c.get("dtype", "")) for c in metadata.details.get("columns", [])}


def _is_numeric(dtype: str) -> bool:
    return dtype.startswith(("int", "float", "uint", "Int", "Float", "UInt"))


async def plan_analysis(
    question: str, files: list[FileMetadata], mapping: dict[str, str], llm: TurnLLM
) -> AnalysisSpec | None:
    """The spec for `question`, or None when the form cannot express it."""
    frames = [(mapping[f.name], _dtypes(f)) for f in files if f.name in mapping and _dtypes(f)]
    text = question.lower()
    if not frames or _unexpressible(text):
        return None
    frame, dtypes = frames[0]
    named = _columns_named(text, list(dtypes))
    for candidate, candidate_dtypes in frames[1:]:  # the first frame that has a named column
        if named:
            break
        frame, dtypes = candidate, candidate_dtypes
        named = _columns_named(text, list(dtypes))
    if not named:
        frame, dtypes = frames[0]
    sources: dict[str, str] = {}
    operation = _operation(text)
    if operation is not None:
        sources["operation"] = "question"
    group_by = _group_column(text, named, dtypes)
    if group_by:
        sources["group_by"] = "question"
    elif any(_names_a_value(text, f) for f in files if mapping.get(f.name) == frame):
        return None
    targets = [column for column in named if column != group_by]
    if len(targets) > (2 if operation == "correlation" else 1):
        return None  # a second column means a filter or a relation the spec cannot hold
    if targets:
        sources["column"] = "question"
    if operation is None or (not targets and operation not in ("count", "describe")):
        filled = await _ask_model(question, frame, list(dtypes), llm)
        if filled is None:
            return None
        operation = operation or filled["operation"]
        sources.setdefault("operation", "model")
        if not targets and filled["column"] != _NONE:
            targets = [filled["column"]]
            sources["column"] = "model"
    if operation == "other":
        return None
    spec = AnalysisSpec(
        frame=frame,
        operation=operation,
        column=targets[0] if targets else "",
        other_column=targets[1] if len(targets) > 1 else "",
        group_by=group_by,
        sources=sources,
    )
    return spec if _valid(spec, dtypes) else None


def _valid(spec: AnalysisSpec, dtypes: dict[str, str]) -> bool:
    if spec.group_by and spec.operation in ("describe", "correlation"):
        return False  # rendered ungrouped, it would answer another question
    if spec.operation in _NUMERIC_OPERATIONS:
        columns = (
            [spec.column, spec.other_column] if spec.operation == "correlation" else [spec.column]
        )
        return all(column and _is_numeric(dtypes.get(column, "")) for column in columns)
    return True


async def _ask_model(
    question: str, frame: str, columns: list[str], llm: TurnLLM
) -> dict[str, str] | None:
    schema: type[BaseModel] = create_model(
        "AnalysisChoice",
        operation=(_literal([*OPERATIONS, "other"]), ...),
        column=(_literal([*columns, _NONE]), ...),
    )
    prompt = (
        "[stage: analysis_spec]\n"
        f"## INPUT\n{question}\n"
        f"## METADATA\n{frame} has the columns: {', '.join(columns)}\n"
        "## TASK\nWhich operation and which column answer INPUT? "
        "Use operation 'other' if none fits. Reply with JSON."
    )
    try:
        choice = await llm.json("analysis_spec", "", prompt, schema, max_tokens=60)
    except StructuredReplyError:
        return None
    return {"operation": str(choice.operation), "column": str(choice.column)}  # type: ignore[attr-defined]


def _literal(values: list[str]) -> Any:
    return Literal[tuple(values)]


_SQL_AGGREGATES = {
    "mean": "avg({})",
    "sum": "sum({})",
    "max": "max({})",
    "min": "min({})",
    "median": "median({})",
    "std": "stddev_samp({})",
    "count": "count({})",
    "nunique": "count(DISTINCT {})",
}


def render_code(spec: AnalysisSpec, relation: bool = False) -> str:
    """The Python that computes `spec`, printing a labelled result. `relation`: the frame
    is a DuckDB relation (a file too large for pandas), queried with SQL."""
    if relation:
        return _render_sql(spec)
    frame, column, group = spec.frame, spec.column, spec.group_by
    label = f"{spec.operation} of {column}" if column else spec.operation
    if spec.operation == "correlation":
        expression = f"{frame}[{column!r}].corr({frame}[{spec.other_column!r}])"
        label = f"correlation of {column} and {spec.other_column}"
    elif spec.operation == "describe":
        expression = f"{frame}[{column!r}].describe()" if column else f"{frame}.describe()"
    elif spec.operation == "count" and not column:
        expression = f"{frame}.groupby({group!r}).size()" if group else f"len({frame})"
        label = f"rows per {group}" if group else "rows"
    else:
        method = {"count": "count", "nunique": "nunique"}.get(spec.operation, spec.operation)
        source = f"{frame}.groupby({group!r})[{column!r}]" if group else f"{frame}[{column!r}]"
        expression = f"{source}.{method}()"
        if group:
            label += f" per {group}"
    return f"result = {expression}\nprint({label + ':'!r})\nprint(result)\n"


def _render_sql(spec: AnalysisSpec) -> str:
    """`render_code` for a DuckDB relation: one SQL query, and only its result in pandas."""
    frame, column, group = spec.frame, spec.column, spec.group_by
    label = f"{spec.operation} of {column}" if column else spec.operation
    if spec.operation == "describe":
        source = f"{frame}.select({_quoted(column)!r})" if column else frame
        return f"result = {source}.describe().df()\nprint({label + ':'!r})\nprint(result)\n"
    if spec.operation == "correlation":
        value = f"corr({_quoted(column)}, {_quoted(spec.other_column)})"
        label = f"correlation of {column} and {spec.other_column}"
    elif spec.operation == "count" and not column:
        value, label = "count(*)", (f"rows per {group}" if group else "rows")
    else:
        value = _SQL_AGGREGATES[spec.operation].format(_quoted(column))
        if group:
            label += f" per {group}"
    if group:
        key = _quoted(group)
        sql = f"SELECT {key}, {value} AS result FROM {frame} GROUP BY {key} ORDER BY {key}"
        shown = "result"
    else:
        sql, shown = f"SELECT {value} AS result FROM {frame}", "result['result'][0]"
    return (
        f"import duckdb\nresult = duckdb.sql({sql!r}).df()\n"
        f"print({label + ':'!r})\nprint({shown})\n"
    )


def _quoted(name: str) -> str:
    """A column name as an SQL identifier."""
    return '"' + name.replace('"', '""') + '"'

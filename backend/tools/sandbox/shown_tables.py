"""The tables a run shows: saved as Parquet for the UI to page, previewed for its event.

Part of the in-sandbox program (see `worker.py`); stdlib and data packages only.

A run shows a table (a pandas or Polars DataFrame, or a DuckDB relation) when it is
the cell's last expression (its compact text is printed, as a notebook would), when
it is printed, and when the run creates or changes a DataFrame variable. Each becomes
`outputs/.tables/<run>_<n>.parquet`: a hard link to the variable's own Parquet when
it is one (variables are replaced with os.replace, so the link keeps this run's
data), else a file of its own. The server pages, sorts and filters it with DuckDB;
the run reports each table's shape, types and first rows, all JSON.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import datetime
import decimal
import math
import os
from collections.abc import Iterator
from typing import Any

import variables

TABLES_FOLDER = "outputs/.tables"
MAX_TABLES = 5  # per run
KEPT_TABLES = 200  # per session: older tables' files are deleted
PREVIEW_ROWS = 20
MAX_PREVIEW_COLUMNS = 100
MAX_CELL_CHARS = 200
MAX_DISPLAY_CHARS = 20_000  # the last expression's text, for the notebook export
DISPLAY_HOOK = "__cell_display__"  # a builtin: the cell's namespace never holds it


def is_table(value: Any) -> bool:
    module = type(value).__module__.split(".", 1)[0]
    if module == "pandas":
        return type(value).__name__ == "DataFrame"
    if module == "polars":
        return type(value).__name__ == "DataFrame"
    if module in ("duckdb", "_duckdb"):
        return type(value).__name__ == "DuckDBPyRelation"
    return False


class Shown:
    """What a run has shown so far, in order, once each."""

    def __init__(self) -> None:
        self.tables: list[tuple[Any, str]] = []  # (value, how it was shown)
        self.displayed = ""  # what the last expression printed

    def add(self, value: Any, how: str) -> None:
        if is_table(value) and all(value is not seen for seen, _ in self.tables):
            self.tables.append((value, how))

    def display(self, value: Any) -> None:
        """The cell's last expression: a table is shown, and printed as a notebook would."""
        if is_table(value):
            self.add(value, "expression")
            text = str(value)
            print(text)
            self.displayed = text[:MAX_DISPLAY_CHARS]


def with_display(code: str) -> ast.Module | str:
    """`code` whose last expression statement goes to the display hook (or `code` as it is,
    which compiles to the same error, when it does not parse)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return code
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        hook = ast.Name(id=DISPLAY_HOOK, ctx=ast.Load())
        call = ast.Call(func=hook, args=[last.value], keywords=[])
        tree.body[-1] = ast.copy_location(ast.Expr(value=call), last)
        ast.fix_missing_locations(tree)
    return tree


@contextlib.contextmanager
def watching(shown: Shown) -> Iterator[None]:
    """While the cell runs: tables it prints are shown, and its last expression displayed."""
    original = builtins.print

    def printing(*values: Any, **options: Any) -> None:
        for value in values:
            shown.add(value, "printed")
        original(*values, **options)

    builtins.print = printing
    setattr(builtins, DISPLAY_HOOK, shown.display)
    try:
        yield
    finally:
        builtins.print = original
        with contextlib.suppress(AttributeError):
            delattr(builtins, DISPLAY_HOOK)


def save(
    shown: Shown,
    namespace: dict[str, Any],
    saved_variables: list[dict[str, Any]],
    workspace: str,
    run_id: str,
) -> list[dict[str, Any]]:
    """Write what the run showed (then the DataFrames it saved) as Parquet; their previews."""
    candidates = list(shown.tables)
    for entry in saved_variables:
        value = namespace.get(str(entry.get("name")))
        if is_table(value) and not type(value).__name__.startswith("DuckDB"):
            candidates.append((value, "variable"))  # a relation would be read whole: not offered
    names = {id(value): name for name, value in namespace.items() if not name.startswith("_")}
    folder = os.path.join(workspace, TABLES_FOLDER)
    tables: list[dict[str, Any]] = []
    done: set[int] = set()
    for value, how in candidates:
        if len(tables) == MAX_TABLES:
            break
        if id(value) in done:
            continue
        done.add(id(value))
        table_id = f"{run_id}_{len(tables) + 1}"
        name = names.get(id(value), "")
        try:
            os.makedirs(folder, exist_ok=True)
            path = os.path.join(folder, f"{table_id}.parquet")
            _write(value, name, path, saved_variables, workspace)
            table = {"id": table_id, "name": name, "source": how, **preview(path)}
            if how == "expression":
                table["display"] = shown.displayed
            tables.append(table)
        except Exception:  # not every frame can be Parquet (mixed-type columns): not a table
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, f"{table_id}.parquet"))
    if tables:
        _prune(folder)
    return tables


def _write(
    value: Any, name: str, path: str, saved_variables: list[dict[str, Any]], workspace: str
) -> None:
    variable = _variable_file(name, saved_variables, workspace) if name else None
    if variable is not None:
        with contextlib.suppress(OSError):
            os.link(variable, path, follow_symlinks=False)
            return
    draft = path + ".partial"
    try:
        module = type(value).__module__.split(".", 1)[0]
        rows = variables.PARQUET_ROW_GROUP  # what the server reads at a time
        if module == "pandas":
            try:
                value.to_parquet(draft, row_group_size=rows)
            except (TypeError, ValueError):  # e.g. column names that are not strings
                value.rename(columns=str).to_parquet(draft, row_group_size=rows)
        else:  # Polars and DuckDB write Parquet themselves
            value.write_parquet(draft, row_group_size=rows)
        os.replace(draft, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(draft)


def _variable_file(name: str, saved: list[dict[str, Any]], workspace: str) -> str | None:
    """The Parquet of the pandas DataFrame variable `name`, as this or an earlier run saved it."""
    entry = next((e for e in saved if e.get("name") == name), None)
    if entry is None:
        entry = variables.read_catalog(os.path.join(workspace, "variables")).get(name)
    if not entry or entry.get("format") != "parquet" or entry.get("type") != "DataFrame":
        return None
    return os.path.join(workspace, "variables", f"{name}.parquet")


def preview(path: str) -> dict[str, Any]:
    """The table's row count, columns with their (Arrow) types, and first rows, JSON-safe."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    with pq.ParquetFile(path) as parquet:
        schema = parquet.schema_arrow
        columns = [{"name": f.name, "type": str(f.type)} for f in schema]
        shown = schema.names[:MAX_PREVIEW_COLUMNS]
        batch = next(parquet.iter_batches(batch_size=PREVIEW_ROWS, columns=shown), None)
        rows = [] if batch is None else batch.to_pylist()[:PREVIEW_ROWS]
        return {
            "rows": parquet.metadata.num_rows,
            "columns": columns,
            "preview": [[json_safe(row[c]) for c in shown] for row in rows],
        }


def json_safe(value: Any) -> Any:
    """A cell as JSON: numbers JavaScript reads exactly, text for everything else."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value if abs(value) < 2**53 else str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return value if math.isfinite(value) else str(value)
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, decimal.Decimal | datetime.timedelta):
        value = str(value)
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"


def _prune(folder: str) -> None:
    """Keep the session's newest KEPT_TABLES tables."""
    try:
        entries = [e for e in os.scandir(folder) if e.is_file(follow_symlinks=False)]
    except OSError:
        return
    if len(entries) <= KEPT_TABLES:
        return
    entries.sort(key=lambda e: e.stat(follow_symlinks=False).st_ctime_ns)  # a link's too
    for entry in entries[: len(entries) - KEPT_TABLES]:
        with contextlib.suppress(OSError):
            os.unlink(entry.path)

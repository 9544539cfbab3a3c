"""SQLite and DuckDB database files: opened read-only from a descriptor, and their catalog.

Run in the confined helper (`isolation.py`), never in the server: a crafted database file
is hostile input for a native parser. A data source's file is bound read-only into the
helper and opened by path: SQLite as immutable with no database to attach, DuckDB
read-only with no access to any other file and its configuration locked. A workspace's
file arrives as a descriptor: DuckDB opens it through /proc; SQLite, which would follow
that link to a path the helper cannot see, reads it whole into memory.

The catalog is plain data (the shape `backend/tools/data_sources/catalog.py` reads):
tables and views, their columns (type, primary key, the column a foreign key points at,
a few sample values) and row counts. `describe_database` is the workspace's metadata
reader for such a file.
"""

from __future__ import annotations

import sqlite3
from typing import Any, BinaryIO, Literal
from urllib.parse import quote

from backend.files.model import FileMetadata, Source

DatabaseKind = Literal["sqlite", "duckdb"]
# A file's extension -> the database it holds.
DATABASE_EXTENSIONS: dict[str, DatabaseKind] = {
    "sqlite": "sqlite",
    "sqlite3": "sqlite",
    "db": "sqlite",
    "duckdb": "duckdb",
}
MAX_SAMPLES = 3
SAMPLE_CHARS = 40
DESCRIBED_TABLES = 50  # a workspace file's summary describes at most this many
MAX_DESCRIBED_BYTES = 256 * 1024**2  # a workspace's SQLite file is read whole to describe it


def sample_text(value: object) -> str:
    text = str(value)
    return text if len(text) <= SAMPLE_CHARS else text[: SAMPLE_CHARS - 1] + "…"


def open_sqlite(path: str) -> sqlite3.Connection:
    """Read-only and immutable (no lock, no journal), with no other database to attach."""
    connection = sqlite3.connect(f"file:{quote(path)}?mode=ro&immutable=1", uri=True)
    connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    return connection


def _sqlite_in_memory(handle: BinaryIO, size: int) -> sqlite3.Connection:
    """A workspace's file, read whole: SQLite follows /proc/self/fd's link to a path the
    confined helper cannot see."""
    if size > MAX_DESCRIBED_BYTES:
        raise ValueError(f"larger than {MAX_DESCRIBED_BYTES // 1024**2} MB: not described")
    connection = sqlite3.connect(":memory:")
    connection.deserialize(handle.read(size + 1))
    connection.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    return connection


def open_duckdb(path: str) -> Any:
    """Read-only, reaching no other file, its configuration locked."""
    import duckdb

    return duckdb.connect(
        path,
        read_only=True,
        config={
            "enable_external_access": False,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "lock_configuration": True,
            "threads": 1,
        },
    )


def _quoted(*parts: str) -> str:
    return ".".join('"' + part.replace('"', '""') + '"' for part in parts)


def database_catalog(path: str, kind: DatabaseKind, max_tables: int) -> dict[str, Any]:
    """The tables of the database file at `path`, as plain data."""
    if kind == "sqlite":
        with open_sqlite(path) as connection:
            return {"tables": _sqlite_tables(connection, max_tables)}
    connection = open_duckdb(path)
    try:
        return {"tables": _duckdb_tables(connection, max_tables)}
    finally:
        connection.close()


def _column(name: str, kind: str, index: int, rows: list[Any], **keys: str) -> dict[str, Any]:
    samples = [sample_text(row[index]) for row in rows if row[index] is not None]
    return {"name": name, "type": kind, "samples": samples, **keys}


def _sqlite_tables(connection: sqlite3.Connection, max_tables: int) -> list[dict[str, Any]]:
    tables = []
    listed = connection.execute(
        "SELECT name, type FROM sqlite_schema WHERE type IN ('table', 'view')"
        " AND name NOT LIKE 'sqlite_%' ORDER BY name LIMIT ?",
        (max_tables,),
    ).fetchall()
    for name, kind in listed:
        quoted = _quoted(name)
        info = connection.execute(f"PRAGMA table_info({quoted})").fetchall()
        references = {
            row[3]: f"{row[2]}.{row[4]}"
            for row in connection.execute(f"PRAGMA foreign_key_list({quoted})").fetchall()
        }
        samples = connection.execute(f"SELECT * FROM {quoted} LIMIT {MAX_SAMPLES}").fetchall()
        count = connection.execute(f"SELECT count(*) FROM {quoted}").fetchone()
        columns = [
            _column(
                column[1],
                column[2] or "any",
                index,
                samples,
                key="primary" if column[5] else "",
                references=references.get(column[1], ""),
            )
            for index, column in enumerate(info)
        ]
        tables.append({"name": name, "kind": kind, "rows": count[0], "columns": columns})
    return tables


def _duckdb_tables(connection: Any, max_tables: int) -> list[dict[str, Any]]:
    listed = connection.execute(
        "SELECT * FROM (SELECT schema_name AS s, table_name AS t, estimated_size AS n,"
        " 'table' AS k FROM duckdb_tables() WHERE NOT internal UNION ALL SELECT schema_name,"
        " view_name, NULL, 'view' FROM duckdb_views() WHERE NOT internal)"
        " ORDER BY s <> 'main', s, t LIMIT ?",
        [max_tables],
    ).fetchall()
    tables = []
    for schema, name, rows, kind in listed:
        described = connection.execute(
            "SELECT column_name, data_type FROM duckdb_columns()"
            " WHERE schema_name = ? AND table_name = ? ORDER BY column_index",
            [schema, name],
        ).fetchall()
        keys = connection.execute(
            "SELECT constraint_type, constraint_column_names, referenced_table,"
            " referenced_column_names FROM duckdb_constraints()"
            " WHERE schema_name = ? AND table_name = ?"
            " AND constraint_type IN ('PRIMARY KEY', 'FOREIGN KEY')",
            [schema, name],
        ).fetchall()
        primary = {c for kind_, cols, _, _ in keys if kind_ == "PRIMARY KEY" for c in cols}
        references = {
            column: f"{table}.{target}"
            for kind_, cols, table, targets in keys
            if kind_ == "FOREIGN KEY"
            for column, target in zip(cols, targets or [], strict=False)
        }
        samples = connection.execute(
            f"SELECT * FROM {_quoted(schema, name)} LIMIT {MAX_SAMPLES}"
        ).fetchall()
        columns = [
            _column(
                column,
                data_type,
                index,
                samples,
                key="primary" if column in primary else "",
                references=references.get(column, ""),
            )
            for index, (column, data_type) in enumerate(described)
        ]
        tables.append(
            {
                "name": name if schema == "main" else f"{schema}.{name}",
                "kind": kind,
                "rows": rows,
                "columns": columns,
            }
        )
    return tables


def describe_database(source: Source) -> FileMetadata:
    """A workspace's SQLite or DuckDB file: its tables and their columns."""
    kind = DATABASE_EXTENSIONS[source.extension]
    source.handle.seek(0)
    if kind == "sqlite":
        with _sqlite_in_memory(source.handle, source.size) as connection:
            tables = _sqlite_tables(connection, DESCRIBED_TABLES)
    else:
        tables = database_catalog(
            f"/proc/self/fd/{source.handle.fileno()}", kind, DESCRIBED_TABLES
        )["tables"]
    listed = "; ".join(
        f"{table['name']} ({', '.join(c['name'] for c in table['columns'])})" for table in tables
    )
    label = "SQLite" if kind == "sqlite" else "DuckDB"
    return FileMetadata(
        name=source.name,
        extension=source.extension,
        size=source.size,
        kind="data",
        summary=f"{label} database, {len(tables)} tables: {listed}"[:2000],
        details={"database": kind, "tables": tables},
    )


# Files a dataset is made of: extension -> DuckDB's reader and its options.
DATASET_READERS: dict[str, tuple[str, str]] = {
    "csv": ("read_csv", ""),
    "tsv": ("read_csv", ", delim = '\t'"),
    "parquet": ("read_parquet", ""),
    "json": ("read_json", ""),
    "jsonl": ("read_json", ", format = 'newline_delimited'"),
}
DATASET_MEMORY = "512MB"  # DuckDB's while it loads one file; the rest spills beside it


def add_dataset_table(handle: BinaryIO, extension: str, table: str, database: str) -> int:
    """In the helper: the file open as `handle` becomes `table` of the DuckDB database at
    `database` (created if new), in the helper's own writable folder; its row count."""
    import duckdb

    reader, options = DATASET_READERS[extension]
    folder = database.rsplit("/", 1)[0] or "."
    connection = duckdb.connect(
        database,
        config={
            "threads": 1,
            "memory_limit": DATASET_MEMORY,
            "temp_directory": f"{folder}/.spill",
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
        },
    )
    try:
        source = f"/proc/self/fd/{handle.fileno()}"
        connection.execute(
            f"CREATE TABLE {_quoted(table)} AS SELECT * FROM {reader}(?{options})", [source]
        )
        counted = connection.execute(f"SELECT count(*) FROM {_quoted(table)}").fetchone()
        return int(counted[0]) if counted else 0
    except Exception as exc:  # duckdb.Error: sent back as words only
        raise ValueError(str(exc).split("\n")[0]) from None
    finally:
        connection.close()

"""What DATA_DIR holds, and which of it a backup keeps.

Each top-level entry is kept, copied as a live SQLite database, or left out with a
reason that the manifest records; an entry this list does not know is left out and
named, so a new kind of data is noticed rather than silently copied half-way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from backend.admin.manifest import Left
from backend.storage.drafts import STAGING_FOLDER, is_draft
from backend.storage.eval_files import EVAL_SETS_FOLDER
from backend.storage.file_blobs import FILES_FOLDER
from backend.storage.migrate import CHECKPOINTS
from backend.storage.workspaces import SNAPSHOTS_FOLDER

SQLITE_DATABASE = "app.db"  # DATA_DIR's own database, when DATABASE_URL is empty
SECRET_KEY = "secret_key"  # backend/core/security.py
INITIAL_PASSWORD = "initial_admin_password"  # backend/core/accounts.py
SANDBOX_CHECK = "sandbox-check"  # backend/tools/sandbox/self_check.py's CHECK_FOLDER
RAG = "rag"  # per-user search indexes (backend/tools/rag/store.py)
LOGS = "logs"  # the audit logs (backend/storage/audit.py)
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")

# Folders copied file by file, without following links.
TREES: dict[str, str] = {
    "scratch": "the session workspaces: uploads, outputs, persisted variables, scripts",
    SNAPSHOTS_FOLDER: "each agent turn's workspace state, for branches (hard links kept)",
    FILES_FOLDER: "the files users gave the OpenAI Files API",
    EVAL_SETS_FOLDER: "the files of users' evaluation sets, and the starter set's",
    LOGS: "the audit logs of tool runs and prompts (whole lines)",
}
FILES: dict[str, str] = {
    SECRET_KEY: "the generated JWT signing key (mode 0600): tokens, and the MCP servers' "
    "secrets sealed with it, stay valid",
}
LEFT_OUT: dict[str, str] = {
    INITIAL_PASSWORD: "the generated admin password in clear, for the first sign-in only: "
    "the database holds its hash",
    "server_id": "this server's identity: a restored copy makes a new one, so that it is "
    "never taken for the server it was copied from (their turns on a shared database "
    "would be marked interrupted by each other)",
    STAGING_FOLDER: "the server's drafts and its records of files moved in during runs: "
    "they matter only to turns in progress",
    "tus": "resumable uploads in progress: clients start them again",
    "mcp-servers": "stdio MCP servers' working folders from before issue 40: they now run "
    "in scratch folders outside DATA_DIR, removed when they stop",
    SANDBOX_CHECK: "the start-up self-check's scratch workspace: made again at each start",
    "tmp": "the table engine's spill folder (TABLE_QUERY_SPILL_MB): emptied at each start",
    "tdd_cache": "solved TDD tasks: a cache, filled again as tasks are solved",
    "s3cache": "which S3 object each workspace copy came from: a copy is fetched again "
    "when next used",
    "mirror": "the local copy of WORKSPACE_BUCKET (with EXECUTOR_BACKEND=ray the bucket "
    "holds the workspaces: back it up with the object store's own tools)",
}
TEMPORARY_PREFIXES: dict[str, str] = {
    "parquet-": "a Parquet conversion's temporary folder",
    f".{SECRET_KEY}.": "a secret key being written",
}


@dataclass
class Survey:
    """DATA_DIR sorted: what to copy, and what not (with why)."""

    trees: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    sqlite: list[str] = field(default_factory=list)  # relative paths, copied by the backup API
    left_out: list[Left] = field(default_factory=list)


def survey(data_dir: Path, database: Path | None) -> Survey:
    """Sort DATA_DIR's entries; `database` is the SQLite store's file (None: PostgreSQL)."""
    found = Survey()
    own_database = database is not None and database.parent.resolve() == data_dir.resolve()
    for name in sorted(os.listdir(data_dir)):
        path = data_dir / name
        if own_database and database is not None and name.startswith(database.name):
            if name != database.name and name.removeprefix(database.name) not in SQLITE_SIDE_FILES:
                unknown = Left(path=_printable(name), reason="not known to this server")
                found.left_out.append(unknown)
            continue  # the database itself is copied on its own
        if name == SQLITE_DATABASE:
            found.left_out.append(
                Left(path=name, reason="not the configured database (see DATABASE_URL)")
            )
        elif name.startswith(CHECKPOINTS):
            if database is None:
                reason = "with PostgreSQL the checkpoints are in the database"
                found.left_out.append(Left(path=name, reason=reason))
            elif name == CHECKPOINTS:
                found.sqlite.append(name)
        elif name == RAG and path.is_dir() and not path.is_symlink():
            found.sqlite.extend(_indexes(path))
        elif name in TREES:
            found.trees.append(name)
        elif name in FILES:
            found.files.append(name)
        elif name in LEFT_OUT:
            found.left_out.append(Left(path=name, reason=LEFT_OUT[name]))
        elif prefix := next((p for p in TEMPORARY_PREFIXES if name.startswith(p)), None):
            found.left_out.append(Left(path=name, reason=TEMPORARY_PREFIXES[prefix]))
        else:
            found.left_out.append(Left(path=_printable(name), reason="not known to this server"))
    return found


def _printable(name: str) -> str:
    """A name JSON can hold, even one that is not UTF-8."""
    return name.encode("utf-8", "backslashreplace").decode("utf-8")


def _indexes(folder: Path) -> list[str]:
    """The search indexes' databases (their WAL files are folded into each copy)."""
    return [
        f"{RAG}/{entry.name}"
        for entry in sorted(os.scandir(folder), key=lambda entry: entry.name)
        if entry.name.endswith(".sqlite3") and entry.is_file(follow_symlinks=False)
    ]


def transient(relative: str) -> bool:
    """A file being written (a draft, a variable's `.partial`, a snapshot being taken),
    which the copy skips: its finished version replaces it by a rename."""
    parts = relative.split("/")
    name = parts[-1]
    if is_draft(name):
        return True
    if name.endswith(".partial"):
        in_variables = parts[0] == "scratch" and len(parts) >= 3 and parts[2] == "variables"
        return in_variables or parts[0] == SNAPSHOTS_FOLDER
    return False


def whole_lines(relative: str) -> bool:
    """An append-only log, copied up to its last complete line."""
    return relative.startswith(f"{LOGS}/") and relative.endswith(".jsonl")

"""`sql(source, query)` in a run: read-only SQL on the data sources its conversation
attached, answered by the server over a Unix socket the sandbox sees at SOCKET.

Part of the in-sandbox program (see `worker.py`); stdlib and data packages only.

The sandbox has no network and never sees a credential: it sends the source's name and
the query, and the server, which holds the connection, sends back the rows as an Arrow
IPC stream (or the database's error, with the catalog's nearest names when a table or
column was unknown). A small answer becomes a pandas DataFrame. One larger than
LARGE_SHARE of the run's memory is written, as it arrives, to Parquet in the workspace
(DuckDB's spill folder) and given as a DuckDB relation over that file, read out of core.
Like DuckDB's own spill, the file lives for its run, which may write it past the file
size limit (within the disk quota): a relation cannot be kept between runs anyway.
"""

from __future__ import annotations

import builtins
import json
import os
import re
import socket
from typing import Any

import out_of_core

QUERIES_FOLDER = os.path.join(out_of_core.SPILL_FOLDER, "queries")
LARGE_SHARE = 0.4
_USES_SQL = re.compile(r"\bsql\s*\(")
_count = 0


class QueryError(Exception):
    """The server or the database refused the query; the message says why."""


def configure(code: str, workspace: str, config: dict[str, Any]) -> None:
    """Give the run `sql` (a builtin, so never saved as a variable) when its code calls it
    and the server offers a socket (`config["data_socket"]`)."""
    path = config.get("data_socket") or ""
    if not _USES_SQL.search(code) or not path or not os.path.exists(path):
        return
    max_memory_mb = float(config["max_memory_mb"])
    large = int(max_memory_mb * 1024 * 1024 * LARGE_SHARE)
    duckdb_settings: dict[str, Any] = dict(out_of_core.settings(workspace, max_memory_mb))

    def sql(source: str, query: str) -> Any:
        """Rows of read-only `query` on the attached data source `source`, as a DataFrame
        (a DuckDB relation over Parquet when larger than memory allows)."""
        return _query(path, str(source), str(query), workspace, large, duckdb_settings)

    builtins.sql = sql  # type: ignore[attr-defined]


def _read_line(stream: Any) -> dict[str, Any]:
    line = stream.readline(1_000_000)
    if not line:
        raise QueryError("the data source channel closed without an answer")
    answer: dict[str, Any] = json.loads(line)
    return answer


def _query(
    path: str, source: str, query: str, workspace: str, large: int, settings: dict[str, Any]
) -> Any:
    global _count
    import pyarrow as pa  # type: ignore[import-untyped]

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as channel:
        channel.connect(path)
        channel.sendall(json.dumps({"source": source, "sql": query}).encode() + b"\n")
        stream = channel.makefile("rb")
        header = _read_line(stream)
        if not header.get("ok"):
            message = str(header.get("error", "the query failed"))
            if header.get("nearest"):
                message += f" (the catalog's nearest names: {', '.join(header['nearest'])})"
            raise QueryError(message)
        reader = pa.ipc.open_stream(stream)
        held: list[Any] = []
        size = 0
        writer = None
        path = ""
        for batch in reader:
            if writer is not None:
                writer.write_batch(batch)
                continue
            held.append(batch)
            size += batch.nbytes
            if size > large:
                import pyarrow.parquet as pq  # type: ignore[import-untyped]

                _count += 1
                os.makedirs(os.path.join(workspace, QUERIES_FOLDER), exist_ok=True)
                path = os.path.join(
                    workspace, QUERIES_FOLDER, f"{source}_{os.getpid()}_{_count}.parquet"
                )
                writer = pq.ParquetWriter(path, reader.schema)
                for kept in held:
                    writer.write_batch(kept)
                held = []
        trailer = _read_line(stream)
    print(
        f"[query {trailer.get('id', '')} on {source}: {trailer.get('rows', 0)} rows"
        + (", cut at the limit" if trailer.get("truncated") else "")
        + "]"
    )
    if writer is not None:
        writer.close()
        import duckdb

        # Its own connection, bounded as out_of_core bounds DuckDB in a run.
        return duckdb.connect(config=settings).read_parquet(path)
    return pa.Table.from_batches(held, schema=reader.schema).to_pandas()

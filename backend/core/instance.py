"""This server's identity among several on one database: kept in DATA_DIR.

A turn stored as `running` names the server that runs it, so a server that starts
marks only its own cut-off turns `interrupted`, never those another server is still
running. The id survives restarts (a file), so a restarted server finds its own.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path

_FILE = "server_id"


def server_id(data_dir: Path) -> str:
    path = data_dir / _FILE
    with contextlib.suppress(FileExistsError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(uuid.uuid4().hex)
            handle.flush()
            os.fsync(handle.fileno())
    text = path.read_text().strip()
    if not text:  # a crash between create and write: start afresh
        path.unlink()
        return server_id(data_dir)
    return text

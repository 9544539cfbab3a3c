"""The allowlisted S3 objects as data files, beside a session's uploads.

Listed and described without downloading them (`s3_metadata.py`, in the
isolated helper, cached per object and ETag), and copied into a session's
workspace only when code is about to use them (`s3_cache.py`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from backend.files.isolation import IsolatedCallFailed, IsolatedRunner
from backend.files.model import FileMetadata
from backend.files.s3_cache import S3Cache
from backend.files.s3_metadata import describe_object
from backend.storage.s3_objects import (
    S3Config,
    S3Object,
    check_allowed,
    head,
    list_objects,
)
from backend.storage.sessions import SessionKey
from backend.storage.workspaces import Workspaces

_CACHED = 1024


class S3Source:
    def __init__(
        self, config: S3Config, workspaces: Workspaces, runner: IsolatedRunner, max_bytes: int
    ) -> None:
        self.config = config
        self.runner = runner
        self.cache = S3Cache(config, workspaces, max_bytes)
        self._described: OrderedDict[tuple[str, str, int], FileMetadata] = OrderedDict()
        self._lock = threading.Lock()

    def files(self) -> list[FileMetadata]:
        """Every data file under the allowlist, with its metadata (raises `S3Error`)."""
        return [self._describe(found) for found in list_objects(self.config)]

    def info(self, name: str) -> FileMetadata:
        """One object's metadata (raises `S3Forbidden`, `S3NotFound`, `S3Unavailable`)."""
        return self._describe(head(self.config, check_allowed(self.config, name)))

    def copy(self, session_id: SessionKey, name: str) -> str:
        """The workspace path of the object's copy, fetched if it is missing or stale."""
        return self.cache.fetch(session_id, check_allowed(self.config, name))

    def _describe(self, found: S3Object) -> FileMetadata:
        key = (found.location.name, found.etag, found.size)
        with self._lock:
            if key in self._described:
                self._described.move_to_end(key)
                return self._described[key]
        try:
            metadata = self.runner.call(describe_object, self.config, found, network=True)
        except IsolatedCallFailed as exc:
            metadata = FileMetadata(
                found.location.name, "", found.size, "data", "unreadable", error=str(exc)
            )
        if metadata.error is None:  # a failed read may be the endpoint's, worth a retry
            with self._lock:
                self._described[key] = metadata
                if len(self._described) > _CACHED:
                    self._described.popitem(last=False)
        return metadata

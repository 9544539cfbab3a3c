"""Session workspaces kept in S3 (WORKSPACE_BUCKET), reconciled with a local copy.

S3 is the home of every workspace: a session's file `path` is the object
`<prefix>/<session_id>/<path>`. Each process (API server, Ray actor) works on a
local copy and calls `push` (local changes to S3) or `pull` (S3 changes to the
copy) at defined points. What was last synced, per file (size, mtime_ns, ETag), is
kept in `manifest_dir/<session_id>.json`, outside the workspace, because sandboxed
code can write anything inside it. Nothing in the copy is ever followed as a link
(`backend.storage.workspace_tree`); object keys that are not safe workspace paths
are refused. S3 failures are the `S3Error` family, whose messages carry no
credential.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from backend.config import Settings
from backend.storage import workspace_tree
from backend.storage.drafts import is_draft
from backend.storage.object_transfer import MULTIPART_THRESHOLD, ObjectTransfer, S3File, Synced
from backend.storage.s3_objects import S3Config
from backend.storage.sessions import SessionKey, check_key
from backend.storage.workspaces import UnsafePath, listable_name, safe_relative

_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
log = logging.getLogger(__name__)


@dataclass
class SyncReport:
    """What one push or pull did; paths are relative to the workspace."""

    uploaded: list[str] = field(default_factory=list)
    downloaded: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # push: links, FIFOs; pull: unsafe keys
    bytes_moved: int = 0


def parse_location(location: str) -> tuple[str, str]:
    """(bucket, prefix) of `bucket` or `bucket/prefix`; ValueError if either is not valid."""
    bucket, _, prefix = location.strip().removeprefix("s3://").strip("/").partition("/")
    prefix = prefix.strip("/")
    if not _BUCKET.fullmatch(bucket):
        raise ValueError(f"WORKSPACE_BUCKET: {bucket!r} is not an S3 bucket name")
    if prefix and workspace_path(prefix) is None:
        raise ValueError(f"WORKSPACE_BUCKET: {prefix!r} is not a plain folder path")
    return bucket, prefix


def workspace_path(relative: str) -> list[str] | None:
    """The folders and name an object's key (below the session) maps to; None if unsafe."""
    try:
        parts = safe_relative(relative).parts
    except UnsafePath:
        return None
    if "/".join(parts) != relative:  # `a//b`, `./a`: one file under two names
        return None
    if not all(listable_name(part) and not is_draft(part) for part in parts):
        return None
    return list(parts)


class WorkspaceMirror:
    def __init__(
        self,
        config: S3Config,
        location: str,
        manifest_dir: Path,
        *,
        multipart_threshold: int = MULTIPART_THRESHOLD,
    ) -> None:
        self.bucket, self.prefix = parse_location(location)
        self.manifest_dir = manifest_dir
        self.objects = ObjectTransfer(config, self.bucket, multipart_threshold)
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings, manifest_dir: Path) -> WorkspaceMirror | None:
        """None when WORKSPACE_BUCKET is empty: workspaces are then local only."""
        if not settings.WORKSPACE_BUCKET.strip():
            return None
        config = S3Config(
            endpoint_url=settings.S3_ENDPOINT_URL,
            access_key_id=settings.S3_ACCESS_KEY_ID,
            secret_access_key=settings.S3_SECRET_ACCESS_KEY,
            region=settings.S3_REGION,
            allowed=(),
        )
        return cls(config, settings.WORKSPACE_BUCKET, manifest_dir)

    def key(self, session_id: SessionKey, relative: str = "") -> str:
        """The object key of a session's file (of its folder when `relative` is empty)."""
        folder = f"{self.prefix}/{check_key(session_id)}/"
        return folder.lstrip("/") + relative

    def push(self, session_id: SessionKey, local: Path) -> SyncReport:
        """Upload the copy's files changed since the last sync; delete the objects of
        files it no longer has."""
        with self._lock(session_id), self._synced(session_id, local) as (root, manifest):
            files, others = workspace_tree.walk(root)
            report = SyncReport(skipped=others)
            changed = {f.path: f.size for f in files if not _unchanged(f, manifest)}
            done, failure = self.objects.each(
                changed, lambda path: self.objects.upload(root, path, self.key(session_id, path))
            )
            _record(done, manifest, report.uploaded, report)
            if failure is not None:
                raise failure
            for path in sorted(set(manifest) - {f.path for f in files}):
                self.objects.delete(self.key(session_id, path))
                del manifest[path]
                report.deleted.append(path)
            return report

    def pull(self, session_id: SessionKey, local: Path) -> SyncReport:
        """Download the objects changed since the last sync; delete the copy's files whose
        objects are gone."""
        with self._lock(session_id), self._synced(session_id, local) as (root, manifest):
            remote, refused = self._remote(session_id)
            report = SyncReport(skipped=refused)
            wanted = {
                path: found.size
                for path, found in remote.items()
                if path not in manifest
                or manifest[path].etag != found.etag
                or workspace_tree.stat_regular(root, path.split("/")) is None
            }
            done, failure = self.objects.each(
                wanted, lambda path: self.objects.download(root, path, remote[path])
            )
            _record(done, manifest, report.downloaded, report)
            if failure is not None:
                raise failure
            for path in sorted(set(manifest) - set(remote)):
                del manifest[path]
                try:
                    if workspace_tree.remove(root, path.split("/")):
                        report.deleted.append(path)
                except OSError as exc:  # a folder there now, or a link on the way
                    log.warning("workspace mirror: cannot delete %r: %s", path, exc.strerror)
            return report

    def remove(self, session_id: SessionKey) -> int:
        """Delete every object of the session and its manifest (a deleted session);
        returns how many objects went."""
        folder = self.key(session_id)
        with self._lock(session_id):
            listed = [found.key for found in self.objects.listing(folder)]
            for key in listed:
                self.objects.delete(key)
            (self.manifest_dir / f"{check_key(session_id)}.json").unlink(missing_ok=True)
        return len(listed)

    def _remote(self, session_id: SessionKey) -> tuple[dict[str, S3File], list[str]]:
        """The session's objects by workspace path, and the paths refused as unsafe."""
        folder = self.key(session_id)
        found: dict[str, S3File] = {}
        refused: list[str] = []
        for listed in self.objects.listing(folder):
            relative = listed.key[len(folder) :]
            if relative.endswith("/"):
                continue  # a folder marker, as some S3 tools make
            if workspace_path(relative) is None:
                log.warning("workspace mirror: refused the object key %r", listed.key[:300])
                refused.append(relative)
            else:
                found[relative] = listed
        return found, refused

    @contextlib.contextmanager
    def _lock(self, session_id: SessionKey) -> Iterator[None]:
        with self._guard:
            lock = self._locks.setdefault(session_id, threading.Lock())
        with lock:
            yield

    @contextlib.contextmanager
    def _synced(
        self, session_id: SessionKey, local: Path
    ) -> Iterator[tuple[int, dict[str, Synced]]]:
        """The copy's open root and the session's manifest, saved on the way out (what
        was moved before a failure is remembered too)."""
        if local.resolve() in (self.manifest_dir.resolve(), *self.manifest_dir.resolve().parents):
            raise ValueError(f"the manifest folder {self.manifest_dir} is inside {local}")
        target = self.manifest_dir / f"{check_key(session_id)}.json"
        where = os.path.abspath(local)
        manifest = _load(target, where)
        root = workspace_tree.open_root(local)
        try:
            yield root, manifest
        finally:
            os.close(root)
            self.manifest_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            draft = target.with_name(f".{target.name}.{uuid.uuid4().hex}")
            files = {path: asdict(synced) for path, synced in manifest.items()}
            draft.write_text(json.dumps({"local": where, "files": files}), encoding="utf-8")
            os.replace(draft, target)


def _unchanged(file: workspace_tree.LocalFile, manifest: dict[str, Synced]) -> bool:
    """The file still has the size and mtime it had when last synced."""
    known = manifest.get(file.path)
    return known is not None and (known.size, known.mtime_ns) == (file.size, file.mtime_ns)


def _record(
    done: dict[str, Synced], manifest: dict[str, Synced], moved: list[str], report: SyncReport
) -> None:
    for path, synced in sorted(done.items()):
        manifest[path] = synced
        moved.append(path)
        report.bytes_moved += synced.size


def _load(target: Path, where: str) -> dict[str, Synced]:
    """The manifest at `target`, if it describes the copy at `where`; else empty."""
    try:
        value = json.loads(target.read_text(encoding="utf-8"))
        if value["local"] != where:
            return {}
        return {str(path): Synced(**record) for path, record in value["files"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}

"""tus uploads in progress: the offset is what the disk holds; old and orphaned ones go."""

from __future__ import annotations

import os
from pathlib import Path

from backend.storage.resumable import ResumableUploads
from backend.storage.workspaces import Workspaces


def test_an_upload_resumes_from_its_part_and_lands_in_the_session(tmp_path: Path) -> None:
    uploads = ResumableUploads(tmp_path)
    upload = uploads.create(1, "u1-s1", "data.csv", 6)
    fd = uploads.appender(upload)
    os.write(fd, b"a,b\n")
    os.close(fd)
    again = ResumableUploads(tmp_path)  # a restarted server
    same = again.get(upload.id)
    assert same == upload and again.offset(upload) == 4
    fd = again.appender(upload)
    os.write(fd, b"1\n")
    os.close(fd)
    workspaces = Workspaces(tmp_path)
    again.finish(upload, workspaces)
    assert (workspaces.path("u1-s1") / "uploads" / "data.csv").read_bytes() == b"a,b\n1\n"
    assert list((tmp_path / "tus").iterdir()) == []
    assert again.get(upload.id) is None


def test_expired_uploads_and_orphaned_parts_are_removed(tmp_path: Path) -> None:
    uploads = ResumableUploads(tmp_path)
    old = uploads.create(1, "u1-s", "old.csv", 10)
    fresh = uploads.create(1, "u1-s", "new.csv", 10)
    (tmp_path / "tus" / f"{'f' * 32}.part").write_bytes(b"orphan")  # its .json never written
    assert uploads.remove_expired(-1) == 2  # everything is older than -1 s
    assert uploads.get(old.id) is None and uploads.get(fresh.id) is None
    assert list((tmp_path / "tus").iterdir()) == []
    kept = uploads.create(1, "u1-s", "kept.csv", 10)
    assert uploads.remove_expired(3600) == 0 and uploads.get(kept.id) == kept


def test_ids_that_are_not_ours_are_not_found(tmp_path: Path) -> None:
    uploads = ResumableUploads(tmp_path)
    assert uploads.get("../../etc/passwd") is None
    assert uploads.get("0" * 32) is None

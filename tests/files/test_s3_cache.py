"""S3 copies in a workspace (backend/files/s3_cache.py) against a real S3 server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from backend.files.s3_cache import S3Cache
from backend.storage.s3_objects import (
    Allowed,
    S3Config,
    S3Location,
    S3NoRoom,
    S3TooLarge,
    check_allowed,
)
from backend.storage.workspaces import Workspaces
from tests.support.seaweedfs import S3Server

SESSION = "u1-cache"
NAME = "s3://cachetest/data/a.csv"


@pytest.fixture
def config(s3_server: S3Server) -> S3Config:
    s3 = s3_server.client()
    if "cachetest" not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket="cachetest")
    s3.put_object(Bucket="cachetest", Key="data/a.csv", Body=b"a,b\n1,2\n")
    return S3Config(
        s3_server.endpoint,
        s3_server.access_key,
        s3_server.secret_key,
        s3_server.region,
        (Allowed.parse("cachetest/data"),),
    )


@pytest.fixture
def workspaces(tmp_path: Path) -> Workspaces:
    workspaces = Workspaces(tmp_path)
    workspaces.ensure(SESSION)
    return workspaces


def fetch(cache: S3Cache, config: S3Config) -> Path:
    path = cache.fetch(SESSION, check_allowed(config, NAME))
    return cache.workspaces.path(SESSION) / path


def test_a_full_disk_refuses_the_new_version_and_keeps_the_old_copy(
    config: S3Config, workspaces: Workspaces, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = S3Cache(config, workspaces, max_bytes=10**9)
    copy = fetch(cache, config)
    assert copy.read_bytes() == b"a,b\n1,2\n"
    s3_server.client().put_object(Bucket="cachetest", Key="data/a.csv", Body=b"a,b\n" * 1000)
    monkeypatch.setattr(workspaces, "room", lambda session_id: 100)
    with pytest.raises(S3NoRoom, match="does not fit"):
        fetch(cache, config)
    assert copy.read_bytes() == b"a,b\n1,2\n"  # the copy in use is untouched
    assert [n for n in os.listdir(copy.parent) if n.startswith(".")] == []


def test_an_object_over_the_cap_is_refused(config: S3Config, workspaces: Workspaces) -> None:
    with pytest.raises(S3TooLarge, match="MAX_UPLOAD_SIZE_MB"):
        fetch(S3Cache(config, workspaces, max_bytes=4), config)
    assert not (workspaces.path(SESSION) / "s3/cachetest/data/a.csv").exists()


def test_a_copy_changed_in_the_workspace_is_fetched_again(
    config: S3Config, workspaces: Workspaces
) -> None:
    cache = S3Cache(config, workspaces, max_bytes=10**9)
    copy = fetch(cache, config)
    copy.write_bytes(b"tampered by the session's code\n")
    assert fetch(cache, config).read_bytes() == b"a,b\n1,2\n"


def test_the_cached_path_mirrors_the_name() -> None:
    assert S3Location.parse(NAME).cached_path == "s3/cachetest/data/a.csv"
    assert Allowed.parse("s3://cachetest/data/").prefix == "data/"
    assert not Allowed.parse("cachetest/data").covers(
        S3Location.parse("s3://cachetest/data2/x.csv")
    )

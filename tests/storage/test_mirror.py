"""WorkspaceMirror against a real S3 server (SeaweedFS on 127.0.0.1): two local copies play
two nodes sharing one WORKSPACE_BUCKET (issue 13)."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from botocore.exceptions import ClientError  # type: ignore[import-untyped]

from backend.config import Settings
from backend.storage import workspace_tree
from backend.storage.mirror import WorkspaceMirror, parse_location, workspace_path
from backend.storage.s3_objects import S3Config, S3Error
from backend.storage.workspaces import NotARegularFile
from backend.tools.sandbox.variables import CATALOG
from tests.support.seaweedfs import S3Server

BUCKET = "workspaces"
SESSION = "u1-session-1"


@dataclass
class Node:
    """One process's view: its local copy of the workspace and its mirror."""

    mirror: WorkspaceMirror
    local: Path

    def push(self) -> Any:
        return self.mirror.push(SESSION, self.local)

    def pull(self) -> Any:
        return self.mirror.pull(SESSION, self.local)

    def write(self, relative: str, data: bytes) -> None:
        path = self.local / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def files(self) -> dict[str, bytes]:
        """Every regular file of the copy (links not followed) and its bytes."""
        found = {}
        for folder, _, names in os.walk(self.local):
            for name in names:
                path = Path(folder, name)
                if path.is_file() and not path.is_symlink():
                    found[path.relative_to(self.local).as_posix()] = path.read_bytes()
        return found


def s3_config(s3: S3Server, secret: str | None = None) -> S3Config:
    return S3Config(
        endpoint_url=s3.endpoint,
        access_key_id=s3.access_key,
        secret_access_key=s3.secret_key if secret is None else secret,
        region=s3.region,
        allowed=(),
    )


@pytest.fixture(scope="module")
def bucket(s3_server: S3Server) -> S3Server:
    s3_server.client().create_bucket(Bucket=BUCKET)
    return s3_server


@pytest.fixture
def prefix(tmp_path: Path) -> str:
    return f"tests/{tmp_path.name}"  # each test has its own corner of the bucket


def make_node(s3: S3Server, root: Path, prefix: str, **options: Any) -> Node:
    mirror = WorkspaceMirror(s3_config(s3), f"{BUCKET}/{prefix}", root / "sync", **options)
    return Node(mirror, root / "workspace")


@pytest.fixture
def a(bucket: S3Server, tmp_path: Path, prefix: str) -> Node:
    return make_node(bucket, tmp_path / "a", prefix)


@pytest.fixture
def b(bucket: S3Server, tmp_path: Path, prefix: str) -> Node:
    return make_node(bucket, tmp_path / "b", prefix)


def remote(s3: S3Server, prefix: str) -> dict[str, bytes]:
    """The session's objects, by key below the session, and their bytes."""
    client = s3.client()
    folder = f"{prefix}/{SESSION}/"
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=folder).get("Contents", [])
    return {
        o["Key"][len(folder) :]: client.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
        for o in listed
    }


def test_a_pushed_file_is_pulled_byte_identical(
    a: Node, b: Node, bucket: S3Server, prefix: str
) -> None:
    data = os.urandom(300_001)
    a.write("uploads/data.csv", data)

    pushed = a.push()
    assert pushed.uploaded == ["uploads/data.csv"]
    assert pushed.bytes_moved == len(data)
    assert remote(bucket, prefix) == {"uploads/data.csv": data}

    pulled = b.pull()
    assert pulled.downloaded == ["uploads/data.csv"]
    assert pulled.bytes_moved == len(data)
    assert b.files() == {"uploads/data.csv": data}


def test_a_second_sync_with_nothing_changed_moves_nothing(a: Node, b: Node) -> None:
    a.write("outputs/plot.png", b"png" * 1000)
    a.write("notes.txt", b"hello")
    assert sorted(a.push().uploaded) == ["notes.txt", "outputs/plot.png"]
    assert len(b.pull().downloaded) == 2

    again = a.push()
    assert (again.uploaded, again.deleted, again.bytes_moved) == ([], [], 0)
    assert b.pull().downloaded == []
    assert b.push().uploaded == []  # what B pulled is known as synced
    assert a.pull().downloaded == []  # what A pushed is known by its ETag


def test_a_file_missing_locally_is_pulled_again(a: Node, b: Node) -> None:
    a.write("outputs/table.csv", b"a\n1\n")
    a.push()
    b.pull()
    (b.local / "outputs/table.csv").unlink()  # lost from B's copy, not deleted in S3
    assert b.pull().downloaded == ["outputs/table.csv"]
    assert b.files() == {"outputs/table.csv": b"a\n1\n"}


def test_a_modified_file_is_uploaded_and_pulled_again(a: Node, b: Node) -> None:
    a.write("outputs/result.json", b'{"total": 1}')
    a.write("outputs/other.txt", b"unchanged")
    a.push()
    b.pull()

    a.write("outputs/result.json", b'{"total": 1999000}')
    pushed = a.push()
    assert pushed.uploaded == ["outputs/result.json"]
    pulled = b.pull()
    assert pulled.downloaded == ["outputs/result.json"]
    assert b.files()["outputs/result.json"] == b'{"total": 1999000}'

    b.write("outputs/result.json", b'{"total": 2}')  # and back the other way
    assert b.push().uploaded == ["outputs/result.json"]
    assert a.pull().downloaded == ["outputs/result.json"]
    assert a.files()["outputs/result.json"] == b'{"total": 2}'


def test_a_deletion_propagates_both_ways(a: Node, b: Node, bucket: S3Server, prefix: str) -> None:
    a.write("outputs/first.txt", b"1")
    a.write("outputs/second.txt", b"2")
    a.push()
    b.pull()

    (a.local / "outputs/first.txt").unlink()
    assert a.push().deleted == ["outputs/first.txt"]
    assert set(remote(bucket, prefix)) == {"outputs/second.txt"}
    assert b.pull().deleted == ["outputs/first.txt"]
    assert set(b.files()) == {"outputs/second.txt"}

    (b.local / "outputs/second.txt").unlink()
    assert b.push().deleted == ["outputs/second.txt"]
    assert remote(bucket, prefix) == {}
    assert a.pull().deleted == ["outputs/second.txt"]
    assert a.files() == {}


def test_nested_hidden_and_variables_folders_round_trip(a: Node, b: Node) -> None:
    # The layout backend/tools/sandbox/variables.py persists: variables/<name>.<ext> and
    # the catalog beside them.
    written = {
        f"variables/{CATALOG}": b'{"df": {"format": "parquet", "file": "variables/df.parquet"}}',
        "variables/df.parquet": os.urandom(4096),
        "variables/arr.npy": os.urandom(800),
        "outputs/runs/2024/01/deep.csv": b"a,b\n1,2\n",
        ".cache/hidden/state.bin": os.urandom(100),
        ".hidden": b"dot file",
        "notepad.json": b'{"entries": []}\n',
        "empty.txt": b"",
        "name with spaces & ünïcode.txt": b"x",
    }
    for relative, data in written.items():
        a.write(relative, data)

    assert sorted(a.push().uploaded) == sorted(written)
    assert sorted(b.pull().downloaded) == sorted(written)
    assert b.files() == written


def test_links_and_fifos_are_not_uploaded(
    a: Node, bucket: S3Server, prefix: str, tmp_path: Path
) -> None:
    secret = b"TOP-SECRET-" + secrets.token_hex(8).encode()
    outside = tmp_path / "server-files"
    outside.mkdir()
    (outside / "shadow").write_bytes(secret)
    a.write("outputs/ok.txt", b"fine")
    (a.local / "leak").symlink_to(outside / "shadow")  # what a sandbox might plant
    (a.local / "outputs/folder-link").symlink_to(outside)
    os.mkfifo(a.local / "pipe")

    pushed = a.push()
    assert pushed.uploaded == ["outputs/ok.txt"]
    assert pushed.skipped == ["leak", "outputs/folder-link", "pipe"]
    stored = remote(bucket, prefix)
    assert stored == {"outputs/ok.txt": b"fine"}
    assert not any(secret in body for body in stored.values())

    (a.local / "outputs/ok.txt").unlink()  # a regular file swapped for a link
    (a.local / "outputs/ok.txt").symlink_to(outside / "shadow")
    assert a.push().deleted == ["outputs/ok.txt"]
    assert remote(bucket, prefix) == {}


def test_hostile_object_keys_are_refused(
    b: Node, bucket: S3Server, prefix: str, tmp_path: Path
) -> None:
    client = bucket.client()
    folder = f"{prefix}/{SESSION}/"
    try:  # SeaweedFS refuses `..` in a key (InvalidRequest); AWS S3 stores it
        client.put_object(Bucket=BUCKET, Key=f"{folder}../escape", Body=b"escaped")
        escape_stored = True
    except ClientError:
        escape_stored = False  # the unit test below covers it
    hostile = ["ctl\x01name", "esc\x1b[2Jape", ".draft-evil", "outputs/.draft-x"]
    for relative in hostile:
        client.put_object(Bucket=BUCKET, Key=folder + relative, Body=b"evil")
    client.put_object(Bucket=BUCKET, Key=f"{folder}outputs/ok.txt", Body=b"fine")

    pulled = b.pull()
    assert pulled.downloaded == ["outputs/ok.txt"]
    assert sorted(pulled.skipped) == sorted(hostile + ["../escape"] * escape_stored)
    assert b.files() == {"outputs/ok.txt": b"fine"}
    assert "escape" not in [p.name for p in tmp_path.rglob("*")]


@pytest.mark.parametrize(
    "relative",
    [
        *("../escape", "a/../../escape", "/etc/passwd", "a//b", "./x", "x/.", "", "back\\slash"),
        *("tab\tname", "nul\x00", "del\x7f", ".draft-1", "a/.draft-1/b", "lone\udc80surrogate"),
    ],
)
def test_unsafe_keys_map_to_no_workspace_path(relative: str) -> None:
    assert workspace_path(relative) is None


def test_safe_keys_map_to_their_folders_and_name() -> None:
    assert workspace_path("variables/df.parquet") == ["variables", "df.parquet"]
    assert workspace_path(".cache/x y.txt") == [".cache", "x y.txt"]


def test_pull_never_writes_through_a_planted_link(b: Node, bucket: S3Server, prefix: str) -> None:
    client = bucket.client()
    folder = f"{prefix}/{SESSION}/"
    client.put_object(Bucket=BUCKET, Key=f"{folder}uploads/data.csv", Body=b"remote data")
    client.put_object(Bucket=BUCKET, Key=f"{folder}notes.txt", Body=b"remote notes")
    outside = b.local.parent / "outside"
    outside.mkdir(parents=True)
    (outside / "target.txt").write_bytes(b"server file")
    b.local.mkdir(parents=True)
    (b.local / "uploads").symlink_to(outside)  # a folder swapped for a link
    (b.local / "notes.txt").symlink_to(outside / "target.txt")

    pulled = b.pull()
    assert pulled.downloaded == ["notes.txt"]  # uploads/ is a link: nothing written there
    assert sorted(p.name for p in outside.iterdir()) == ["target.txt"]
    assert (outside / "target.txt").read_bytes() == b"server file"
    assert not (b.local / "notes.txt").is_symlink()  # the link itself was replaced
    assert (b.local / "notes.txt").read_bytes() == b"remote notes"


def test_a_file_swapped_for_a_link_after_the_walk_is_not_read(tmp_path: Path) -> None:
    # push opens each file it walked again: by then the sandbox may have swapped it.
    local = tmp_path / "workspace"
    (local / "outputs").mkdir(parents=True)
    (tmp_path / "shadow").write_bytes(b"secret")
    (local / "leak").symlink_to(tmp_path / "shadow")
    (local / "folder").symlink_to(local / "outputs")
    (local / "outputs" / "x.txt").write_bytes(b"x")
    os.mkfifo(local / "pipe")  # opening it must not wait for a writer
    root = workspace_tree.open_root(local)
    try:
        with pytest.raises(OSError):
            workspace_tree.open_regular(root, ["leak"])
        with pytest.raises(OSError):
            workspace_tree.open_regular(root, ["folder", "x.txt"])
        with pytest.raises(NotARegularFile):
            workspace_tree.open_regular(root, ["pipe"])
        os.close(workspace_tree.open_regular(root, ["outputs", "x.txt"]))
    finally:
        os.close(root)


def test_wrong_credentials_raise_an_s3_error_without_the_secret(
    bucket: S3Server, tmp_path: Path, prefix: str
) -> None:
    wrong = "wrong-" + secrets.token_hex(16)
    mirror = WorkspaceMirror(s3_config(bucket, wrong), f"{BUCKET}/{prefix}", tmp_path / "sync")
    local = tmp_path / "workspace"
    local.mkdir()
    (local / "data.csv").write_bytes(b"a,b\n")

    for sync in (mirror.push, mirror.pull):
        with pytest.raises(S3Error) as refused:
            sync(SESSION, local)
        assert refused.value.status == 502
        text = f"{refused.value} {refused.value!r}"
        assert "refused the request" in text
        assert wrong not in text and bucket.secret_key not in text


def test_drafts_are_not_pushed(a: Node, bucket: S3Server, prefix: str) -> None:
    a.write("uploads/.draft-0123abcd", b"half an upload")
    a.write(".draft-top", b"half a file")
    a.write("uploads/done.csv", b"a\n1\n")

    assert a.push().uploaded == ["uploads/done.csv"]
    assert set(remote(bucket, prefix)) == {"uploads/done.csv"}


def test_big_files_stream_in_parts(bucket: S3Server, tmp_path: Path, prefix: str) -> None:
    threshold = 5 * 1024**2
    a = make_node(bucket, tmp_path / "a", prefix, multipart_threshold=threshold)
    b = make_node(bucket, tmp_path / "b", prefix, multipart_threshold=threshold)
    data = os.urandom(2 * threshold + 3)
    a.write("outputs/big.bin", data)
    a.write("outputs/small.bin", b"small")

    assert a.push().bytes_moved == len(data) + 5
    head = bucket.client().head_object(Bucket=BUCKET, Key=f"{prefix}/{SESSION}/outputs/big.bin")
    assert head["ETag"].endswith('-3"')  # a multipart upload of three parts
    pulled = b.pull()
    assert sorted(pulled.downloaded) == ["outputs/big.bin", "outputs/small.bin"]
    assert b.files()["outputs/big.bin"] == data
    assert a.pull().downloaded == [] and a.push().uploaded == []


def test_the_manifest_lives_outside_the_workspace(a: Node, tmp_path: Path) -> None:
    a.write("x.txt", b"x")
    a.push()
    assert a.files() == {"x.txt": b"x"}
    assert (a.mirror.manifest_dir / f"{SESSION}.json").is_file()

    inside = WorkspaceMirror(a.mirror.objects.config, BUCKET, a.local / ".sync")
    with pytest.raises(ValueError, match="inside"):
        inside.push(SESSION, a.local)


def test_a_copy_elsewhere_starts_from_an_empty_manifest(
    a: Node, tmp_path: Path, bucket: S3Server, prefix: str
) -> None:
    a.write("x.txt", b"x")
    a.push()
    moved = Node(a.mirror, tmp_path / "elsewhere")
    # The manifest describes A's copy: an empty copy elsewhere deletes nothing from S3...
    assert moved.push().deleted == []
    assert remote(bucket, prefix) == {"x.txt": b"x"}
    assert moved.pull().downloaded == ["x.txt"]  # ...and is not trusted to hold anything


def test_locations_and_settings() -> None:
    assert parse_location("bucket") == ("bucket", "")
    assert parse_location("s3://my.bucket/a/b/") == ("my.bucket", "a/b")
    for bad in ("", "Bad_Bucket", "bucket/../x", "bucket/a\x01"):
        with pytest.raises(ValueError, match="WORKSPACE_BUCKET"):
            parse_location(bad)

    sync = Path("/nonexistent/sync")
    assert WorkspaceMirror.from_settings(Settings(WORKSPACE_BUCKET=""), sync) is None
    settings = Settings(WORKSPACE_BUCKET="wsb/tenant", S3_SECRET_ACCESS_KEY="k")
    mirror = WorkspaceMirror.from_settings(settings, sync)
    assert mirror is not None
    assert mirror.key(SESSION, "outputs/a.csv") == f"tenant/{SESSION}/outputs/a.csv"
    assert mirror.objects.config.secret_access_key == "k"
    with pytest.raises(Exception, match="session"):
        mirror.key("../session")

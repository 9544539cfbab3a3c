"""Parquet copies of large tables (backend/files/conversion.py), in the real helper process."""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest

from backend.files.conversion import Conversion, ParquetConversions, follow
from backend.files.isolation import Confine
from backend.storage.workspaces import WorkspaceFile, Workspaces
from backend.tools.sandbox.availability import bwrap_problem
from backend.tools.sandbox.command import helper_command
from tests.support.processes import descendants
from tests.support.waiting import wait_for

SESSION = "u1-conv"
# The server's own helper: in bubblewrap where the sandbox has it, as here by default.
CONFINE: Confine | None = helper_command if bwrap_problem() is None else None


@pytest.fixture
def workspaces(tmp_path: Path) -> Workspaces:
    workspaces = Workspaces(tmp_path)
    workspaces.ensure(SESSION)
    return workspaces


@pytest.fixture
def conversions(workspaces: Workspaces) -> Iterator[ParquetConversions]:
    conversions = ParquetConversions(
        workspaces, threshold_bytes=1000, memory_mb=256, confine=CONFINE
    )
    yield conversions
    conversions.close()


def write(workspaces: Workspaces, relative: str, text: str) -> WorkspaceFile:
    path = workspaces.path(SESSION) / relative
    path.write_text(text)
    info = path.stat()
    return WorkspaceFile(relative, info.st_size, info.st_mtime)


def listed(workspaces: Workspaces, relative: str) -> WorkspaceFile | None:
    return {f.path: f for f in workspaces.list_files(SESSION)}.get(relative)


def finished(conversions: ParquetConversions, found: WorkspaceFile) -> Conversion:
    """Ask for the status, as the catalog does, until the conversion has ended."""
    workspaces = conversions.workspaces
    seen: list[Conversion] = []

    def ended() -> bool:
        twin = listed(workspaces, found.path + ".parquet")
        status = conversions.status(SESSION, found, twin)
        assert status is not None
        seen.append(status)
        return status.state in ("done", "failed")

    wait_for(ended, timeout=120)
    return seen[-1]


def table(rows: int) -> str:
    return "id,city,amount\n" + "".join(f"{i},c{i % 7},{i * 1.5}\n" for i in range(rows))


def test_a_large_csv_gets_a_parquet_copy_with_every_row(
    workspaces: Workspaces, conversions: ParquetConversions
) -> None:
    found = write(workspaces, "uploads/sales.csv", table(50_000))
    status = finished(conversions, found)
    assert status.state == "done" and status.progress == 100.0, status
    copy = pq.read_table(workspaces.path(SESSION) / "uploads/sales.csv.parquet")
    assert copy.num_rows == 50_000
    assert copy.column_names == ["id", "city", "amount"]
    assert copy.column("amount")[3].as_py() == 4.5
    leftovers = [n for n in os.listdir(workspaces.path(SESSION) / "uploads") if n.startswith(".")]
    assert leftovers == []


def test_small_files_and_other_types_are_not_converted(
    workspaces: Workspaces, conversions: ParquetConversions
) -> None:
    small = write(workspaces, "uploads/tiny.csv", "a,b\n1,2\n")
    notes = write(workspaces, "uploads/notes.md", "x" * 5000)
    outside = write(workspaces, "outputs/result.csv", table(1000))
    for found in (small, notes, outside):
        assert conversions.status(SESSION, found, None) is None


def test_a_file_that_is_not_a_table_fails_with_a_reason_and_leaves_nothing(
    workspaces: Workspaces, conversions: ParquetConversions
) -> None:
    found = write(workspaces, "uploads/events.jsonl", '{"a": 1}\n' * 200 + "not json at all\n")
    status = finished(conversions, found)
    assert status.state == "failed", status
    assert status.error and status.error.startswith("could not convert to Parquet"), status
    assert "/proc/self/fd" not in status.error
    assert sorted(os.listdir(workspaces.path(SESSION) / "uploads")) == ["events.jsonl"]
    again = conversions.status(SESSION, found, None)
    assert again is not None and again.state == "failed"  # not retried until the file changes


def test_a_source_swapped_for_a_link_is_never_read(
    workspaces: Workspaces, conversions: ParquetConversions, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text(table(1000))
    found = write(workspaces, "uploads/data.csv", table(1000))
    link = workspaces.path(SESSION) / "uploads/data.csv"
    link.unlink()
    link.symlink_to(secret)  # what sandboxed code can do between listing and conversion
    status = finished(conversions, found)
    assert status.state == "failed", status
    assert not (workspaces.path(SESSION) / "uploads/data.csv.parquet").exists()


def test_a_changed_source_is_converted_again(
    workspaces: Workspaces, conversions: ParquetConversions
) -> None:
    found = write(workspaces, "uploads/log.tsv", table(2000).replace(",", "\t"))
    assert finished(conversions, found).state == "done"
    twin = listed(workspaces, "uploads/log.tsv.parquet")
    assert twin is not None
    path = workspaces.path(SESSION) / "uploads/log.tsv"
    path.write_text(table(3000).replace(",", "\t"))
    os.utime(path, (twin.modified + 5, twin.modified + 5))  # newer than its copy
    changed = listed(workspaces, "uploads/log.tsv")
    assert changed is not None
    assert finished(conversions, changed).state == "done"
    copy = pq.read_table(workspaces.path(SESSION) / "uploads/log.tsv.parquet")
    assert copy.num_rows == 3000


def test_an_excel_sheet_is_converted_through_csv(
    workspaces: Workspaces, conversions: ParquetConversions
) -> None:
    import openpyxl  # type: ignore[import-untyped]

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(["region", "sales"])
    for i in range(3000):
        sheet.append([f"r{i % 4}", i])
    path = workspaces.path(SESSION) / "uploads/book.xlsx"
    book.save(path)
    info = path.stat()
    found = WorkspaceFile("uploads/book.xlsx", info.st_size, info.st_mtime)
    assert finished(conversions, found).state == "done"
    copy = pq.read_table(workspaces.path(SESSION) / "uploads/book.xlsx.parquet")
    assert copy.num_rows == 3000 and copy.column_names == ["region", "sales"]
    assert sum(copy.column("sales").to_pylist()) == sum(range(3000))


def _file(workspaces: Workspaces, session: str, relative: str, text: str) -> WorkspaceFile:
    path = workspaces.ensure(session) / relative
    path.write_text(text)
    info = path.stat()
    return WorkspaceFile(relative, info.st_size, info.st_mtime)


def _state(conversions: ParquetConversions, session: str, found: WorkspaceFile) -> str:
    twin = {f.path: f for f in conversions.workspaces.list_files(session)}.get(
        found.path + ".parquet"
    )
    status = conversions.status(session, found, twin)
    assert status is not None
    return status.state


def test_users_take_turns_in_the_queue(workspaces: Workspaces) -> None:
    """One user's many uploads do not make another's wait behind all of them."""
    conversions = ParquetConversions(
        workspaces, threshold_bytes=1000, memory_mb=256, confine=CONFINE
    )
    try:
        many = [_file(workspaces, "u1-many", f"uploads/{n}.csv", table(20_000)) for n in range(4)]
        one = _file(workspaces, "u2-one", "uploads/mine.csv", table(20_000))
        for found in many:
            assert _state(conversions, "u1-many", found) in ("queued", "converting")
        assert _state(conversions, "u2-one", one) == "queued"
        wait_for(lambda: _state(conversions, "u2-one", one) == "done", timeout=120)
        # Served in turns (u1's first, u2's, u1's second, ...): u1's last two still wait.
        assert [_state(conversions, "u1-many", found) for found in many[2:]] != ["done", "done"]
        assert _state(conversions, "u1-many", many[3]) == "queued"
    finally:
        conversions.close()


def test_a_copy_is_written_only_within_the_owners_quota(workspaces: Workspaces) -> None:
    left = {"u3-full": 0, "u4-tight": 4096, "u5-room": 10**9}
    conversions = ParquetConversions(
        workspaces,
        threshold_bytes=1000,
        memory_mb=256,
        quota_left=left.__getitem__,
        confine=CONFINE,
    )
    try:
        files = {s: _file(workspaces, s, "uploads/big.csv", table(50_000)) for s in left}
        ended: dict[str, str] = {}
        for session, found in files.items():

            def done(session: str = session, found: WorkspaceFile = found) -> bool:
                ended[session] = _state(conversions, session, found)
                return ended[session] in ("done", "failed")

            wait_for(done, timeout=120)
        assert ended == {"u3-full": "failed", "u4-tight": "failed", "u5-room": "done"}
        full = conversions.status("u3-full", files["u3-full"], None)
        assert full is not None and "disk quota" in (full.error or ""), full
        for session in ("u3-full", "u4-tight"):  # the helper could not write past 4 KB
            assert sorted(os.listdir(workspaces.path(session) / "uploads")) == ["big.csv"]
    finally:
        conversions.close()


SECRETS = {
    "SECRET_KEY": "the-servers-signing-key",
    "DATABASE_URL": "postgresql://app:hunter2@db.internal/app",
    "AWS_SECRET_ACCESS_KEY": "s3-secret-key",
}


def _cmdline(pid: int) -> list[bytes]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")


def _started_below_us(before: set[int]) -> dict[int, list[bytes]]:
    """The programs this test process started since `before`, as they run (bubblewrap, the
    helper), by pid: not a fork of ours that has yet to exec (it shows our environment)."""
    ours, found = _cmdline(os.getpid()), {}
    for pid in set(descendants(os.getpid())) - before:
        try:
            argv = _cmdline(pid)
        except OSError:
            continue  # ended meanwhile
        if argv != ours:
            found[pid] = argv
    return found


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _while_converting(
    conversions: ParquetConversions, workspaces: Workspaces, session: str
) -> tuple[int, dict[int, bytes], WorkspaceFile]:
    """Start converting a file and catch its helper running: the helper's pid, and the
    environment of each program started for it (bubblewrap's and the helper's)."""
    found = _file(workspaces, session, "uploads/big.csv", table(50_000))
    before = set(descendants(os.getpid()))  # what other tests left running
    environments: dict[int, bytes] = {}
    helper: list[int] = []

    def caught() -> bool:
        for pid, argv in _started_below_us(before).items():
            try:
                environments[pid] = Path(f"/proc/{pid}/environ").read_bytes()
            except OSError:
                continue
            if argv[0] == sys.executable.encode():  # the helper itself, not bubblewrap
                helper.append(pid)
        assert _state(conversions, session, found) in ("queued", "converting")
        return bool(helper)

    wait_for(caught, timeout=60)
    return helper[0], environments, found


@pytest.mark.parametrize("confined", [True, False], ids=["bubblewrap", "rlimits-only"])
def test_the_helper_gets_none_of_the_servers_environment_and_dies_with_its_session(
    workspaces: Workspaces, confined: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if confined and CONFINE is None:
        pytest.skip(f"no bubblewrap here: {bwrap_problem()}")
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)  # the server's own environment
    conversions = ParquetConversions(
        workspaces, threshold_bytes=1000, memory_mb=256, confine=CONFINE if confined else None
    )
    try:
        helper, environments, found = _while_converting(conversions, workspaces, "u6-env")
        for pid, environment in environments.items():
            for name, value in SECRETS.items():
                assert name.encode() not in environment, (pid, name)
                assert value.encode() not in environment, (pid, name)
        conversions.forget_session("u6-env")  # the session is deleted: its helper goes too
        wait_for(lambda: _gone(helper), timeout=30)
        assert sorted(os.listdir(workspaces.path("u6-env") / "uploads")) == ["big.csv"]
        assert conversions.status("u6-env", found, None) is not None  # queued anew
    finally:
        conversions.close()


def test_a_confined_helper_sees_nothing_of_data_dir(workspaces: Workspaces) -> None:
    """A file that takes the helper over finds no workspace, no database, no key."""
    if CONFINE is None:
        pytest.skip(f"no bubblewrap here: {bwrap_problem()}")
    data_dir = workspaces.root.parent
    (data_dir / "secret_key").write_text("the server's signing key")
    conversions = ParquetConversions(
        workspaces, threshold_bytes=1000, memory_mb=256, confine=CONFINE
    )
    try:
        helper, _, found = _while_converting(conversions, workspaces, "u7-root")
        root = Path(f"/proc/{helper}/root")
        source = workspaces.path("u7-root") / found.path
        assert (root / "usr").is_dir()  # its root, as it sees it
        for path in (data_dir, data_dir / "secret_key", source, workspaces.path(SESSION)):
            assert not os.path.lexists(f"{root}{path}"), path
        assert _state(conversions, "u7-root", found) in ("converting", "done")
        wait_for(lambda: _state(conversions, "u7-root", found) == "done", timeout=120)
        wait_for(lambda: not list(data_dir.glob("parquet-*")))  # its scratch folder goes
    finally:
        conversions.close()


class _Planted:
    """A pickle that creates `path` when it is unpickled."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.path), "w"))


@pytest.mark.parametrize(
    "report",
    [
        b"pickle",
        b'{"kind": "done", "rows": 5}',  # cut off: no end of line
        b'{"kind": "exec", "code": "import os"}\n',
        b'{"kind": "done", "rows": 5, "also": 1}\n',
        b'{"kind": "progress", "percent": NaN}\n',
        b'["done", 5]\n',
        b'{"kind": "failed", "error": "' + b"x" * 2000 + b'"}\n',
        b"\xff\xfe\n",
    ],
    ids=["pickle", "cut", "unknown", "extra", "nan", "list", "long", "bytes"],
)
def test_a_report_that_is_not_one_fails_the_conversion_and_is_never_unpickled(
    tmp_path: Path, report: bytes
) -> None:
    planted = tmp_path / "planted"
    if report == b"pickle":
        report = pickle.dumps(("done", _Planted(planted))) + b"\n"
    conversion = Conversion("converting", 0.0, "uploads/x.csv.parquet")
    progress = b'{"kind": "progress", "percent": 40.0}\n'
    assert follow([progress, report], conversion) is False
    assert conversion.state == "failed" and conversion.progress == 40.0
    assert conversion.error == "the converter sent a report it may not send"
    assert not planted.exists()
    good = Conversion("converting", 0.0, "uploads/x.csv.parquet")
    assert follow([progress, b'{"kind": "done", "rows": 5}\n'], good) is True
    assert good.state == "converting" and good.error is None  # the server commits, then done

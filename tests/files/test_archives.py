"""Archive listings, and `safe_extract` refusing everything that could escape or explode."""

from __future__ import annotations

import bz2
import gzip
import io
import os
import stat
import tarfile
import zipfile
from pathlib import Path

import pytest

from backend.files import ArchiveLimits, UnsafeArchive, safe_extract
from tests.files.helpers import describe, zip_bomb_bytes, zip_bytes


def _tar(members: list[tarfile.TarInfo], data: dict[str, bytes], mode: str = "w:gz") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as archive:  # type: ignore[call-overload]
        for info in members:
            content = data.get(info.name)
            if content is not None:
                info.size = len(content)
            archive.addfile(info, io.BytesIO(content) if content is not None else None)
    return buffer.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE, target: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = target
    return info


def _extract(tmp_path: Path, name: str, data: bytes, limits: ArchiveLimits | None = None) -> Path:
    target = tmp_path / "out"
    target.mkdir(parents=True)
    with io.BytesIO(data) as source:
        if limits is None:
            safe_extract(source, name, target)
        else:
            safe_extract(source, name, target, limits)
    return target


def test_a_zip_is_listed_without_unpacking(tmp_path: Path) -> None:
    path = tmp_path / "bundle.zip"
    path.write_bytes(zip_bytes({"a.csv": b"x,y\n1,2\n", "docs/readme.md": b"# hi\n"}))
    metadata = describe(path)
    assert (metadata.kind, metadata.error) == ("archive", None)
    assert metadata.details["entries"] == [
        {"name": "a.csv", "size": 8, "type": "file"},
        {"name": "docs/readme.md", "size": 5, "type": "file"},
    ]
    assert metadata.details["entry_count"] == 2


def test_tar_tgz_and_tar_bz2_are_listed(tmp_path: Path) -> None:
    members = [_member("data"), _member("data/x.csv"), _member("link", tarfile.SYMTYPE, "x")]
    members[0].type = tarfile.DIRTYPE
    data = {"data/x.csv": b"1,2\n"}
    for name, mode in (("a.tar", "w"), ("a.tgz", "w:gz"), ("a.tar.bz2", "w:bz2")):
        path = tmp_path / name
        path.write_bytes(_tar(list(members), data, mode))
        metadata = describe(path)
        assert metadata.error is None, name
        assert [e["type"] for e in metadata.details["entries"]] == ["dir", "file", "link"]
        assert metadata.details["entry_count"] == 3


def test_a_single_compressed_file_shows_its_content(tmp_path: Path) -> None:
    path = tmp_path / "sales.csv.gz"
    path.write_bytes(gzip.compress(b"region,amount\nEU,3\n"))
    metadata = describe(path)
    assert metadata.details["entries"] == [{"name": "sales.csv", "size": 19, "type": "file"}]
    assert metadata.details["first_lines"] == ["region,amount", "EU,3"]
    bz = tmp_path / "notes.txt.bz2"
    bz.write_bytes(bz2.compress(b"hello\n"))
    assert describe(bz).details["first_lines"] == ["hello"]


def test_a_zip_bomb_is_flagged_in_its_listing(tmp_path: Path) -> None:
    path = tmp_path / "bomb.zip"
    path.write_bytes(zip_bomb_bytes("zeros.bin", 20))
    assert "zip bomb" in describe(path).details["warning"]


def test_safe_extract_unpacks_zip_tgz_and_gz(tmp_path: Path) -> None:
    out = _extract(
        tmp_path / "z", "a.zip", zip_bytes({"a.csv": b"1\n", "d/b.txt": b"2\n", "d/": b""})
    )
    assert (out / "a.csv").read_bytes() == b"1\n"
    assert (out / "d" / "b.txt").read_bytes() == b"2\n"
    tgz = _tar([_member("./top/x.csv")], {"./top/x.csv": b"x\n"})
    assert (_extract(tmp_path / "t", "a.tgz", tgz) / "top" / "x.csv").read_bytes() == b"x\n"
    single = _extract(tmp_path / "g", "uploads/data.csv.gz", gzip.compress(b"a,b\n"))
    assert (single / "data.csv").read_bytes() == b"a,b\n"
    assert stat.S_IMODE((single / "data.csv").stat().st_mode) == 0o600


def _symlinkzip_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        info = zipfile.ZipInfo("innocent")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        archive.writestr(info, "/etc/passwd")
    return buffer.getvalue()


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("up.zip", zip_bytes({"ok.txt": b"1", "../evil.txt": b"x"}), "points outside"),
        ("abs.zip", zip_bytes({"/etc/cron.d/x": b"x"}), "absolute path"),
        ("deep.zip", zip_bytes({"a/../../evil": b"x"}), "points outside"),
        ("link.zip", _symlinkzip_bytes(), "is a link"),
        ("link.tgz", _tar([_member("l", tarfile.SYMTYPE, "/etc/passwd")], {}), "is a link"),
        ("hard.tgz", _tar([_member("h", tarfile.LNKTYPE, "/etc/passwd")], {}), "is a link"),
        ("dev.tar", _tar([_member("d", tarfile.CHRTYPE)], {}, "w"), "device or FIFO"),
        ("up.tgz", _tar([_member("../x")], {"../x": b"x"}), "points outside"),
        ("bomb.zip", zip_bomb_bytes("zeros.bin", 20), "zip bomb"),
        ("plain.zip", b"not an archive at all", "not a zip"),
    ],
    # A gzip header holds the time it was made: bytes in an id differ between pytest-xdist's
    # workers when they collect in different seconds, and the run stops.
    ids=lambda value: "bytes" if isinstance(value, bytes) else None,
)
def test_safe_extract_refuses_and_writes_nothing(
    tmp_path: Path, name: str, data: bytes, message: str
) -> None:
    with pytest.raises(UnsafeArchive, match=message):
        _extract(tmp_path, name, data)
    assert os.listdir(tmp_path / "out") == []
    assert not (tmp_path / "evil.txt").exists()


def test_safe_extract_caps_members_and_total_size(tmp_path: Path) -> None:
    many = zip_bytes({f"f{i}.txt": b"x" for i in range(20)})
    with pytest.raises(UnsafeArchive, match="20 members"):
        _extract(tmp_path / "a", "many.zip", many, ArchiveLimits(max_members=10))
    big = zip_bytes({"big.bin": os.urandom(50_000)})
    with pytest.raises(UnsafeArchive, match="unpack to 50,000 bytes"):
        _extract(tmp_path / "b", "big.zip", big, ArchiveLimits(max_total_bytes=10_000))
    gz = gzip.compress(bytes(5_000_000))
    with pytest.raises(UnsafeArchive, match="unpacks to more than"):
        _extract(tmp_path / "c", "zeros.bin.gz", gz)
    assert os.listdir(tmp_path / "c" / "out") == []


def test_a_lying_zip_header_is_caught_and_cleaned_up(tmp_path: Path) -> None:
    data = bytearray(zip_bytes({"first.txt": b"fine\n", "second.txt": b"A" * 5000}))
    # Shrink second.txt's declared size in its local and central headers.
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = data.rfind(signature)
        data[at + offset : at + offset + 4] = (100).to_bytes(4, "little")
    with pytest.raises(UnsafeArchive, match="could not be unpacked"):
        _extract(tmp_path, "liar.zip", bytes(data))
    assert os.listdir(tmp_path / "out") == []


def test_the_destination_must_be_an_empty_real_folder(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "existing").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir()
    archive = zip_bytes({"a.txt": b"1"})
    with pytest.raises(UnsafeArchive, match="not empty"):
        safe_extract(io.BytesIO(archive), "a.zip", tmp_path / "real")
    with pytest.raises(UnsafeArchive, match="not a plain folder"):
        safe_extract(io.BytesIO(archive), "a.zip", tmp_path / "link")
    assert os.listdir(tmp_path / "elsewhere") == []


class _PlantingSource(io.BytesIO):
    """Plants a link in the destination once the checks are done (a sandbox racing us)."""

    def __init__(self, data: bytes, link: Path, points_to: Path) -> None:
        super().__init__(data)
        self.link, self.points_to, self.starts = link, points_to, 0

    def read(self, size: int | None = -1, /) -> bytes:
        if self.tell() == 0:
            self.starts += 1
            if self.starts == 2:  # the first member's data, after sniffing and the checks
                os.symlink(self.points_to, self.link)
        return super().read(size)


def test_a_link_planted_during_extraction_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    target = tmp_path / "out"
    outside.mkdir()
    target.mkdir()
    source = _PlantingSource(zip_bytes({"a.txt": b"1", "d/x.txt": b"2"}), target / "d", outside)
    with pytest.raises(UnsafeArchive, match="could not be unpacked"):
        safe_extract(source, "a.zip", target)
    assert os.listdir(outside) == []
    assert os.listdir(target) == ["d"]  # only the planted link; a.txt was removed

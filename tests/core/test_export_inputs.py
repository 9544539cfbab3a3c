"""An export's input files are hashed once while unchanged (backend/core/export/inputs.py):
each export of a session with a 200 MB upload hashed all of it again, a second of a core
for the same bytes (noisy_neighbour, issue 40). Any write gives the file a new ctime,
which only the kernel sets, and so a new digest."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from backend.core.export.inputs import _Digests

DATA = b"a,b\n1,2\n" * 10_000


class Reads:
    """A file opened for reading that counts its reads."""

    def __init__(self, path: Path) -> None:
        self.handle = path.open("rb")
        self.reads = 0

    def fileno(self) -> int:
        return self.handle.fileno()

    def read(self, size: int = -1) -> bytes:
        self.reads += 1
        return self.handle.read(size)

    def close(self) -> None:
        self.handle.close()


def _of(digests: _Digests, path: Path) -> tuple[tuple[int, str], int]:
    reads = Reads(path)
    try:
        found = digests.of(reads)  # type: ignore[arg-type]
    finally:
        reads.close()
    return found, reads.reads


def test_an_unchanged_file_is_hashed_once_and_a_changed_one_again(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_bytes(DATA)
    digests = _Digests(settled_ns=0)
    first, reads = _of(digests, path)
    assert first == (len(DATA), hashlib.sha256(DATA).hexdigest()) and reads >= 1
    again, reads = _of(digests, path)
    assert again == first and reads == 0  # from the digests kept
    changed = DATA.replace(b"1,2", b"3,4")  # the same size, other bytes
    path.write_bytes(changed)
    os.utime(path, ns=(0, 10**9))  # within one clock tick a write may keep the times
    after, reads = _of(digests, path)
    assert after == (len(changed), hashlib.sha256(changed).hexdigest()) and reads >= 1


def test_a_file_changed_just_now_is_hashed_every_time(tmp_path: Path) -> None:
    path = tmp_path / "fresh.csv"
    path.write_bytes(DATA)
    digests = _Digests()  # a second must pass since its last change
    for _ in range(2):
        found, reads = _of(digests, path)
        assert found[1] == hashlib.sha256(DATA).hexdigest() and reads >= 1


def test_the_digests_kept_are_bounded(tmp_path: Path) -> None:
    digests = _Digests(kept=3, settled_ns=0)
    paths = []
    for number in range(5):
        paths.append(tmp_path / f"{number}.csv")
        paths[-1].write_bytes(DATA + bytes([number]))
        _of(digests, paths[-1])
    kept: Any = digests._digests
    assert len(kept) == 3
    _, reads = _of(digests, paths[0])  # the oldest went first
    assert reads >= 1
    _, reads = _of(digests, paths[4])
    assert reads == 0

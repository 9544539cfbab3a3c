"""scripts/check_private_imports.py: another package's private names are refused, ours are not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "check_private_imports.py"

VIOLATING = """\
from __future__ import annotations

import json
import pkg.sub._mod
from pkg.mod import _name, public
from pkg._mod import thing
from pkg import __version__

from backend._own import helper
from ._sibling import other
"""

CLEAN = """\
import os.path
from collections import abc

from backend.core import _shared
from tests.support._fixtures import server


def inner() -> None:
    from pkg import __all__
"""

NESTED = """\
def later() -> None:
    from pkg.a._b.c import d
"""


def run_check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(root)], capture_output=True, text=True, check=False
    )


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_each_private_import_is_listed_with_its_file_and_line(tmp_path: Path) -> None:
    write(tmp_path / "backend" / "bad.py", VIOLATING)
    write(tmp_path / "tests" / "clean.py", CLEAN)
    write(tmp_path / "scripts" / "deep" / "nested.py", NESTED)
    # Another project's files under tests/ are not ours to check.
    write(tmp_path / "tests" / "node" / "node_modules" / "lib" / "x.py", VIOLATING)

    result = run_check(tmp_path)

    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "backend/bad.py:4: import pkg.sub._mod",
        "backend/bad.py:5: from pkg.mod import _name, public",
        "backend/bad.py:6: from pkg._mod import thing",
        "scripts/deep/nested.py:2: from pkg.a._b.c import d",
    ]
    assert "4 import(s)" in result.stderr


def test_a_tree_without_private_imports_passes(tmp_path: Path) -> None:
    write(tmp_path / "tests" / "clean.py", CLEAN)
    write(tmp_path / "benchmarks" / "also_clean.py", "from __future__ import annotations\n")

    result = run_check(tmp_path)

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")

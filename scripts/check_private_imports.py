"""Fail when our code imports another package's private names (`make lint`).

A name that starts with an underscore is a promise nobody made: the next release may
rename or remove it without a word. This reads every .py file under backend/, tests/,
benchmarks/ and scripts/ and reports each import with such a name at any depth:
`from pkg.mod import _name`, `from pkg._mod import name`, `import pkg._mod`. Dunders
(`__future__`, `__version__`) are public; our own packages and relative imports are
exempt. Exit status 1, with one `file:line: import` per finding, when there is any.

    python scripts/check_private_imports.py [ROOT]
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

FIRST_PARTY = frozenset({"backend", "tests", "benchmarks", "scripts"})
CHECKED_DIRS = ("backend", "tests", "benchmarks", "scripts")
# Installed copies of other projects' code that may sit under tests/ (npm packages).
SKIPPED_DIRS = frozenset({"node_modules", "__pycache__"})


@dataclass(frozen=True)
class PrivateImport:
    path: Path
    line: int
    statement: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.statement}"


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _private_path(dotted: str) -> bool:
    return any(is_private(part) for part in dotted.split("."))


def _imports_private_name(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.Import):
        return any(
            alias.name.split(".")[0] not in FIRST_PARTY and _private_path(alias.name)
            for alias in node.names
        )
    if node.level or node.module is None or node.module.split(".")[0] in FIRST_PARTY:
        return False  # relative, or ours
    return _private_path(node.module) or any(is_private(alias.name) for alias in node.names)


def private_imports(source: str, path: Path) -> Iterator[PrivateImport]:
    """Each import statement in `source` that names another package's private name."""
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.Import | ast.ImportFrom) and _imports_private_name(node):
            yield PrivateImport(path, node.lineno, ast.unparse(node))


def python_files(root: Path) -> Iterator[Path]:
    for top in CHECKED_DIRS:
        for path in sorted((root / top).rglob("*.py")):
            parts = path.relative_to(root).parts
            if not any(part in SKIPPED_DIRS or part.startswith(".") for part in parts):
                yield path


def main(argv: Sequence[str]) -> int:
    root = Path(argv[0]) if argv else Path(__file__).resolve().parent.parent
    found = [
        finding
        for path in python_files(root)
        for finding in private_imports(path.read_text(encoding="utf-8"), path.relative_to(root))
    ]
    for finding in sorted(found, key=lambda finding: (str(finding.path), finding.line)):
        print(finding)
    if found:
        print(
            f"{len(found)} import(s) of another package's private names; use its public API.",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Write the offline bundle's lock: requirements.txt plus the hash of each wheel built here.

`pip wheel --require-hashes -r requirements.txt` checks every download against the lock,
then builds the sdists among them (llama-cpp-python) into wheels whose hashes the lock
cannot know. The bundle's lock is requirements.txt with, for each such requirement, the
built wheel's sha256 added to its hashes, so that `pip install --require-hashes` from the
bundle still refuses any file that is neither a locked download nor the wheel built from a
locked sdist. It fails unless every requirement has exactly one wheel in the folder, of the
locked version, and every wheel there is a locked requirement.

    python -m scripts.bundle_lock requirements.txt WHEELS_DIR > requirements-bundle.txt
"""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import NormalizedName, canonicalize_name, parse_wheel_filename
from packaging.version import Version

# A requirement of a `uv pip compile --generate-hashes` lock: `name==version \`, then its
# `--hash=sha256:…` lines.
REQUIREMENT = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;\\]+)")
HASH = re.compile(r"--hash=sha256:(?P<hex>[0-9a-f]{64})")


@dataclass(frozen=True)
class LockedRequirement:
    line: int  # index of its `name==version` line
    version: Version
    hashes: frozenset[str]


def read_lock(lines: list[str]) -> dict[NormalizedName, LockedRequirement]:
    """Every `name==version` of the lock with the sha256 hashes listed under it."""
    found: dict[NormalizedName, LockedRequirement] = {}
    index = 0
    while index < len(lines):
        match = REQUIREMENT.match(lines[index])
        if match is None:
            index += 1
            continue
        start, hashes = index, set(HASH.findall(lines[index]))
        while lines[index].rstrip().endswith("\\") and index + 1 < len(lines):
            index += 1
            hashes.update(HASH.findall(lines[index]))
        name = canonicalize_name(match["name"])
        found[name] = LockedRequirement(start, Version(match["version"]), frozenset(hashes))
        index += 1
    return found


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def bundle_lock(lock_text: str, wheels: list[Path]) -> str:
    """The lock's text with each built wheel's hash added; ValueError when they disagree."""
    lines = lock_text.splitlines()
    locked = read_lock(lines)
    problems: list[str] = []
    built: dict[int, tuple[str, str]] = {}  # line of the requirement -> (wheel hash, file name)
    seen: set[NormalizedName] = set()
    for wheel in sorted(wheels):
        name, version, _build, _tags = parse_wheel_filename(wheel.name)
        requirement = locked.get(name)
        if requirement is None:
            problems.append(f"{wheel.name}: not in the lock")
            continue
        if name in seen:
            problems.append(f"{wheel.name}: a second wheel of {name}")
        seen.add(name)
        if version != requirement.version:
            problems.append(f"{wheel.name}: the lock pins {name}=={requirement.version}")
        digest = sha256(wheel)
        if digest not in requirement.hashes:
            built[requirement.line] = (digest, wheel.name)
    problems += [f"{name}: no wheel" for name in sorted(set(locked) - seen)]
    if problems:
        raise ValueError("\n".join(problems))

    out: list[str] = []
    for index, line in enumerate(lines):
        if index in built:
            digest, file_name = built[index]
            out.append(f"# {file_name}: built by `make bundle` from the sdist hash-checked below")
            continues = line.rstrip().endswith("\\")
            out.append(line if continues else f"{line.rstrip()} \\")
            out.append(f"    --hash=sha256:{digest}" + (" \\" if continues else ""))
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    lock, wheels_dir = Path(argv[0]), Path(argv[1])
    try:
        text = bundle_lock(lock.read_text(), list(wheels_dir.glob("*.whl")))
    except ValueError as error:
        print(f"{lock} and {wheels_dir} disagree:\n{error}", file=sys.stderr)
        return 1
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""What does a turn's data snapshot cost, in time and in disk, with a 2 GB upload in the session?

Method: a session workspace (`Workspaces`) gets a 2 GiB upload, written for real in
chunks and synced, and a realistic state: Parquet and .npy variables of a few MB, JSON
variables and their catalog, notepad.json, earlier plots and scripts. A first
`TurnSnapshots.take` copies that state (never uploads/). Then 20 turns each change one
small variable, write one matplotlib plot and a script, and append to the notepad and
the catalog; each turn's `take` is timed, and the new disk it costs is the growth of the
snapshot tree's st_blocks (each inode counted once, so hard links are free). Then a
turn writes a 200 MB variable (its cost should be that variable), a small turn follows
it (the 200 MB is linked), and `restore` is timed back to an earlier turn and forward
again. The baseline, in the same run, is a naive full copy of the workspace after the
20 turns (`shutil.copytree`), with and without uploads/, timed once. Everything lives under a
temporary folder (`--dir`, default the system's, e.g. /tmp) and is deleted at the end.

    .venv/bin/python -m benchmarks.branch_snapshot [--upload-gb 2] [--turns 20] [--dir DIR]
        [--smoke]

`--smoke`: a 1 MiB upload, 2 turns and a 2 MiB variable, to check that it runs (`make test`
does); the goals are printed but not judged, since they are about the full sizes.

Goals (issue 27): a turn that changed nothing big snapshots in under 50 ms and under
1 MB of new disk; 20 turns with a 2 GB upload hold far less than 40 GB (here: under 1%
of 20 copies of the workspace). On a filesystem without reflinks (ext4) a changed file
is copied; with them (btrfs, XFS) st_blocks still counts its shared blocks, so the new
disk shown for the 200 MB turn is an upper bound there.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from backend.storage.sessions import session_key
from backend.storage.snapshots import TurnSnapshots
from backend.storage.sparse_copy import FICLONE
from backend.storage.workspaces import Workspaces

KEY = session_key(1, "branch-snapshot-bench")
MiB = 1024**2
GiB = 1024**3
CHUNK = 8 * MiB
GOAL_SECONDS = 0.050
GOAL_NEW_DISK = 1_000_000
GOAL_SHARE = 0.01  # of 20 full copies of the workspace


def size(value: float) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", 1024)):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {unit}"
    return f"{value:.0f} B"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def disk(root: Path) -> int:
    """Bytes of disk under `root` (files and folders), each inode counted once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for folder, folders, files in os.walk(root):
        for name in (*folders, *files):
            info = os.lstat(os.path.join(folder, name))
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total


def filesystem(folder: Path) -> str:
    kind = subprocess.run(
        ["stat", "-f", "-c", "%T", str(folder)], capture_output=True, text=True, check=True
    ).stdout.strip()
    source, clone = folder / "probe-source", folder / "probe-clone"
    source.write_bytes(b"x" * 4096)
    try:
        with open(source, "rb") as reading, open(clone, "wb") as writing:
            fcntl.ioctl(writing.fileno(), FICLONE, reading.fileno())
        reflinks = "reflinks: yes"
    except OSError:
        reflinks = "reflinks: no, a changed file is copied in the kernel (copy_file_range)"
    finally:
        source.unlink()
        clone.unlink(missing_ok=True)
    return f"{kind} ({reflinks})"


def write_upload(path: Path, total: int) -> float:
    started = time.perf_counter()
    chunk = np.random.default_rng(0).integers(0, 256, CHUNK, dtype=np.uint8).tobytes()
    with open(path, "wb") as handle:
        for offset in range(0, total, CHUNK):
            handle.write(chunk[: min(CHUNK, total - offset)])
        handle.flush()
        os.fsync(handle.fileno())
    return time.perf_counter() - started


def plot(turn: int) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    rng = np.random.default_rng(turn)
    figure, axes = pyplot.subplots(figsize=(6, 4))
    axes.plot(np.cumsum(rng.normal(size=500)), label=f"turn {turn}")
    axes.hist(rng.normal(size=2000), bins=40, alpha=0.4)
    axes.legend()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80)
    pyplot.close(figure)
    return buffer.getvalue()


class Session:
    """A workspace and what a turn of the agent writes into it."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.notes: list[str] = []
        self.results: list[float] = []
        self.catalog: dict[str, dict[str, object]] = {}

    def write(self, relative: str, data: bytes) -> None:
        path = self.workspace / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        name, _, kind = Path(relative).name.rpartition(".")
        if relative.startswith("variables/") and name != "variables_metadata":
            self.catalog[name] = {"type": kind, "bytes": len(data)}

    def note(self, text: str) -> None:
        self.notes.append(text)
        entries = [{"turn": n, "text": note} for n, note in enumerate(self.notes)]
        self.write("notepad.json", json.dumps({"entries": entries}).encode())
        self.write("variables/variables_metadata.json", json.dumps(self.catalog).encode())

    def realistic_state(self) -> None:
        rng = np.random.default_rng(1)
        rows = 150_000
        sales = pd.DataFrame(
            {
                "order": np.arange(rows),
                "region": rng.choice(["north", "south", "east", "west"], rows),
                "amount": rng.gamma(2.0, 50.0, rows),
                "day": pd.date_range("2024-01-01", periods=rows, freq="min"),
            }
        )
        self.write("variables/sales.parquet", sales.to_parquet())
        summary = sales.groupby("region")["amount"].describe()
        self.write("variables/summary.parquet", summary.to_parquet())
        buffer = io.BytesIO()
        np.save(buffer, rng.normal(size=(500, 500)), allow_pickle=False)
        self.write("variables/weights.npy", buffer.getvalue())
        lookup = {f"customer-{n}": {"segment": n % 7, "score": n / 3} for n in range(20_000)}
        self.write("variables/lookup.json", json.dumps(lookup).encode())
        for turn in range(3):
            self.write(f"outputs/overview_{turn}.png", plot(100 + turn))
            self.write(f"scripts/setup_{turn}.py", f"print({turn})\n".encode() * 20)
        self.note("sales loaded: 150,000 orders; weights fitted")

    def small_turn(self, turn: int) -> None:
        """One small variable changed, one plot written, a script, a note."""
        self.results.append(turn / 7)
        self.write("variables/results.json", json.dumps(self.results).encode())
        self.write(f"outputs/turn_{turn}.png", plot(turn))
        self.write(f"scripts/turn_{turn}.py", f"results.append({turn} / 7)\n".encode())
        self.note(f"turn {turn}: results has {len(self.results)} values")


def measure(args: argparse.Namespace, root: Path) -> bool:
    workspaces = Workspaces(root / "data")
    snapshots = TurnSnapshots(root / "data", workspaces)
    workspace = workspaces.ensure(KEY)
    tree = snapshots.folder(KEY)
    print(f"filesystem: {filesystem(root)} at {root}")

    upload_bytes = int(args.upload_gb * GiB)
    wrote = write_upload(workspace / "uploads" / "data.csv", upload_bytes)
    session = Session(workspace)
    session.realistic_state()
    state = disk(workspace) - disk(workspace / "uploads")
    count = sum(len(names) for _, _, names in os.walk(workspace)) - 1
    print(
        f"session: upload {size(upload_bytes)} (written in {wrote:.1f} s),"
        f" state {size(state)} in {count} files"
    )

    def take(message_id: int) -> tuple[float, int, str]:
        before = disk(tree) if tree.exists() else 0
        started = time.perf_counter()
        cost = snapshots.take(KEY, message_id)
        seconds = time.perf_counter() - started
        return seconds, disk(tree) - before, f"linked {cost.linked}, copied {cost.copied}"

    seconds, new, files = take(1)
    print(
        f"{'first snapshot (the whole state but uploads)':48} {ms(seconds):>10}"
        f" {size(new):>11}   {files}"
    )

    times: list[float] = []
    news: list[int] = []
    last_files = ""
    for turn in range(2, args.turns + 2):
        session.small_turn(turn)
        seconds, new, last_files = take(turn)
        times.append(seconds)
        news.append(new)
    after_turns = disk(tree)
    workspace_size = disk(workspace)
    print(f"{args.turns} turns, each: one small variable, one plot, a script, notepad, catalog")
    print(f"  take time        median {ms(statistics.median(times)):>10}   max {ms(max(times))}")
    print(f"  new disk a turn  median {size(statistics.median(news)):>10}   max {size(max(news))}")
    print(f"  files, last turn {last_files}")

    baselines = {}
    for label, ignore in (
        ("baseline: copytree of the whole workspace", None),
        ("baseline: copytree without uploads/", skip_uploads(workspace)),
    ):
        copy = root / "copy"
        started = time.perf_counter()
        shutil.copytree(workspace, copy, symlinks=True, ignore=ignore)
        baselines[label] = time.perf_counter() - started
        print(f"{label:48} {ms(baselines[label]):>10} {size(disk(copy)):>11}")
        shutil.rmtree(copy)

    big_turn = args.turns + 2
    big = np.random.default_rng(2).random(args.big_mb * MiB // 8)
    buffer = io.BytesIO()
    np.save(buffer, big, allow_pickle=False)
    session.write("variables/big.npy", buffer.getvalue())
    session.note("big simulated")
    seconds, new, files = take(big_turn)
    share = new / len(buffer.getvalue())
    print(
        f"{f'turn writing a {args.big_mb} MiB variable':48} {ms(seconds):>10} {size(new):>11}"
        f"   {files}; {share:.2f}x the variable"
    )
    session.small_turn(big_turn + 1)
    seconds, new, files = take(big_turn + 1)
    print(
        f"{'next small turn (the big variable linked)':48} {ms(seconds):>10} {size(new):>11}"
        f"   {files}"
    )

    middle = 2 + args.turns // 2
    for label, target in (
        (f"restore to turn {middle} (drops the big variable)", middle),
        (f"restore to turn {big_turn + 1} (brings it back)", big_turn + 1),
        ("restore to before any turn", None),
        (f"restore to turn {big_turn + 1} again", big_turn + 1),
    ):
        started = time.perf_counter()
        snapshots.restore(KEY, target)
        print(f"{label:48} {ms(time.perf_counter() - started):>10}")

    median = statistics.median(times)
    full, without = baselines.values()
    copies = args.turns * workspace_size
    print(
        f"snapshot disk after {args.turns} turns: {size(after_turns)}"
        f" vs {args.turns} x workspace {size(copies)} ({after_turns / copies:.3%})"
    )
    print(
        f"ratios: a small turn's take is {full / median:,.0f}x faster than copying the"
        f" workspace, {without / median:.1f}x faster than copying it without uploads/"
    )
    goals = [
        (
            median < GOAL_SECONDS,
            f"a small turn snapshots in under 50 ms (median {ms(median)}, max {ms(max(times))})",
        ),
        (
            max(news) < GOAL_NEW_DISK,
            f"a small turn costs under 1 MB of new disk (max {size(max(news))})",
        ),
        (
            after_turns < GOAL_SHARE * copies,
            f"{args.turns} turns hold under 1% of"
            f" {args.turns} copies ({size(after_turns)} of {size(copies)})",
        ),
    ]
    for met, text in goals:
        print(f"  {'PASS' if met else 'FAIL'}  {text}")
    if args.smoke:
        print("  (--smoke: the goals are for the full sizes; not judged)")
    return all(met for met, _ in goals)


def skip_uploads(workspace: Path) -> Callable[[str, list[str]], list[str]]:
    """copytree's `ignore`: the workspace's uploads/ folder, nothing else."""

    def ignore(folder: str, names: list[str]) -> list[str]:
        return ["uploads"] if Path(folder) == workspace else []

    return ignore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upload-gb", type=float, default=2.0, help="GiB (default 2)")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--big-mb", type=int, default=200, help="the big variable, MiB")
    parser.add_argument("--dir", type=Path, default=None, help="where the session lives")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, to check it runs")
    args = parser.parse_args()
    if args.smoke:
        args.upload_gb, args.turns, args.big_mb = 1 / 1024, 2, 2
    root = Path(tempfile.mkdtemp(prefix="branch-snapshot-", dir=args.dir))
    try:
        passed = measure(args, root)
    finally:
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(root)
    sys.exit(0 if passed or args.smoke else 1)


if __name__ == "__main__":
    main()

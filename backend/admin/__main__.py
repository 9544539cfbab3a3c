"""`python -m backend.admin backup PATH` and `restore PATH [--force]` (docs/operations.md).

Both read the server's settings (the environment and `.env`), print what they did,
and exit 1 with a one-line reason, never a traceback, when they cannot.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from pathlib import Path

from backend.admin.backup import BackupReport, backup
from backend.admin.errors import AdminError
from backend.admin.restore import RestoreReport, restore
from backend.config import ConfigError, load_settings
from backend.storage import StoreBusy, StoreUnavailable

MB = 1024 * 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m backend.admin",
        description="Back up a server's data while it serves, or restore a backup.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    saving = commands.add_parser(
        "backup", help="write a consistent backup of the database and DATA_DIR to PATH"
    )
    saving.add_argument("path", type=Path, help="a new folder (written as PATH.partial first)")
    loading = commands.add_parser(
        "restore", help="restore the backup at PATH into an empty DATA_DIR and database"
    )
    loading.add_argument("path", type=Path, help="a folder written by `backup`")
    loading.add_argument(
        "--force",
        action="store_true",
        help="restore into a DATA_DIR or database that is not empty (stop the server first; "
        "DATA_DIR's entries are moved aside, PostgreSQL's tables are replaced)",
    )
    args = parser.parse_args(argv)
    try:
        settings = load_settings()
        if args.command == "backup":
            print(_backed_up(backup(settings, args.path)))
        else:
            print(_restored(restore(settings, args.path, force=args.force)))
    except (AdminError, ConfigError, StoreBusy, StoreUnavailable, OSError, sqlite3.Error) as exc:
        print(f"{args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{args.command}: interrupted", file=sys.stderr)
        return 130
    return 0


def _backed_up(report: BackupReport) -> str:
    lines = [
        f"Backed up to {report.path}: the {report.database.kind} database "
        f"({report.database.source}) and {report.files} files, {report.size / MB:.1f} MB"
        + (f" ({report.linked} kept as hard links)" if report.linked else "")
        + "."
    ]
    lines += [f"  skipped: {count} {why}" for why, count in sorted(report.skipped.items())]
    lines += [f"  not included: {left.path}: {left.reason}" for left in report.left_out]
    return "\n".join(lines)


def _restored(report: RestoreReport) -> str:
    manifest = report.manifest
    lines = [
        f"Checked {len(manifest.files)} files ({report.checked_bytes / MB:.1f} MB) against "
        f"the manifest of {manifest.created}.",
        f"Restored the {manifest.database.kind} database and {report.files} files "
        f"of {manifest.data_dir}.",
    ]
    if report.interrupted:
        lines.append(f"Marked {report.interrupted} turn(s) that were running interrupted.")
    lines += [f"Moved aside (delete once the server works): {path}" for path in report.moved_aside]
    lines += [
        f"  setting not restored: {left.path}: {left.reason}"
        for left in manifest.settings_not_included
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())

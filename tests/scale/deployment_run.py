"""Run docs/scale-out.md's "Running on several machines" commands, as written, and use them.

Started by `test_deployment.py` inside network and pid namespaces of its own (`unshare
--net --pid`, only loopback), so the Ray head keeps its documented port 6379, its nodes
find no other address than 127.0.0.1, and nothing leaves the namespace. Here it starts
what the README assumes exists (PostgreSQL, SeaweedFS, an old DATA_DIR), then runs every
command line of the section's bash block with the documented variables set, and checks
that a session alternates between the two API servers it started. Prints one JSON line;
exits non-zero on any failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg

from backend.storage.sqlite import SQLiteStore
from tests.support.live_server import ROOT, free_port
from tests.support.postgres import binaries, postgres
from tests.support.seaweedfs import seaweedfs
from tests.support.waiting import wait_for

SECTION = "## Running on several machines"
ADMIN_PASSWORD = "deployment-admin-password"
START_TIMEOUT = 180.0


def section() -> str:
    text = (ROOT / "docs" / "scale-out.md").read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start : end if end > 0 else None]


def blocks(kind: str) -> list[list[str]]:
    """The lines of each ```kind block of the section."""
    return [block.splitlines() for block in re.findall(rf"```{kind}\n(.*?)```", section(), re.S)]


def commands() -> list[str]:
    (lines,) = blocks("bash")
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]


def settings_names() -> list[str]:
    (lines,) = blocks("ini")
    return [line.split("=", 1)[0] for line in lines if "=" in line]


def run(line: str, env: dict[str, str]) -> None:
    done = subprocess.run(
        ["bash", "-c", line], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        raise AssertionError(f"{line!r} failed ({done.returncode}):\n{done.stderr[-3000:]}")


@contextlib.contextmanager
def api_servers(line: str, env: dict[str, str], root: Path) -> Iterator[list[str]]:
    """Two API servers started by the README's line, each with its PORT and DATA_DIR."""
    processes, urls = [], []
    try:
        for name in ("a", "b"):
            port = free_port()
            log = open(root / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
            own = env | {"PORT": str(port), "DATA_DIR": str(root / name)}
            processes.append(
                (
                    subprocess.Popen(
                        ["bash", "-c", line],
                        cwd=ROOT,
                        env=own,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                    ),
                    log,
                )
            )
            urls.append(f"http://127.0.0.1:{port}")
        for url, (process, _) in zip(urls, processes, strict=True):

            def healthy(url: str = url, process: subprocess.Popen[bytes] = process) -> bool:
                if process.poll() is not None:
                    logs = "\n".join((root / f"{n}.log").read_text()[-2000:] for n in "ab")
                    raise AssertionError(f"an API server exited:\n{logs}")
                with contextlib.suppress(httpx.HTTPError):
                    return httpx.get(f"{url}/health", timeout=5).status_code == 200
                return False

            wait_for(healthy, START_TIMEOUT)
        yield urls
    finally:
        for process, log in processes:
            process.terminate()
            process.wait(timeout=60)
            log.close()


def run_code(url: str, token: str, session: str, code: str) -> str:
    answer = httpx.post(
        f"{url}/api/tools/python_coder",
        json={"session_id": session, "code": code, "mode": "code"},
        headers={"Authorization": f"Bearer {token}"},
        timeout=180,
    ).json()
    assert answer["success"], answer
    return str(answer["data"]["stdout"])


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="deployment-"))
    bindir = binaries()
    assert bindir is not None, "no PostgreSQL binaries"
    try:
        with postgres(bindir) as database, seaweedfs(root / "s3") as s3:
            s3.client().create_bucket(Bucket="agent-workspaces")
            old = root / "old-data"
            store = SQLiteStore(old / "app.db")
            store.create_user("carol", "not-a-real-hash")
            store.close()
            (root / "replies.json").write_text("[]")
            # As on real machines: not the switch the loopback test cluster needs.
            inherited = dict(os.environ)
            inherited.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
            env = {
                **inherited,
                "RAY_USAGE_STATS_ENABLED": "0",
                # The documented variables, set as they would be on the machines.
                "HEAD_IP": "127.0.0.1",
                "NODE_IP": "127.0.0.1",
                "OLD_DATA_DIR": str(old),
                # The documented settings.
                "DATABASE_URL": database.new_database(),
                "SECRET_KEY": secrets.token_urlsafe(40),
                "EXECUTOR_BACKEND": "ray",
                "RAY_ADDRESS": "127.0.0.1:6379",
                "WORKSPACE_BUCKET": "agent-workspaces",
                "S3_ENDPOINT_URL": s3.endpoint,
                "S3_ACCESS_KEY_ID": s3.access_key,
                "S3_SECRET_ACCESS_KEY": s3.secret_key,
                "HOST": "127.0.0.1",
                # The test's own: a scripted model, a known admin password, a cache here.
                "LLM_BACKEND": "scripted",
                "SCRIPTED_REPLIES": str(root / "replies.json"),
                "ADMIN_PASSWORD": ADMIN_PASSWORD,
                "RAY_CACHE_DIR": str(root / "ray-cache"),
            }
            missing = [name for name in settings_names() if name not in env]
            assert not missing, f"README settings the test does not set: {missing}"
            ran: list[str] = []
            lines = commands()
            for line in lines:
                if "run_backend.py" in line:
                    break
                run(line, env)
                ran.append(line)
            server = next(line for line in lines if "run_backend.py" in line)
            try:
                with api_servers(server, env, root) as (a, b):
                    ran.append(server)
                    token = httpx.post(
                        f"{a}/api/auth/login",
                        json={"username": "admin", "password": ADMIN_PASSWORD},
                    ).json()["access_token"]
                    session = "deployed"
                    first = run_code(a, token, session, "x = 6 * 7\nprint('set', x)")
                    second = run_code(b, token, session, "print('kept', x)")
                    users = httpx.get(
                        f"{b}/api/users/me", headers={"Authorization": f"Bearer {token}"}
                    ).json()
                    with psycopg.connect(env["DATABASE_URL"]) as db:
                        names = sorted(row[0] for row in db.execute("SELECT username FROM users"))
            finally:
                for line in lines[lines.index(server) + 1 :]:
                    run(line, env)
                    ran.append(line)
            print(
                json.dumps(
                    {
                        "ran": ran,
                        "first": first,
                        "second": second,
                        "me": users["username"],
                        "users": names,
                    }
                )
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except AssertionError as exc:
        print(f"deployment check failed: {exc}", file=sys.stderr)
        sys.exit(1)

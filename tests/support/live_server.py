"""Run the real server as a subprocess on 127.0.0.1, as `make run` would."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(port: int, data_dir: Path, **env: str) -> dict[str, str]:
    """A test server's settings: on 127.0.0.1 at `port` with `data_dir`, then `env`."""
    return {
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "DATA_DIR": str(data_dir),
        "LOG_LEVEL": "INFO",
        # The start-up sandbox check costs each start a sandbox (pandas and matplotlib
        # imported in it); the tests of the check, and of what it shows, turn it on.
        "SANDBOX_SELF_CHECK": "false",
        # bcrypt's cost 4, not 12: a sign-in or a new user then costs about a millisecond
        # of CPU, not 0.3 s (most tests sign in, many make users).
        "PASSWORD_HASH_ROUNDS": "4",
        **env,
    }


class LiveServer:
    """One server process; `start()` again after `stop()` reuses its DATA_DIR and port.

    It starts in the repository, or in `cwd` if set before `start()` (where a user's
    `make run` would, with a relative `DATA_DIR` in `env`)."""

    def __init__(self, data_dir: Path, **env: str) -> None:
        self.data_dir = data_dir
        self.cwd = ROOT
        self.port = free_port()
        self.env = server_env(self.port, data_dir, **env)
        self.process: subprocess.Popen[str] | None = None
        self.log_path = data_dir.parent / f"server-{self.port}.log"
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120) -> LiveServer:
        self.starts += 1
        env = {key: value for key, value in os.environ.items() if not key.startswith("OPENAI_")}
        env.update(self.env)
        with self.log_path.open("a") as log:  # the child keeps its own descriptor
            log.write(f"\n--- start {self.starts} ---\n")
            log.flush()
            self.process = subprocess.Popen(
                [sys.executable, str(ROOT / "run_backend.py")],
                cwd=self.cwd,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"server did not become healthy in {timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def kill9(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()

    def token(self, username: str = "admin", password: str | None = None) -> str:
        password = password or self.env["ADMIN_PASSWORD"]
        response = httpx.post(
            f"{self.url}/api/auth/login",
            json={"username": username, "password": password},
            # bcrypt, on a CI machine busy with the other worker and this server's own
            # start-up sandbox check, has taken more than httpx's default 5 s.
            timeout=60,
        )
        response.raise_for_status()
        return str(response.json()["access_token"])

    def has_open(self, path: Path) -> bool:
        """Whether the server's process holds `path` open."""
        assert self.process is not None
        target = str(path.resolve())
        for each in Path(f"/proc/{self.process.pid}/fd").iterdir():
            with contextlib.suppress(OSError):  # closed meanwhile
                if os.readlink(each) == target:
                    return True
        return False

    def client(self, token: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token or self.token()}"}
        kwargs.setdefault("timeout", 60)
        return httpx.Client(base_url=self.url, headers=headers, **kwargs)

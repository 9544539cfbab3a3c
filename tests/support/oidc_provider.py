"""A real OpenID Provider for tests: tests/oidc_provider/provider.mjs (the certified
oidc-provider package) on 127.0.0.1, with the clients and accounts a test gives it.

`make oidc-provider` installs the package from tests/oidc_provider/package-lock.json; nothing
is downloaded when a test runs. The provider's header comment describes its login form
(`<input name="login">`, buttons "Sign in" and "Cancel"), which any account id of
`set_account` passes, with no consent page.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from tests.support.processes import stop_group

ROOT = Path(__file__).resolve().parents[2]
PROVIDER_DIR = ROOT / "tests/oidc_provider"
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
LOG_TAIL_CHARS = 4000


class OidcProvider:
    """One provider process, started on entering the `with` block and stopped on leaving it.

    `clients` are oidc-provider client metadata (client_id, client_secret, redirect_uris,
    token_endpoint_auth_method, ...); `accounts` map an account id to its claims (name, email,
    groups, ...). `start()` again after `stop()` serves the same issuer (port) and keys, with
    no sessions or codes from before."""

    def __init__(
        self,
        tmp_path: Path,
        clients: list[dict[str, Any]],
        accounts: dict[str, dict[str, Any]] | None = None,
        issuer: str | None = None,
    ) -> None:
        self.fixed_issuer = issuer  # behind a proxy: the proxy's URL
        self.root = Path(tempfile.mkdtemp(prefix="oidc-provider-", dir=tmp_path))
        self.clients = clients
        self.accounts_path = self.root / "accounts.json"
        self.config_path = self.root / "config.json"
        self.log_path = self.root / "provider.log"
        self.port = 0  # the system's choice at the first start, kept for the next ones
        self.process: subprocess.Popen[bytes] | None = None
        self._issuer: str | None = None
        self._listening = 0
        self._accounts = dict(accounts or {})
        self._write_accounts()

    def __enter__(self) -> OidcProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def issuer(self) -> str:
        assert self._issuer is not None, "the provider has not started"
        return self._issuer

    def set_account(self, account_id: str, claims: dict[str, Any]) -> None:
        """Add or replace an account; the provider reads it at the next sign-in or token."""
        self._accounts[account_id] = claims
        self._write_accounts()

    def rotate_keys(self) -> str:
        """A new RSA key signs from now on, the older ones stay in the JWKS; returns its kid."""
        response = httpx.post(f"{self.issuer}/test/rotate-keys", timeout=30)
        response.raise_for_status()
        return str(response.json()["kid"])

    def start(self) -> OidcProvider:
        if not (PROVIDER_DIR / "node_modules/oidc-provider").is_dir():
            raise RuntimeError("oidc-provider is not installed: run `make oidc-provider`")
        config = {
            "port": self.port,
            "clients": self.clients,
            "accounts_file": str(self.accounts_path),
            "keys_file": str(self.root / "keys.json"),
        }
        if self.fixed_issuer is not None:
            config["issuer"] = self.fixed_issuer
        self.config_path.write_text(json.dumps(config, indent=2))
        with self.log_path.open("ab") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                ["node", str(PROVIDER_DIR / "provider.mjs"), str(self.config_path)],
                cwd=self.root,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                start_new_session=True,  # its own process group, stopped as a whole
            )
        try:
            self._issuer = self._wait_ready()
        except BaseException:
            self.stop()
            raise
        self.port = self._listening
        return self

    def stop(self) -> None:
        if self.process is not None:
            stop_group(self.process, STOP_TIMEOUT)
            assert self.process.stdout is not None
            self.process.stdout.close()
            self.process = None

    def log(self) -> str:
        """The end of the provider's stderr, for an error message."""
        return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]

    def _write_accounts(self) -> None:
        # Written aside, then renamed: the provider never reads a half-written file.
        partial = self.accounts_path.with_suffix(".partial")
        partial.write_text(json.dumps(self._accounts, indent=2))
        partial.replace(self.accounts_path)

    def _wait_ready(self) -> str:
        """The issuer from the provider's `READY <issuer> <port>` line, read within
        START_TIMEOUT s (the port it listens on is kept in `_listening`)."""
        assert self.process is not None and self.process.stdout is not None
        stdout = self.process.stdout.fileno()
        deadline = time.monotonic() + START_TIMEOUT
        received = b""
        while b"\n" not in received:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(f"no READY after {START_TIMEOUT:g} s:\n{self.log()}")
            if select.select([stdout], [], [], remaining)[0]:
                chunk = os.read(stdout, 4096)
                if not chunk:
                    code = self.process.wait(timeout=STOP_TIMEOUT)
                    raise RuntimeError(f"oidc provider exited with {code}:\n{self.log()}")
                received += chunk
        line = received.split(b"\n", 1)[0].decode()
        word, issuer, port = [*line.split(" "), "", ""][:3]
        if word != "READY" or not port.isdigit():
            raise RuntimeError(f"unexpected line {line!r} from the oidc provider:\n{self.log()}")
        self._listening = int(port)
        return issuer

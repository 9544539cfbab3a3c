"""Tampering with what the sandbox persists, or with its channel to the server.

Variables are restored from the workspace when a worker restarts; the workspace is
writable by hostile code. Nothing restored may execute code, hijack an import, or stop the
session from working.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import stat
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.security.helpers import Secrets, assert_no_secrets, everything, run, stdout, workspace
from tests.support.live_server import LiveServer

KILL_SANDBOX = "import os\nos.kill(-1, 9)\nos.kill(os.getpid(), 9)\n"
KILL_ZYGOTE = "import os\nos.kill(os.getppid(), 9)\nos.kill(os.getpid(), 9)\n"


class Payload:
    """Unpickling this runs a shell command (the classic pickle RCE)."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return (os.system, (self.command,))


def pickle_payload(marker: str) -> bytes:
    return pickle.dumps(Payload(f"echo PWNED > /workspace/{marker}"))


def npy_payload(marker: str) -> bytes:
    buffer = io.BytesIO()
    array = np.array([Payload(f"echo PWNED > /workspace/{marker}"), 1], dtype=object)
    np.save(buffer, array, allow_pickle=True)
    return buffer.getvalue()


# id -> (catalog entry, file name under variables/, file content), given the marker name
Poison = Callable[[str], tuple[dict[str, Any], str, bytes]]
POISONS: dict[str, Poison] = {
    "pickle_format": lambda m: (
        {"name": "evil", "format": "pickle", "file": "variables/evil.pkl"},
        "evil.pkl",
        pickle_payload(m),
    ),
    "npy_object_dtype": lambda m: (
        {"name": "evil", "format": "npy", "file": "variables/evil.npy"},
        "evil.npy",
        npy_payload(m),
    ),
    "json_path_traversal": lambda m: (
        {"name": "evil", "format": "json", "file": "../../secret_key"},
        "unused.json",
        b"null",
    ),
}


@pytest.mark.parametrize("poison", POISONS.values(), ids=POISONS.keys())
def test_poisoned_variables_are_not_executed_on_restore(
    server: LiveServer, secrets: Secrets, sid: str, poison: Poison
) -> None:
    marker = f"pwned-{uuid.uuid4().hex[:8]}"
    entry, filename, content = poison(marker)
    run(server, "x = 41", sid)
    plant = (
        "import json\n"
        "path = 'variables/variables_metadata.json'\n"
        "catalog = json.load(open(path))\n"
        f"catalog['evil'] = {entry!r}\n"
        "json.dump(catalog, open(path, 'w'))\n"
        f"open('variables/{filename}', 'wb').write(bytes.fromhex({content.hex()!r}))\n"
        + KILL_SANDBOX
    )
    run(server, plant, sid)
    catalog = json.loads((workspace(server, sid) / "variables/variables_metadata.json").read_text())
    assert "evil" in catalog, "the poisoned catalog entry was not planted"
    result = run(server, "print(x, 'evil' in globals())", sid)
    assert stdout(result).strip() == "41 False", everything(result)[:2000]
    assert not (workspace(server, sid) / marker).exists(), "the restore ran a pickle payload"
    assert_no_secrets(everything(result), secrets)


MALFORMED_CATALOGS = {
    "entry_not_an_object": "open(path, 'w').write('{\"x\": 1}')",
    "deeply_nested_json": "open(path, 'w').write('[' * 100000)",
    "catalog_is_a_fifo": "import os\nos.unlink(path)\nos.mkfifo(path)",
}


@pytest.mark.parametrize("plant", MALFORMED_CATALOGS.values(), ids=MALFORMED_CATALOGS.keys())
def test_malformed_catalog_does_not_brick_the_session(
    server: LiveServer, sid: str, plant: str
) -> None:
    run(server, "x = 41", sid)
    run(server, f"path = 'variables/variables_metadata.json'\n{plant}\n{KILL_SANDBOX}", sid)
    catalog = workspace(server, sid) / "variables" / "variables_metadata.json"
    try:
        result = run(server, "print('still-works')", sid, http_timeout=10)
    except httpx.TimeoutException:
        pytest.fail("the session hung (over 10 s) restarting from a planted catalog")
    finally:
        _unblock_fifo(catalog)
    assert stdout(result).strip() == "still-works", result


def _unblock_fifo(path: Path) -> None:
    """If a worker is stuck opening the planted FIFO, feed it an empty catalog."""
    if not stat.S_ISFIFO(path.lstat().st_mode):
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return  # nobody is waiting on it
    try:
        os.write(fd, b"{}")
    finally:
        os.close(fd)


HIJACK_MODULES = [
    "json",
    "sitecustomize",
    "usercustomize",
    "variables",
    "numpy",
    "pandas",
    "matplotlib",
    "site",
    "os",
]


@pytest.mark.parametrize("restart", [KILL_ZYGOTE, KILL_SANDBOX], ids=["zygote", "sandbox"])
def test_planted_modules_are_not_imported(server: LiveServer, sid: str, restart: str) -> None:
    plant = "".join(
        f"open('{name}.py', 'w').write(\"open('/workspace/HIJACKED-{name}', 'w').write('x'); "
        "print('HIJACKED')\\n\")\n"
        for name in HIJACK_MODULES
    )
    run(server, plant + "print('PLANTED')", sid)
    assert (workspace(server, sid) / "json.py").exists()
    run(server, restart, sid)
    result = run(
        server,
        "import json, sys\nprint(json.dumps([1]))\nprint('SYSPATH', sys.path)\n"
        "import numpy, pandas, matplotlib\n",
        sid,
    )
    text = everything(result)
    assert "[1]" in stdout(result), text[:2000]
    assert "HIJACKED" not in text
    hijacked = sorted(p.name for p in workspace(server, sid).glob("HIJACKED-*"))
    assert hijacked == [], f"planted modules ran: {hijacked}"
    syspath = stdout(result).split("SYSPATH", 1)[1].splitlines()[0]
    assert "'/workspace'" not in syspath and "''" not in syspath, syspath


CRASHES = {
    "system_exit": "raise SystemExit(0)",
    "os_exit": "import os\nos._exit(0)",
    "segfault": "import ctypes\nctypes.string_at(0)",
    "poisoned_builtins": "import builtins\nbuiltins.print = None\nraise RuntimeError('boom')",
}


@pytest.mark.parametrize("crash", CRASHES.values(), ids=CRASHES.keys())
def test_failed_run_rolls_back_state(server: LiveServer, sid: str, crash: str) -> None:
    run(server, "x = 41", sid)
    result = run(server, f"x = 0\n{crash}", sid)
    assert not result["success"], result
    follow_up = run(server, "print(x)", sid)
    assert follow_up["success"], follow_up
    assert stdout(follow_up).strip() == "41", follow_up


FORGED = {
    "id": "forged",
    "ok": True,
    "stdout": "FORGED-OUTPUT\n",
    "stderr": "",
    "files": ["../../secret_key"],
    "figures": [],
    "variables": [],
}
# id -> a Python expression, evaluated in the sandbox, for the bytes to inject
CHANNEL_WRITES = {
    "forged_response": repr((json.dumps(FORGED) + "\n").encode()),
    "json_not_an_object": repr(b"[1]\n"),
    "garbage_without_newline": "b'A' * (20 * 1024 * 1024)",
}


@pytest.mark.parametrize("payload", CHANNEL_WRITES.values(), ids=CHANNEL_WRITES.keys())
def test_run_cannot_inject_into_the_server_channel(
    server: LiveServer, sid: str, payload: str
) -> None:
    """Writing into every inherited socket must not change what later runs report."""
    code = (
        "import os, socket, stat, time\n"
        f"payload = {payload}\n"
        "for fd in range(3, 64):\n"
        "    try:\n"
        "        if not stat.S_ISSOCK(os.fstat(fd).st_mode):\n"
        "            continue\n"
        "    except OSError:\n"
        "        continue\n"
        "    sock = socket.socket(fileno=os.dup(fd))\n"
        "    sent, deadline = 0, time.monotonic() + 1\n"
        "    while sent < len(payload) and time.monotonic() < deadline:\n"
        "        try:\n"
        "            sent += sock.send(payload[sent:], socket.MSG_DONTWAIT)\n"
        "        except BlockingIOError:\n"
        "            time.sleep(0.01)\n"
        "        except OSError:\n"
        "            break\n"
        "    sock.close()\n"
        "    print('WROTE', fd, sent)\n"
        "print('REAL-OUTPUT')\n"
    )
    run(server, code, sid)  # asserts HTTP 200: the server must not choke on it
    for attempt in ("NEXT-ONE", "NEXT-TWO"):
        follow_up = run(server, f"print({attempt!r})", sid)
        assert stdout(follow_up).strip() == attempt, (
            f"a later run got another run's result: {follow_up['data']['stdout'][:200]!r}"
        )
        assert "../../secret_key" not in follow_up["data"]["files"]

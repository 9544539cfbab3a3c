"""The sandbox's view of the file system: host secrets unreachable, host files unwritable."""

from __future__ import annotations

import shutil
import sysconfig
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from backend.storage.workspaces import MAX_LISTED
from backend.tools.sandbox.command import WORKER_DIR
from tests.security.helpers import (
    ROOT,
    Secrets,
    assert_no_secrets,
    client,
    everything,
    new_session,
    run,
    stdout,
    workspace,
)
from tests.support.live_server import LiveServer

READ = """
try:
    with open({path!r}, 'rb') as handle:
        data = handle.read(200000)
    print('ESCAPED:' + data.decode('utf-8', 'replace'))
except Exception as exc:
    print('BLOCKED:' + type(exc).__name__)
"""

# id -> (path as the sandbox should try it, text that must not come back)
Target = Callable[[LiveServer, Secrets], tuple[str, str]]
READ_TARGETS: dict[str, Target] = {
    "etc_passwd": lambda s, k: ("/etc/passwd", "root:x:0:0"),
    "etc_shadow": lambda s, k: ("/etc/shadow", "root:"),
    "secret_key_absolute": lambda s, k: (str(s.data_dir / "secret_key"), k.secret_key),
    "secret_key_relative": lambda s, k: ("../../secret_key", k.secret_key),
    "secret_key_via_proc1_root": lambda s, k: (
        f"/proc/1/root{s.data_dir / 'secret_key'}",
        k.secret_key,
    ),
    "app_db_absolute": lambda s, k: (str(s.data_dir / "app.db"), "SQLite format 3"),
}


@pytest.mark.parametrize("target", READ_TARGETS.values(), ids=READ_TARGETS.keys())
def test_host_file_is_unreadable(
    server: LiveServer, secrets: Secrets, sid: str, target: Target
) -> None:
    path, forbidden = target(server, secrets)
    result = run(server, READ.format(path=path), sid)
    text = everything(result)
    assert "BLOCKED:" in stdout(result), text[:2000]
    assert "ESCAPED:" not in text
    assert forbidden not in text
    assert_no_secrets(text, secrets)


def test_other_sessions_workspace_is_invisible(
    server: LiveServer, secrets: Secrets, sid: str
) -> None:
    victim = new_session("victim")
    marker = f"PRIVATE-{uuid.uuid4().hex}"
    own = run(
        server,
        f"open('outputs/private.txt', 'w').write({marker!r})\n"
        "print(open('outputs/private.txt').read())",
        victim,
    )
    assert marker in stdout(own), own  # the victim itself can read it
    host_copy = workspace(server, victim) / "outputs" / "private.txt"
    assert host_copy.read_text() == marker
    paths = [
        f"../{victim}/outputs/private.txt",
        f"/workspace/../{victim}/outputs/private.txt",
        str(host_copy),
        f"/proc/1/root{host_copy}",
    ]
    code = "import os\nprint('LISTING', sorted(os.listdir('..')))\n" + "".join(
        READ.format(path=path) for path in paths
    )
    result = run(server, code, sid)
    text = everything(result)
    assert stdout(result).count("BLOCKED:") == len(paths), text[:3000]
    assert "ESCAPED:" not in text
    assert marker not in text
    assert victim not in stdout(result).split("LISTING", 1)[1].splitlines()[0]
    assert_no_secrets(text, secrets)


ENVIRONMENTS = {
    "proc_self_environ": "print(open('/proc/self/environ', 'rb').read().decode())",
    "every_process_environ": (
        "import os\n"
        "for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
        "    try:\n"
        "        print(pid, open(f'/proc/{pid}/environ', 'rb').read().decode())\n"
        "    except OSError as exc:\n"
        "        print(pid, 'BLOCKED:' + type(exc).__name__)\n"
        "print('PATH=' + os.environ['PATH'])"
    ),
}


@pytest.mark.parametrize("code", ENVIRONMENTS.values(), ids=ENVIRONMENTS.keys())
def test_environment_holds_no_server_secrets(
    server: LiveServer, secrets: Secrets, sid: str, code: str
) -> None:
    result = run(server, code, sid)
    text = everything(result)
    assert "PATH" in stdout(result), text[:2000]  # the environment really was read
    assert_no_secrets(text, secrets)
    for name in ("ADMIN_PASSWORD", "SECRET_KEY", "OPENAI", "REDTEAM_CANARY", "DATA_DIR", "PORT"):
        assert name not in text, f"{name} is in the sandbox's environment"


def test_inherited_descriptors_lead_nowhere_outside(
    server: LiveServer, secrets: Secrets, sid: str
) -> None:
    code = """
import os, select, stat
for fd in sorted(int(n) for n in os.listdir('/proc/self/fd')):
    try:
        mode = os.fstat(fd).st_mode
        target = os.readlink(f'/proc/self/fd/{fd}')
    except OSError:
        continue  # the descriptor listdir itself used
    kind = ('dir' if stat.S_ISDIR(mode) else 'reg' if stat.S_ISREG(mode) else
            'chr' if stat.S_ISCHR(mode) else 'fifo' if stat.S_ISFIFO(mode) else
            'sock' if stat.S_ISSOCK(mode) else 'other')
    print('FD', fd, kind, target)
for fd in range(3, 21):
    try:
        if select.select([fd], [], [], 0)[0]:
            print('READ', fd, os.read(fd, 65536))
    except OSError as exc:
        print('READ', fd, 'BLOCKED:' + type(exc).__name__)
"""
    result = run(server, code, sid)
    text = everything(result)
    fds = [line.split(maxsplit=3) for line in stdout(result).splitlines() if line.startswith("FD")]
    assert fds, text[:2000]
    assert len(fds) <= 32, f"too many inherited descriptors: {fds}"
    for _, fd, kind, target in fds:
        assert kind != "dir", f"fd {fd} is a directory ({target}): openat() could walk from it"
        if kind == "reg":
            assert target.startswith("/workspace/"), f"fd {fd} is a host file: {target}"
        if kind == "chr":
            assert target in ("/dev/null", "/dev/zero", "/dev/urandom"), (fd, target)
    assert_no_secrets(text, secrets)


# id -> (path inside the sandbox, the host path it must not create, must the write fail?)
WriteTarget = Callable[[LiveServer, str], tuple[str, Path, bool]]
PURELIB = sysconfig.get_paths()["purelib"]
STDLIB = sysconfig.get_paths()["stdlib"]
WRITE_TARGETS: dict[str, WriteTarget] = {
    "usr_bin": lambda s, n: (f"/usr/bin/{n}", Path(f"/usr/bin/{n}"), True),
    "opt_sandbox_worker_dir": lambda s, n: (f"/opt/sandbox/{n}.py", WORKER_DIR / f"{n}.py", True),
    "venv_site_packages_pth": lambda s, n: (
        f"{PURELIB}/{n}.pth",
        Path(PURELIB) / f"{n}.pth",
        True,
    ),
    "etc": lambda s, n: (f"/etc/{n}", Path(f"/etc/{n}"), False),
    "server_source_dir": lambda s, n: (
        str(ROOT / "backend" / f"{n}.py"),
        ROOT / "backend" / f"{n}.py",
        False,
    ),
}


@pytest.mark.parametrize("target", WRITE_TARGETS.values(), ids=WRITE_TARGETS.keys())
def test_write_outside_workspace_never_reaches_the_host(
    server: LiveServer, sid: str, target: WriteTarget
) -> None:
    name = f"rt-pwned-{uuid.uuid4().hex[:8]}"
    inside, host, must_fail = target(server, name)
    assert not host.exists()
    code = (
        "try:\n"
        f"    open({inside!r}, 'w').write('import os; PWNED = 1\\n')\n"
        "    print('WROTE')\n"
        "except Exception as exc:\n"
        "    print('BLOCKED:' + type(exc).__name__)\n"
        "open('/tmp/ok.txt', 'w').write('tmp is fine')\n"
        "print('TMP_OK')\n"
    )
    result = run(server, code, sid)
    try:
        assert not host.exists(), f"the sandbox wrote {host} on the host"
    finally:
        host.unlink(missing_ok=True)
    assert "TMP_OK" in stdout(result), result
    if must_fail:
        assert "BLOCKED:OSError" in stdout(result), everything(result)[:2000]


def test_pandas_cannot_read_host_files(server: LiveServer, secrets: Secrets, sid: str) -> None:
    paths = ["/etc/passwd", str(server.data_dir / "secret_key"), "../../secret_key"]
    code = "import pandas as pd\n" + "".join(
        "try:\n"
        f"    print('ESCAPED:', pd.read_csv({path!r}, header=None).to_string())\n"
        "except Exception as exc:\n"
        "    print('BLOCKED:' + type(exc).__name__)\n"
        for path in paths
    )
    result = run(server, code, sid)
    text = everything(result)
    assert stdout(result).count("BLOCKED:") == len(paths), text[:2000]
    assert "ESCAPED" not in text and "root:x:0:0" not in text
    assert_no_secrets(text, secrets)


def test_matplotlib_cannot_save_outside_workspace(server: LiveServer, sid: str) -> None:
    name = f"rt-plot-{uuid.uuid4().hex[:8]}.png"
    targets = {
        f"/opt/sandbox/{name}": WORKER_DIR / name,
        str(server.data_dir / name): server.data_dir / name,
        f"{PURELIB}/{name}": Path(PURELIB) / name,
    }
    code = "import matplotlib.pyplot as plt\nfig, ax = plt.subplots()\nax.plot([1, 2])\n" + "".join(
        "try:\n"
        f"    fig.savefig({inside!r})\n"
        f"    print('WROTE', {inside!r})\n"
        "except Exception as exc:\n"
        "    print('BLOCKED:' + type(exc).__name__)\n"
        for inside in targets
    )
    result = run(server, code, sid)
    try:
        for host in targets.values():
            assert not host.exists(), f"matplotlib wrote {host} on the host"
    finally:
        for host in targets.values():
            host.unlink(missing_ok=True)
    # The read-only mounts refuse; the host data dir is simply not there.
    assert stdout(result).count("BLOCKED:") >= 2, everything(result)[:2000]


def test_sparse_terabyte_file_is_refused(server: LiveServer, sid: str) -> None:
    before = shutil.disk_usage(server.data_dir).used
    code = (
        "try:\n"
        "    with open('huge.bin', 'wb') as handle:\n"
        "        handle.seek(10**12)\n"
        "        handle.write(b'x')\n"
        "    print('ESCAPED: wrote a 1 TB file')\n"
        "except OSError as exc:\n"
        "    print('BLOCKED:' + type(exc).__name__, exc.errno)\n"
    )
    result = run(server, code, sid)
    assert "BLOCKED:OSError 27" in stdout(result), everything(result)[:2000]  # EFBIG
    huge = workspace(server, sid) / "huge.bin"
    if huge.exists():
        assert huge.stat().st_size <= 64 * 1024 * 1024
    assert shutil.disk_usage(server.data_dir).used - before < 200 * 1024 * 1024


def test_inode_flood_is_limited(server: LiveServer, sid: str) -> None:
    """A run that leaves more files than the workspace's limit fails for that reason, well
    inside its time limit (10 100 empty files take well under a second)."""
    code = (
        "import os\nos.makedirs('flood', exist_ok=True)\n"
        "for i in range(10_100):\n    open(f'flood/{i}', 'w').close()\nprint('FLOODED')"
    )
    try:
        result = run(server, code, sid)
        assert not result["success"], "nothing limited the flood of 10 100 files"
        assert "more than 10000 files" in (result["error"] or ""), result["error"]
    finally:
        shutil.rmtree(workspace(server, sid) / "flood", ignore_errors=True)


def test_file_listing_stays_bounded_after_inode_flood(server: LiveServer, sid: str) -> None:
    code = (
        "import os\nos.makedirs('flood', exist_ok=True)\n"
        "for i in range(20000):\n    open(f'flood/{i}', 'w').close()\nprint('FLOODED')"
    )
    try:
        run(server, code, sid, timeout=5)
        listing = client(server).get(f"/api/sessions/{sid}/files", timeout=30)
        assert listing.status_code == 200, listing.text[:500]
        assert len(listing.json()) <= MAX_LISTED, (
            f"the listing returned {len(listing.json())} entries, over MAX_LISTED={MAX_LISTED}"
        )
    except httpx.TimeoutException:
        pytest.fail("listing the flooded workspace took over 30 s")
    finally:
        shutil.rmtree(workspace(server, sid) / "flood", ignore_errors=True)

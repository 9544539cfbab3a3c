"""Processes: bombs, signals, daemons, shells, namespaces and terminals stay in the sandbox."""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.security.helpers import (
    SLACK,
    Secrets,
    assert_no_secrets,
    assert_x_kept,
    everything,
    run,
    set_x,
    stdout,
    workspace,
)
from tests.support.live_server import LiveServer
from tests.support.waiting import wait_for


@pytest.fixture
def host_canary() -> Iterator[subprocess.Popen[bytes]]:
    """A process on the host that no signal from the sandbox may reach."""
    process = subprocess.Popen(["sleep", "300"])
    try:
        yield process
    finally:
        process.kill()
        process.wait()


FORK_BOMBS = {
    "plain": (
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    ),
    "setsid_escapes_group": (
        "import os\nwhile True:\n    try:\n        if os.fork() == 0:\n            os.setsid()\n"
        "    except OSError:\n        pass"
    ),
}


@pytest.mark.parametrize("bomb", FORK_BOMBS.values(), ids=FORK_BOMBS.keys())
def test_fork_bomb_is_stopped(
    server: LiveServer, sid: str, bomb: str, host_canary: subprocess.Popen[bytes]
) -> None:
    set_x(server, sid)
    result = run(server, bomb, sid, timeout=3)
    assert not result["success"]
    assert result["wall"] < 3 + SLACK, f"took {result['wall']:.1f} s"
    assert host_canary.poll() is None
    assert_x_kept(server, sid)
    count = run(
        server, "import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))", sid
    )
    assert int(stdout(count)) <= 8, f"bomb processes survived: {stdout(count)}"


# Forks until refused, holding every child, then waits (briefly) for the test's go-ahead.
HOLDING_BOMB = (
    "import os, time\nforks = 0\nwhile True:\n    try:\n        pid = os.fork()\n"
    "    except OSError:\n        break\n    if pid == 0:\n        time.sleep(60)\n"
    "        os._exit(0)\n    forks += 1\nopen('at-peak', 'w').close()\n"
    "deadline = time.monotonic() + 3\n"
    "while not os.path.exists('release') and time.monotonic() < deadline:\n"
    "    time.sleep(0.01)\nprint('forks', forks)\n"
)


def test_a_fork_bomb_leaves_another_users_sandbox_able_to_fork(
    server: LiveServer, sid: str
) -> None:
    """The process limit is per sandbox and absolute: a bomb at its peak takes nothing
    from another user's sandbox, which starts and forks as usual meanwhile."""
    name = f"procs-{uuid.uuid4().hex[:8]}"
    with server.client() as admin:
        made = admin.post("/api/users", json={"username": name, "password": f"{name}-pass"})
    assert made.status_code == 201, made.text
    other = server.client(server.token(name, f"{name}-pass"))
    with other, ThreadPoolExecutor(1) as pool:
        bomb = pool.submit(run, server, HOLDING_BOMB, sid, 5)
        peak = workspace(server, sid) / "at-peak"
        wait_for(lambda: peak.exists() or bomb.done(), timeout=30)
        assert peak.exists(), bomb.result()
        code = (
            "import subprocess\n"
            "print(sum(subprocess.run(['true']).returncode == 0 for _ in range(20)))\n"
        )
        reply = other.post("/api/tools/python_coder", json={"session_id": "forks", "code": code})
        (workspace(server, sid) / "release").touch()
        assert reply.status_code == 200, reply.text
        assert reply.json()["data"]["stdout"] == "20\n", reply.json()
        bombed = stdout(bomb.result())
    forks = int(bombed.split()[-1])
    assert 0 < forks < 128, f"one sandbox held {forks} processes (SANDBOX_MAX_PROCESSES: 128)"


KILLS = {
    "parent_zygote": "os.kill(os.getppid(), 9)",
    "keeper": "os.kill(int(open(f'/proc/{os.getppid()}/stat').read().split()[3]), 9)",
    "everything_minus_one": "os.kill(-1, 9)",
    "own_process_group": "os.killpg(0, 9)",
}


@pytest.mark.parametrize("kill", KILLS.values(), ids=KILLS.keys())
def test_killing_sandbox_processes_is_recovered(
    server: LiveServer, sid: str, kill: str, host_canary: subprocess.Popen[bytes]
) -> None:
    set_x(server, sid)
    result = run(server, f"import os\n{kill}\nimport time\ntime.sleep(1)", sid)
    assert result["wall"] < 5 + SLACK, f"took {result['wall']:.1f} s"
    assert host_canary.poll() is None, "a signal from the sandbox reached a host process"
    assert server.process is not None and server.process.poll() is None
    assert_x_kept(server, sid)


def test_shell_runs_only_inside_the_sandbox(server: LiveServer, secrets: Secrets, sid: str) -> None:
    key = server.data_dir / "secret_key"
    command = f"id; cat {key}; cat /etc/passwd; ls -la {server.data_dir}; cat ../../secret_key"
    code = (
        "import subprocess\n"
        f"done = subprocess.run(['sh', '-c', {command!r}], capture_output=True, text=True)\n"
        "print('OUT', done.stdout)\nprint('ERR', done.stderr)\n"
    )
    result = run(server, code, sid)
    text = everything(result)
    assert "uid=" in stdout(result), text[:2000]  # the shell ran...
    assert "root:x:0:0" not in text  # ...and saw nothing of the host
    assert "app.db" not in stdout(result).split("ERR", 1)[0]
    assert_no_secrets(text, secrets)


# A daemon detaches properly: it closes the run's pipes, so the run can return at once. It
# writes its marker DAEMON_DELAY s later: long enough that a run which waited for it is told
# apart from a slow start on a busy machine.
DAEMON_DELAY = 10
LATER = str(DAEMON_DELAY)
DETACH = "    os.closerange(0, 256)\n"
DAEMONS = {
    "fork": (
        "import os, time\n"
        "if os.fork() == 0:\n" + DETACH + "    time.sleep(" + LATER + ")\n"
        "    open('/workspace/{marker}', 'w').write('daemon')\n"
        "    os._exit(0)\n"
        "print('PARENT_RETURNED')\n"
    ),
    "double_fork_setsid": (
        "import os, time\n"
        "if os.fork() == 0:\n" + DETACH + "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        time.sleep(" + LATER + ")\n"
        "        open('/workspace/{marker}', 'w').write('daemon')\n"
        "    os._exit(0)\n"
        "print('PARENT_RETURNED')\n"
    ),
    "fork_then_fail": (
        "import os, time, signal\n"
        "if os.fork() == 0:\n" + DETACH + "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "    time.sleep(" + LATER + ")\n"
        "    open('/workspace/{marker}', 'w').write('daemon')\n"
        "    os._exit(0)\n"
        "print('PARENT_RETURNED')\n"
        "raise RuntimeError('fail on purpose')\n"
    ),
    "thread": (
        "import threading, time\n"
        "def later():\n"
        "    time.sleep(" + LATER + ")\n"
        "    open('/workspace/{marker}', 'w').write('thread')\n"
        "threading.Thread(target=later, daemon=True).start()\n"
        "print('PARENT_RETURNED')\n"
    ),
}


@pytest.mark.parametrize("daemon", DAEMONS.values(), ids=DAEMONS.keys())
def test_leftover_daemon_is_swept(server: LiveServer, sid: str, daemon: str) -> None:
    marker = f"daemon-{uuid.uuid4().hex[:8]}"
    result = run(server, daemon.replace("{marker}", marker), sid)
    assert "PARENT_RETURNED" in stdout(result), everything(result)[:2000]
    assert result["wall"] < DAEMON_DELAY, "the run waited for its daemon"
    time.sleep(DAEMON_DELAY + 2)  # past the moment the daemon, had it lived, would write
    assert not (workspace(server, sid) / marker).exists(), (
        "code left behind by a finished run kept running and wrote into the workspace"
    )


def test_ignoring_sigterm_does_not_survive_timeout(server: LiveServer, sid: str) -> None:
    set_x(server, sid)
    code = (
        "import signal\n"
        "for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGXCPU):\n"
        "    signal.signal(sig, signal.SIG_IGN)\n"
        "signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals) - {signal.SIGKILL})\n"
        "x = 0\n"
        "while True:\n"
        "    pass\n"
    )
    result = run(server, code, sid, timeout=3)
    assert not result["success"]
    assert "TimeoutError" in str(result["error"]), result["error"]
    assert result["wall"] < 3 + SLACK
    assert_x_kept(server, sid)


NAMESPACES = {
    "ctypes_unshare_user": (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "ok = libc.unshare(0x10000000) == 0\nerr = ctypes.get_errno()"
    ),
    "unshare_binary": (
        "import subprocess\n"
        "done = subprocess.run(['unshare', '-r', 'id'], capture_output=True, text=True)\n"
        "ok, err = done.returncode == 0, done.stderr.strip()"
    ),
    "nested_bwrap": (
        "import subprocess\n"
        "done = subprocess.run(['bwrap', '--ro-bind', '/', '/', 'id'], capture_output=True,"
        " text=True)\nok, err = done.returncode == 0, done.stderr.strip()"
    ),
}


@pytest.mark.parametrize("attempt", NAMESPACES.values(), ids=NAMESPACES.keys())
def test_no_new_namespaces_or_mounts(server: LiveServer, sid: str, attempt: str) -> None:
    code = f"{attempt}\nprint(('ESCAPED:' if ok else 'BLOCKED:') + str(err))\n"
    result = run(server, code, sid)
    assert "BLOCKED:" in stdout(result), everything(result)[:2000]
    assert "ESCAPED" not in stdout(result)


def test_tiocsti_terminal_injection_fails(server: LiveServer, sid: str) -> None:
    code = (
        "import fcntl, os, termios\n"
        "fds = [0, 1, 2]\n"
        "try:\n"
        "    fds.append(os.open('/dev/tty', os.O_RDWR))\n"
        "except OSError as exc:\n"
        "    print('BLOCKED:tty-open', type(exc).__name__)\n"
        "for fd in fds:\n"
        "    try:\n"
        "        fcntl.ioctl(fd, termios.TIOCSTI, b'x')\n"
        "        print('ESCAPED: injected into fd', fd)\n"
        "    except OSError as exc:\n"
        "        print('BLOCKED:' + type(exc).__name__, fd)\n"
    )
    result = run(server, code, sid)
    assert "ESCAPED" not in stdout(result), stdout(result)
    assert stdout(result).count("BLOCKED:") == 4, everything(result)[:2000]

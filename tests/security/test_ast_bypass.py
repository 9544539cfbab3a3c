"""Python-level tricks that dodge an AST filter still cannot hurt the host.

AST_PREFILTER is off, so each trick really reaches os.system/subprocess/ctypes (the
snippet prints REACHED to prove it). What it can then do is the sandbox's business:
no host file, no secret, no server state may come back.
"""

from __future__ import annotations

import pytest

from tests.security.helpers import Secrets, assert_no_secrets, everything, run, stdout
from tests.support.live_server import LiveServer

PASSWD_LINE = "root:x:0:0"
SQLITE_HEADER = "SQLite format 3"


def shell_command(server: LiveServer) -> str:
    """What a hostile snippet would like to run: read host secrets by every path it knows."""
    data = server.data_dir
    return (
        f"cat /etc/passwd /etc/shadow {data}/secret_key {data}/app.db ../../secret_key "
        f"../../app.db /proc/1/root{data}/secret_key; ls -la {data}; echo SHELL_DONE"
    )


# Each snippet binds `f` to something that runs a shell command, using a trick an AST
# filter would have to catch; the common tail prints REACHED and runs CMD.
BYPASSES = {
    "dunder_import_concat": "f = __import__('o' + 's').system",
    "getattr_builtins_import": "f = getattr(__builtins__, '__imp' + 'ort__')('os').system",
    "importlib_import_module": "f = __import__('importlib').import_module('o' + 's').system",
    "sys_modules_os": "import sys\nf = sys.modules['os'].system",
    "subclasses_walk_wrap_close": (
        "w = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close']\n"
        "f = w[0].__init__.__globals__['system']"
    ),
    "vars_builtins": (
        "import builtins\nf = vars(builtins)['__import__']('subprocess').getoutput\n"
        "g = f\nf = lambda c: print(g(c))"
    ),
    "ctypes_libc_system": (
        "import ctypes\nlibc = ctypes.CDLL(None)\nf = lambda c: libc.system(c.encode())"
    ),
    "pickle_loads_rce": (
        "import pickle\n"
        'f = lambda c: pickle.loads(b"cos\\nsystem\\n(S\'" + c.encode() + b"\'\\ntR.")'
    ),
}


@pytest.mark.parametrize("trick", BYPASSES.values(), ids=BYPASSES.keys())
def test_bypass_reaches_os_but_not_the_host(
    server: LiveServer, secrets: Secrets, sid: str, trick: str
) -> None:
    code = f"{trick}\nprint('REACHED')\nf({shell_command(server)!r})\n"
    result = run(server, code, sid)
    text = everything(result)
    assert "REACHED" in stdout(result), f"the trick did not run at all: {text[:2000]}"
    assert "SHELL_DONE" in text, f"the shell command did not run: {text[:2000]}"
    assert PASSWD_LINE not in text
    assert SQLITE_HEADER not in text
    assert_no_secrets(text, secrets)


def test_decorator_exec_format_trick(server: LiveServer, secrets: Secrets, sid: str) -> None:
    statement = f"import os; print('REACHED'); os.system({shell_command(server)!r})"
    assert "{" not in statement and '"' not in statement
    code = f'@exec\n@"{statement}".format\nclass A:\n    pass\n'
    result = run(server, code, sid)
    text = everything(result)
    assert "REACHED" in stdout(result), text[:2000]
    assert "SHELL_DONE" in text, text[:2000]
    assert PASSWD_LINE not in text
    assert SQLITE_HEADER not in text
    assert_no_secrets(text, secrets)


def test_execv_replacing_the_run_with_a_shell(
    server: LiveServer, secrets: Secrets, sid: str
) -> None:
    code = (
        "import os\nprint('REACHED')\n"
        f"os.execv('/bin/sh', ['sh', '-c', {shell_command(server)!r}])\n"
    )
    result = run(server, code, sid)
    text = everything(result)
    assert "REACHED" in stdout(result), text[:2000]
    assert "SHELL_DONE" in text, text[:2000]
    assert not result["success"]  # the run never reported a result: it became a shell
    assert PASSWD_LINE not in text
    assert SQLITE_HEADER not in text
    assert_no_secrets(text, secrets)
    follow_up = run(server, "print('still-works')", sid)
    assert stdout(follow_up).strip() == "still-works", follow_up


def test_format_string_globals_reveal_no_server_secrets(
    server: LiveServer, secrets: Secrets, sid: str
) -> None:
    code = (
        "import sys\n"
        "def f():\n    pass\n"
        'print("{0.__globals__}".format(f))\n'
        "for name in ('__main__', 'variables', 'builtins'):\n"
        "    print(name, '{0.__dict__}'.format(sys.modules[name])[:200000])\n"
        "print('REACHED')\n"
    )
    result = run(server, code, sid)
    text = everything(result)
    assert "REACHED" in stdout(result), text[:2000]
    assert "OUTPUT_CAP" in text, "the worker's module globals were not reached"
    assert_no_secrets(text, secrets)
    assert "ADMIN_PASSWORD" not in text and "SECRET_KEY" not in text


def test_frame_walk_reveals_no_server_secrets(
    server: LiveServer, secrets: Secrets, sid: str
) -> None:
    code = (
        "import sys\n"
        "frame = sys._getframe(0)\n"
        "while frame is not None:\n"
        "    print('FRAME', frame.f_code.co_name, sorted(frame.f_globals)[:80])\n"
        "    for key, value in list(frame.f_locals.items()):\n"
        "        print('   ', key, repr(value)[:5000])\n"
        "    frame = frame.f_back\n"
        "print('caller globals', sorted(sys._getframe(1).f_globals))\n"
        "print('REACHED')\n"
    )
    result = run(server, code, sid)
    text = everything(result)
    assert "REACHED" in stdout(result), text[:2000]
    # The walk got into the worker's own frames, where its configuration lives.
    assert "max_memory_mb" in text and "keeper_pid" in text, text[:3000]
    assert_no_secrets(text, secrets)
    assert "ADMIN_PASSWORD" not in text and "SECRET_KEY" not in text


def test_memory_of_every_sandbox_process_holds_no_server_secret(
    server: LiveServer, secrets: Secrets, sid: str
) -> None:
    """Scan the memory of every other sandbox process (keeper, zygote) for the host's secrets.

    The secrets travel XOR-masked, so only this run (which skips itself) ever holds them
    in clear: a hit anywhere else means the server handed a secret to the sandbox.
    """
    import os

    needles = [value.encode() for value in secrets.values().values()]
    pad = os.urandom(max(len(n) for n in needles))
    masked = [bytes(a ^ b for a, b in zip(n, pad, strict=False)).hex() for n in needles]
    code = (
        "import os\n"
        f"pad = bytes.fromhex({pad.hex()!r})\n"
        f"needles = [bytes(a ^ b for a, b in zip(bytes.fromhex(h), pad)) for h in {masked!r}]\n"
        "me = os.getpid()\n"
        "found, scanned, processes = [], 0, 0\n"
        "for pid in [p for p in os.listdir('/proc') if p.isdigit() and int(p) != me]:\n"
        "    try:\n"
        "        maps = open(f'/proc/{pid}/maps').read().splitlines()\n"
        "        mem = open(f'/proc/{pid}/mem', 'rb', 0)\n"
        "    except OSError as exc:\n"
        "        print('NOACCESS', pid, type(exc).__name__)\n"
        "        continue\n"
        "    processes += 1\n"
        "    for line in maps:\n"
        "        span, perms = line.split()[:2]\n"
        "        if 'r' not in perms:\n"
        "            continue\n"
        "        start, end = (int(x, 16) for x in span.split('-'))\n"
        "        position = start\n"
        "        while position < end:\n"
        "            size = min(end - position, 8 << 20)\n"
        "            try:\n"
        "                mem.seek(position)\n"
        "                chunk = mem.read(size + 256)\n"
        "            except (OSError, ValueError, OverflowError):\n"
        "                break\n"
        "            scanned += len(chunk)\n"
        "            for index, needle in enumerate(needles):\n"
        "                if needle in chunk:\n"
        "                    found.append((pid, index))\n"
        "            position += size\n"
        "    mem.close()\n"
        "print('PROCESSES', processes, 'SCANNED', scanned)\n"
        "print('FOUND', sorted(set(found)))\n"
    )
    result = run(server, code, sid, timeout=5)
    text = everything(result)
    assert result["success"], text[:3000]
    assert "FOUND []" in stdout(result), f"a sandbox process holds a host secret: {text[:3000]}"
    words = stdout(result).split()
    processes = int(words[words.index("PROCESSES") + 1])
    scanned = int(words[words.index("SCANNED") + 1])
    unreadable = stdout(result).count("NOACCESS")
    # The keeper and the zygote are undumpable, so a run cannot even read them;
    # anything it could read was scanned in full and held no secret.
    assert processes + unreadable >= 2, text[:3000]
    assert processes == 0 or scanned > 1_000_000, text[:3000]

"""Resource exhaustion: memory, disk, CPU, time and output are all bounded."""

from __future__ import annotations

import pytest

from tests.security.helpers import (
    SLACK,
    assert_x_kept,
    everything,
    run,
    set_x,
    stdout,
    workspace,
)
from tests.support.live_server import LiveServer

OUTPUT_LIMIT = 1_200_000
TRUNCATION_NOTICE = "[output truncated at 1 MB]"


MEMORY_BOMBS = {
    "bytearray_10gb": "x = 0\nbuf = bytearray(10**10)",
    "growing_list": "x = 0\nblocks = []\nwhile True:\n    blocks.append(b'x' * 10**7)",
}


@pytest.mark.parametrize("bomb", MEMORY_BOMBS.values(), ids=MEMORY_BOMBS.keys())
def test_memory_bomb_fails_and_state_survives(server: LiveServer, sid: str, bomb: str) -> None:
    set_x(server, sid)
    result = run(server, bomb, sid)
    assert not result["success"]
    assert any(
        word in str(result["error"]) for word in ("MemoryError", "SIGKILL", "OSError", "mmap")
    ), result["error"]
    assert result["wall"] < 5 + SLACK
    assert_x_kept(server, sid)


def test_limits_cannot_be_raised(server: LiveServer, sid: str) -> None:
    code = (
        "import resource\n"
        "names = ('RLIMIT_AS', 'RLIMIT_CPU', 'RLIMIT_FSIZE', 'RLIMIT_NPROC', 'RLIMIT_NOFILE')\n"
        "for name in names:\n"
        "    kind = getattr(resource, name)\n"
        "    try:\n"
        "        resource.setrlimit(kind, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))\n"
        "        print('ESCAPED:', name)\n"
        "    except (ValueError, OSError) as exc:\n"
        "        print('BLOCKED:' + type(exc).__name__, name)\n"
    )
    result = run(server, code, sid)
    assert "ESCAPED" not in stdout(result), stdout(result)
    assert stdout(result).count("BLOCKED:") == 5, everything(result)[:2000]


def test_filling_tmp_hits_its_size_cap(server: LiveServer, sid: str) -> None:
    code = (
        "written = 0\n"
        "try:\n"
        "    for i in range(20):\n"
        "        with open(f'/tmp/fill{i}', 'wb') as handle:\n"
        "            for _ in range(10):\n"
        "                handle.write(b'x' * 2**20)\n"
        "                written += 1\n"
        "    print('ESCAPED: wrote', written, 'MB')\n"
        "except OSError as exc:\n"
        "    print('BLOCKED:' + str(exc.errno), written)\n"
    )
    result = run(server, code, sid)
    assert "BLOCKED:28" in stdout(result), everything(result)[:2000]  # ENOSPC
    written = int(stdout(result).split()[-1])
    assert written <= 64, f"{written} MB went into /tmp"


def test_in_memory_file_systems_are_capped(server: LiveServer, sid: str) -> None:
    """/tmp is a 64 MB tmpfs; every other writable in-memory place must be capped too,
    or a run can pin host RAM that no RLIMIT_AS accounts for."""
    code = (
        "import os\n"
        "for place in ('/dev/shm', '/dev', '/etc'):\n"
        "    written = 0\n"
        "    try:\n"
        "        for i in range(8):\n"
        "            with open(f'{place}/rt-fill{i}', 'wb') as handle:\n"
        "                for _ in range(32):\n"
        "                    handle.write(b'x' * 2**20)\n"
        "                    written += 1\n"
        "    except OSError as exc:\n"
        "        print('STOPPED', place, exc.errno)\n"
        "    print('WROTE', place, written)\n"
        "    for i in range(8):\n"
        "        try:\n"
        "            os.unlink(f'{place}/rt-fill{i}')\n"
        "        except OSError:\n"
        "            pass\n"
    )
    try:
        result = run(server, code, sid, timeout=5)
        written = {
            line.split()[1]: int(line.split()[2])
            for line in stdout(result).splitlines()
            if line.startswith("WROTE")
        }
        assert len(written) == 3, everything(result)[:2000]
        uncapped = {place: mb for place, mb in written.items() if mb > 96}
        assert not uncapped, f"MB of host RAM written to uncapped tmpfs mounts: {uncapped}"
    finally:
        run(server, "import os\nos.kill(-1, 9)\nos.kill(os.getpid(), 9)", sid)


HANGS = {
    "huge_integer_power": "10**10**10",
    "catastrophic_regex": "import re\nre.match('(a+)+$', 'a' * 40 + 'b')",
    "sleep_forever": "import time\ntime.sleep(10**6)",
}


@pytest.mark.parametrize("hang", HANGS.values(), ids=HANGS.keys())
def test_hang_is_stopped_at_the_timeout(server: LiveServer, sid: str, hang: str) -> None:
    set_x(server, sid)
    result = run(server, "x = 0\n" + hang, sid, timeout=3)
    assert not result["success"]
    assert "TimeoutError" in str(result["error"]), result["error"]
    assert result["wall"] < 3 + SLACK, f"took {result['wall']:.1f} s"
    assert_x_kept(server, sid)


def test_requested_timeout_is_capped_by_the_server(server: LiveServer, sid: str) -> None:
    result = run(server, "import time\ntime.sleep(10**6)", sid, timeout=3600)
    assert not result["success"]
    assert "5 s" in str(result["error"]), result["error"]
    assert result["wall"] < 5 + SLACK, f"took {result['wall']:.1f} s"


def test_stdout_flood_is_truncated(server: LiveServer, sid: str) -> None:
    result = run(server, "for _ in range(100000):\n    print('x' * 1000)", sid)
    out = stdout(result)
    assert len(out) < OUTPUT_LIMIT, len(out)
    assert TRUNCATION_NOTICE in out
    assert result["metadata"]["truncated"] is True


def test_stderr_flood_is_truncated(server: LiveServer, sid: str) -> None:
    code = "import sys\nfor _ in range(100000):\n    sys.stderr.write('e' * 1000 + '\\n')"
    result = run(server, code, sid)
    assert len(result["data"]["stderr"]) < OUTPUT_LIMIT, len(result["data"]["stderr"])
    assert result["metadata"]["truncated"] is True


def test_binary_garbage_output_is_safe(server: LiveServer, sid: str) -> None:
    code = "import os\nfor _ in range(64):\n    os.write(1, bytes(range(256)) * 1024)"
    result = run(server, code, sid)
    assert len(stdout(result)) < OUTPUT_LIMIT + 1000
    follow_up = run(server, "print('still-works')", sid)
    assert stdout(follow_up).strip() == "still-works"


def test_a_file_over_the_size_limit_is_undone_even_past_the_soft_rlimit(
    server: LiveServer, sid: str
) -> None:
    """The file size rlimit is soft at PYTHON_CODE_MAX_FILE_SIZE (its hard value lets
    DuckDB spill): code that raises it still cannot keep a file over the limit."""
    set_x(server, sid)
    code = (
        "import resource\n"
        "_, hard = resource.getrlimit(resource.RLIMIT_FSIZE)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))\n"
        "with open('outputs/big.bin', 'wb') as handle:\n"
        "    handle.write(b'x' * (60 * 1024 * 1024))\n"
        "x = 1\n"
    )
    result = run(server, code, sid)
    assert not result["success"]
    assert "outputs/big.bin" in str(result["error"]) and "50 MB" in str(result["error"])
    assert not (workspace(server, sid) / "outputs" / "big.bin").exists()
    assert_x_kept(server, sid)

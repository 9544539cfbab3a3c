"""One user cannot exhaust what the others share: sandboxes, agent runs and disk.

A live server of its own with small limits: 3 warm sandboxes per user and 4 for the
host, 2 concurrent agent runs per user, 5 MB of disk per user. Sandboxes are counted
as real processes (each one's bubblewrap, by the workspace it binds). Code that must
stay busy waits for a file the test writes, so nothing here sleeps to synchronise.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.conftest import scripted_server
from tests.support.agent_script import react_turn
from tests.support.live_server import LiveServer
from tests.support.waiting import wait_for

USER_SANDBOXES = 3
HOST_SANDBOXES = 4
MEGABYTE = 1024 * 1024
QUOTA_MB = 5
ROUTES = ("api_runs", "openai")  # where the third concurrent agent run is started


def held_code(tag: str) -> str:
    """Code that runs until the test writes outputs/release-<tag> in its workspace."""
    return (
        f"import os, time\nopen('outputs/started-{tag}', 'w').close()\n"
        f"while not os.path.exists('outputs/release-{tag}'): time.sleep(0.02)\n"
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("tenancy")
    replies = [
        reply
        for route in ROUTES
        for reply in (
            *react_turn(f"HELD-1-{route}", code=held_code(f"HELD-1-{route}"), answer="One."),
            *react_turn(f"HELD-2-{route}", code=held_code(f"HELD-2-{route}"), answer="Two."),
            *react_turn(f"OTHER-{route}", code="print(6 * 7)\n", answer="It is 42."),
            *react_turn(f"AGAIN-{route}", code="print('again')\n", answer="Again."),
        )
    ]
    with scripted_server(
        folder,
        replies,
        AST_PREFILTER="false",
        USER_MAX_SANDBOXES=str(USER_SANDBOXES),
        HOST_MAX_SANDBOXES=str(HOST_SANDBOXES),
        USER_MAX_RUNS="2",
        USER_MAX_DISK_MB=str(QUOTA_MB),
    ) as live:
        yield live


def new_user(server: LiveServer, name: str) -> tuple[httpx.Client, int]:
    """A signed-in client for a new user, and the user's id."""
    with server.client() as admin:
        created = admin.post("/api/users", json={"username": name, "password": f"{name}-pass-1"})
    assert created.status_code == 201, created.text
    return server.client(server.token(name, f"{name}-pass-1")), int(created.json()["id"])


def run(http: httpx.Client, session: str, code: str) -> httpx.Response:
    return http.post("/api/tools/python_coder", json={"session_id": session, "code": code})


def ran(http: httpx.Client, session: str, code: str) -> str:
    response = run(http, session, code)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["success"], body
    return str(body["data"]["stdout"])


def workspace(server: LiveServer, user_id: int, session: str) -> Path:
    return server.data_dir / "scratch" / f"u{user_id}-{session}"


def sandboxes(server: LiveServer, user_id: int | None = None) -> set[str]:
    """The session keys whose sandbox is running: each is one bubblewrap process."""
    scratch = f"{server.data_dir / 'scratch'}/"
    keys: set[str] = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        if not args[0].endswith(b"bwrap"):
            continue
        keys |= {
            text.removeprefix(scratch)
            for text in (arg.decode(errors="replace") for arg in args)
            if text.startswith(scratch)
        }
    prefix = "" if user_id is None else f"u{user_id}-"
    return {key for key in keys if key.startswith(prefix)}


def release(path: Path, tag: str) -> None:
    (path / "outputs" / f"release-{tag}").touch()


def test_forty_sessions_keep_few_sandboxes_and_every_variable(server: LiveServer) -> None:
    alice, alice_id = new_user(server, "alice")
    bob, bob_id = new_user(server, "bob")
    with alice, bob:
        for number in range(40):
            assert ran(alice, f"s{number}", f"x = {number}\nprint('set')") == "set\n"
            warm = sandboxes(server, alice_id)
            assert len(warm) <= USER_SANDBOXES, f"after {number + 1} sessions: {sorted(warm)}"
        assert f"u{alice_id}-s39" in sandboxes(server, alice_id)  # the one just used stays
        for number in range(2):
            assert ran(bob, f"b{number}", "y = 1\nprint('set')") == "set\n"
            assert len(sandboxes(server)) <= HOST_SANDBOXES, sorted(sandboxes(server))
        assert len(sandboxes(server, bob_id)) == 2  # the host's cap stopped one of alice's
        # Sessions stopped long ago come back with their variables, from disk.
        assert ran(alice, "s0", "print(x)") == "0\n"
        assert ran(alice, "s17", "print(x)") == "17\n"
        assert ran(bob, "b0", "print(y)") == "1\n"
        assert len(sandboxes(server, alice_id)) <= USER_SANDBOXES
        assert len(sandboxes(server)) <= HOST_SANDBOXES


def test_a_user_at_their_cap_is_refused_while_another_runs(server: LiveServer) -> None:
    carol, carol_id = new_user(server, "carol")
    dave, _ = new_user(server, "dave")
    busy = [f"busy{number}" for number in range(USER_SANDBOXES)]
    with carol, dave, httpx.Client(base_url=server.url, headers=carol.headers, timeout=60) as side:
        pending = []
        for session in busy:  # each keeps its sandbox running code until released
            ran(carol, session, "pass")
            pending.append(side.build_request(
                "POST", "/api/tools/python_coder",
                json={"session_id": session, "code": held_code(session)},
            ))  # fmt: skip
        with _concurrently(side, pending) as replies:
            for session in busy:
                started = workspace(server, carol_id, session) / "outputs" / f"started-{session}"
                wait_for(started.exists)
            refused = run(carol, "one-more", "print(1)")
            assert refused.status_code == 429, refused.text
            assert refused.json()["code"] == "too_many_sandboxes"
            assert "USER_MAX_SANDBOXES" in refused.json()["detail"]
            assert int(refused.headers["retry-after"]) > 0
            # Another user still runs code, here and now.
            assert ran(dave, "mine", "print(6 * 7)") == "42\n"
            for session in busy:
                release(workspace(server, carol_id, session), session)
        assert all(reply.status_code == 200 for reply in replies), [r.text for r in replies]
        assert ran(carol, "one-more", "print(1)") == "1\n"  # a busy one became idle


@pytest.mark.parametrize("third", ROUTES)
def test_a_third_concurrent_agent_run_is_refused(server: LiveServer, third: str) -> None:
    erin, erin_id = new_user(server, f"erin-{third}")
    frank, _ = new_user(server, f"frank-{third}")
    with erin, frank:
        tags = [f"HELD-1-{third}", f"HELD-2-{third}"]
        runs = [_start_run(erin, tag) for tag in tags]
        for run_id, tag in zip(runs, tags, strict=True):  # both are running their code
            started = workspace(server, erin_id, _session_of(erin, run_id)) / "outputs"
            wait_for((started / f"started-{tag}").exists, timeout=60)
        if third == "openai":
            sdk = openai.OpenAI(
                base_url=f"{server.url}/v1",
                api_key=erin.headers["Authorization"].removeprefix("Bearer "),
                max_retries=0,
            )
            with pytest.raises(openai.RateLimitError) as caught:
                sdk.chat.completions.create(
                    model="scripted",
                    messages=[{"role": "user", "content": f"OTHER-{third} third"}],
                    extra_body={"agent_type": "react"},
                )
            error = caught.value.body
            assert isinstance(error, dict) and error["code"] == "too_many_runs", error
            assert "USER_MAX_RUNS" in error["message"]
        else:
            refused = erin.post("/api/runs", json={"message": f"OTHER-{third} third"})
            assert refused.status_code == 429, refused.text
            assert refused.json()["code"] == "too_many_runs"
            assert "USER_MAX_RUNS" in refused.json()["detail"]
        # Another user's agent run goes through meanwhile.
        answer = frank.post("/api/chat", json={"message": f"OTHER-{third}", "agent_type": "react"})
        assert answer.status_code == 200, answer.text
        assert "42" in answer.json()["answer"]
        # One run ends (done), the other is stopped: both give their places back.
        release(workspace(server, erin_id, _session_of(erin, runs[0])), tags[0])
        wait_for(lambda: _status(erin, runs[0]) == "completed", timeout=60)
        assert erin.post(f"/api/runs/{runs[1]}/cancel").status_code == 200
        assert _status(erin, runs[1]) == "cancelled"
        again = erin.post("/api/runs", json={"message": f"AGAIN-{third}", "agent_type": "react"})
        assert again.status_code == 202, again.text
        wait_for(lambda: _status(erin, again.json()["run_id"]) != "running", timeout=60)


def test_uploads_and_runs_past_the_disk_quota_get_507(server: LiveServer) -> None:
    gina, gina_id = new_user(server, "gina")
    three = os.urandom(3 * MEGABYTE)
    with gina:
        stored = gina.put("/api/sessions/quota/uploads/first.csv", content=three)
        assert stored.status_code == 201, stored.text
        # The first upload counts at once: the next one would pass 5 MB.
        for refused in (
            gina.put("/api/sessions/quota/uploads/second.csv", content=three),
            gina.post(
                "/api/upload", data={"session_id": "other"}, files={"file": ("m.csv", three)}
            ),
            gina.post(
                "/api/tus/",
                headers={
                    "Tus-Resumable": "1.0.0",
                    "Upload-Length": str(len(three)),
                    "Upload-Metadata": _tus_metadata(session_id="other", filename="t.csv"),
                },
            ),
        ):
            assert refused.status_code == 507, refused.text
            assert refused.json()["code"] == "disk_quota_exceeded"
            detail = refused.json()["detail"]
            assert "your disk quota" in detail and f"{QUOTA_MB} MB (USER_MAX_DISK_MB)" in detail
        assert not (workspace(server, gina_id, "quota") / "uploads" / "second.csv").exists()
        # A run may fill what is left, never more: it is stopped and its file deleted.
        big = "import os\nopen('big.bin', 'wb').write(os.urandom(3 * 2**20))\nprint('kept')"
        stopped = run(gina, "quota", big).json()
        assert not stopped["success"] and "reached your disk quota" in stopped["error"], stopped
        assert not (workspace(server, gina_id, "quota") / "big.bin").exists()
        assert ran(gina, "quota", big.replace("3 *", "1 *")) == "kept\n"
        # Past the quota (an admin lowered it), the next run is refused until space is freed.
        with server.client() as admin:
            lowered = admin.patch(f"/api/users/{gina_id}", json={"limits": {"max_disk_mb": 2}})
        assert lowered.status_code == 200, lowered.text
        full = run(gina, "quota", "print(1)")
        assert full.status_code == 507, full.text
        assert "Your disk quota is full" in full.json()["detail"]
        sdk = openai.OpenAI(
            base_url=f"{server.url}/v1",
            api_key=gina.headers["Authorization"].removeprefix("Bearer "),
            max_retries=0,
        )
        with pytest.raises(openai.InternalServerError) as caught:
            sdk.chat.completions.create(
                model="scripted",
                messages=[{"role": "user", "content": "OTHER"}],
                extra_body={"agent_type": "react"},
            )
        assert caught.value.status_code == 507
        error = caught.value.body
        assert isinstance(error, dict) and error["code"] == "disk_quota_exceeded", error


def test_one_users_runs_together_never_write_past_the_quota(server: LiveServer) -> None:
    """Each run is checked against the quota before it starts; two that run at once
    share what is left while they go on, so neither can spend the other's part."""
    hana, hana_id = new_user(server, "hana")
    tags = ("one", "two")
    # Both wait until both have started, then each writes 3 MB: 6 MB of a 5 MB quota.
    code = {
        tag: held_code(tag) + "for i in range(3):\n"
        "    open(f'part{i}.bin', 'wb').write(os.urandom(2**20))\nprint('wrote')\n"
        for tag in tags
    }
    with hana, ThreadPoolExecutor(2) as pool:
        answers = [pool.submit(run, hana, tag, code[tag]) for tag in tags]
        for tag in tags:
            started = workspace(server, hana_id, tag) / "outputs" / f"started-{tag}"
            wait_for(started.exists, timeout=60)
        for tag in tags:
            release(workspace(server, hana_id, tag), tag)
        results = [answer.result().json() for answer in answers]
        stopped = [r for r in results if not r["success"]]
        assert stopped, results  # 6 MB did not fit
        for result in stopped:
            assert "reached your disk quota" in result["error"], result
        parts = [part for tag in tags for part in workspace(server, hana_id, tag).glob("part*.bin")]
        assert sum(part.stat().st_blocks * 512 for part in parts) <= QUOTA_MB * MEGABYTE
        # What the stopped runs' files took is free again for the next run.
        assert ran(hana, "one", "print('next')") == "next\n"


def _start_run(http: httpx.Client, tag: str) -> str:
    response = http.post("/api/runs", json={"message": tag, "agent_type": "react"})
    assert response.status_code == 202, response.text
    return str(response.json()["run_id"])


def _session_of(http: httpx.Client, run_id: str) -> str:
    return str(http.get(f"/api/runs/{run_id}").json()["session_id"])


def _status(http: httpx.Client, run_id: str) -> str:
    return str(http.get(f"/api/runs/{run_id}").json()["status"])


def _tus_metadata(**values: str) -> str:
    return ",".join(f"{k} {base64.b64encode(v.encode()).decode()}" for k, v in values.items())


class _concurrently:
    """Send `requests` on threads; the replies are there once the block has ended."""

    def __init__(self, http: httpx.Client, requests: list[httpx.Request]) -> None:
        import concurrent.futures

        self._pool = concurrent.futures.ThreadPoolExecutor(len(requests))
        self._futures = [self._pool.submit(http.send, request) for request in requests]
        self.replies: list[Any] = []

    def __enter__(self) -> list[Any]:
        return self.replies

    def __exit__(self, *exc: object) -> None:
        self.replies.extend(future.result(timeout=120) for future in self._futures)
        self._pool.shutdown()

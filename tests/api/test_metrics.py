"""Prometheus metrics at /metrics: a real Prometheus scrapes a live server after a turn;
the own port, the address allow list, off by default, and no user's data in a label."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import scripted_app, scripted_server
from tests.support.agent_script import react_turn
from tests.support.live_server import LiveServer, free_port
from tests.support.processes import stop_group

PROMETHEUS = Path("/usr/bin/prometheus")
TAG = "METRICS-1"
REVIEW = {"when": "[stage: review]", "content": '{"answers_question": true}', "repeat": True}
REPLIES = [
    REVIEW,
    *react_turn(TAG, "print('total', 6 * 7)\n", "The total is 42."),
    {"when": "PLAIN-1", "content": "Hello, a plain answer."},
]
SCRIPTED_TOKEN = re.compile(r"\s*\S+")  # how the scripted model counts (backend/llm/scripted.py)
# Distinctive values that must never become a label's.
USER = "quokka-metrics-user"
SESSION = "sess-marmot-4821"
FILE = "aardvark-report.csv"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One ReAct turn with a python_coder run and one plain chat, on a server with metrics."""
    with scripted_server(
        tmp_path_factory.mktemp("metrics"),
        REPLIES,
        METRICS_ENABLED="true",
        SANDBOX_SELF_CHECK="true",  # its run must not be counted
    ) as live:
        with live.client() as http:
            react = http.post("/api/chat", json={"message": f"{TAG} 6 x 7?", "agent_type": "react"})
            assert react.status_code == 200, react.text
            assert react.json()["answer"] == "The total is 42."
            plain = http.post("/api/chat", json={"message": "PLAIN-1 hi", "agent_type": "chat"})
            assert plain.status_code == 200, plain.text
        yield live


# A real Prometheus


class Prometheus:
    """Debian's prometheus binary on a loopback port, scraping `target` every second."""

    def __init__(self, root: Path, target: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = root / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: pda\n    metrics_path: /metrics\n"
            f"    static_configs:\n      - targets: ['{target}']\n"
        )
        self.log_path = root / "prometheus.log"
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(
                [
                    str(PROMETHEUS),
                    f"--config.file={config}",
                    f"--storage.tsdb.path={root / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a group of its own, for stop_group
            )

    def query(self, promql: str) -> list[dict[str, Any]]:
        response = httpx.get(f"{self.url}/api/v1/query", params={"query": promql}, timeout=10)
        response.raise_for_status()
        body = response.json()
        assert body["status"] == "success", body
        return list(body["data"]["result"])

    def wait_for_scrape_after(self, moment: float, timeout: float = 60) -> None:
        """Until a scrape of the target that began after `moment` (Unix time) is stored."""
        deadline = time.monotonic() + timeout
        while True:
            assert self.process.poll() is None, self.log_path.read_text()[-3000:]
            try:
                result = self.query('timestamp(up{job="pda"} == 1)')
            except httpx.HTTPError:
                result = []  # not listening yet
            if result and float(result[0]["value"][1]) > moment:
                return
            assert time.monotonic() < deadline, (
                f"no scrape after {moment} in {timeout} s:\n{self.log_path.read_text()[-3000:]}"
            )
            time.sleep(0.2)

    def stop(self) -> None:
        stop_group(self.process, timeout=10)


def value(results: list[dict[str, Any]]) -> float:
    assert len(results) == 1, results
    return float(results[0]["value"][1])


def reported_tokens(data_dir: Path) -> Counter[tuple[str, str]]:
    """Tokens by (stage, kind), as the scripted model reported them for each call in the
    prompt log: its prompt's messages and its reply, counted as the model counts them. A
    record without a stage is a turn's summary, except plain chat's, its one call."""
    tokens: Counter[tuple[str, str]] = Counter()
    for line in (data_dir / "logs" / "prompts.jsonl").read_text().splitlines():
        record = json.loads(line)
        stage = record.get("stage") or ("chat" if record["agent_type"] == "chat" else None)
        if stage is None:
            continue
        prompt = sum(len(SCRIPTED_TOKEN.findall(str(m["content"]))) for m in record["prompt"])
        tokens[stage, "prompt"] += prompt
        tokens[stage, "completion"] += len(SCRIPTED_TOKEN.findall(record["answer"]))
    return tokens


def exposed_tokens(text: str) -> Counter[tuple[str, str]]:
    tokens: Counter[tuple[str, str]] = Counter()
    for family in text_string_to_metric_families(text):
        if family.name == "pda_llm_tokens":
            for sample in family.samples:
                tokens[sample.labels["stage"], sample.labels["kind"]] += int(sample.value)
    return tokens


@pytest.mark.skipif(
    not PROMETHEUS.exists(),
    reason="PROMETHEUS TESTS NOT RUN: no /usr/bin/prometheus; install Debian's prometheus "
    "package (make test does, as root)",
)
def test_prometheus_scrapes_the_turns_tokens_and_runs(server: LiveServer, tmp_path: Path) -> None:
    done = time.time()
    prometheus = Prometheus(tmp_path, f"127.0.0.1:{server.port}")
    try:
        prometheus.wait_for_scrape_after(done)
        answered = prometheus.query('pda_turns_total{agent="react",outcome="answered"}')
        chats = prometheus.query('pda_turns_total{agent="chat",outcome="answered"}')
        runs = prometheus.query('pda_sandbox_runs_total{outcome="ok"}')
        calls = prometheus.query("sum by (stage) (pda_llm_calls_total)")
        by_stage = prometheus.query("sum by (stage, kind) (pda_llm_tokens_total)")
        turn_seconds = prometheus.query('pda_turn_duration_seconds_count{agent="react"}')
        chat_requests = prometheus.query(
            'pda_http_requests_total{route="/api/chat",method="POST",status="2xx"}'
        )
    finally:
        prometheus.stop()
    assert value(answered) == 1
    assert value(chats) == 1
    assert value(runs) == 1  # the turn's run; the start-up self-check is not counted
    assert value(turn_seconds) == 1
    assert value(chat_requests) == 2
    assert {r["metric"]["stage"]: float(r["value"][1]) for r in calls} == {
        "react": 1,
        "generate": 1,
        "answer": 1,
        "chat": 1,
    }
    scraped = Counter(
        {(r["metric"]["stage"], r["metric"]["kind"]): int(float(r["value"][1])) for r in by_stage}
    )
    reported = reported_tokens(server.data_dir)
    assert reported[("react", "prompt")] > 0 and reported[("chat", "completion")] > 0
    assert scraped == reported
    assert exposed_tokens(httpx.get(f"{server.url}/metrics").text) == reported


def test_labels_name_no_user_session_or_path(server: LiveServer) -> None:
    with server.client() as admin:
        created = admin.post("/api/users", json={"username": USER, "password": "x" * 12})
        assert created.status_code == 201, created.text
    with server.client(server.token(USER, "x" * 12)) as http:
        put = http.put(f"/api/sessions/{SESSION}/uploads/{FILE}", content=b"a,b\n1,2\n")
        assert put.status_code == 201, put.text
        read = http.get(f"/api/sessions/{SESSION}/files/uploads/{FILE}")
        assert read.status_code == 200, read.text
        missing = http.get(f"/api/sessions/{SESSION}/files/uploads/nothing-{FILE}")
        assert missing.status_code == 404
        unrouted = http.get(f"/api/{SESSION}/{FILE}")
        assert unrouted.status_code == 404
    expected = {
        "/api/sessions/{session_id}/files/{path:path}",
        "/api/sessions/{session_id}/uploads/{name}",
        "unmatched",
    }
    # A request is counted just after its response has gone: wait for the last one's.
    deadline = time.monotonic() + 10
    while True:
        text = httpx.get(f"{server.url}/metrics").text
        families = list(text_string_to_metric_families(text))
        routes = {sample.labels.get("route") for f in families for sample in f.samples}
        if expected <= routes or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert expected <= routes
    for secret in (USER, SESSION, FILE, "aardvark", "marmot", "quokka"):
        assert secret not in text
    uploaded = next(f for f in families if f.name == "pda_upload_bytes")
    assert uploaded.samples[0].value >= len(b"a,b\n1,2\n")


# Where /metrics is served, and to whom


def test_metrics_port_serves_them_and_the_api_port_does_not(tmp_path: Path) -> None:
    port = free_port()
    with scripted_server(
        tmp_path, [REVIEW], METRICS_ENABLED="true", METRICS_PORT=str(port)
    ) as live:
        own = httpx.get(f"http://127.0.0.1:{port}/metrics")
        on_the_api = httpx.get(f"{live.url}/metrics")
    assert own.status_code == 200
    assert own.headers["content-type"].startswith("text/plain")
    assert 'pda_http_requests_total{method="GET",route="/health",status="2xx"}' in own.text
    assert on_the_api.status_code == 404


def test_an_address_outside_metrics_allowed_gets_403(tmp_path: Path) -> None:
    with scripted_server(
        tmp_path, [REVIEW], METRICS_ENABLED="true", METRICS_ALLOWED="10.0.0.0/8"
    ) as live:
        response = httpx.get(f"{live.url}/metrics")  # from 127.0.0.1
    assert response.status_code == 403
    assert "pda_" not in response.text
    assert "METRICS_ALLOWED" in response.text


@pytest.mark.parametrize("trusted_proxies", ["", "127.0.0.1"])
def test_a_forwarded_address_is_not_believed_on_the_metrics_port(
    tmp_path: Path, trusted_proxies: str
) -> None:
    """A local process claims an allowed address in X-Forwarded-For: the metrics port judges
    the socket's peer (127.0.0.1), which METRICS_ALLOWED leaves out, whatever the API's port
    trusts (TRUSTED_PROXIES)."""
    port = free_port()
    allowed = "10.1.2.3"
    with scripted_server(
        tmp_path,
        [REVIEW],
        METRICS_ENABLED="true",
        METRICS_PORT=str(port),
        METRICS_ALLOWED=allowed,
        TRUSTED_PROXIES=trusted_proxies,
    ):
        forged = httpx.get(f"http://127.0.0.1:{port}/metrics", headers={"X-Forwarded-For": allowed})
    assert forged.status_code == 403
    assert "pda_" not in forged.text


def test_metrics_are_off_by_default(tmp_path: Path) -> None:
    with scripted_app(tmp_path, [REVIEW]) as app:
        assert app.request("GET", "/metrics").status_code == 404

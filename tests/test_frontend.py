"""The UI's serving: at `/` of the API, and through `run_frontend.py`, same-origin both ways."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from backend.api.ui import CHART_FRAME_POLICY, CONTENT_SECURITY_POLICY
from tests.conftest import ADMIN_PASSWORD, StartApp, StartServer, write_replies
from tests.support.agent_script import sse_events
from tests.support.app_client import InProcessServer
from tests.support.live_server import ROOT, LiveServer, free_port

REPLIES = [{"when": "Q-PROXY", "content": "Through the proxy.", "token_delay": 0.01}]


@pytest.fixture
def server(start_server: StartServer, tmp_path: Path) -> LiveServer:
    return start_server(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", REPLIES))


@pytest.fixture
def app(start_app: StartApp, tmp_path: Path) -> InProcessServer:
    """The same app in this process: serving the page and its assets needs no socket."""
    return start_app(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", REPLIES))


@pytest.fixture
def frontend(server: LiveServer) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "FRONTEND_PORT": str(port), "PORT": str(server.port)}
    process = subprocess.Popen(
        [sys.executable, "run_frontend.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url + "/assets/style.css")
                break
            except httpx.ConnectError:
                assert process.poll() is None, "run_frontend.py exited"
                assert time.monotonic() < deadline, "run_frontend.py did not start"
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def assert_is_the_page(page: httpx.Response) -> None:
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert "script-src 'self';" in CONTENT_SECURITY_POLICY
    assert page.headers["x-content-type-options"] == "nosniff"
    assert '<script type="module" src="/assets/js/main.js"></script>' in page.text
    # Structure only: no inline script, handler or style for the CSP to refuse.
    assert "<script>" not in page.text and "<style" not in page.text
    assert re.search(r"\s(on[a-z]+|style)\s*=", page.text) is None


def assert_is_the_chart_frame(frame: httpx.Response) -> None:
    """Plotly's sandboxed frame (chart-frame.js): walled off by its own header too."""
    assert frame.status_code == 200
    assert frame.headers["content-type"].startswith("text/html")
    policy = frame.headers["content-security-policy"]
    assert policy == CHART_FRAME_POLICY
    directives = dict(d.strip().split(" ", 1) for d in policy.split(";"))
    # An opaque origin (no allow-same-origin), framed only by the UI's own page.
    assert directives["sandbox"] == "allow-scripts allow-downloads"
    assert directives["frame-ancestors"] == "'self'"
    assert directives["script-src"] == "'self'" and directives["default-src"] == "'none'"
    assert "connect-src" not in directives  # no request of its own: the page posts the figure
    assert '<script src="/assets/js/chart-frame.js"></script>' in frame.text
    assert "<script>" not in frame.text and "<style" not in frame.text


def test_the_api_serves_the_ui_at_its_root(app: InProcessServer) -> None:
    assert_is_the_page(app.request("GET", "/"))
    assert_is_the_chart_frame(app.request("GET", "/chart-frame"))
    assert "frame-src 'self'" in CONTENT_SECURITY_POLICY
    module = app.request("GET", "/assets/js/main.js")
    assert module.status_code == 200 and "javascript" in module.headers["content-type"]
    vendor = app.request("GET", "/assets/vendor/purify.mjs")
    assert vendor.status_code == 200 and "javascript" in vendor.headers["content-type"]
    assert app.request("GET", "/assets/../backend/main.py").status_code == 404


def test_run_frontend_serves_the_same_page_and_forwards_the_api(
    server: LiveServer, frontend: str
) -> None:
    assert_is_the_page(httpx.get(frontend + "/"))
    assert_is_the_chart_frame(httpx.get(frontend + "/chart-frame"))
    assert httpx.get(frontend + "/assets/js/main.js").status_code == 200
    assert httpx.get(frontend + "/package.json").status_code == 404  # only the page and assets
    assert httpx.get(frontend + "/health").json()["status"] == "ok"
    login = httpx.post(
        frontend + "/api/auth/login", json={"username": "admin", "password": ADMIN_PASSWORD}
    )
    assert login.status_code == 200 and "pda_token" in login.cookies
    bad = httpx.post(frontend + "/api/auth/login", json={"username": "admin", "password": "x"})
    assert bad.status_code == 401 and bad.json()["detail"] == "Incorrect username or password."
    headers = {"Authorization": f"Bearer {login.json()['access_token']}"}
    with httpx.Client(base_url=frontend, headers=headers, timeout=60) as http:
        run = http.post("/api/runs", json={"message": "Q-PROXY hello"}).json()
        with http.stream("GET", f"/api/runs/{run['run_id']}/events") as reply:
            assert reply.headers["content-type"].startswith("text/event-stream")
            events = list(sse_events(reply.iter_lines()))
    assert dict(events)["final"]["text"] == "Through the proxy."
    assert events[-1][0] == "done"

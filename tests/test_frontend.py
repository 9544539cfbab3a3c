"""`run_frontend.py` serves the UI and points it at the API port."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import httpx

from tests.support.live_server import ROOT, free_port


def test_frontend_serves_the_page_with_the_api_port() -> None:
    port = free_port()
    env = {**os.environ, "FRONTEND_PORT": str(port), "PORT": "4321"}
    process = subprocess.Popen(
        [sys.executable, "run_frontend.py"], cwd=ROOT, env=env, stdout=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/")
                break
            except httpx.ConnectError:
                assert time.monotonic() < deadline, "frontend did not start"
                time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert page.status_code == 200
    assert '<meta name="api-port" content="4321">' in page.text
    assert "Python Data Agent" in page.text

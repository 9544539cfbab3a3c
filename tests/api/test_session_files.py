"""Issue 39: the Files panel's listing (`GET /api/sessions/{id}/files`) holds the user's
uploads and what their code wrote, never the server's own files in the workspace (hidden
names, the persisted variables, the run scripts, the notepad): those are still served to
their owner by path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import scripted_server
from tests.support.agent_script import SALES, react_turn, sse_events, upload
from tests.support.live_server import LiveServer
from tests.support.waiting import wait_for

# Saves a DataFrame variable, writes a file of its own and shows a table.
CODE = (
    "totals = df1.groupby('region', as_index=False)['price'].sum()\n"
    "totals.to_csv('outputs/summary.csv', index=False)\n"
    "totals\n"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp("session-files")
    with scripted_server(folder, react_turn("Q-FILES", CODE, "Totals saved.")) as live:
        upload(live, "files")
        body = {"message": "Q-FILES totals by region", "session_id": "files", "stream": True,
                "agent_type": "react"}  # fmt: skip
        with live.client(timeout=300) as http, http.stream("POST", "/api/chat", json=body) as reply:
            events = [name for name, _ in sse_events(reply.iter_lines())]
        assert "table" in events and "error" not in events, events
        yield live


def _workspace(server: LiveServer) -> Path:
    (workspace,) = (server.data_dir / "scratch").glob("u*-files")
    return workspace


def test_the_listing_is_the_users_files_and_what_their_code_wrote(server: LiveServer) -> None:
    on_disk = {
        str(path.relative_to(_workspace(server)))
        for path in _workspace(server).rglob("*")
        if path.is_file()
    }
    # The run left the server's own files beside the user's...
    assert {"notepad.json", "variables/totals.parquet"} <= on_disk
    assert any(path.startswith("scripts/") for path in on_disk)
    assert any(path.startswith("outputs/.tables/") for path in on_disk)
    # ...and the listing has only the user's.
    with server.client() as http:
        listed = http.get("/api/sessions/files/files")
    assert listed.status_code == 200
    assert sorted(f["path"] for f in listed.json()) == ["outputs/summary.csv", "uploads/sales.csv"]


def test_the_servers_files_are_still_served_by_path(server: LiveServer) -> None:
    with server.client() as http:
        notepad = http.get("/api/sessions/files/files/notepad.json")
        variable = http.get("/api/sessions/files/files/variables/totals.parquet")
        upload_ = http.get("/api/sessions/files/files/uploads/sales.csv")
    assert notepad.status_code == 200 and "entries" in notepad.json()
    assert variable.status_code == 200 and variable.content.startswith(b"PAR1")
    assert upload_.content == SALES


def test_a_download_whose_client_went_away_closes_its_file(server: LiveServer) -> None:
    """Starlette reads a file's chunks in a thread and, when the client goes, leaves the
    file open until the garbage collector finds its iterator."""
    big = _workspace(server) / "outputs" / "big.bin"
    with big.open("wb") as sparse:  # far more than loopback's buffers hold (36 MB here)
        sparse.truncate(512 * 1024 * 1024)
    url = "/api/sessions/files/files/outputs/big.bin"
    with server.client() as http, http.stream("GET", url) as download:
        assert download.status_code == 200
        chunks = download.iter_bytes()  # held: httpx closes the connection when it goes
        next(chunks)
        assert server.has_open(big)
    wait_for(lambda: not server.has_open(big), timeout=10)

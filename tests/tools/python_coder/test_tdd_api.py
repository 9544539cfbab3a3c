"""`POST /api/tools/python_coder` with `mode: tdd`, on a real server."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import StartServer, write_replies
from tests.tools.python_coder.tdd.test_solver import INSTRUCTION, tdd_replies


def test_tdd_over_http_fixes_a_function_then_answers_from_the_cache(
    start_server: StartServer, tmp_path: Path
) -> None:
    server = start_server(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", tdd_replies()))
    body = {"session_id": "tdd", "query": INSTRUCTION, "mode": "tdd"}
    with server.client(timeout=120) as http:
        http.post("/api/upload", data={"session_id": "tdd"}, files={"file": ("a.txt", b"x")})
        first = http.post("/api/tools/python_coder", json=body).json()
        again = http.post("/api/tools/python_coder", json=body).json()
        unknown = http.post("/api/tools/python_coder", json={**body, "session_id": "nobody"})

    assert first["mode"] == "tdd" and first["success"] and first["all_tests_passed"]
    for key in ("function_specs", "implementations", "tests", "test_results"):
        assert first[key], key
    assert first["iterations"] == 1 and not first["cached"] and first["llm_calls"] == 6
    assert "6 of 6 tests pass for parse_numbers, mean_of." in first["answer"]
    assert again["cached"] and again["llm_calls"] == 0
    assert again["implementations"] == first["implementations"]
    assert unknown.status_code == 404
    assert list((server.data_dir / "tdd_cache").glob("*.json"))

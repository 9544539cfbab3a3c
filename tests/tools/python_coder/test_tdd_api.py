"""`POST /api/tools/python_coder` with `mode: tdd`, on a real server."""

from __future__ import annotations

import subprocess
import sys
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
        code = http.post(
            "/api/tools/python_coder",
            json={"session_id": "tdd", "code": "print(mean_of(parse_numbers('1, 2, 6')))"},
        ).json()
        exported = http.get("/api/sessions/tdd/export?format=py").text

    assert first["mode"] == "tdd" and first["success"] and first["all_tests_passed"]
    for key in ("function_specs", "implementations", "tests", "test_results"):
        assert first[key], key
    assert first["iterations"] == 1 and not first["cached"] and first["llm_calls"] == 6
    assert "6 of 6 tests pass for parse_numbers, mean_of." in first["answer"]
    assert again["cached"] and again["llm_calls"] == 0
    assert again["implementations"] == first["implementations"]
    assert unknown.status_code == 404
    assert list((server.data_dir / "tdd_cache" / "u1").glob("*.json"))  # the admin's own

    # Issue 14: the session exports the functions once (the cached repeat is the same work)
    # with their tests, which pass when the script runs on its own.
    assert not code["success"]  # a TDD run leaves no functions behind, so this run failed
    assert exported.count("functions built test-first") == 1 and "run_tests()" in exported
    for implementation in first["implementations"].values():
        assert implementation.strip() in exported
    assert "mean_of(parse_numbers" not in exported  # the failed run is not a step
    (tmp_path / "session.py").write_text(exported)
    ran = subprocess.run(
        [sys.executable, "session.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, ran.stderr
    assert "6 of 6 tests passed" in ran.stdout


def test_a_second_user_asking_the_same_gets_their_own_solve_not_the_first_users_cache(
    start_server: StartServer, tmp_path: Path
) -> None:
    replies = tdd_replies() + tdd_replies()
    server = start_server(SCRIPTED_REPLIES=write_replies(tmp_path / "r.json", replies))
    body = {"session_id": "tdd", "query": INSTRUCTION, "mode": "tdd"}
    with server.client(timeout=120) as admin:
        created = admin.post("/api/users", json={"username": "bo", "password": "bo-password-1"})
        assert created.status_code == 201, created.text
        admin.post("/api/upload", data={"session_id": "tdd"}, files={"file": ("a.txt", b"x")})
        first = admin.post("/api/tools/python_coder", json=body).json()
    with server.client(server.token("bo", "bo-password-1"), timeout=120) as bo:
        bo.post("/api/upload", data={"session_id": "tdd"}, files={"file": ("a.txt", b"x")})
        second = bo.post("/api/tools/python_coder", json=body).json()
        again = bo.post("/api/tools/python_coder", json=body).json()
    assert first["all_tests_passed"] and not first["cached"]
    # Verified in bo's own sandbox, not handed over from the admin's.
    assert second["all_tests_passed"] and not second["cached"] and second["llm_calls"] == 6
    assert again["cached"] and again["llm_calls"] == 0  # bo's own cache

"""Issue 41: evaluation sets and runs. A scripted model right on 7 of 10 questions scores
7/10, with each question's answer, code, calls, tokens, time and conversation, by API and
CLI; DABench's format is imported; runs are stopped, compared and deleted; another user's
sets and runs, deleted ids and made-up ids are all "not found"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from backend.core.evals.sets import MAX_SETS
from tests.conftest import scripted_server
from tests.support.eval_set import COUNT, RIGHT, import_files, replies, write_dabench
from tests.support.live_server import ROOT, LiveServer
from tests.support.waiting import wait_for

SAMPLE = ROOT.parent / "shared" / "dabench-sample"
ENDED = ("completed", "cancelled", "failed", "interrupted")
SLOW = {"when": ["[stage: react]", "SLOWQ"], "content": "Thinking hard", "token_delay": 0.2}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("evals")
    script = [*replies(), {**SLOW, "repeat": True}]
    with scripted_server(root, script, METRICS_ENABLED="true") as live:
        yield live


@pytest.fixture(scope="module")
def dabench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dabench(tmp_path_factory.mktemp("dabench") / "ten")


def _person(server: LiveServer, name: str) -> httpx.Client:
    with server.client() as admin:
        made = admin.post("/api/users", json={"username": name, "password": f"{name}-password"})
    assert made.status_code == 201, made.text
    return server.client(server.token(name, f"{name}-password"), timeout=60)


def _imported(http: httpx.Client, folder: Path, name: str = "ten") -> dict[str, Any]:
    made = http.post("/api/evals/sets", data={"name": name}, files=import_files(folder))
    assert made.status_code == 201, made.text
    return dict(made.json())


def _finished(http: httpx.Client, run_id: str, timeout: float = 240) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def ended() -> bool:
        seen.update(http.get(f"/api/evals/runs/{run_id}").json())
        return seen["status"] in ENDED

    wait_for(ended, timeout)
    return seen


@pytest.fixture(scope="module")
def scored(server: LiveServer, dabench: Path) -> Iterator[tuple[httpx.Client, dict[str, Any]]]:
    """The owner's client and a finished run of the ten questions, with `react`."""
    with _person(server, "evaluator") as http:
        eval_set = _imported(http, dabench)
        body = {"set_id": eval_set["id"], "agent_type": "react"}
        started = http.post("/api/evals/runs", json=body)
        assert started.status_code == 202, started.text
        assert started.json()["status"] == "queued"
        yield http, _finished(http, started.json()["id"])


def test_a_model_right_on_seven_of_ten_scores_seven_of_ten(
    scored: tuple[httpx.Client, dict[str, Any]],
) -> None:
    http, run = scored
    assert run["status"] == "completed", run
    assert (run["done"], run["total"]) == (COUNT, COUNT)
    score = run["score"]
    assert (score["right"], score["answered"], score["accuracy"]) == (RIGHT, COUNT, 0.7)
    assert 0.39 < score["low"] < 0.40 and 0.89 < score["high"] < 0.90  # Wilson, 95%
    results = {r["question_id"]: r for r in run["results"]}
    assert [r["question_id"] for r in run["results"]] == [str(n) for n in range(1, COUNT + 1)]
    assert [results[str(n)]["correct"] for n in range(1, COUNT + 1)] == [True] * 7 + [False] * 3
    first = results["1"]
    assert first["expected"] == {"total": "4"} and first["extracted"] == {"total": "4"}
    assert first["values"] == {"total": True} and first["error"] is None
    assert first["answer"].endswith("@total[4]")
    assert len(first["code"]) == 1 and first["code"][0].endswith("print('EVQ01', len(df1))\n")
    assert first["llm_calls"] >= 3 and first["tokens"] > 0 and first["seconds"] > 0
    assert results["8"]["extracted"] == {"total": "999"} and results["8"]["values"] == {
        "total": False
    }
    assert results["9"]["extracted"] == {} and results["10"]["extracted"] == {"sum": "9"}
    by_kind = {k["kind"]: (k["right"], k["answered"]) for k in run["by_kind"]}
    assert by_kind == {"easy": (5, 5), "hard": (2, 5)}
    # Each question was asked in a fresh session holding only its file: a conversation.
    conversation = http.get(f"/api/conversations/{first['conversation_id']}").json()
    assert "EVQ01" in conversation["messages"][0]["content"]
    files = http.get("/api/files", params={"session_id": first["session_id"]}).json()
    assert [f["name"] for f in files] == ["uploads/prices.csv"]
    metrics = httpx.get(f"{http.base_url}/metrics").text
    assert 'pda_eval_questions_total{model="scripted",result="right"} 7.0' in metrics
    assert 'pda_eval_questions_total{model="scripted",result="wrong"} 3.0' in metrics


def test_the_cli_prints_the_same_score_and_runs_again_and_compares(
    server: LiveServer, scored: tuple[httpx.Client, dict[str, Any]], dabench: Path
) -> None:
    http, run = scored
    token = http.headers["Authorization"].removeprefix("Bearer ")
    env = {**os.environ, "PDA_TOKEN": token}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "backend.evals", "--server", server.url, *args]
        return subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )

    shown = cli("show", run["id"])
    assert shown.returncode == 0, shown.stderr
    assert "score: 7/10 right (70%; 95% interval 40%-89%)" in shown.stdout
    lines = {line.split()[0]: line.split() for line in shown.stdout.splitlines() if line}
    assert lines["1"][2] == "yes" and lines["8"][2] == "no"
    again = cli("run", "--set", str(dabench), "--agent-type", "react")
    assert again.returncode == 0, again.stderr
    assert "imported 10 questions" in again.stdout and "score: 7/10 right" in again.stdout
    second = http.get("/api/evals/runs").json()[0]
    assert second["id"] != run["id"] and second["score"]["right"] == RIGHT
    compared = http.get(f"/api/evals/runs/{run['id']}/compare/{second['id']}").json()
    assert [(p["first"]["correct"], p["second"]["correct"]) for p in compared["questions"]] == [
        (n <= RIGHT, n <= RIGHT) for n in range(1, COUNT + 1)
    ]
    side_by_side = cli("compare", run["id"], second["id"])
    assert side_by_side.returncode == 0, side_by_side.stderr
    assert "first: 7/10" in side_by_side.stdout and "second: 7/10" in side_by_side.stdout
    missing = cli("show", "er_" + "0" * 32)
    assert missing.returncode == 1 and "Evaluation run not found" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_a_run_is_stopped_and_deleted_with_its_conversations(
    server: LiveServer, tmp_path: Path
) -> None:
    folder = write_dabench(tmp_path / "slow")
    lines = (folder / "questions.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["question"] = "SLOWQ: think about it"
    (folder / "questions.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]))
    with _person(server, "stopper") as http:
        eval_set = _imported(http, folder, "slow")
        run = http.post("/api/evals/runs", json={"set_id": eval_set["id"], "agent_type": "react"})
        run_id = run.json()["id"]
        wait_for(lambda: http.get(f"/api/evals/runs/{run_id}").json()["current"] == "1")
        busy = http.post("/api/evals/runs", json={"set_id": eval_set["id"]})
        assert busy.status_code == 409 and busy.json()["detail"].startswith("You already have")
        stopped = http.post(f"/api/evals/runs/{run_id}/cancel")
        assert stopped.status_code == 200 and stopped.json()["status"] == "cancelled"
        shown = http.get(f"/api/evals/runs/{run_id}").json()
        stopped_in = shown["results"][0]  # kept (its conversation), never scored
        assert shown["done"] == 0 and stopped_in["stopped"] and shown["score"]["answered"] == 0
        assert stopped_in["error"].startswith("The run was stopped")
        conversation = shown["results"][0]["conversation_id"]
        assert http.get(f"/api/conversations/{conversation}").status_code == 200
        assert http.delete(f"/api/evals/runs/{run_id}").status_code == 204
        assert http.get(f"/api/evals/runs/{run_id}").status_code == 404
        assert http.get(f"/api/conversations/{conversation}").status_code == 404
        assert http.delete(f"/api/evals/sets/{eval_set['id']}").status_code == 204
        assert http.get("/api/evals/sets").json() == []


def test_another_users_sets_and_runs_are_not_found(
    server: LiveServer, scored: tuple[httpx.Client, dict[str, Any]]
) -> None:
    owner, run = scored
    set_id = run["set_id"]
    with _person(server, "intruder") as other:
        assert other.get("/api/evals/sets").json() == []
        assert other.get("/api/evals/runs").json() == []
        deleted = _imported(other, write_dabench(Path(server.data_dir).parent / "own"), "own")
        assert other.delete(f"/api/evals/sets/{deleted['id']}").status_code == 204
        for made_up in (set_id, deleted["id"], "es_" + "f" * 32, "..", "%2e%2e%2fetc", "es_x"):
            assert other.get(f"/api/evals/sets/{made_up}").status_code == 404, made_up
            assert other.delete(f"/api/evals/sets/{made_up}").status_code == 404, made_up
            started = other.post("/api/evals/runs", json={"set_id": made_up})
            assert started.status_code == 404, made_up
            assert started.json()["detail"] == "Evaluation set not found."
        for made_up in (run["id"], "er_" + "f" * 32, "..", "er_../../x"):
            assert other.get(f"/api/evals/runs/{made_up}").status_code == 404, made_up
            assert other.post(f"/api/evals/runs/{made_up}/cancel").status_code == 404
            assert other.delete(f"/api/evals/runs/{made_up}").status_code == 404
            assert other.get(f"/api/evals/runs/{made_up}/compare/{made_up}").status_code == 404
        conversation = run["results"][0]["conversation_id"]
        assert other.get(f"/api/conversations/{conversation}").status_code == 404
    # The owner's set and run are untouched.
    assert owner.get(f"/api/evals/sets/{set_id}").status_code == 200
    assert owner.get(f"/api/evals/runs/{run['id']}").json()["score"]["right"] == RIGHT


def test_a_bad_import_says_what_is_wrong(server: LiveServer, dabench: Path) -> None:
    parts = import_files(dabench)
    with _person(server, "importer") as http:
        no_table = [p for p in parts if p[0] != "tables"] + [("tables", ("other.csv", b"a\n1\n"))]
        refused = http.post("/api/evals/sets", files=no_table)
        assert refused.status_code == 422
        assert "'prices.csv', which is not among the tables sent" in refused.json()["detail"]
        broken = [("questions", ("q.jsonl", b"{not json\n")), *parts[1:]]
        refused = http.post("/api/evals/sets", files=broken)
        assert refused.status_code == 422
        assert refused.json()["detail"] == "Line 1 of the questions file is not JSON."
        unsafe = [*parts[:2], ("tables", ("../prices.csv", b"a\n"))]
        refused = http.post("/api/evals/sets", files=unsafe)
        assert refused.status_code == 422, refused.text
        assert http.get("/api/evals/sets").json() == []


@pytest.mark.skipif(not SAMPLE.is_dir(), reason="the DABench sample is not beside the repository")
def test_the_dabench_sample_imports(server: LiveServer) -> None:
    with _person(server, "dabench") as http:
        made = _imported(http, SAMPLE, "DABench sample")
        assert made["question_count"] == 10 and made["source"] == "dabench"
        shown = http.get(f"/api/evals/sets/{made['id']}").json()
        first = shown["questions"][0]
        assert (first["id"], first["files"], first["kind"]) == (
            "55",
            ["estimated_numbers.csv"],
            "easy",
        )
        assert first["expected"] == [{"name": "mean_cases", "value": "2081990", "tolerance": 1e-6}]
        assert sum(len(q["expected"]) for q in shown["questions"]) > 10


def test_the_starter_set_is_added_once_and_runs_from_its_files(server: LiveServer) -> None:
    with _person(server, "starter") as http:
        made = http.post("/api/evals/sets/starter")
        assert made.status_code == 201, made.text
        starter = made.json()
        assert starter["source"] == "starter" and starter["question_count"] >= 30
        assert set(starter["kinds"]) >= {"aggregate", "multi-step", "join", "dates", "dirty"}
        questions = http.get(f"/api/evals/sets/{starter['id']}").json()["questions"]
        assert all(q["expected"] and q["files"] for q in questions)
        # Its files are the server's, written once: more starter sets add only their rows.
        for _ in range(MAX_SETS - 1):
            assert http.post("/api/evals/sets/starter").status_code == 201
        refused = http.post("/api/evals/sets/starter")
        assert refused.status_code == 429 and refused.json()["detail"].startswith(
            f"You have {MAX_SETS} evaluation sets"
        )

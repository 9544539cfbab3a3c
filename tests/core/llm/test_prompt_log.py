"""The prompt log names, for each prompt of a turn, its stage and the agent it belongs to."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import scripted_server
from tests.support.agent_script import upload

PLAN = {
    "steps": [{"goal": "Q-LOG mean price", "tool": "python_coder", "success_criterion": "a number"}]
}
CODE = "print('mean price:', df1['price'].mean())\n"


def test_each_prompt_of_a_turn_is_logged_with_its_own_agent(tmp_path: Path) -> None:
    replies = [
        {"when": "[stage: route]", "content": '{"agent": "plan_execute"}'},
        {"when": ["[stage: plan]", "Q-LOG"], "content": json.dumps(PLAN)},
        {"when": ["[stage: generate]", "Q-LOG"], "content": f"```python\n{CODE}```"},
        {"when": ["[stage: final]", "Q-LOG"], "content": "The mean price is 20.0."},
    ]
    with scripted_server(tmp_path, replies) as server:
        upload(server, "log")
        with server.client(timeout=120) as http:
            # Unclear on its own with a file in the session: the router asks the model.
            body = {"message": "Q-LOG What is the average?", "session_id": "log"}
            reply = http.post("/api/chat", json=body)
        assert reply.status_code == 200, reply.text
        assert reply.json()["agent_type"] == "plan_execute"
        log = (server.data_dir / "logs" / "prompts.jsonl").read_text().splitlines()

    records = [json.loads(line) for line in log]
    assert [(r.get("stage"), r["agent_type"]) for r in records] == [
        ("route", "router"),
        ("plan", "plan_execute"),
        ("generate", "python_coder"),
        ("final", "plan_execute"),  # the plan's one answer: its step wrote none of its own
        (None, "plan_execute"),  # the turn as a whole, as the client sees it
    ]
    assert records[0]["prompt"][-1]["content"].startswith("[stage: route]")
    assert records[2]["prompt"][-1]["content"].startswith("[stage: generate]")

"""How many model calls a turn makes, by stage, and that its prompts share one cached prefix.

A local model charges seconds for every call and every prompt token it has not
cached, so these counts are a contract: an extra call fails here. The turns run on
one live server with the scripted model, shared by the module: each test has a
session of its own, and replies tagged with a word only its messages carry. The
prompt log (`prompts.jsonl`) is what the model was sent; a test reads its own
session's records.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import scripted_server
from tests.support.agent_script import sse_events, upload
from tests.support.live_server import LiveServer

SALES = b"region,amount\nnorth,10\nsouth,30\nnorth,25\nwest,5\n"
# Five statements: not trivial, so it is reviewed.
TOTALS = (
    "totals = df1.groupby('region')['amount'].sum()\n"
    "best = totals.idxmax()\n"
    "top = totals.max()\n"
    "print('totals:', totals.to_dict())\n"
    "print('highest region:', best, top)\n"
)
TRIVIAL = "print('rows:', len(df1))\n"
APPROVED = '{"answers_question": true, "problems": []}'

ONE_STEP_ANSWER = "- North has the highest total: 35.\n- South follows with 30.\n\nNext: plot it?"
ONE_STEP = [
    {"when": ["[stage: react]", "Q-ONE"],
     "content": "Action: python_coder\nAction Input: Q-ONE"},
    {"when": ["[stage: generate]", "Q-ONE"],
     "content": f"```python\n{TOTALS}```\nCheck: yes, it prints the highest total."},
    {"when": ["[stage: review]", "Q-ONE"], "content": APPROVED},
    {"when": ["[stage: answer]", "Q-ONE"], "content": ONE_STEP_ANSWER},
]  # fmt: skip
TRIVIAL_STEP = [
    {"when": ["[stage: react]", "Q-TRIV"],
     "content": "Action: python_coder\nAction Input: Q-TRIV"},
    {"when": ["[stage: generate]", "Q-TRIV"], "content": f"```python\n{TRIVIAL}```\nCheck: yes"},
    {"when": ["[stage: answer]", "Q-TRIV"], "content": "There are 4 rows."},
]  # fmt: skip
PARTIAL_STEP = [
    {"when": ["[stage: react]", "Q-PART"],
     "content": "Action: python_coder\nAction Input: Q-PART rows"},
    {"when": ["[stage: generate]", "Q-PART rows"], "content": f"```python\n{TRIVIAL}```"},
    {"when": ["[stage: answer]", "Q-PART"], "content": "PARTIAL"},
    {"when": ["[stage: react]", "Q-PART", "rows: 4"],
     "content": "Action: python_coder\nAction Input: Q-PART regions"},
    {"when": ["[stage: generate]", "Q-PART regions"],
     "content": "```python\nprint('regions:', df1['region'].nunique())\n```"},
    {"when": ["[stage: react]", "Q-PART", "regions: 3"],
     "content": "Final Answer: 4 rows over 3 regions."},
]  # fmt: skip
GOALS = ["Q-THREE totals per region", "Q-THREE highest region", "Q-THREE share of the highest"]
PLAN = {"steps": [{"goal": g, "tool": "python_coder", "success_criterion": "printed"}
                  for g in GOALS]}  # fmt: skip
PLAN_CODES = [
    TOTALS,
    TOTALS.replace("print('totals:', totals.to_dict())\n", "print('rows:', len(df1))\n"),
    TOTALS + "print('share:', round(top / totals.sum(), 3))\n",
]
THREE_STEPS: list[dict[str, Any]] = [
    {"when": ["[stage: plan]", "Q-THREE"], "content": json.dumps(PLAN)},
    *(
        {"when": ["[stage: generate]", goal], "content": f"```python\n{code}```\nCheck: yes"}
        for goal, code in zip(GOALS, PLAN_CODES, strict=True)
    ),
    {"when": ["[stage: review]", "Q-THREE"], "content": APPROVED, "repeat": True},
    {"when": ["[stage: final]", "Q-THREE"], "content": "North leads with 35, a share of 0.5."},
]


def _cached_turn(tag: str, code: str) -> list[dict[str, Any]]:
    action = f"Action: python_coder\nAction Input: {tag}"
    return [
        {"when": ["[stage: react]", tag], "content": action},
        {"when": ["[stage: generate]", tag], "content": f"```python\n{code}```"},
        {"when": ["[stage: review]", tag], "content": APPROVED},
        {"when": ["[stage: answer]", tag], "content": "The highest total is 35."},
    ]  # fmt: skip


SAME_NAME = [
    {"when": ["[stage: react]", "MINE"], "content": "Final Answer: Your file is sales.csv."},
    {"when": ["[stage: react]", "THEIRS"], "content": "Final Answer: You have no files."},
]
SELF_FIRST = "totals = df1.groupby('region')['amount'].sum()\nprint(totals)\n"
SELF_CHECKED = [
    {"when": ["[stage: react]", "Q-SELF"],
     "content": "Action: python_coder\nAction Input: Q-SELF"},
    {"when": ["[stage: generate]", "Q-SELF"],
     "content": f"```python\n{SELF_FIRST}```\nCheck: no, it does not name the highest region."},
    {"when": ["[stage: modify]", "Q-SELF"], "content": f"```python\n{TOTALS}```\nCheck: yes"},
    {"when": ["[stage: review]", "Q-SELF"], "content": APPROVED},
    {"when": ["[stage: answer]", "Q-SELF"], "content": "North has the highest total: 35."},
]  # fmt: skip
# Every test's replies: each matches only the messages of its own test.
REPLIES = [
    *ONE_STEP,
    *TRIVIAL_STEP,
    *PARTIAL_STEP,
    *THREE_STEPS,
    *_cached_turn("FIRST", TOTALS),
    *_cached_turn("SECOND", TOTALS),
    *SAME_NAME,
    *SELF_CHECKED,
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with scripted_server(tmp_path_factory.mktemp("model-calls"), REPLIES) as live:
        yield live


def _turn(server: LiveServer, session: str, message: str, agent: str) -> list[tuple[str, Any]]:
    with server.client(timeout=120) as http:
        body = {"message": message, "session_id": session, "agent_type": agent, "stream": True}
        with http.stream("POST", "/api/chat", json=body) as response:
            assert response.status_code == 200, response.read()
            return list(sse_events(response.iter_lines()))


def _prompts(server: LiveServer, session: str) -> list[dict[str, Any]]:
    """The model calls of the sessions named `session` (each user's: `u<id>-<session>`)."""
    log = server.data_dir / "logs" / "prompts.jsonl"
    key = re.compile(rf"u\d+-{re.escape(session)}")
    return [
        r
        for r in map(json.loads, log.read_text().splitlines())
        if r.get("stage") and key.fullmatch(r["session_id"])
    ]


def _answer(events: list[tuple[str, Any]]) -> tuple[list[str], str]:
    tokens = [data["text"] for name, data in events if name == "token"]
    final = next(data for name, data in events if name == "final")
    return tokens, final["text"]


def test_a_one_step_react_turn_makes_four_calls_and_writes_its_answer_once(
    server: LiveServer,
) -> None:
    answer = ONE_STEP_ANSWER
    upload(server, "one", data=SALES)
    events = _turn(server, "one", "Q-ONE Which region has the highest total amount?", "react")
    prompts = _prompts(server, "one")

    assert [p["stage"] for p in prompts] == ["react", "generate", "review", "answer"]
    tokens, final = _answer(events)
    assert len(tokens) >= 3  # shown as it was written, a piece at a time
    assert "".join(tokens).strip() == final == answer
    names = [name for name, _ in events]
    assert names.index("token") > names.index("execution")  # written after the run
    # The review and the answer continue the conversation that wrote the code.
    generate, review, written = (p["prompt"] for p in prompts[1:])
    assert review[: len(generate)] == generate and written[: len(review)] == review
    assert review[len(generate)]["content"].startswith("```python")  # the model's own code
    assert "Check: yes" in review[len(generate)]["content"]


def test_trivial_code_skips_the_review_three_calls(server: LiveServer) -> None:
    upload(server, "triv", data=SALES)
    events = _turn(server, "triv", "Q-TRIV How many rows are there?", "react")
    prompts = _prompts(server, "triv")
    assert [p["stage"] for p in prompts] == ["react", "generate", "answer"]
    assert _answer(events)[1] == "There are 4 rows."


def test_a_partial_answer_lets_react_go_on_and_combine(server: LiveServer) -> None:
    upload(server, "part", data=SALES)
    events = _turn(server, "part", "Q-PART How many rows and regions?", "react")
    prompts = _prompts(server, "part")
    # The second result is combined by ReAct: python_coder writes no answer for it.
    assert [p["stage"] for p in prompts] == [
        "react", "generate", "answer", "react", "generate", "react",
    ]  # fmt: skip
    tokens, final = _answer(events)
    assert final == "4 rows over 3 regions." and "PARTIAL" not in "".join(tokens)


def test_a_three_step_plan_makes_at_most_eight_calls_and_one_answer(server: LiveServer) -> None:
    upload(server, "three", data=SALES)
    events = _turn(
        server, "three", "Q-THREE Which region leads, and by what share?", "plan_execute"
    )
    prompts = _prompts(server, "three")

    assert [p["stage"] for p in prompts] == [
        "plan", "generate", "review", "generate", "review", "generate", "review", "final",
    ]  # fmt: skip
    # Each step sees what the earlier ones printed, with no answer written in between.
    third = prompts[5]["prompt"][-1]["content"]
    assert (
        "Step 1 found:" in third and "Step 2 found:" in third and "highest region: north" in third
    )
    assert _answer(events)[1] == "North leads with 35, a share of 0.5."


def test_the_prompts_of_a_session_share_their_stable_prefix_byte_for_byte(
    server: LiveServer,
) -> None:
    upload(server, "cache", data=SALES)
    _turn(server, "cache", "FIRST Which region has the highest total?", "react")
    first = _prompts(server, "cache")
    _turn(server, "cache", "SECOND And which region has the highest total now?", "react")
    second = _prompts(server, "cache")[len(first) :]

    def encoded(prompt: list[dict[str, str]]) -> list[str]:
        return [json.dumps(message, sort_keys=True) for message in prompt]

    for turn_prompts, head_size in ((first, 1), (second, 3)):  # system, then the conversation
        heads = [encoded(p["prompt"])[:head_size] for p in turn_prompts]
        assert all(head == heads[0] for head in heads), "a prompt of the turn changed its head"
        assert all(p["prompt"][head_size]["content"].startswith("[stage: ") for p in turn_prompts)
    system = first[0]["prompt"][0]
    assert system["role"] == "system" and "## METADATA" in system["content"]
    assert "sales.csv" in system["content"] and "## RULES" in system["content"]
    # The second turn extends the first's prefix: the same system prompt, then the first turn.
    assert second[0]["prompt"][0] == system
    assert [m["role"] for m in second[0]["prompt"][1:3]] == ["human", "ai"]
    assert second[0]["prompt"][1]["content"].startswith("FIRST")


def test_another_user_with_the_same_session_name_gets_a_head_of_their_own(
    server: LiveServer,
) -> None:
    upload(server, "same-name", data=SALES)
    _turn(server, "same-name", "MINE Which file do I have?", "react")
    with server.client() as admin:
        made = admin.post("/api/users", json={"username": "bob", "password": "bob-pass-12"})
    assert made.status_code == 201, made.text
    with server.client(server.token("bob", "bob-pass-12"), timeout=120) as bob:
        body = {"message": "THEIRS Which file do I have?", "session_id": "same-name",
                "agent_type": "react"}  # fmt: skip
        assert bob.post("/api/chat", json=body).status_code == 200
    prompts = _prompts(server, "same-name")

    mine, theirs = (p["prompt"] for p in prompts)
    assert "sales.csv" in mine[0]["content"]
    # Bob's "same-name" is a session of his own: none of the admin's files or conversation.
    assert "sales.csv" not in json.dumps(theirs) and "MINE" not in json.dumps(theirs)
    assert "(no data files)" in theirs[0]["content"] and len(theirs) == 2


def test_the_models_own_no_sends_the_code_back_with_its_reason(server: LiveServer) -> None:
    upload(server, "self", data=SALES)
    events = _turn(server, "self", "Q-SELF Which region has the highest total amount?", "react")
    prompts = _prompts(server, "self")

    assert [p["stage"] for p in prompts] == ["react", "generate", "modify", "review", "answer"]
    modify = prompts[2]["prompt"][-1]["content"]
    assert "Your own check: no, it does not name the highest region." in modify
    ran = [data["code"] for name, data in events if name == "code"]
    assert len(ran) == 1 and ran[0].endswith(TOTALS)  # only the modified code ran
    assert _answer(events)[1] == "North has the highest total: 35."

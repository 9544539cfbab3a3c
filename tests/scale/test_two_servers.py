"""Two API server processes over one PostgreSQL, sessions on a 2-node Ray cluster, the
workspaces in S3 (SeaweedFS): a conversation that alternates between them keeps its
variables, files and agent memory, and a lost node loses nothing persisted."""

from __future__ import annotations

import json
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import ray

from backend.tools.sandbox.ray_pool import actor_name, connect
from tests.conftest import ADMIN_PASSWORD, write_replies
from tests.support.agent_script import react_turn, upload
from tests.support.live_server import LiveServer
from tests.support.postgres import PostgresServer
from tests.support.ray_cluster import LoopbackCluster
from tests.support.seaweedfs import S3Server
from tests.support.waiting import wait_for

SESSION = "alternating"
KEY = f"u1-{SESSION}"  # the admin's session key: the actor's name


@pytest.fixture
def servers(
    tmp_path: Path,
    cluster: LoopbackCluster,
    postgres_server: PostgresServer,
    s3_server: S3Server,
    workspace_bucket: str,
) -> Iterator[tuple[LiveServer, LiveServer]]:
    """Servers A and B: their own DATA_DIR each, everything else shared."""
    namespace = f"two-servers-{uuid.uuid4().hex[:8]}"
    shared = {
        "DATABASE_URL": postgres_server.new_database(),
        "SECRET_KEY": secrets.token_urlsafe(40),
        "ADMIN_PASSWORD": ADMIN_PASSWORD,
        "LLM_BACKEND": "scripted",
        "EXECUTOR_BACKEND": "ray",
        "RAY_ADDRESS": cluster.address,
        "RAY_NAMESPACE": namespace,
        "RAY_CACHE_DIR": str(tmp_path / "ray-cache"),
        "WORKSPACE_BUCKET": f"{workspace_bucket}/{namespace}",
        "S3_ENDPOINT_URL": s3_server.endpoint,
        "S3_ACCESS_KEY_ID": s3_server.access_key,
        "S3_SECRET_ACCESS_KEY": s3_server.secret_key,
        "S3_REGION": s3_server.region,
    }
    replies = {
        "a": [*react_turn("Q-A")],
        "b": [{"when": ["[stage: react]", "Q-B"], "content": "Final Answer: Still 20.0."}],
    }
    started: list[LiveServer] = []
    try:
        for name in ("a", "b"):
            script = write_replies(tmp_path / f"{name}.json", replies[name])
            server = LiveServer(tmp_path / name, SCRIPTED_REPLIES=script, **shared)
            started.append(server.start())
        yield started[0], started[1]
    finally:
        for server in started:
            server.stop()


def run_code(server: LiveServer, token: str, code: str) -> dict[str, Any]:
    with server.client(token, timeout=120) as http:
        response = http.post(
            "/api/tools/python_coder", json={"session_id": SESSION, "code": code, "mode": "code"}
        )
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_a_conversation_alternating_between_two_servers_keeps_its_state(
    servers: tuple[LiveServer, LiveServer], cluster: LoopbackCluster
) -> None:
    a, b = servers
    token = a.token()  # one sign-in serves both: one database, one SECRET_KEY
    health = httpx.get(f"{b.url}/health", headers={"Authorization": f"Bearer {token}"}).json()
    assert health["database"]["kind"] == "postgresql"
    assert health["executor"]["backend"] == "ray"

    upload(a, SESSION)  # lands on A, reaches the sandbox's node through S3
    first = run_code(
        a,
        token,
        "import pandas as pd\ntotal = int(pd.read_csv('uploads/sales.csv')['price'].sum())\n"
        "print('total', total)",
    )
    assert first["success"] and first["data"]["stdout"] == "total 40\n", first
    second = run_code(  # on B: the same actor, found by name, with the variable
        b,
        token,
        "import matplotlib.pyplot as plt\nplt.plot([1, total])\n"
        "plt.savefig('outputs/line.png')\nprint('twice', total * 2)",
    )
    assert second["success"] and second["data"]["stdout"] == "twice 80\n", second

    with a.client(token) as http:  # B's output, served by A (pulled from S3)
        listed = {f["path"] for f in http.get(f"/api/sessions/{SESSION}/files").json()}
        image = http.get(f"/api/sessions/{SESSION}/files/outputs/line.png")
    assert {"uploads/sales.csv", "outputs/line.png"} <= listed
    assert image.status_code == 200 and image.content.startswith(b"\x89PNG")

    # An agent turn on A, the next on B: the memory comes from PostgreSQL's checkpoints.
    with a.client(token, timeout=120) as http:
        turn = http.post(
            "/api/chat",
            json={"message": "Q-A what is the mean price in the csv?", "session_id": SESSION},
        ).json()
    assert turn["answer"] == "The mean price is 20.0.", turn
    with b.client(token, timeout=120) as http:
        again = http.post(
            "/api/chat",
            json={"message": "Q-B and what was the csv mean again?", "session_id": SESSION},
        ).json()
        conversations = http.get("/api/conversations").json()
    assert again["answer"] == "Still 20.0.", again
    prompt = next(
        json.loads(line)["prompt"][-1]["content"]
        for line in (b.data_dir / "logs" / "prompts.jsonl").read_text().splitlines()
        if '"stage": "react"' in line and "Q-B" in line
    )
    assert "python_coder(Q-A mean price) → mean price: 20.0" in prompt
    assert [c["session_id"] for c in conversations] == [SESSION]

    # The node holding the session's actor is lost: the next run, on B, has everything.
    connect(cluster.address, "tests")
    namespace = a.env["RAY_NAMESPACE"]
    holder = str(ray.get(ray.get_actor(actor_name(KEY), namespace=namespace).node.remote()))
    survivor = next(node.node_id for node in cluster.nodes if node.node_id != holder)
    cluster.remove_node(cluster.node(holder))
    try:

        def moved() -> bool:
            try:
                actor = ray.get_actor(actor_name(KEY), namespace=namespace)
                return bool(ray.get(actor.node.remote(), timeout=5) == survivor)
            except ray.exceptions.RayError:
                return False

        wait_for(moved, 60)
        after = run_code(
            b, token, "from pathlib import Path\nprint(total, Path('outputs/line.png').exists())"
        )
        assert after["success"], after
        assert after["data"]["stdout"] == "40 True\n", after
    finally:
        cluster.add_node()

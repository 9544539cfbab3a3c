"""Groups (issue 44) on a live server: an admin manages them at /api/groups; a group's
models and limits apply to its members and not to others; a user taken out of a group
loses what it gave at their next request. Models come from an Ollama stand-in with three."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import openai
import pytest

from tests.support.live_server import LiveServer, free_port
from tests.support.shared_server import SharedServer, SignedIn, module_server, own_user
from tests.support.stand_in_models import StandIn, StandInOllama

MODELS = {name: StandIn(window=8_192) for name in ("wide:latest", "narrow:latest", "other:latest")}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServer]:
    with (
        StandInOllama(free_port(), MODELS) as ollama,
        module_server(
            tmp_path_factory.mktemp("groups"),
            LLM_BACKEND="ollama",
            OLLAMA_HOST=ollama.url,
            OLLAMA_MODEL="wide:latest",
        ) as live,
    ):
        yield live


@pytest.fixture
def user(server: SharedServer, request: pytest.FixtureRequest) -> SignedIn:
    return own_user(server, request)


def _id(server: LiveServer, user: SignedIn) -> int:
    with user.client() as http:
        return int(http.get("/api/users/me").json()["id"])


def _sdk(user: SignedIn) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{user.url}/v1", api_key=user.token(), max_retries=0)


def _listed(user: SignedIn) -> list[str]:
    with _sdk(user) as sdk:
        return sorted(model.id for model in sdk.models.list())


def _tokens(per_day: int) -> dict[str, int]:
    return {"max_tokens_per_day": per_day}


def _chat(user: SignedIn, model: str | None = None) -> str:
    """A plain chat turn: through the OpenAI SDK with `model`, else through /api/chat with
    none (the user's default); the model that answered."""
    if model is None:
        with user.client() as http:
            answered = http.post("/api/chat", json={"message": "hello", "agent_type": "chat"})
        if answered.status_code == 429:
            raise openai.RateLimitError(
                answered.json()["detail"], response=answered, body=answered.json()
            )
        assert answered.status_code == 200, answered.text
        return str(answered.json()["model"])
    with _sdk(user) as sdk:
        made = sdk.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "hello"}],
            extra_body={"agent_type": "chat"},
        )
    return made.model


def test_only_admins_manage_groups_and_names_are_unique(
    server: SharedServer, user: SignedIn
) -> None:
    with user.client() as http:
        assert http.get("/api/groups").status_code == 403
        assert http.post("/api/groups", json={"name": "mine"}).status_code == 403
    with server.client(server.admin_token) as admin:
        made = admin.post("/api/groups", json={"name": "unique-one", "limits": {"max_runs": 2}})
        assert made.status_code == 201, made.text
        again = admin.post("/api/groups", json={"name": "unique-one"})
        assert (again.status_code, again.json()["code"]) == (409, "name_taken")
        bad = admin.post("/api/groups", json={"name": "../etc"})
        assert bad.status_code == 422
        unknown_server = admin.post("/api/groups", json={"name": "x1", "mcp_server_ids": [999]})
        assert (unknown_server.status_code, unknown_server.json()["code"]) == (
            422,
            "unknown_mcp_server",
        )
        group_id = made.json()["id"]
        for missing in (f"/api/groups/{group_id + 1000}", "/api/groups/0", "/api/groups/..%2F1"):
            assert admin.get(missing).status_code in (404, 422), missing
        assert (
            admin.post(f"/api/groups/{group_id}/members", json={"user_id": 10**9}).json()["code"]
            == "unknown_user"
        )
        assert admin.delete(f"/api/groups/{group_id}").status_code == 204
        assert admin.get(f"/api/groups/{group_id}").status_code == 404  # deleted


def test_a_groups_models_are_all_its_members_see_and_use(
    server: SharedServer, request: pytest.FixtureRequest
) -> None:
    member, other = own_user(server, request), own_user(server, request)
    everything = ["narrow:latest", "other:latest", "wide:latest"]
    with server.client(server.admin_token) as admin:
        group = admin.post("/api/groups", json={"name": "narrow-only", "models": ["narrow"]})
        assert group.status_code == 201, group.text
        added = admin.post(
            f"/api/groups/{group.json()['id']}/members", json={"user_id": _id(server, member)}
        )
        assert added.status_code == 201, added.text
        assert [m["origin"] for m in added.json()["members"]] == ["admin"]

        assert _listed(member) == ["narrow:latest"]
        with member.client() as http:
            assert [m["id"] for m in http.get("/api/models").json()["data"]] == ["narrow:latest"]
        with pytest.raises(openai.PermissionDeniedError) as refused:
            _chat(member, "wide:latest")
        assert refused.value.code == "model_not_allowed"
        assert "You may not use the model 'wide:latest'" in refused.value.message
        assert _chat(member, "narrow:latest") == "narrow:latest"
        assert _chat(member) == "narrow:latest"  # the server's default is not theirs
        # Someone outside the group is not bound by it.
        assert _listed(other) == everything
        assert _chat(other, "wide:latest") == "wide:latest"

        # Taken out of the group: everything again, at the next request.
        removed = admin.delete(f"/api/groups/{group.json()['id']}/members/{_id(server, member)}")
        assert removed.status_code == 204
        assert _listed(member) == everything
        assert _chat(member, "wide:latest") == "wide:latest"


def test_the_most_generous_groups_limit_applies_unless_set_on_the_user(
    server: SharedServer, request: pytest.FixtureRequest
) -> None:
    member, other = own_user(server, request), own_user(server, request)
    member_id = _id(server, member)
    with server.client(server.admin_token) as admin:
        tight = admin.post(
            "/api/groups", json={"name": "tight", "limits": {"max_tokens_per_day": 1}}
        )
        assert tight.status_code == 201, tight.text
        admin.post(f"/api/groups/{tight.json()['id']}/members", json={"user_id": member_id})

        def limits(user: SignedIn) -> dict[str, int]:
            with user.client() as http:
                return dict(http.get("/api/users/me/usage").json()["limits"])

        assert limits(member)["max_tokens_per_day"] == 1
        assert limits(other)["max_tokens_per_day"] == 0  # the server's default: unlimited
        with contextlib.suppress(openai.RateLimitError):  # it may be cut as it passes the limit
            _chat(member, "wide:latest")  # a reply of several tokens
        with pytest.raises(openai.RateLimitError) as refused:
            _chat(member, "wide:latest")
        assert refused.value.code == "daily_token_limit"
        assert _chat(other, "wide:latest")  # not in the group

        roomy = admin.post(
            "/api/groups", json={"name": "roomy", "limits": {"max_tokens_per_day": 10**9}}
        )
        admin.post(f"/api/groups/{roomy.json()['id']}/members", json={"user_id": member_id})
        assert limits(member)["max_tokens_per_day"] == 10**9  # the most generous
        assert _chat(member, "wide:latest")
        # A value set on the user wins over every group's.
        admin.patch(f"/api/users/{member_id}", json={"limits": {"max_tokens_per_day": 1}})
        assert limits(member)["max_tokens_per_day"] == 1
        admin.patch(f"/api/users/{member_id}", json={"limits": {}})
        admin.delete(f"/api/groups/{roomy.json()['id']}/members/{member_id}")
        with pytest.raises(openai.RateLimitError):  # back to the tight group's limit
            _chat(member, "wide:latest")


def test_a_users_groups_are_shown_to_them_and_to_admins(
    server: SharedServer, user: SignedIn
) -> None:
    user_id = _id(server, user)
    with server.client(server.admin_token) as admin:
        group = admin.post("/api/groups", json={"name": f"shown-{user_id}"}).json()
        admin.post(f"/api/groups/{group['id']}/members", json={"user_id": user_id})
        listed = next(u for u in admin.get("/api/users").json() if u["id"] == user_id)
    with user.client() as http:
        mine = http.get("/api/users/me").json()["groups"]
    expected = [{"id": group["id"], "name": f"shown-{user_id}", "origin": "admin"}]
    assert listed["groups"] == expected and mine == expected

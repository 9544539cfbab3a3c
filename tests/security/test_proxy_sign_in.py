"""Sign-in behind an authenticating proxy (issue 44): TRUSTED_USER_HEADER names the user,
and counts only on a connection from TRUSTED_PROXIES; from any other address the header is
ignored, whatever X-Forwarded-For it carries. Groups come from TRUSTED_GROUPS_HEADER."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import write_replies
from tests.support.shared_server import SharedServer, module_server

PROXY, STRANGER = "127.0.0.1", "127.0.0.2"
USER, GROUPS = "X-Forwarded-User", "X-Forwarded-Groups"


@pytest.fixture(autouse=True)
def server_stays_healthy() -> None:
    """This module starts a server of its own, not the red-team suite's shared one."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServer]:
    root = tmp_path_factory.mktemp("proxy")
    with module_server(
        root,
        SCRIPTED_REPLIES=write_replies(root / "replies.json", []),
        TRUSTED_PROXIES=f"{PROXY}/32",
        TRUSTED_USER_HEADER=USER,
        TRUSTED_GROUPS_HEADER=GROUPS,
    ) as live:
        yield live


def _from(server: SharedServer, address: str) -> httpx.Client:
    transport = httpx.HTTPTransport(local_address=address)
    return httpx.Client(base_url=server.url, transport=transport, timeout=30)


def _me(server: SharedServer, token: str) -> dict[str, object]:
    with server.client(token) as http:
        return dict(http.get("/api/users/me").json())


def test_the_trusted_proxy_signs_its_user_in_with_their_groups(server: SharedServer) -> None:
    with _from(server, PROXY) as proxy:
        assert proxy.get("/api/auth/methods").json()["proxy"] is True
        # The proxy passes the browser's address on: still a connection from the proxy.
        first = proxy.post(
            "/api/auth/proxy",
            headers={USER: "erin", GROUPS: "analysts, ops", "X-Forwarded-For": "10.1.2.3"},
        )
        assert first.status_code == 200, first.text
        me = _me(server, first.json()["access_token"])
        assert me["username"] == "erin"
        assert [(g["name"], g["origin"]) for g in me["groups"]] == [  # type: ignore[attr-defined]
            ("analysts", "claim"),
            ("ops", "claim"),
        ]
        again = proxy.post("/api/auth/proxy", headers={USER: "erin", GROUPS: "ops"})
        me = _me(server, again.json()["access_token"])
        assert [g["name"] for g in me["groups"]] == ["ops"]  # type: ignore[attr-defined]
        nameless = proxy.post("/api/auth/proxy")
        assert (nameless.status_code, nameless.json()["code"]) == (401, "invalid_credentials")


@pytest.mark.parametrize("forwarded", [None, PROXY])
def test_the_header_from_another_address_is_ignored(
    server: SharedServer, forwarded: str | None
) -> None:
    headers = {USER: "admin", GROUPS: "admins"}
    if forwarded:
        headers["X-Forwarded-For"] = forwarded  # pretending to be the proxy does not help
    with _from(server, STRANGER) as stranger:
        refused = stranger.post("/api/auth/proxy", headers=headers)
        assert (refused.status_code, refused.json()["code"]) == (401, "invalid_credentials")
        assert "believed only from TRUSTED_PROXIES" in refused.json()["detail"]
        # Nor does it sign anyone in on any other route.
        assert stranger.get("/api/users/me", headers=headers).status_code == 401
    with server.client(server.admin_token) as admin:
        names = [u["username"] for u in admin.get("/api/users").json()]
    assert names.count("admin") == 1 and "admin-2" not in names


def test_an_identity_from_the_proxy_never_becomes_a_local_user(server: SharedServer) -> None:
    """The proxy's "admin" is a user of its own, not the local admin."""
    with _from(server, PROXY) as proxy:
        signed = proxy.post("/api/auth/proxy", headers={USER: "admin"})
    assert signed.status_code == 200, signed.text
    me = _me(server, signed.json()["access_token"])
    assert me["username"] == "admin-2" and me["is_admin"] is False

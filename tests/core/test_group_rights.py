"""What a user's groups let them use: lists add up, `*` is every model, a group with no
list has no say, and a user none of whose groups has a list may use everything."""

from __future__ import annotations

from backend.core.group_rights import rights_of
from backend.storage import Group, UserLimits


def _group(models: list[str] | None = None, servers: list[int] | None = None) -> Group:
    return Group(1, "g", "", UserLimits(), models, servers, 0.0)


def test_no_group_with_a_list_bounds_nothing() -> None:
    for groups in ([], [_group()], [_group(), _group()]):
        rights = rights_of(groups)
        assert rights.may_use_model("anything:7b") and rights.may_use_mcp_server(42)


def test_the_lists_of_a_users_groups_add_up() -> None:
    rights = rights_of([_group(["narrow"], [1]), _group(["wide:latest"], [3]), _group()])
    assert rights.may_use_model("narrow") and rights.may_use_model("narrow:latest")
    assert rights.may_use_model("wide") and rights.may_use_model("wide:latest")
    assert not rights.may_use_model("other:latest") and not rights.may_use_model("narrow:7b")
    assert rights.may_use_mcp_server(1) and rights.may_use_mcp_server(3)
    assert not rights.may_use_mcp_server(2)


def test_an_empty_list_allows_nothing_and_a_star_every_model() -> None:
    nothing = rights_of([_group([], [])])
    assert not nothing.may_use_model("narrow") and not nothing.may_use_mcp_server(1)
    every = rights_of([_group(["narrow"]), _group(["*"])])
    assert every.may_use_model("anything-at-all")

"""Groups and single sign-on identities in the store, on SQLite and on a real PostgreSQL:
a group's limits and lists, admin and claimed memberships (a sign-in's claim replaces only
the claimed ones), and an identity naming one user for good."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.storage import GroupNameTaken, IdentityTaken, Membership, Store, UserLimits, open_store


@pytest.fixture
def store(database_url: str, tmp_path: Path) -> Iterator[Store]:
    opened = open_store(database_url, tmp_path)
    yield opened
    opened.close()


def test_a_group_keeps_its_limits_models_and_servers(store: Store) -> None:
    made = store.create_group(
        name="analysts", max_runs=3, max_tokens_per_day=0, models=["b", "a", "a"]
    )
    assert made.limits == UserLimits(max_runs=3, max_tokens_per_day=0)
    assert made.models == ["a", "b"] and made.mcp_server_ids is None
    assert store.get_group(made.id) == made
    with pytest.raises(GroupNameTaken):
        store.create_group(name="analysts")
    changed = store.update_group(made.id, models=None, mcp_server_ids=[7, 7, 2], max_runs=None)
    assert changed is not None and changed.models is None and changed.mcp_server_ids == [2, 7]
    assert changed.limits == UserLimits(max_tokens_per_day=0)
    other = store.create_group(name="admins")
    with pytest.raises(GroupNameTaken):
        store.update_group(other.id, name="analysts")
    assert [g.name for g in store.list_groups()] == ["admins", "analysts"]
    assert store.update_group(999_999, name="x") is None
    assert store.delete_group(other.id) and not store.delete_group(other.id)


def test_a_claim_replaces_only_the_claimed_memberships(store: Store) -> None:
    alice, bob = store.create_user("alice", "h"), store.create_user("bob", "h")
    staff = store.create_group(name="staff")
    assert store.add_group_member(staff.id, alice.id)
    assert not store.add_group_member(staff.id, 999_999)  # no such user
    assert not store.add_group_member(999_999, alice.id)  # no such group

    groups = store.sync_claimed_groups(alice.id, ["data", "ops", "data"])
    assert [g.name for g in groups] == ["data", "ops", "staff"]
    data = next(g for g in groups if g.name == "data")
    assert data.limits == UserLimits() and data.models is None  # made with no say
    assert store.group_members(data.id) == [Membership(alice.id, "claim")]

    # The provider stops naming "ops" and names "staff": the admin's membership stays.
    store.sync_claimed_groups(alice.id, ["data", "staff"])
    assert [g.name for g in store.groups_of(alice.id)] == ["data", "staff"]
    assert store.group_members(staff.id) == [
        Membership(alice.id, "admin"),
        Membership(alice.id, "claim"),
    ]
    store.sync_claimed_groups(alice.id, [])
    assert [g.name for g in store.groups_of(alice.id)] == ["staff"]
    assert store.groups_of(bob.id) == []

    assert store.remove_group_member(staff.id, alice.id)
    assert not store.remove_group_member(staff.id, alice.id)
    assert store.groups_of(alice.id) == []
    store.add_group_member(staff.id, bob.id)
    assert store.memberships(bob.id) == [(staff.id, Membership(bob.id, "admin"))]
    store.delete_user(bob.id)  # a deleted user leaves their groups
    assert store.group_members(staff.id) == []


def test_an_identity_names_one_user(store: Store) -> None:
    alice = store.create_user("alice", "h")
    assert store.user_id_for_identity("http://idp", "sub-1") is None
    store.link_identity(alice.id, "http://idp", "sub-1")
    assert store.user_id_for_identity("http://idp", "sub-1") == alice.id
    assert store.user_id_for_identity("http://other-idp", "sub-1") is None  # per issuer
    bob = store.create_user("bob", "h")
    with pytest.raises(IdentityTaken):
        store.link_identity(bob.id, "http://idp", "sub-1")
    updated = store.update_user(alice.id, email="a@example.org", display_name="Alice A.")
    assert updated is not None and (updated.email, updated.display_name) == (
        "a@example.org",
        "Alice A.",
    )
    store.delete_user(alice.id)
    assert store.user_id_for_identity("http://idp", "sub-1") is None

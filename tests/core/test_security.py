"""Password hashes, tokens and the generated secret key."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from backend.config import ConfigError
from backend.core.security import (
    InvalidToken,
    create_access_token,
    credentials_version,
    dummy_password_hash,
    hash_password,
    load_or_create_secret_key,
    read_access_token,
    verify_password,
)

KEY = "k" * 48


def test_password_hash_verifies_only_the_right_password() -> None:
    hashed = hash_password("correct horse")
    assert hashed.startswith("$2b$")
    assert verify_password("correct horse", hashed)
    assert not verify_password("correct horsf", hashed)


def test_long_passwords_differ_beyond_bcrypts_72_bytes() -> None:
    hashed = hash_password("x" * 80 + "a")
    assert not verify_password("x" * 80 + "b", hashed)


def test_a_hash_is_made_at_the_cost_asked_and_checked_at_its_own() -> None:
    assert hash_password("correct horse").startswith("$2b$12$")  # PASSWORD_HASH_ROUNDS' default
    cheap = hash_password("correct horse", rounds=4)
    assert cheap.startswith("$2b$04$")
    assert verify_password("correct horse", cheap)
    assert not verify_password("correct horsf", cheap)


def test_an_unknown_users_stand_in_hash_has_the_users_cost_and_is_made_once() -> None:
    assert dummy_password_hash(4).startswith("$2b$04$")
    assert dummy_password_hash(4) is dummy_password_hash(4)
    assert not verify_password("", dummy_password_hash(4))


def test_token_round_trip_and_tampering() -> None:
    version = credentials_version("$2b$hash", 0)
    token = create_access_token(7, version, KEY, expires_hours=1)
    claims = read_access_token(token, KEY)
    assert (claims.user_id, claims.credentials_version) == (7, version)
    again = read_access_token(create_access_token(7, version, KEY, expires_hours=1), KEY)
    assert len(claims.token_id) >= 16 and again.token_id != claims.token_id  # what logout revokes
    with pytest.raises(InvalidToken):
        read_access_token(token, "x" * 48)
    with pytest.raises(InvalidToken):
        read_access_token(token[:-2] + "xx", KEY)


def test_credentials_version_changes_with_the_password_and_the_epoch() -> None:
    versions = {
        credentials_version(password_hash, epoch)
        for password_hash in ("$2b$one", "$2b$two")
        for epoch in (0, 1, 2)
    }
    assert len(versions) == 6
    assert credentials_version("$2b$one", 1) == credentials_version("$2b$one", 1)


def test_expired_token_is_refused() -> None:
    token = create_access_token(7, "$2b$hash", KEY, expires_hours=-1)
    with pytest.raises(InvalidToken):
        read_access_token(token, KEY)


def test_generated_secret_key_is_private_and_stable(tmp_path: Path) -> None:
    first = load_or_create_secret_key("", tmp_path)
    assert len(first) >= 48
    assert stat.S_IMODE((tmp_path / "secret_key").stat().st_mode) == 0o600
    assert load_or_create_secret_key("", tmp_path) == first
    assert load_or_create_secret_key(KEY, tmp_path) == KEY


def test_a_truncated_secret_key_file_stops_start_up(tmp_path: Path) -> None:
    (tmp_path / "secret_key").write_text("")
    with pytest.raises(ConfigError, match=r"SECRET_KEY: .* too short"):
        load_or_create_secret_key("", tmp_path)


def test_secret_key_file_readable_by_others_is_tightened(tmp_path: Path) -> None:
    load_or_create_secret_key("", tmp_path)
    (tmp_path / "secret_key").chmod(0o644)
    load_or_create_secret_key("", tmp_path)
    assert stat.S_IMODE((tmp_path / "secret_key").stat().st_mode) == 0o600

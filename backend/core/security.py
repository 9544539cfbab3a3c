"""Credentials: password hashes, JWT access tokens, API keys and the server's signing key."""

from __future__ import annotations

import base64
import functools
import hashlib
import logging
import os
import secrets
import stat
import time
from dataclasses import dataclass
from pathlib import Path

import bcrypt
import jwt

from backend.config import ConfigError

logger = logging.getLogger(__name__)

ALGORITHM = "HS256"
DEFAULT_ROUNDS = 12  # bcrypt's cost: each step doubles a hash's time, and a sign-in's
_SECRET_KEY_FILE = "secret_key"


class InvalidToken(Exception):
    """The token is missing, malformed, forged or expired."""


def _prehash(password: str) -> bytes:
    # bcrypt only reads 72 bytes; hashing first makes every character count.
    return base64.b64encode(hashlib.sha256(password.encode()).digest())


def hash_password(password: str, rounds: int = DEFAULT_ROUNDS) -> str:
    """bcrypt at cost `rounds` (PASSWORD_HASH_ROUNDS); a hash keeps its cost, so checking it
    costs what making it did."""
    return bcrypt.hashpw(_prehash(password), bcrypt.gensalt(rounds)).decode()


def verify_password(password: str, password_hash: str) -> bool:
    try:
        return bcrypt.checkpw(_prehash(password), password_hash.encode())
    except ValueError:
        return False


@functools.cache
def dummy_password_hash(rounds: int) -> str:
    """Checked when the username is unknown, so a login takes as long either way: at the
    cost users' hashes are made at (made at start-up, so no sign-in pays for it)."""
    return hash_password(secrets.token_urlsafe(16), rounds)


def credentials_version(password_hash: str, epoch: int) -> str:
    """A short fingerprint of the password's hash and the credentials' epoch: a new password,
    or the epoch moved on, changes it, and every token naming the old one is refused."""
    # Epoch 0 (never ended) is the hash alone: tokens issued before epochs existed still work.
    material = password_hash if epoch == 0 else f"{password_hash}\n{epoch}"
    return hashlib.sha256(material.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class AccessToken:
    """The claims of a verified access token."""

    user_id: int
    credentials_version: str  # `credentials_version` when it was issued
    token_id: str  # what signing out revokes
    expires_at: float


def create_access_token(user_id: int, version: str, secret_key: str, expires_hours: float) -> str:
    """A signed token for the user, naming their `credentials_version` of now."""
    now = int(time.time())
    claims = {
        "sub": str(user_id),
        "pwv": version,
        "jti": secrets.token_urlsafe(16),
        "iat": now,
        "exp": now + int(expires_hours * 3600),
    }
    return jwt.encode(claims, secret_key, algorithm=ALGORITHM)


def read_access_token(token: str, secret_key: str) -> AccessToken:
    """The claims of a valid token, or `InvalidToken`."""
    claims = _verified_claims(token, secret_key)
    if claims.expires_at <= time.time():
        raise InvalidToken("the token has expired")
    return claims


@functools.lru_cache(maxsize=4096)
def _verified_claims(token: str, secret_key: str) -> AccessToken:
    # Verifying the signature is the costly part of every request; a token's
    # claims never change, so each token is verified once. Expiry is checked on use.
    # `iat` is not compared with the clock: a token from an API server whose clock runs a
    # little ahead is valid here too; `exp` alone bounds its life.
    try:
        claims = jwt.decode(
            token, secret_key, algorithms=[ALGORITHM], options={"verify_iat": False}
        )
        return AccessToken(
            int(claims["sub"]), str(claims["pwv"]), str(claims["jti"]), float(claims["exp"])
        )
    except (jwt.PyJWTError, KeyError, ValueError) as exc:
        raise InvalidToken(str(exc)) from None


# Personal API keys: random, so a fast unsalted hash is enough to store them safely.
API_KEY_PREFIX = "pda-"


def new_api_key() -> str:
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


def is_api_key(token: str) -> bool:
    return token.startswith(API_KEY_PREFIX)


def api_key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def load_or_create_secret_key(configured: str, data_dir: Path) -> str:
    """Use SECRET_KEY if set; otherwise a random key kept in DATA_DIR with mode 0600.

    The file appears complete or not at all (written aside, then linked into
    place), so a crash or a second server never leaves an empty, forgeable key.
    """
    if configured:
        return configured
    path = data_dir / _SECRET_KEY_FILE
    data_dir.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        draft = data_dir / f".{_SECRET_KEY_FILE}.{secrets.token_hex(8)}"
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(48))
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(draft, path)
            logger.info("Generated a new SECRET_KEY in %s", path)
        except FileExistsError:
            pass  # another server won the race; use its key
        finally:
            draft.unlink()
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        logger.warning("%s was readable by others; restricting it to mode 0600", path)
        path.chmod(0o600)
    key = path.read_text().strip()
    if len(key) < 32:
        raise ConfigError(f"SECRET_KEY: {path} is too short to be safe; delete it to generate anew")
    return key

"""Credentials: password hashes, JWT access tokens and the server's signing key."""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import secrets
import stat
import time
from pathlib import Path

import bcrypt
from jose import JWTError, jwt

logger = logging.getLogger(__name__)

ALGORITHM = "HS256"
_SECRET_KEY_FILE = "secret_key"


class InvalidToken(Exception):
    """The token is missing, malformed, forged or expired."""


def _prehash(password: str) -> bytes:
    # bcrypt only reads 72 bytes; hashing first makes every character count.
    return base64.b64encode(hashlib.sha256(password.encode()).digest())


def hash_password(password: str) -> str:
    return bcrypt.hashpw(_prehash(password), bcrypt.gensalt()).decode()


def verify_password(password: str, password_hash: str) -> bool:
    try:
        return bcrypt.checkpw(_prehash(password), password_hash.encode())
    except ValueError:
        return False


# Checked when the username is unknown, so a login takes as long either way.
DUMMY_PASSWORD_HASH = hash_password(secrets.token_urlsafe(16))


def create_access_token(user_id: int, secret_key: str, expires_hours: float) -> str:
    now = int(time.time())
    claims = {"sub": str(user_id), "iat": now, "exp": now + int(expires_hours * 3600)}
    return str(jwt.encode(claims, secret_key, algorithm=ALGORITHM))


def read_access_token(token: str, secret_key: str) -> int:
    """Return the user id in a valid token, or raise `InvalidToken`."""
    try:
        claims = jwt.decode(token, secret_key, algorithms=[ALGORITHM])
        return int(claims["sub"])
    except (JWTError, KeyError, ValueError) as exc:
        raise InvalidToken(str(exc)) from None


def load_or_create_secret_key(configured: str, data_dir: Path) -> str:
    """Use SECRET_KEY if set; otherwise a random key kept in DATA_DIR with mode 0600."""
    if configured:
        return configured
    path = data_dir / _SECRET_KEY_FILE
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if stat.S_IMODE(path.stat().st_mode) & 0o077:
            logger.warning("%s was readable by others; restricting it to mode 0600", path)
            path.chmod(0o600)
        return path.read_text().strip()
    key = secrets.token_urlsafe(48)
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    logger.info("Generated a new SECRET_KEY in %s", path)
    return key
